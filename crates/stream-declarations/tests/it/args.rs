//! The worker's check (the JSON Schema, run by the `jsonschema` crate) and
//! the trusted parent's check (the typed parse) agree on every argument of
//! a corpus of valid and invalid calls, and on generated ones.

use proptest::prelude::*;
use serde_json::{Value, json};
use stream_core::payload::ProposalKind;
use stream_declarations::args::{ArgsProblem, TargetOutput, parse_arguments, parse_arguments_text};
use stream_declarations::tool_spec;
use stream_testkit::canary::Canary;

use crate::common::with;

fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{i:064x}")).collect()
}

fn memory() -> Value {
    json!({
        "operation": "append",
        "proposed_text": "The owner prefers tea.",
        "reason": "They asked me to remember it.",
        "evidence_event_ids": [hex('a')],
    })
}

fn correction() -> Value {
    json!({
        "target_output": "latest",
        "replacement": "Paris is the capital of France.",
        "reason": "I said Lyon.",
        "evidence_event_ids": [],
    })
}

fn focus() -> Value {
    json!({
        "identity": {"id": "spring-garden", "version": 1},
        "lineage": {"parent": null},
        "scope": {"chat": "origin"},
        "objective": "Help plan the spring garden.",
        "subscriptions": [{"source": "telegram:42", "types": ["stream.telegram.message.received"]}],
        "budgets": {"maxRunsPerDay": 5, "maxOutputTokensPerRun": 800, "maxDays": 30},
        "requestedPermissions": {"tools": [], "proposals": [], "externalActions": false},
        "retirement": {"rule": "after-days", "days": 30},
    })
}

fn without(mut v: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v.pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key)
        .unwrap();
    v
}

/// Asserts that schema and typed parse both give `valid`.
fn agree(kind: ProposalKind, label: &str, args: &Value, valid: bool) {
    let spec = tool_spec(kind);
    let schema = jsonschema::draft202012::new(&spec.schema).unwrap();
    let by_schema = schema.is_valid(args);
    let by_type = parse_arguments(kind, args);
    assert_eq!(by_schema, valid, "{label}: schema says {by_schema}");
    assert_eq!(
        by_type.is_ok(),
        valid,
        "{label}: typed parse says {:?}",
        by_type.err()
    );
}

#[test]
fn request_memory_change_corpus() {
    let k = ProposalKind::MemoryChange;
    let cases: Vec<(&str, Value, bool)> = vec![
        ("valid", memory(), true),
        (
            "replace-document",
            with(memory(), "/operation", json!("replace-document")),
            true,
        ),
        (
            "no evidence",
            with(memory(), "/evidence_event_ids", json!([])),
            true,
        ),
        (
            "16 evidence ids",
            with(memory(), "/evidence_event_ids", json!(ids(16))),
            true,
        ),
        (
            "17 evidence ids",
            with(memory(), "/evidence_event_ids", json!(ids(17))),
            false,
        ),
        (
            "duplicate evidence",
            with(memory(), "/evidence_event_ids", json!([hex('b'), hex('b')])),
            false,
        ),
        (
            "uppercase id",
            with(memory(), "/evidence_event_ids", json!([hex('A')])),
            false,
        ),
        (
            "non-hex id",
            with(memory(), "/evidence_event_ids", json!([hex('g')])),
            false,
        ),
        (
            "63-digit id",
            with(memory(), "/evidence_event_ids", json!(["a".repeat(63)])),
            false,
        ),
        (
            "65-digit id",
            with(memory(), "/evidence_event_ids", json!(["a".repeat(65)])),
            false,
        ),
        (
            "id with newline",
            with(
                memory(),
                "/evidence_event_ids",
                json!([format!("{}\n", hex('a'))]),
            ),
            false,
        ),
        (
            "numeric id",
            with(memory(), "/evidence_event_ids", json!([1])),
            false,
        ),
        (
            "evidence not an array",
            with(memory(), "/evidence_event_ids", json!(hex('a'))),
            false,
        ),
        (
            "latest as evidence",
            with(memory(), "/evidence_event_ids", json!(["latest"])),
            false,
        ),
        (
            "empty text",
            with(memory(), "/proposed_text", json!("")),
            false,
        ),
        (
            "text at 32768 scalars (4-byte chars)",
            with(memory(), "/proposed_text", json!("😀".repeat(32_768))),
            true,
        ),
        (
            "text at 32769 scalars",
            with(memory(), "/proposed_text", json!("x".repeat(32_769))),
            false,
        ),
        ("empty reason", with(memory(), "/reason", json!("")), false),
        (
            "reason at 1000",
            with(memory(), "/reason", json!("é".repeat(1000))),
            true,
        ),
        (
            "reason at 1001",
            with(memory(), "/reason", json!("é".repeat(1001))),
            false,
        ),
        (
            "unknown operation",
            with(memory(), "/operation", json!("delete")),
            false,
        ),
        (
            "operation wrong case",
            with(memory(), "/operation", json!("Append")),
            false,
        ),
        (
            "operation not a string",
            with(memory(), "/operation", json!(1)),
            false,
        ),
        (
            "text not a string",
            with(memory(), "/proposed_text", json!(["x"])),
            false,
        ),
        (
            "extra property",
            with(memory(), "/path", json!("memory.md")),
            false,
        ),
        (
            "extra target",
            with(memory(), "/document_id", json!(hex('c'))),
            false,
        ),
        ("missing operation", without(memory(), "/operation"), false),
        (
            "missing evidence",
            without(memory(), "/evidence_event_ids"),
            false,
        ),
        ("null", json!(null), false),
        ("array", json!([memory()]), false),
        ("string", json!(memory().to_string()), false),
    ];
    for (label, args, valid) in &cases {
        agree(k, label, args, *valid);
    }
}

#[test]
fn submit_correction_corpus() {
    let k = ProposalKind::SelfCorrection;
    let cases: Vec<(&str, Value, bool)> = vec![
        ("latest", correction(), true),
        (
            "exact id",
            with(correction(), "/target_output", json!(hex('d'))),
            true,
        ),
        (
            "Latest",
            with(correction(), "/target_output", json!("Latest")),
            false,
        ),
        (
            "latest with space",
            with(correction(), "/target_output", json!("latest ")),
            false,
        ),
        (
            "latest plus id",
            with(
                correction(),
                "/target_output",
                json!(format!("latest{}", hex('d'))),
            ),
            false,
        ),
        (
            "63-digit id",
            with(correction(), "/target_output", json!("d".repeat(63))),
            false,
        ),
        (
            "uppercase id",
            with(correction(), "/target_output", json!(hex('D'))),
            false,
        ),
        (
            "id as number",
            with(correction(), "/target_output", json!(7)),
            false,
        ),
        (
            "null target",
            with(correction(), "/target_output", json!(null)),
            false,
        ),
        (
            "empty replacement",
            with(correction(), "/replacement", json!("")),
            false,
        ),
        (
            "replacement at 4096",
            with(correction(), "/replacement", json!("ж".repeat(4096))),
            true,
        ),
        (
            "replacement at 4097",
            with(correction(), "/replacement", json!("ж".repeat(4097))),
            false,
        ),
        (
            "reason at 1001",
            with(correction(), "/reason", json!("x".repeat(1001))),
            false,
        ),
        (
            "16 evidence ids",
            with(correction(), "/evidence_event_ids", json!(ids(16))),
            true,
        ),
        (
            "17 evidence ids",
            with(correction(), "/evidence_event_ids", json!(ids(17))),
            false,
        ),
        (
            "duplicate evidence",
            with(
                correction(),
                "/evidence_event_ids",
                json!([hex('e'), hex('f'), hex('e')]),
            ),
            false,
        ),
        (
            "extra property",
            with(correction(), "/targets", json!([])),
            false,
        ),
        (
            "missing target",
            without(correction(), "/target_output"),
            false,
        ),
        (
            "missing replacement",
            without(correction(), "/replacement"),
            false,
        ),
        ("memory arguments", memory(), false),
    ];
    for (label, args, valid) in &cases {
        agree(k, label, args, *valid);
    }
}

#[test]
fn propose_focus_corpus() {
    let k = ProposalKind::FocusDeclaration;
    let sixteen_subs: Vec<Value> = (0..16)
        .map(|i| json!({"source": format!("telegram:{i}"), "types": ["stream.telegram.message.received"]}))
        .collect();
    let mut seventeen_subs = sixteen_subs.clone();
    seventeen_subs.push(sixteen_subs[0].clone());
    let cases: Vec<(&str, Value, bool)> = vec![
        ("valid", focus(), true),
        (
            "manual retirement",
            with(focus(), "/retirement", json!({"rule": "manual"})),
            true,
        ),
        (
            "with a parent",
            with(
                focus(),
                "/lineage/parent",
                json!({"id": "garden", "version": 2}),
            ),
            true,
        ),
        (
            "no subscriptions",
            with(focus(), "/subscriptions", json!([])),
            true,
        ),
        (
            "16 subscriptions",
            with(focus(), "/subscriptions", json!(sixteen_subs)),
            true,
        ),
        (
            "17 subscriptions",
            with(focus(), "/subscriptions", json!(seventeen_subs)),
            false,
        ),
        (
            "integral float budget",
            with(focus(), "/budgets/maxDays", json!(30.0)),
            true,
        ),
        (
            "fractional budget",
            with(focus(), "/budgets/maxDays", json!(30.5)),
            false,
        ),
        (
            "budget as string",
            with(focus(), "/budgets/maxDays", json!("30")),
            false,
        ),
        (
            "maxRunsPerDay 0",
            with(focus(), "/budgets/maxRunsPerDay", json!(0)),
            false,
        ),
        (
            "maxRunsPerDay 1000",
            with(focus(), "/budgets/maxRunsPerDay", json!(1000)),
            true,
        ),
        (
            "maxRunsPerDay 1001",
            with(focus(), "/budgets/maxRunsPerDay", json!(1001)),
            false,
        ),
        (
            "maxOutputTokensPerRun 32000",
            with(focus(), "/budgets/maxOutputTokensPerRun", json!(32_000)),
            true,
        ),
        (
            "maxOutputTokensPerRun 32001",
            with(focus(), "/budgets/maxOutputTokensPerRun", json!(32_001)),
            false,
        ),
        (
            "maxDays 365",
            with(focus(), "/budgets/maxDays", json!(365)),
            true,
        ),
        (
            "maxDays 366",
            with(focus(), "/budgets/maxDays", json!(366)),
            false,
        ),
        (
            "negative budget",
            with(focus(), "/budgets/maxDays", json!(-1)),
            false,
        ),
        (
            "version 0",
            with(focus(), "/identity/version", json!(0)),
            false,
        ),
        (
            "version u32 max",
            with(focus(), "/identity/version", json!(u32::MAX)),
            true,
        ),
        (
            "version past u32",
            with(focus(), "/identity/version", json!(u64::from(u32::MAX) + 1)),
            false,
        ),
        (
            "parent version 0",
            with(
                focus(),
                "/lineage/parent",
                json!({"id": "garden", "version": 0}),
            ),
            false,
        ),
        (
            "slug too short",
            with(focus(), "/identity/id", json!("ab")),
            false,
        ),
        (
            "slug 64",
            with(focus(), "/identity/id", json!("a".repeat(64))),
            true,
        ),
        (
            "slug 65",
            with(focus(), "/identity/id", json!("a".repeat(65))),
            false,
        ),
        (
            "slug uppercase",
            with(focus(), "/identity/id", json!("Garden")),
            false,
        ),
        (
            "slug underscore",
            with(focus(), "/identity/id", json!("spring_garden")),
            false,
        ),
        (
            "parent slug bad",
            with(focus(), "/lineage/parent", json!({"id": "G", "version": 1})),
            false,
        ),
        ("missing parent", without(focus(), "/lineage/parent"), false),
        (
            "parent extra field",
            with(
                focus(),
                "/lineage/parent",
                json!({"id": "garden", "version": 1, "x": 1}),
            ),
            false,
        ),
        (
            "scope other chat",
            with(focus(), "/scope/chat", json!("all")),
            false,
        ),
        (
            "empty objective",
            with(focus(), "/objective", json!("")),
            false,
        ),
        (
            "objective 2000",
            with(focus(), "/objective", json!("ü".repeat(2000))),
            true,
        ),
        (
            "objective 2001",
            with(focus(), "/objective", json!("ü".repeat(2001))),
            false,
        ),
        (
            "bad source",
            with(focus(), "/subscriptions/0/source", json!("telegram")),
            false,
        ),
        (
            "source with space",
            with(focus(), "/subscriptions/0/source", json!("telegram:4 2")),
            false,
        ),
        (
            "no types",
            with(focus(), "/subscriptions/0/types", json!([])),
            false,
        ),
        (
            "17 types",
            with(focus(), "/subscriptions/0/types", json!(vec!["t"; 17])),
            false,
        ),
        (
            "type 128",
            with(focus(), "/subscriptions/0/types", json!(["t".repeat(128)])),
            true,
        ),
        (
            "type 129",
            with(focus(), "/subscriptions/0/types", json!(["t".repeat(129)])),
            false,
        ),
        (
            "empty type",
            with(focus(), "/subscriptions/0/types", json!([""])),
            false,
        ),
        (
            "requests a tool",
            with(focus(), "/requestedPermissions/tools", json!(["web"])),
            false,
        ),
        (
            "requests a proposal",
            with(
                focus(),
                "/requestedPermissions/proposals",
                json!(["memory-change"]),
            ),
            false,
        ),
        (
            "requests external actions",
            with(
                focus(),
                "/requestedPermissions/externalActions",
                json!(true),
            ),
            false,
        ),
        (
            "external actions as 0",
            with(focus(), "/requestedPermissions/externalActions", json!(0)),
            false,
        ),
        (
            "after-days without days",
            with(focus(), "/retirement", json!({"rule": "after-days"})),
            false,
        ),
        (
            "after-days 0",
            with(
                focus(),
                "/retirement",
                json!({"rule": "after-days", "days": 0}),
            ),
            false,
        ),
        (
            "after-days 366",
            with(
                focus(),
                "/retirement",
                json!({"rule": "after-days", "days": 366}),
            ),
            false,
        ),
        (
            "after-days null",
            with(
                focus(),
                "/retirement",
                json!({"rule": "after-days", "days": null}),
            ),
            false,
        ),
        (
            "manual with days",
            with(focus(), "/retirement", json!({"rule": "manual", "days": 3})),
            false,
        ),
        (
            "manual with null days",
            with(
                focus(),
                "/retirement",
                json!({"rule": "manual", "days": null}),
            ),
            false,
        ),
        (
            "unknown rule",
            with(focus(), "/retirement", json!({"rule": "never"})),
            false,
        ),
        (
            "authority object",
            with(focus(), "/authority", json!({"activation": true})),
            false,
        ),
        (
            "authority all false",
            with(focus(), "/authority", json!({"activation": false})),
            false,
        ),
        (
            "a top-level flag",
            with(focus(), "/training", json!(true)),
            false,
        ),
        (
            "resolution",
            with(focus(), "/resolution", json!({"events": "checked"})),
            false,
        ),
        (
            "fingerprint",
            with(focus(), "/fingerprint", json!(hex('a'))),
            false,
        ),
        (
            "extra in identity",
            with(focus(), "/identity/name", json!("x")),
            false,
        ),
        (
            "extra in budgets",
            with(focus(), "/budgets/maxCost", json!(1)),
            false,
        ),
        (
            "extra in permissions",
            with(focus(), "/requestedPermissions/training", json!(false)),
            false,
        ),
        ("missing budgets", without(focus(), "/budgets"), false),
        ("missing retirement", without(focus(), "/retirement"), false),
        (
            "wrapped in declaration",
            json!({"declaration": focus()}),
            false,
        ),
    ];
    for (label, args, valid) in &cases {
        agree(k, label, args, *valid);
    }
}

#[test]
fn focus_refusals_name_the_field() {
    let k = ProposalKind::FocusDeclaration;
    let refused = |args: Value| parse_arguments(k, &args).unwrap_err();
    for flag in [
        "activation",
        "dataExpansion",
        "externalActions",
        "training",
        "adapterPromotion",
    ] {
        let err = refused(with(focus(), "/authority", json!({flag: true})));
        assert_eq!(
            (err.field.as_str(), err.problem),
            ("authority", ArgsProblem::UnknownField),
            "{flag}"
        );
        let err = refused(with(focus(), &format!("/{flag}"), json!(true)));
        assert_eq!(
            (err.field.as_str(), err.problem),
            (flag, ArgsProblem::UnknownField),
            "{flag}"
        );
        assert!(err.to_string().contains(flag), "{err}");
    }
    let err = refused(with(
        focus(),
        "/requestedPermissions/externalActions",
        json!(true),
    ));
    assert_eq!(
        (err.field.as_str(), err.problem),
        (
            "requestedPermissions.externalActions",
            ArgsProblem::NotTheLiteral
        )
    );
    let err = refused(with(focus(), "/requestedPermissions/tools", json!(["web"])));
    assert_eq!(
        (err.field.as_str(), err.problem),
        ("requestedPermissions.tools", ArgsProblem::MustBeEmpty)
    );
    let err = refused(with(focus(), "/budgets/maxDays", json!(366)));
    assert_eq!(
        (err.field.as_str(), err.problem),
        ("budgets.maxDays", ArgsProblem::OutOfRange)
    );
    let err = refused(with(focus(), "/identity/id", json!("No")));
    assert_eq!(
        (err.field.as_str(), err.problem),
        ("identity.id", ArgsProblem::OutOfRange)
    );
    let err = refused(without(focus(), "/lineage/parent"));
    assert_eq!(
        (err.field.as_str(), err.problem),
        ("lineage.parent", ArgsProblem::MissingField)
    );
    let err = refused(with(focus(), "/subscriptions/0/extra", json!(1)));
    assert_eq!(
        (err.field.as_str(), err.problem),
        ("subscriptions[0].?", ArgsProblem::UnknownField)
    );
}

#[test]
fn argument_refusals_name_the_field_and_never_the_content() {
    let canary = Canary::new("args");
    let c = canary.as_str();
    let refusals = [
        (
            ProposalKind::MemoryChange,
            with(memory(), "/proposed_text", json!(c.repeat(2000))),
            "proposed_text",
            ArgsProblem::LengthOutOfBounds,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), "/reason", json!(7)),
            "reason",
            ArgsProblem::WrongType,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), "/operation", json!(c)),
            "operation",
            ArgsProblem::NotAllowedValue,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), "/evidence_event_ids", json!(ids(17))),
            "evidence_event_ids",
            ArgsProblem::TooManyEvidenceIds,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), "/evidence_event_ids", json!([hex('1'), hex('1')])),
            "evidence_event_ids",
            ArgsProblem::DuplicateEvidenceId,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), "/evidence_event_ids", json!([hex('1'), c])),
            "evidence_event_ids[1]",
            ArgsProblem::NotAnEventId,
        ),
        (
            ProposalKind::MemoryChange,
            with(memory(), &format!("/{c}"), json!(c)),
            "?",
            ArgsProblem::UnknownField,
        ),
        (
            ProposalKind::SelfCorrection,
            with(correction(), "/target_output", json!(c)),
            "target_output",
            ArgsProblem::NotAnEventId,
        ),
        (
            ProposalKind::SelfCorrection,
            with(correction(), "/replacement", json!("")),
            "replacement",
            ArgsProblem::LengthOutOfBounds,
        ),
        (
            ProposalKind::FocusDeclaration,
            with(focus(), "/objective", json!(c.repeat(100))),
            "objective",
            ArgsProblem::LengthOutOfBounds,
        ),
        (
            ProposalKind::FocusDeclaration,
            with(focus(), "/subscriptions/0/source", json!(c)),
            "subscriptions[0].source",
            ArgsProblem::NotASourceName,
        ),
    ];
    for (kind, args, field, problem) in refusals {
        let err = parse_arguments(kind, &args).unwrap_err();
        assert_eq!((err.field.as_str(), err.problem), (field, problem), "{err}");
        let shown = format!("{err} {err:?}");
        assert!(!canary.found_in(&shown), "canary leaked: {shown}");
    }
}

#[test]
fn latest_and_ids_parse_to_the_target_enum() {
    let args = parse_arguments(ProposalKind::SelfCorrection, &correction()).unwrap();
    let stream_declarations::ToolArgs::SelfCorrection(a) = args else {
        panic!()
    };
    assert_eq!(a.target_output, TargetOutput::Latest);
    let exact = stream_declarations::SubmitCorrectionArgs::parse(&with(
        correction(),
        "/target_output",
        json!(hex('9')),
    ))
    .unwrap();
    assert!(matches!(exact.target_output, TargetOutput::Output(id) if id.as_str() == hex('9')));
}

#[test]
fn raw_text_arguments_agree_too() {
    let text = memory().to_string();
    assert!(parse_arguments_text(ProposalKind::MemoryChange, &text).is_ok());
    let err = parse_arguments_text(ProposalKind::MemoryChange, "{\"operation\":").unwrap_err();
    assert_eq!(err.problem, ArgsProblem::NotJson);
    let err = parse_arguments_text(ProposalKind::MemoryChange, "{\"operation\":\"append\",\"operation\":\"append\",\"proposed_text\":\"x\",\"reason\":\"y\",\"evidence_event_ids\":[]}").unwrap_err();
    assert_eq!(err.problem, ArgsProblem::DuplicateKey);
}

fn text_of(len: usize, wide: bool) -> String {
    if wide {
        "😀".repeat(len)
    } else {
        "a".repeat(len)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn generated_memory_arguments_agree(
        text_len in prop_oneof![0usize..4, 32_765usize..32_771],
        reason_len in prop_oneof![0usize..3, 998usize..1003],
        wide in any::<bool>(),
        evidence in proptest::collection::vec(0u8..20, 0..19),
        op in prop_oneof![Just("append"), Just("replace-document"), Just("insert")],
    ) {
        let ids: Vec<String> = evidence.iter().map(|i| format!("{i:064x}")).collect();
        let unique = ids.iter().collect::<std::collections::HashSet<_>>().len() == ids.len();
        let args = json!({
            "operation": op,
            "proposed_text": text_of(text_len, wide),
            "reason": text_of(reason_len, !wide),
            "evidence_event_ids": ids,
        });
        let valid = (1..=32_768).contains(&text_len)
            && (1..=1000).contains(&reason_len)
            && ids.len() <= 16
            && unique
            && op != "insert";
        agree(ProposalKind::MemoryChange, "generated", &args, valid);
    }

    #[test]
    fn generated_correction_arguments_agree(
        target in prop_oneof![Just("latest".to_owned()), "[0-9a-f]{63,65}", "[0-9a-fA-Z]{64}", "lat[a-z]{3}"],
        replacement_len in prop_oneof![0usize..3, 4094usize..4099],
        wide in any::<bool>(),
    ) {
        let args = json!({
            "target_output": target,
            "replacement": text_of(replacement_len, wide),
            "reason": "r",
            "evidence_event_ids": [],
        });
        let target_ok = target == "latest"
            || (target.len() == 64 && target.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        let valid = target_ok && (1..=4096).contains(&replacement_len);
        agree(ProposalKind::SelfCorrection, "generated", &args, valid);
    }

    #[test]
    fn generated_focus_budgets_agree(
        runs in 0u32..1_003, tokens in prop_oneof![0u32..3, 31_998u32..32_003], days in 0u32..368,
        rule in prop_oneof![Just("after-days"), Just("manual")], with_days in any::<bool>(),
    ) {
        let mut args = focus();
        args["budgets"] = json!({"maxRunsPerDay": runs, "maxOutputTokensPerRun": tokens, "maxDays": days});
        args["retirement"] = if with_days { json!({"rule": rule, "days": days}) } else { json!({"rule": rule}) };
        let valid = (1..=1000).contains(&runs)
            && (1..=32_000).contains(&tokens)
            && (1..=365).contains(&days)
            && matches!((rule, with_days), ("after-days", true) | ("manual", false));
        agree(ProposalKind::FocusDeclaration, "generated", &args, valid);
    }
}
