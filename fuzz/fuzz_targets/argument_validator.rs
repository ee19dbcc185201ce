//! The worker's argument validator: arbitrary argument strings for any of
//! the three tools (through the real OpenAI response parser) never panic, and
//! whatever is captured stays inside the packet's capability.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stream_core::payload::ProviderApi;
use stream_protocol::{BrokerResponse, Packet, WorkerResult};
use stream_worker::capture::{PreparedPacket, evaluate_response};

static PACKET: OnceLock<Packet> = OnceLock::new();
static PREPARED: OnceLock<PreparedPacket<'static>> = OnceLock::new();

const TOOLS: [&str; 4] = ["request_memory_change", "submit_correction", "propose_focus", "other"];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let packet = PACKET.get_or_init(|| stream_testkit::packets::packet(ProviderApi::OpenaiChat));
    let prepared = PREPARED.get_or_init(|| PreparedPacket::new(packet).unwrap());
    let arguments = String::from_utf8_lossy(rest);
    let name = TOOLS[usize::from(selector) % TOOLS.len()];
    let body = serde_json::json!({"choices": [{"message": {"content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    ]}}]});
    let response = BrokerResponse { status: 200, body: body.to_string() };
    if let WorkerResult::Completed(c) = evaluate_response(prepared, &response) {
        assert_eq!(c.calls.len(), 1);
        let args = &c.calls[0].arguments;
        if let Some(ids) = args.get("evidence_event_ids").and_then(|v| v.as_array()) {
            for id in ids {
                let id = id.as_str().unwrap();
                assert!(packet.capability.evidence_ids.iter().any(|e| e.as_str() == id));
            }
        }
        if let Some(target) = args.get("target_output").and_then(|v| v.as_str()) {
            assert!(target == "latest" || packet.capability.correction_targets.iter().any(|t| t.as_str() == target));
        }
        assert!(arguments.len() <= stream_worker::capture::MAX_ARGUMENT_BYTES);
    }
});
