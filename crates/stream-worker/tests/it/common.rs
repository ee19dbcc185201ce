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

/// A call whose raw argument string is `raw`.
pub fn raw_call(id: &str, name: &str, raw: &str) -> ParsedToolCall {
    ParsedToolCall {
        id: id.into(),
        name: name.into(),
        arguments: match serde_json::from_str(raw) {
            Ok(v) => ToolArguments::Json(v),
            Err(_) => ToolArguments::NotJson,
        },
        raw_len: raw.len(),
    }
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
