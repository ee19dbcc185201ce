//! Helpers shared by the worker's integration tests.

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_protocol::Packet;
use stream_provider::{ParsedCompletion, ParsedToolCall, ToolArguments};

pub use stream_testkit::packets::{
    correction_args, event_id, focus_args, memory_args, packet as sample_packet,
};

/// The sample OpenAI packet.
pub fn packet() -> Packet {
    sample_packet(ProviderApi::OpenaiChat)
}

/// A call with JSON arguments, sized as their compact serialization.
pub fn call(id: &str, name: &str, args: Value) -> ParsedToolCall {
    let raw_len = args.to_string().len();
    ParsedToolCall {
        id: id.into(),
        name: name.into(),
        arguments: ToolArguments::Json(args),
        raw_len,
    }
}

/// A call whose raw argument string is `raw`, parsed as the worker parses
/// it: through `stream_provider::parse_response` and so the one strict JSON
/// parser (`stream_core::json`).
pub fn raw_call(id: &str, name: &str, raw: &str) -> ParsedToolCall {
    let body = serde_json::json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": raw}}]}}]})
    .to_string();
    let mut parsed = stream_provider::parse_response(ProviderApi::OpenaiChat, &body).unwrap();
    parsed.tool_calls.remove(0)
}

/// A completion of `texts` and `calls`.
pub fn completion(texts: &[&str], calls: Vec<ParsedToolCall>) -> ParsedCompletion {
    ParsedCompletion {
        texts: texts.iter().map(|t| (*t).to_owned()).collect(),
        thinking: false,
        tool_calls: calls,
        usage: None,
        finish: None,
    }
}
