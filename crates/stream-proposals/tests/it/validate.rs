//! The parent's trusted validation: the worker's word is checked against
//! the brokered response and the snapshot, row by row.

use serde_json::{Value, json};
use stream_core::payload::{ProposalKind, ProviderApi, RunFailureReason as R, ThinkingMarker};
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;
use stream_proposals::validate::{AttemptEvidence, validate_completion};
use stream_protocol::{CallResult, CapturedCall, Completion, WorkerResult};

/// An OpenAI Chat Completions body with `text` and `calls` (name, id, args).
fn body(text: Option<&str>, calls: &[(&str, &str, Value)]) -> String {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(name, id, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}).to_string()
}

/// An OpenAI body with one call whose arguments string is `arguments` exactly.
fn raw_body(name: &str, id: &str, arguments: &str) -> String {
    json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}}]})
    .to_string()
}

/// A focus declaration as arguments text, its `identity` object given as `identity`.
fn focus_text(identity: &str) -> String {
    format!(
        r#"{{"identity":{identity},"lineage":{{"parent":null}},"scope":{{"chat":"origin"}},"objective":"Plan the garden.","subscriptions":[],"budgets":{{"maxRunsPerDay":5,"maxOutputTokensPerRun":800,"maxDays":60}},"requestedPermissions":{{"tools":[],"proposals":[],"externalActions":false}},"retirement":{{"rule":"manual"}}}}"#
    )
}

/// A body whose visible text comes in two parts.
fn two_parts() -> String {
    json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]})
    .to_string()
}

/// What an honest worker would report for the same completion.
fn honest(text: Option<&str>, calls: &[(&str, &str, Value)]) -> WorkerResult {
    WorkerResult::Completed(Completion {
        text: text.map(str::to_owned),
        thinking: ThinkingMarker::None,
        calls: calls
            .iter()
            .map(|(name, id, args)| CapturedCall {
                tool: (*name).into(),
                call_id: (*id).into(),
                arguments: args.clone(),
                result: CallResult::default(),
            })
            .collect(),
    })
}

fn memory(evidence: Vec<String>) -> (&'static str, &'static str, Value) {
    (
        "request_memory_change",
        "c1",
        json!({"operation": "append", "proposed_text": "tea", "reason": "asked", "evidence_event_ids": evidence}),
    )
}

fn correction(target: &str) -> (&'static str, &'static str, Value) {
    (
        "submit_correction",
        "c2",
        json!({"target_output": target, "replacement": "Paris.", "reason": "wrong", "evidence_event_ids": []}),
    )
}

fn check(w: &World, body: &str, worker: &WorkerResult) -> Result<Vec<ProposalKind>, R> {
    validate_completion(
        &w.snapshot,
        AttemptEvidence {
            api: ProviderApi::OpenaiChat,
            status: 200,
            body,
            worker,
        },
    )
    .map(|c| c.proposals.iter().map(ValidatedProposal::kind).collect())
}

#[test]
fn an_honest_completion_validates_and_latest_resolves() {
    let w = World::new();
    let calls = [
        memory(vec![w.trigger.id().to_string()]),
        correction("latest"),
    ];
    let completion = validate_completion(
        &w.snapshot,
        AttemptEvidence {
            api: ProviderApi::OpenaiChat,
            status: 200,
            body: &body(Some("Done."), &calls),
            worker: &honest(Some("Done."), &calls),
        },
    )
    .unwrap();
    assert_eq!(completion.text.unwrap().as_str(), "Done.");
    let ValidatedProposal::Correction { target, .. } = &completion.proposals[1] else {
        panic!()
    };
    assert_eq!(
        target.output_event_id, w.earlier_output,
        "latest is the snapshot's most recent target"
    );
    assert_eq!(target, w.snapshot.latest_correction_target().unwrap());
}

/// One row per check; each breaks exactly one thing.
#[test]
fn the_parent_refuses_what_the_worker_or_provider_got_wrong() {
    let w = World::new();
    let ok_calls = [memory(vec![])];
    let long = "x".repeat(4097);
    let unadmitted = "9".repeat(64);
    let rows: Vec<(&str, String, WorkerResult, R)> = vec![
        // "Every captured call in the assistant message must correspond one-to-one with the validated result packet."
        (
            "worker hid a call",
            body(None, &ok_calls),
            honest(None, &[]),
            R::ResultMismatch,
        ),
        (
            "worker invented a call",
            body(Some("hi"), &[]),
            honest(Some("hi"), &ok_calls),
            R::ResultMismatch,
        ),
        (
            "worker changed the arguments",
            body(None, &ok_calls),
            honest(
                None,
                &[(
                    "request_memory_change",
                    "c1",
                    json!({"operation": "append", "proposed_text": "coffee", "reason": "asked", "evidence_event_ids": []}),
                )],
            ),
            R::ResultMismatch,
        ),
        (
            "worker changed the call id",
            body(None, &ok_calls),
            honest(
                None,
                &[("request_memory_change", "other", ok_calls[0].2.clone())],
            ),
            R::ResultMismatch,
        ),
        (
            "worker changed the text",
            body(Some("a"), &[]),
            honest(Some("b"), &[]),
            R::ResultMismatch,
        ),
        // "A valid proposal completion may contain one bounded visible text part"
        (
            "text over 4,096 characters",
            body(Some(&long), &[]),
            honest(Some(&long), &[]),
            R::InvalidOutput,
        ),
        (
            "neither text nor calls",
            body(None, &[]),
            honest(None, &[]),
            R::InvalidOutput,
        ),
        (
            "text in two parts",
            two_parts(),
            honest(Some("a"), &[]),
            R::InvalidOutput,
        ),
        // "The sandbox and trusted parent both reject any other evidence id."
        (
            "evidence not admitted",
            body(None, &[memory(vec![unadmitted.clone()])]),
            honest(None, &[memory(vec![unadmitted.clone()])]),
            R::CapabilityEscape,
        ),
        // "Current, undelivered, omitted, unrelated, arbitrary ... runs are unavailable."
        (
            "target not admitted",
            body(None, &[correction(&unadmitted)]),
            honest(None, &[correction(&unadmitted)]),
            R::CapabilityEscape,
        ),
        (
            "unknown tool",
            body(None, &[("delete_everything", "c9", json!({}))]),
            honest(None, &[("delete_everything", "c9", json!({}))]),
            R::UnknownTool,
        ),
        (
            "two calls of one kind",
            body(
                None,
                &[
                    memory(vec![]),
                    (
                        "request_memory_change",
                        "c3",
                        json!({"operation": "append", "proposed_text": "b", "reason": "r", "evidence_event_ids": []}),
                    ),
                ],
            ),
            honest(
                None,
                &[
                    memory(vec![]),
                    (
                        "request_memory_change",
                        "c3",
                        json!({"operation": "append", "proposed_text": "b", "reason": "r", "evidence_event_ids": []}),
                    ),
                ],
            ),
            R::DuplicateCall,
        ),
        (
            "extra property",
            body(
                None,
                &[(
                    "request_memory_change",
                    "c1",
                    json!({"operation": "append", "proposed_text": "t", "reason": "r", "evidence_event_ids": [], "path": "/etc/passwd"}),
                )],
            ),
            honest(
                None,
                &[(
                    "request_memory_change",
                    "c1",
                    json!({"operation": "append", "proposed_text": "t", "reason": "r", "evidence_event_ids": [], "path": "/etc/passwd"}),
                )],
            ),
            R::MalformedCall,
        ),
        // "Malformed ... calls produce no proposal event": a repeated key is
        // malformed at every depth, even when an (old or lying) worker
        // captured the last value as `serde_json` keeps it.
        (
            "duplicate key at the top level",
            raw_body(
                "request_memory_change",
                "c1",
                r#"{"operation":"append","proposed_text":"canary-first-7d2c","proposed_text":"tea","reason":"asked","evidence_event_ids":[]}"#,
            ),
            honest(None, &[memory(vec![])]),
            R::MalformedCall,
        ),
        (
            "duplicate key nested",
            raw_body(
                "propose_focus",
                "c4",
                &focus_text(r#"{"id":"canary-first","id":"spring-garden","version":1}"#),
            ),
            honest(
                None,
                &[(
                    "propose_focus",
                    "c4",
                    serde_json::from_str(&focus_text(r#"{"id":"spring-garden","version":1}"#))
                        .unwrap(),
                )],
            ),
            R::MalformedCall,
        ),
        // The parent classifies a rejection itself: the worker's reason is never recorded.
        (
            "worker rejected a body the parent finds valid",
            body(None, &ok_calls),
            WorkerResult::Rejected {
                reason: R::TooManyCalls,
            },
            R::ResultMismatch,
        ),
        (
            "worker claims provider-transient after a 200",
            body(Some("hi"), &[]),
            WorkerResult::Rejected {
                reason: R::ProviderTransient,
            },
            R::ResultMismatch,
        ),
        (
            "worker rejected a body the parent also rejects",
            body(None, &[memory(vec![unadmitted.clone()])]),
            WorkerResult::Rejected {
                reason: R::ProviderTransient,
            },
            R::CapabilityEscape,
        ),
        (
            "unparseable body",
            "<html>".into(),
            honest(None, &ok_calls),
            R::ProviderMalformed,
        ),
    ];
    for (name, body, worker, expected) in rows {
        assert_eq!(check(&w, &body, &worker), Err(expected), "{name}");
    }
}

/// The controls of the duplicate-key rows: the same calls without the
/// repeated key validate, so the repeat is the only fault.
#[test]
fn duplicate_key_rows_differ_from_a_valid_call_only_by_the_repeat() {
    let w = World::new();
    let memory_text =
        r#"{"operation":"append","proposed_text":"tea","reason":"asked","evidence_event_ids":[]}"#;
    let focus = focus_text(r#"{"id":"spring-garden","version":1}"#);
    for (name, id, text, kind) in [
        (
            "request_memory_change",
            "c1",
            memory_text,
            ProposalKind::MemoryChange,
        ),
        (
            "propose_focus",
            "c4",
            focus.as_str(),
            ProposalKind::FocusDeclaration,
        ),
    ] {
        let args: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            check(
                &w,
                &raw_body(name, id, text),
                &honest(None, &[(name, id, args)])
            ),
            Ok(vec![kind]),
            "{name}"
        );
    }
}

#[test]
fn tools_not_exposed_by_the_snapshot_are_unknown() {
    let mut w = World::new();
    // A snapshot without correction targets exposes no submit_correction.
    w.snapshot.capabilities.correction_targets.clear();
    w.snapshot
        .capabilities
        .tools
        .retain(|k| *k != ProposalKind::SelfCorrection);
    let calls = [correction("latest")];
    assert_eq!(
        check(&w, &body(None, &calls), &honest(None, &calls)),
        Err(R::UnknownTool)
    );
}

/// Issue 43: a tool call the model wrote as text (the server did not parse
/// it) is `malformed-call` however the worker reported it; the refusal
/// carries none of its text.
#[test]
fn a_tool_call_written_as_text_is_malformed_whatever_the_worker_says() {
    let w = World::new();
    let canary = "canary-raw-call-5e1f";
    let qwen = format!(
        "<tool_call>\n{{\"name\": \"request_memory_change\", \"arguments\": {{\"operation\": \"append\", \"proposed_text\": \"{canary}\", \"reason\": \"r\", \"evidence_event_ids\": []}}}}\n</tool_call>"
    );
    let bare =
        format!("{{\"name\": \"propose_focus\", \"arguments\": {{\"objective\": \"{canary}\"}}}}");
    for (name, text, worker) in [
        (
            "a lying worker calls it a reply",
            &qwen,
            honest(Some(&qwen), &[]),
        ),
        (
            "bare JSON naming an offered tool",
            &bare,
            honest(Some(&bare), &[]),
        ),
        (
            "an honest worker refused it",
            &qwen,
            WorkerResult::Rejected {
                reason: R::MalformedCall,
            },
        ),
    ] {
        let judged = check(&w, &body(Some(text), &[]), &worker);
        assert_eq!(judged, Err(R::MalformedCall), "{name}");
        let shown = format!("{judged:?}");
        assert!(!shown.contains(canary), "{name}: {shown}");
    }
    // The control: JSON naming a tool the snapshot does not expose is text.
    let mut w = World::new();
    w.snapshot
        .capabilities
        .tools
        .retain(|k| *k != ProposalKind::FocusDeclaration);
    assert_eq!(
        check(&w, &body(Some(&bare), &[]), &honest(Some(&bare), &[])),
        Ok(vec![])
    );
}
