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

mod focus;

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
