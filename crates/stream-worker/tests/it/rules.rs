//! The capture rules, one table row per rule (the rule's sentence above it).

use serde_json::json;
use stream_core::payload::{RunFailureReason as R, ThinkingMarker};
use stream_protocol::{CallResult, OutputMode, Packet, WorkerResult};
use stream_provider::ParsedCompletion;
use stream_worker::capture::{
    MAX_ARGUMENT_BYTES, PacketError, PreparedPacket, validate_completion,
};

use crate::common::*;

struct Row {
    name: &'static str,
    edit: fn(&mut Packet),
    completion: ParsedCompletion,
    expected: Result<usize, R>,
}

fn keep(_: &mut Packet) {}

fn rows() -> Vec<Row> {
    let mem = || {
        call(
            "call_m",
            "request_memory_change",
            memory_args("Takes the 7:40 train."),
        )
    };
    let cor = || call("call_c", "submit_correction", correction_args("Canberra."));
    let foc = || {
        call(
            "call_f",
            "propose_focus",
            focus_args("Review my week every Monday."),
        )
    };
    let with = |f: &dyn Fn(&mut serde_json::Value), mut c: stream_provider::ParsedToolCall| {
        if let stream_provider::ToolArguments::Json(v) = &mut c.arguments {
            f(v);
            c.raw_len = v.to_string().len();
        }
        c
    };
    vec![
        // "A valid proposal completion may contain one bounded visible text part
        // plus one to three validated proposal calls."
        Row {
            name: "text plus three calls",
            edit: keep,
            completion: completion(&["Done."], vec![mem(), cor(), foc()]),
            expected: Ok(3),
        },
        Row {
            name: "text only",
            edit: keep,
            completion: completion(&["Hello."], vec![]),
            expected: Ok(0),
        },
        Row {
            name: "tool only",
            edit: keep,
            completion: completion(&[], vec![cor()]),
            expected: Ok(1),
        },
        // "It captures at most three calls total" (four calls).
        Row {
            name: "four calls",
            edit: keep,
            completion: completion(
                &[],
                vec![
                    mem(),
                    cor(),
                    foc(),
                    call("call_x", "request_memory_change", memory_args("x")),
                ],
            ),
            expected: Err(R::TooManyCalls),
        },
        // The packet's maxCalls may lower the bound, never raise it.
        Row {
            name: "over the packet's maxCalls",
            edit: |p| p.capability.max_calls = 1,
            completion: completion(&[], vec![mem(), cor()]),
            expected: Err(R::TooManyCalls),
        },
        Row {
            name: "maxCalls above three is clamped",
            edit: |p| p.capability.max_calls = 9,
            completion: completion(&[], vec![mem(), cor(), foc(), foc()]),
            expected: Err(R::TooManyCalls),
        },
        // "... and at most one call of each kind."
        Row {
            name: "two calls of one kind",
            edit: keep,
            completion: completion(
                &[],
                vec![
                    mem(),
                    call("call_m2", "request_memory_change", memory_args("again")),
                ],
            ),
            expected: Err(R::DuplicateCall),
        },
        // "The worker exposes only the declaration-selected fixed tools."
        Row {
            name: "unknown tool",
            edit: keep,
            completion: completion(&[], vec![call("call_u", "delete_memory", json!({}))]),
            expected: Err(R::UnknownTool),
        },
        Row {
            name: "known tool not exposed",
            edit: |p| p.tools.retain(|t| t.name != "propose_focus"),
            completion: completion(&[], vec![foc()]),
            expected: Err(R::UnknownTool),
        },
        // "Malformed ... calls produce no proposal event": invalid JSON arguments.
        Row {
            name: "invalid JSON arguments",
            edit: keep,
            completion: completion(
                &[],
                vec![raw_call(
                    "call_m",
                    "request_memory_change",
                    "{\"operation\": \"append\", ",
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        // Issue 12: a repeated key is malformed at every depth (plain
        // `serde_json` keeps the last value silently).
        Row {
            name: "duplicate key at the top level",
            edit: keep,
            completion: completion(
                &[],
                vec![raw_call(
                    "call_m",
                    "request_memory_change",
                    r#"{"operation":"append","proposed_text":"A","proposed_text":"B","reason":"r","evidence_event_ids":[]}"#,
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "duplicate key nested",
            edit: keep,
            completion: completion(
                &[],
                vec![raw_call("call_f", "propose_focus", &{
                    let text = focus_args("Review my week every Monday.").to_string();
                    let nested = text.replacen("\"identity\":{", "\"identity\":{\"version\":1,", 1);
                    assert_ne!(nested, text, "the focus arguments have an identity object");
                    nested
                })],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "the same arguments without the repeat (control)",
            edit: keep,
            completion: completion(
                &[],
                vec![
                    raw_call(
                        "call_m",
                        "request_memory_change",
                        r#"{"operation":"append","proposed_text":"B","reason":"r","evidence_event_ids":[]}"#,
                    ),
                    raw_call(
                        "call_f",
                        "propose_focus",
                        &focus_args("Review my week every Monday.").to_string(),
                    ),
                ],
            ),
            expected: Ok(2),
        },
        // "strict TypeBox schemas with no additional properties"
        Row {
            name: "extra property",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["path"] = json!("/etc/passwd");
                    },
                    mem(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "wrong type",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["reason"] = json!(7);
                    },
                    mem(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "missing required property",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v.as_object_mut().map(|o| o.remove("reason"));
                    },
                    cor(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        // "proposed_text: 1–32,768 characters"
        Row {
            name: "text over its bound",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["proposed_text"] = json!("é".repeat(32_769));
                    },
                    mem(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        // "replacement: 1–4,096 characters"
        Row {
            name: "empty replacement",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["replacement"] = json!("");
                    },
                    cor(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        // "evidence_event_ids: unique array of at most 16"
        Row {
            name: "repeated evidence",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["evidence_event_ids"] = json!([event_id(0xa1), event_id(0xa1)]);
                    },
                    mem(),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "arguments not an object",
            edit: keep,
            completion: completion(
                &[],
                vec![raw_call("call_m", "request_memory_change", "[1, 2]")],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "unusable call id",
            edit: keep,
            completion: completion(
                &[],
                vec![call(
                    "call with spaces",
                    "request_memory_change",
                    memory_args("x"),
                )],
            ),
            expected: Err(R::MalformedCall),
        },
        // "... oversized ... calls produce no proposal event"
        Row {
            name: "oversized arguments",
            edit: keep,
            completion: completion(
                &[],
                vec![raw_call(
                    "call_m",
                    "request_memory_change",
                    &format!("\"{}\"", "x".repeat(MAX_ARGUMENT_BYTES)),
                )],
            ),
            expected: Err(R::OversizedCall),
        },
        // "A tool may cite only ids admitted by the snapshot" (evidence).
        Row {
            name: "evidence not admitted",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["evidence_event_ids"] = json!([event_id(0xee)]);
                    },
                    mem(),
                )],
            ),
            expected: Err(R::CapabilityEscape),
        },
        Row {
            name: "correction evidence not admitted",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["evidence_event_ids"] = json!([event_id(0xa1), event_id(0xcc)]);
                    },
                    cor(),
                )],
            ),
            expected: Err(R::CapabilityEscape),
        },
        // "target_output: exact snapshot-admitted output event id"
        Row {
            name: "target admitted by id",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["target_output"] = json!(event_id(0xb1));
                    },
                    cor(),
                )],
            ),
            expected: Ok(1),
        },
        Row {
            name: "target not admitted",
            edit: keep,
            completion: completion(
                &[],
                vec![with(
                    &|v| {
                        v["target_output"] = json!(event_id(0xa1));
                    },
                    cor(),
                )],
            ),
            expected: Err(R::CapabilityEscape),
        },
        // "... or the literal string latest" — only with a target in the snapshot.
        Row {
            name: "latest with no target",
            edit: |p| p.capability.correction_targets.clear(),
            completion: completion(&[], vec![cor()]),
            expected: Err(R::CapabilityEscape),
        },
        // "memory-change is available only when the snapshot contains the exact
        // current memory.md version"
        Row {
            name: "memory change without a memory target",
            edit: |p| p.capability.memory_target = false,
            completion: completion(&[], vec![mem()]),
            expected: Err(R::CapabilityEscape),
        },
        // "Tool calls are invalid in strict-JSON mode."
        Row {
            name: "tool call in strict-json",
            edit: |p| p.output_mode = OutputMode::StrictJson,
            completion: completion(&["{\"a\":1}"], vec![mem()]),
            expected: Err(R::ToolCallInStrictJson),
        },
        Row {
            name: "strict-json text that is not JSON",
            edit: |p| p.output_mode = OutputMode::StrictJson,
            completion: completion(&["sure! {\"a\":1}"], vec![]),
            expected: Err(R::InvalidOutput),
        },
        Row {
            name: "strict-json document",
            edit: |p| p.output_mode = OutputMode::StrictJson,
            completion: completion(&["{\"a\":1}"], vec![]),
            expected: Ok(0),
        },
        // Issue 43: a tool call written as text is "refused with an exact
        // reason, never delivered as raw call text".
        Row {
            name: "a Qwen <tool_call> block as text",
            edit: keep,
            completion: completion(
                &[
                    "<tool_call>\n{\"name\": \"request_memory_change\", \"arguments\": {\"proposed_text\": \"canary-raw-call\"}}\n</tool_call>",
                ],
                vec![],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "a template marker beside a real call",
            edit: keep,
            completion: completion(&["Done. [TOOL_CALLS]"], vec![foc()]),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "bare JSON naming an offered tool",
            edit: keep,
            completion: completion(
                &["{\"name\": \"propose_focus\", \"arguments\": {}}"],
                vec![],
            ),
            expected: Err(R::MalformedCall),
        },
        Row {
            name: "bare JSON naming a tool the packet does not offer",
            edit: |p| p.tools.retain(|t| t.name != "propose_focus"),
            completion: completion(
                &["{\"name\": \"propose_focus\", \"arguments\": {}}"],
                vec![],
            ),
            expected: Ok(0),
        },
        Row {
            name: "strict-json naming a tool: none is offered in that mode",
            edit: |p| p.output_mode = OutputMode::StrictJson,
            completion: completion(&["{\"name\": \"propose_focus\"}"], vec![]),
            expected: Ok(0),
        },
        Row {
            name: "prose about a tool call",
            edit: keep,
            completion: completion(&["I could make a tool call to remember that."], vec![]),
            expected: Ok(0),
        },
        // "one bounded visible text part": two parts.
        Row {
            name: "two text parts",
            edit: keep,
            completion: completion(&["a", "b"], vec![]),
            expected: Err(R::InvalidOutput),
        },
        // ... bounded: conversation-text@1 is 1–4,096 characters.
        Row {
            name: "text over 4096 characters",
            edit: keep,
            completion: completion(&[&"ü".repeat(4097)], vec![]),
            expected: Err(R::InvalidOutput),
        },
        Row {
            name: "text of exactly 4096 characters",
            edit: keep,
            completion: completion(&[&"ü".repeat(4096)], vec![]),
            expected: Ok(0),
        },
        // An empty completion has nothing to deliver.
        Row {
            name: "empty completion",
            edit: keep,
            completion: completion(&[], vec![]),
            expected: Err(R::InvalidOutput),
        },
    ]
}

#[test]
fn capture_rules_table() {
    for row in rows() {
        let mut p = packet();
        (row.edit)(&mut p);
        let prepared = PreparedPacket::new(&p).unwrap();
        let result = validate_completion(&prepared, &row.completion);
        match (&result, row.expected) {
            (WorkerResult::Completed(c), Ok(n)) => {
                assert_eq!(c.calls.len(), n, "{}", row.name);
                for (captured, parsed) in c.calls.iter().zip(&row.completion.tool_calls) {
                    // "A captured call returns a content-dark result with terminate: true."
                    assert_eq!(captured.result, CallResult::default(), "{}", row.name);
                    assert_eq!(captured.call_id, parsed.id, "{}", row.name);
                    assert_eq!(captured.tool, parsed.name, "{}", row.name);
                }
                assert_eq!(
                    c.text.as_deref(),
                    row.completion.texts.first().map(String::as_str)
                );
            }
            (WorkerResult::Rejected { reason }, Err(expected)) => {
                assert_eq!(*reason, expected, "{}", row.name);
            }
            (got, expected) => panic!("{}: got {got:?}, expected {expected:?}", row.name),
        }
    }
}

#[test]
fn thinking_is_marked_and_never_carried() {
    let p = packet();
    let prepared = PreparedPacket::new(&p).unwrap();
    let mut c = completion(&["Hi."], vec![]);
    c.thinking = true;
    let WorkerResult::Completed(done) = validate_completion(&prepared, &c) else {
        panic!("rejected");
    };
    assert_eq!(done.thinking, ThinkingMarker::Redacted);
    c.thinking = false;
    let WorkerResult::Completed(done) = validate_completion(&prepared, &c) else {
        panic!("rejected");
    };
    assert_eq!(done.thinking, ThinkingMarker::None);
}

#[test]
fn unusable_packets_are_refused() {
    let mut p = packet();
    p.tools[1].name = "run_shell".into();
    assert_eq!(
        PreparedPacket::new(&p).unwrap_err(),
        PacketError::UnknownTool { index: 1 }
    );
    let mut p = packet();
    p.tools[2] = p.tools[0].clone();
    assert_eq!(
        PreparedPacket::new(&p).unwrap_err(),
        PacketError::DuplicateTool { index: 2 }
    );
    let mut p = packet();
    p.tools[0].input_schema = json!({"type": "object", "minProperties": "two"});
    assert_eq!(
        PreparedPacket::new(&p).unwrap_err(),
        PacketError::BadSchema { index: 0 }
    );
    // No remote resolution: a schema needing one does not compile.
    let mut p = packet();
    p.tools[0].input_schema = json!({"$ref": "https://example.invalid/schema.json"});
    assert_eq!(
        PreparedPacket::new(&p).unwrap_err(),
        PacketError::BadSchema { index: 0 }
    );
    let mut p = packet();
    p.tools[0].input_schema = json!({"$ref": "file:///etc/passwd"});
    assert_eq!(
        PreparedPacket::new(&p).unwrap_err(),
        PacketError::BadSchema { index: 0 }
    );
}
