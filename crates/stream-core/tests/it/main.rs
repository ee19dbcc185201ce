#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! Integration tests of stream-core: golden canonical bytes and ids for every
//! event type, and the strictness of every payload.

mod common;

use common::*;
use serde_json::{Value, json};
use stream_core::ids::{derive_event_id, derive_run_id};
use stream_core::payload::*;
use stream_core::*;

/// One line per catalog row: the envelope facts, the id and canonical bytes.
fn golden_line<P: Payload>(source: &str, payload: &P) -> String {
    let event = NewEvent::build(&SourceName::new(source).unwrap(), None, None, payload).unwrap();
    format!(
        "{}@{} {} sensitive={} id={}\n  {}\n",
        event.event_type,
        event.version,
        event.authorship.as_str(),
        event.sensitive,
        event.id,
        String::from_utf8(event.payload).unwrap()
    )
}

#[test]
fn catalog_golden() {
    let lines = [
        golden_line("telegram:99", &message_received()),
        golden_line("telegram:99", &delivery_receipt()),
        golden_line("telegram:99", &split_delivery_receipt()),
        golden_line("telegram:99", &delivery_failed()),
        golden_line("agent:telegram-conversation", &observation()),
        golden_line("agent:telegram-conversation", &memory_proposal()),
        golden_line("agent:telegram-conversation", &correction_proposal()),
        golden_line("agent:telegram-conversation", &focus_proposal()),
        golden_line("agent:telegram-conversation", &run_completed()),
        golden_line("agent:telegram-conversation", &run_failed()),
        golden_line(
            "system:proposals",
            &decision(Disposition::Edit, Some("Paris.")),
        ),
        golden_line("system:proposals", &materialized()),
        golden_line("system:proposals", &materialization_failed()),
        golden_line("system:judgments", &judgment()),
        golden_line("filesystem:telegram-agent-context", &file_changed()),
        golden_line("system:activation", &activation_step()),
    ];
    insta::assert_snapshot!(lines.concat());
}

#[test]
fn event_and_run_id_derivations_are_golden() {
    let id = derive_event_id(
        "telegram:99",
        "stream.telegram.message.received",
        &json!(1001),
    )
    .unwrap();
    let run = derive_run_id("telegram-conversation", 18, &id).unwrap();
    insta::assert_snapshot!(format!("event {id}\nrun   {run}"));
}

/// Decoding a stored payload checks schema and cross-field rules.
fn decodes<P: Payload>(value: &Value) -> bool {
    let bytes = serde_json::to_vec(value).unwrap();
    serde_json::from_slice::<P>(&bytes).is_ok_and(|p| p.validate().is_ok())
}

fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    *value
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("no {pointer}")) = new;
    value
}

fn with_extra(mut value: Value, pointer: &str) -> Value {
    value
        .pointer_mut(pointer)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .insert("extra".into(), json!(1));
    value
}

macro_rules! strictness {
    ($name:ident, $ty:ty, $sample:expr, [$($obj:literal),*], [$(($ptr:literal, $val:expr)),*]) => {
        #[test]
        fn $name() {
            let sample: Value = serde_json::to_value($sample).unwrap();
            assert!(decodes::<$ty>(&sample), "the sample itself must decode");
            // Unknown fields are errors at every object level.
            $(assert!(!decodes::<$ty>(&with_extra(sample.clone(), $obj)), "extra field at {:?}", $obj);)*
            // Literal and bounded fields refuse other values.
            $(assert!(!decodes::<$ty>(&with(sample.clone(), $ptr, $val)), "{} accepted {}", $ptr, $val);)*
        }
    };
}

strictness!(
    message_received_is_strict,
    MessageReceived,
    message_received(),
    [""],
    [("/chatType", json!("group")), ("/text", json!(""))]
);
strictness!(
    delivery_receipt_is_strict,
    DeliveryReceipt,
    delivery_receipt(),
    [""],
    [("/messageId", json!(0))]
);
strictness!(
    split_delivery_receipt_is_strict,
    DeliveryReceipt,
    split_delivery_receipt(),
    [""],
    [
        ("/continuationMessageIds", json!([9, 0])),
        ("/continuationMessageIds", json!("9"))
    ]
);
strictness!(
    delivery_failed_is_strict,
    DeliveryFailed,
    delivery_failed(),
    [""],
    [
        ("/errorCode", json!(429)),
        ("/errorCode", json!(500)),
        ("/errorCode", json!(200)),
        ("/sentMessageIds", json!([0]))
    ]
);

/// Receipts written before replies could be split keep their exact bytes:
/// a one-message receipt carries no `continuationMessageIds` at all.
#[test]
fn a_one_message_receipt_has_no_continuation_field() {
    let bytes = serde_json::to_string(&delivery_receipt()).unwrap();
    assert!(!bytes.contains("continuationMessageIds"), "{bytes}");
    assert_eq!(
        split_delivery_receipt().message_ids().collect::<Vec<_>>(),
        [8, 9, 10]
    );
}
strictness!(
    observation_is_strict,
    MessageObservation,
    observation(),
    [""],
    [
        ("/text", json!("x".repeat(4097))),
        ("/outputContract", json!("conversation-text@2"))
    ]
);
strictness!(
    memory_proposal_is_strict,
    MemoryChangeProposed,
    memory_proposal(),
    ["", "/proposer", "/target", "/proposer/provider"],
    [
        ("/proposalState", json!("accepted")),
        ("/publicationEligible", json!(true)),
        ("/target/path", json!("../memory.md")),
        ("/proposedTextLength", json!(3)),
        ("/proposedText", json!("")),
        ("/reason", json!("x".repeat(1001))),
        ("/operation", json!("delete")),
        ("/target/source", json!("filesystem:elsewhere")),
        ("/evidenceEventIds", json!([hex('3'), hex('3')]))
    ]
);
strictness!(
    correction_proposal_is_strict,
    CorrectionProposed,
    correction_proposal(),
    ["", "/target", "/replacement"],
    [
        ("/qualityEligible", json!(true)),
        ("/externalExportEligible", json!(true)),
        ("/publicationEligible", json!(true)),
        ("/target/outputEventId", json!("latest")),
        ("/replacement/text", json!("x".repeat(4097)))
    ]
);
strictness!(
    focus_proposal_is_strict,
    FocusDeclarationProposed,
    focus_proposal(),
    [
        "",
        "/declaration",
        "/authority",
        "/resolution",
        "/declaration/requestedPermissions"
    ],
    [
        ("/authority/activation", json!(true)),
        ("/authority/training", json!(true)),
        ("/authority/adapterPromotion", json!(true)),
        ("/authority/dataExpansion", json!(true)),
        ("/authority/externalActions", json!(true)),
        ("/resolution/lineage", json!("checked")),
        ("/declaration/requestedPermissions/tools", json!(["x"])),
        (
            "/declaration/requestedPermissions/externalActions",
            json!(true)
        ),
        ("/declaration/identity/id", json!("No")),
        ("/declaration/budgets/maxDays", json!(366)),
        (
            "/declaration/objective",
            json!("changed, so the fingerprint no longer matches")
        )
    ]
);
strictness!(
    run_completed_is_strict,
    RunCompleted,
    run_completed(),
    [""],
    [(
        "/proposalEventIds",
        json!([hex('a'), hex('b'), hex('c'), hex('d')])
    )]
);
strictness!(
    run_failed_is_strict,
    RunFailed,
    run_failed(),
    [""],
    [("/reason", json!("the provider said: canary"))]
);
strictness!(
    decision_is_strict,
    ProposalDecision,
    decision(Disposition::Accept, None),
    [""],
    [
        ("/authority", json!("agent")),
        ("/proposalKind", json!("focus-declaration"))
    ]
);
strictness!(
    materialized_is_strict,
    MemoryChangeMaterialized,
    materialized(),
    [""],
    []
);
strictness!(
    materialization_failed_is_strict,
    MaterializationFailed,
    materialization_failed(),
    [""],
    [("/reason", json!("other"))]
);
strictness!(
    judgment_is_strict,
    JudgmentRecorded,
    judgment(),
    ["", "/replacement"],
    [
        ("/externalExportEligible", json!(true)),
        ("/authority", json!("agent")),
        ("/criterionVersion", json!(2))
    ]
);
strictness!(
    file_changed_is_strict,
    FileChanged,
    file_changed(),
    [""],
    []
);
strictness!(
    activation_step_is_strict,
    ActivationStep,
    activation_step(),
    [""],
    [("/step", json!("launch"))]
);

#[test]
fn decision_replacement_rules() {
    // "Edit requires replacement text; accept/reject forbid it."
    let rows = [
        (Disposition::Accept, None, true),
        (Disposition::Accept, Some("x"), false),
        (Disposition::Reject, None, true),
        (Disposition::Reject, Some("x"), false),
        (Disposition::Edit, Some("Paris."), true),
        (Disposition::Edit, None, false),
        (Disposition::Edit, Some(""), false),
    ];
    for (disposition, replacement, ok) in rows {
        assert_eq!(
            decision(disposition, replacement).validate().is_ok(),
            ok,
            "{disposition:?} {replacement:?}"
        );
    }
    // A correction replacement is bounded like the correction itself.
    assert!(
        decision(Disposition::Edit, Some(&"x".repeat(4097)))
            .validate()
            .is_err()
    );
}

#[test]
fn one_materialization_outcome_per_decision() {
    let source = SourceName::fixed(SourceName::PROPOSALS);
    let ok = NewEvent::build(&source, None, None, &materialized()).unwrap();
    let failed = NewEvent::build(&source, None, None, &materialization_failed()).unwrap();
    assert_eq!(ok.id, failed.id, "success and failure share one identity");
    assert_ne!(ok.event_type, failed.event_type);
}

#[test]
fn building_an_invalid_payload_is_refused() {
    let mut proposal = memory_proposal();
    proposal.proposed_text_length += 1;
    let source = SourceName::agent("telegram-conversation").unwrap();
    let err = NewEvent::build(&source, None, None, &proposal).unwrap_err();
    assert_eq!(
        err.to_string(),
        "payload field `proposedTextLength` is invalid: does not match proposedText"
    );
}

#[test]
fn reason_codes_are_golden() {
    let run: Vec<_> = RunFailureReason::ALL.iter().map(|r| r.as_str()).collect();
    let mat: Vec<_> = MaterializationFailure::ALL
        .iter()
        .map(|r| r.as_str())
        .collect();
    for code in RunFailureReason::ALL {
        assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
    }
    for code in MaterializationFailure::ALL {
        assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
    }
    insta::assert_snapshot!(format!(
        "run: {}\nmaterialization: {}",
        run.join(" "),
        mat.join(" ")
    ));
}

#[test]
fn debug_of_events_never_shows_payload() {
    let source = SourceName::new("telegram:99").unwrap();
    let event = NewEvent::build(&source, None, None, &message_received()).unwrap();
    assert!(!format!("{event:?}").contains("canary-message-1"));
    assert!(!format!("{:?}", memory_proposal()).contains("canary-memory-1"));
}

/// The cut of a document into parts is part of the stored format: a store
/// shares a part between snapshots only while equal values cut the same way,
/// so a changed cut (run ends, part sizes, packing) doubles what every turn
/// stores. This pins the parts of one snapshot-shaped document.
#[test]
fn split_layout_golden() {
    let ids: Vec<String> = (0u8..40).map(|i| canon::sha256(&[i]).to_string()).collect();
    let messages: Vec<Value> = (0..24)
        .map(|i| {
            json!({
                "eventId": ids[i % ids.len()],
                "role": if i % 2 == 0 { "owner" } else { "assistant" },
                "text": format!("message {i}: {}", "words and more words ".repeat(i % 5 + 1)),
            })
        })
        .collect();
    let doc = json!({
        "evidence": ids,
        "transcript": messages,
        "memory": "# Memory\n".repeat(40),
        "prompt": {"text": "You are The Stream.", "version": 3},
    });
    let bytes = canon::to_canonical_bytes(&doc).unwrap();
    let split = parts::split(&bytes);
    let mut lines: Vec<String> = split
        .parts
        .iter()
        .map(|(key, part)| format!("{} {}", Sha256Hex::from_bytes(*key), part.len()))
        .collect();
    lines.sort();
    lines.insert(0, format!("root {}", Sha256Hex::from_bytes(split.root)));
    insta::assert_snapshot!(lines.join("\n"));
}
