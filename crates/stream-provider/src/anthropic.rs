//! `anthropic-messages`: Anthropic Messages.
//!
//! Request: top-level `system`, `max_tokens`, messages that alternate user
//! and assistant (neighbours of one role are merged into one message; a
//! history opening with an assistant turn gets the fixed user turn
//! [`EARLIER_CONVERSATION`] before it), user
//! images as base64 `image` blocks, assistant tool calls as `tool_use`
//! blocks, and each run of tool results as `tool_result` blocks placed first
//! in the user message right after the `tool_use` message; `tools` with
//! `input_schema` and `tool_choice: {"type": "auto"}`. In strict-JSON mode no
//! tool is offered.
//!
//! Response: `content` blocks — `text` (visible text), `thinking` and
//! `redacted_thinking` (marked, dropped), `tool_use` (arguments are the
//! `input` object). Any other block type fails the parse (fail closed).

use serde::Deserialize;
use serde_json::{Map, Value, json};
use stream_core::json::CheckedValue;
use stream_protocol::{HistoryMessage, Packet};

use crate::history::{self, BuildError, nonempty};
use crate::parsed::{
    FinishReason, ParseError, ParsedCompletion, ParsedToolCall, ProviderErrorCode, ToolArguments,
    Usage,
};

const API: &str = "anthropic-messages";

/// The fixed user turn opening a history that starts with an assistant turn
/// (Messages expects the user to speak first).
pub const EARLIER_CONVERSATION: &str = "(earlier conversation)";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

fn blocks(m: &HistoryMessage) -> (Role, Vec<Value>) {
    match m {
        HistoryMessage::User { text, image } => {
            let mut out = Vec::new();
            if let Some(image) = image {
                out.push(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": image.media_type, "data": image.data_base64},
                }));
            }
            if let Some(text) = nonempty(text) {
                out.push(json!({"type": "text", "text": text}));
            }
            (Role::User, out)
        }
        HistoryMessage::Assistant { text, tool_calls } => {
            let mut out = Vec::new();
            if let Some(text) = nonempty(text) {
                out.push(json!({"type": "text", "text": text}));
            }
            for call in tool_calls {
                out.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}));
            }
            (Role::Assistant, out)
        }
        HistoryMessage::ToolResult { call_id, content } => (
            Role::User,
            vec![json!({"type": "tool_result", "tool_use_id": call_id, "content": content})],
        ),
    }
}

/// The Messages request body for `packet` (no credential).
pub fn build_request(packet: &Packet) -> Result<Value, BuildError> {
    history::check(packet)?;
    // History is checked: it opens with a user message and every tool result
    // directly follows its tool_use message, so appending neighbours of one
    // role keeps the tool_result blocks first in their user message.
    let mut merged: Vec<(Role, Vec<Value>)> = Vec::new();
    if let Some(HistoryMessage::Assistant { .. }) = packet.history.first() {
        merged.push((
            Role::User,
            vec![json!({"type": "text", "text": EARLIER_CONVERSATION})],
        ));
    }
    for m in packet.history.iter().chain(std::iter::once(&packet.user)) {
        let (role, content) = blocks(m);
        match merged.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(content),
            Some(_) | None => merged.push((role, content)),
        }
    }
    let messages: Vec<Value> = merged
        .into_iter()
        .map(|(role, content)| json!({"role": role.as_str(), "content": content}))
        .collect();

    let mut body = Map::new();
    body.insert("model".into(), json!(packet.provider.model));
    body.insert(
        "max_tokens".into(),
        json!(packet.provider.max_output_tokens),
    );
    if !packet.system.is_empty() {
        body.insert("system".into(), json!(packet.system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if history::offers_tools(packet) {
        let tools: Vec<Value> = packet
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!({"type": "auto"}));
    }
    Ok(Value::Object(body))
}

#[derive(Deserialize)]
struct Response {
    #[serde(rename = "type")]
    kind: MessageType,
    role: AssistantRole,
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
enum MessageType {
    #[serde(rename = "message")]
    Message,
}

#[derive(Deserialize)]
enum AssistantRole {
    #[serde(rename = "assistant")]
    Assistant,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Block {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "thinking")]
    Thinking {},
    #[serde(rename = "redacted_thinking")]
    RedactedThinking {},
    #[serde(rename = "tool_use")]
    ToolUse {
        id: String,
        name: String,
        input: CheckedValue,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

fn finish(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Parses a 2xx Messages body.
pub fn parse_response(body: &str) -> Result<ParsedCompletion, ParseError> {
    let response: Response = serde_json::from_str(body).map_err(|e| ParseError::shape(API, &e))?;
    let (MessageType::Message, AssistantRole::Assistant) = (response.kind, response.role);
    let mut out = ParsedCompletion {
        usage: response.usage.map(|u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }),
        finish: response.stop_reason.as_deref().map(finish),
        ..ParsedCompletion::default()
    };
    for (index, block) in response.content.into_iter().enumerate() {
        match block {
            Block::Text { text } => {
                if !text.is_empty() {
                    out.texts.push(text);
                }
            }
            Block::Thinking {} | Block::RedactedThinking {} => out.thinking = true,
            Block::ToolUse { id, name, input } => {
                let raw_len = serde_json::to_string(&input.value).map_or(usize::MAX, |s| s.len());
                // The one strict parser's verdict: a repeated key is malformed.
                let arguments = match input.into_strict() {
                    Ok(value) => ToolArguments::Json(value),
                    Err(_) => ToolArguments::NotJson,
                };
                out.tool_calls.push(ParsedToolCall {
                    id,
                    name,
                    arguments,
                    raw_len,
                });
            }
            Block::Unknown => return Err(ParseError::UnknownBlock { index }),
        }
    }
    Ok(out)
}

/// The sanitized `error.type` of an error body.
pub fn parse_error_body(body: &str) -> Option<ProviderErrorCode> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("error")?
        .get("type")
        .and_then(Value::as_str)
        .and_then(ProviderErrorCode::sanitize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_use(input: &str) -> String {
        format!(
            r#"{{"type":"message","role":"assistant","stop_reason":"tool_use","content":[{{"type":"tool_use","id":"t1","name":"request_memory_change","input":{input}}}]}}"#
        )
    }

    #[test]
    fn a_repeated_key_in_tool_input_is_not_json_and_the_rest_parses() {
        for input in [r#"{"a":1,"a":2}"#, r#"{"a":{"b":1,"b":2}}"#] {
            let parsed = parse_response(&tool_use(input)).unwrap();
            assert!(
                matches!(parsed.tool_calls[0].arguments, ToolArguments::NotJson),
                "{input}"
            );
            assert_eq!(parsed.tool_calls[0].name, "request_memory_change");
        }
        let parsed = parse_response(&tool_use(r#"{"a":{"b":1}}"#)).unwrap();
        assert_eq!(
            parsed.tool_calls[0].arguments,
            ToolArguments::Json(json!({"a": {"b": 1}}))
        );
    }
}
