//! Property tests of the argument validator (the CI stand-in for the cargo
//! fuzz target `argument_validator` in `fuzz/`).

use proptest::prelude::*;
use serde_json::{Value, json};
use stream_protocol::{BrokerResponse, WorkerResult};
use stream_worker::capture::{MAX_ARGUMENT_BYTES, PreparedPacket, evaluate_response};

use crate::common::*;

const TOOLS: [&str; 4] = [
    "request_memory_change",
    "submit_correction",
    "propose_focus",
    "other",
];

fn id_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(event_id(0xa1))),
        Just(json!(event_id(0xb1))),
        Just(json!(event_id(0x99))),
        Just(json!("latest")),
        "[0-9a-f]{0,70}".prop_map(|s| json!(s)),
        any::<i64>().prop_map(|n| json!(n)),
    ]
}

fn args_strategy(tool: usize) -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("append"), Just("replace-document"), Just("delete")],
        "\\PC{1,40}",
        proptest::collection::vec(id_strategy(), 0..4),
        id_strategy(),
        any::<bool>(),
    )
        .prop_map(move |(op, text, ids, target, extra)| {
            let mut v = match tool {
                0 => json!({"operation": op, "proposed_text": text, "reason": text, "evidence_event_ids": ids}),
                1 => json!({"target_output": target, "replacement": text, "reason": text, "evidence_event_ids": ids}),
                _ => focus_args(&text),
            };
            if extra {
                v["extra"] = json!(true);
            }
            v
        })
}

fn check(name: &str, arguments: &str) -> Result<(), TestCaseError> {
    let p = packet();
    let prepared = PreparedPacket::new(&p).unwrap();
    let body = json!({"choices": [{"message": {"content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    ]}}]});
    let response = BrokerResponse {
        status: 200,
        body: body.to_string(),
    };
    if let WorkerResult::Completed(c) = evaluate_response(&prepared, &response) {
        prop_assert_eq!(c.calls.len(), 1);
        prop_assert!(arguments.len() <= MAX_ARGUMENT_BYTES);
        let args = &c.calls[0].arguments;
        for id in args
            .get("evidence_event_ids")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = id.as_str().unwrap_or_default();
            prop_assert!(p.capability.evidence_ids.iter().any(|e| e.as_str() == id));
        }
        if let Some(target) = args.get("target_output") {
            let target = target.as_str().unwrap_or_default();
            prop_assert!(
                target == "latest"
                    || p.capability
                        .correction_targets
                        .iter()
                        .any(|t| t.as_str() == target)
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn arbitrary_arguments_never_escape_the_capability(tool in 0usize..4, raw in "\\PC{0,200}") {
        check(TOOLS[tool], &raw)?;
    }

    #[test]
    fn near_valid_arguments_never_escape_the_capability(
        (tool, args) in (0usize..3).prop_flat_map(|t| (Just(t), args_strategy(t)))
    ) {
        check(TOOLS[tool], &args.to_string())?;
    }
}
