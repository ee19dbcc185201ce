//! `propose_focus`: the worker's schema and the parent's typed parse agree
//! on a corpus of focus declarations, and refusals name the field.

use super::*;

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
