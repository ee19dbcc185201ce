//! `openai-chat`: OpenAI Chat Completions and compatible servers.
//!
//! Request: a `system` message, the history with `role: "tool"` messages
//! right after the assistant message carrying `tool_calls` (arguments as a
//! canonical JSON string), the current user turn (images as `data:` URLs),
//! `tools` of type `function` whose `parameters` are the packet's schemas,
//! `tool_choice: "auto"`, and the token limit. Provider-side `strict`
//! mode is not used: it rejects the length and count bounds our schemas carry,
//! and validation is ours. In strict-JSON mode no tool is offered and
//! `response_format` asks for a JSON object. The packet's compat mode decides
//! the token-limit field and what else differs per server (module `compat`).
//!
//! Response: `choices[0].message` — `content` (a string, or an array of text
//! parts on some compatible servers), `refusal` (kept as visible text),
//! `reasoning_content`/`reasoning`/`reasoning_details` (thinking: marked,
//! dropped), a leading `<think>…</think>` in the content (some compatible
//! servers inline thinking: dropped and marked), and `tool_calls` whose
//! `function.arguments` is a JSON string that may not be JSON.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use stream_core::json::CheckedValue;
use stream_protocol::{HistoryMessage, Image, OutputMode, Packet};

use crate::compat;
use crate::history::{self, BuildError, nonempty};
use crate::parsed::{
    FinishReason, ParseError, ParsedCompletion, ParsedToolCall, ProviderErrorCode, ToolArguments,
    Usage,
};

const API: &str = "openai-chat";

fn data_url(image: &Image) -> String {
    format!("data:{};base64,{}", image.media_type, image.data_base64)
}

fn user_message(text: &Option<String>, image: &Option<Image>) -> Value {
    match (nonempty(text), image) {
        (Some(text), None) => json!({"role": "user", "content": text}),
        (text, image) => {
            let mut parts = Vec::new();
            if let Some(text) = text {
                parts.push(json!({"type": "text", "text": text}));
            }
            if let Some(image) = image {
                parts.push(json!({"type": "image_url", "image_url": {"url": data_url(image)}}));
            }
            json!({"role": "user", "content": parts})
        }
    }
}

fn message(index: usize, m: &HistoryMessage) -> Result<Value, BuildError> {
    Ok(match m {
        HistoryMessage::User { text, image } => user_message(text, image),
        HistoryMessage::Assistant { text, tool_calls } => {
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            out.insert(
                "content".into(),
                nonempty(text).map_or(Value::Null, |t| json!(t)),
            );
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|c| {
                        let arguments = stream_core::canon::to_canonical_string(&c.arguments)
                            .map_err(|_| BuildError::ArgumentsNotCanonical { index })?;
                        Ok(json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": arguments},
                        }))
                    })
                    .collect::<Result<Vec<_>, BuildError>>()?;
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
        HistoryMessage::ToolResult { call_id, content } => {
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    })
}

/// The Chat Completions request body for `packet` (no credential).
pub fn build_request(packet: &Packet) -> Result<Value, BuildError> {
    history::check(packet)?;
    let mut messages = Vec::with_capacity(packet.history.len() + 2);
    if !packet.system.is_empty() {
        messages.push(json!({"role": "system", "content": packet.system}));
    }
    for (index, m) in packet.history.iter().enumerate() {
        messages.push(message(index, m)?);
    }
    messages.push(message(packet.history.len(), &packet.user)?);

    let compat = packet.provider.compat;
    let mut body = Map::new();
    body.insert("model".into(), json!(packet.provider.model));
    body.insert(
        compat::token_limit_field(compat).into(),
        json!(packet.provider.max_output_tokens),
    );
    body.insert("messages".into(), Value::Array(messages));
    if history::offers_tools(packet) {
        let tools: Vec<Value> = packet
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": compat::schema_sent(compat, &t.input_schema),
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        if compat::asks_parallel_tool_calls(compat) {
            body.insert("parallel_tool_calls".into(), json!(true));
        }
    }
    match packet.output_mode {
        OutputMode::Text => {}
        OutputMode::StrictJson => {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        }
    }
    Ok(Value::Object(body))
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    reasoning_details: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: CheckedValue,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Whether a reasoning field carries anything.
fn present(v: &Option<Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Bool(_) | Value::Number(_)) => true,
    }
}

/// Splits a leading `<think>…</think>` off `text`: (thinking found, rest).
fn strip_inline_thinking(text: &str) -> (bool, &str) {
    let trimmed = text.trim_start();
    let Some(after) = trimmed.strip_prefix("<think>") else {
        return (false, text);
    };
    match after.find("</think>") {
        Some(end) => (true, after[end + "</think>".len()..].trim_start()),
        // Thinking that never closed (a truncated completion): all of it is thinking.
        None => (true, ""),
    }
}

fn finish(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// The arguments through the one strict parser: a repeated key at any depth
/// is malformed, like text that is not JSON.
fn arguments(raw: CheckedValue) -> (ToolArguments, usize) {
    let CheckedValue {
        value,
        duplicate_key,
    } = raw;
    match value {
        Value::String(s) => {
            let len = s.len();
            match stream_core::json::parse_strict(&s) {
                Ok(v) => (ToolArguments::Json(v), len),
                Err(_) => (ToolArguments::NotJson, len),
            }
        }
        // Some compatible servers send the arguments as an object.
        Value::Object(_) => {
            let len = serde_json::to_string(&value).map_or(usize::MAX, |s| s.len());
            if duplicate_key {
                (ToolArguments::NotJson, len)
            } else {
                (ToolArguments::Json(value), len)
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
            (ToolArguments::NotJson, 0)
        }
    }
}

/// Parses a 2xx Chat Completions body.
pub fn parse_response(body: &str) -> Result<ParsedCompletion, ParseError> {
    let response: Response = serde_json::from_str(body).map_err(|e| ParseError::shape(API, &e))?;
    let count = response.choices.len();
    let mut choices = response.choices.into_iter();
    let choice = match (choices.next(), count) {
        (None, _) => return Err(ParseError::NoChoice),
        (Some(choice), 1) => choice,
        (Some(_), count) => return Err(ParseError::MultipleChoices { count }),
    };
    let m = choice.message;
    let mut thinking =
        present(&m.reasoning_content) || present(&m.reasoning) || present(&m.reasoning_details);
    let mut texts = Vec::new();
    let mut push_text = |text: &str, thinking: &mut bool, first: bool| {
        let (inline, rest) = if first {
            strip_inline_thinking(text)
        } else {
            (false, text)
        };
        *thinking |= inline;
        if !rest.is_empty() {
            texts.push(rest.to_owned());
        }
    };
    match m.content {
        None => {}
        Some(Content::Text(text)) => push_text(&text, &mut thinking, true),
        Some(Content::Parts(parts)) => {
            for (i, part) in parts.iter().enumerate() {
                match (part.kind.as_str(), &part.text) {
                    ("text" | "output_text", Some(text)) => push_text(text, &mut thinking, i == 0),
                    ("reasoning" | "thinking", _) => thinking = true,
                    _ => return Err(ParseError::UnknownBlock { index: i }),
                }
            }
        }
    }
    if let Some(refusal) = m.refusal.filter(|r| !r.is_empty()) {
        texts.push(refusal);
    }
    let mut tool_calls = Vec::new();
    for (index, call) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
        match call.kind.as_deref() {
            None | Some("function") => {}
            Some(_) => return Err(ParseError::NotAFunctionCall { index }),
        }
        let (arguments, raw_len) = arguments(call.function.arguments);
        tool_calls.push(ParsedToolCall {
            id: call.id,
            name: call.function.name,
            arguments,
            raw_len,
        });
    }
    Ok(ParsedCompletion {
        texts,
        thinking,
        tool_calls,
        usage: response.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }),
        finish: choice.finish_reason.as_deref().map(finish),
    })
}

/// The sanitized `error.code` (else `error.type`) of an error body.
pub fn parse_error_body(body: &str) -> Option<ProviderErrorCode> {
    let v: Value = serde_json::from_str(body).ok()?;
    let error = v.get("error")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .and_then(ProviderErrorCode::sanitize);
    code.or_else(|| {
        error
            .get("type")
            .and_then(Value::as_str)
            .and_then(ProviderErrorCode::sanitize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_thinking_is_dropped_and_marked() {
        assert_eq!(
            strip_inline_thinking("<think>a</think>\n\nHi"),
            (true, "Hi")
        );
        assert_eq!(strip_inline_thinking("  <think>never closed"), (true, ""));
        assert_eq!(
            strip_inline_thinking("Hi <think>x</think>"),
            (false, "Hi <think>x</think>")
        );
    }

    #[test]
    fn invalid_argument_strings_are_marked_not_json() {
        let (args, len) = arguments(checked("\"{\\\"a\\\": \""));
        assert!(matches!(args, ToolArguments::NotJson));
        assert_eq!(len, 6);
        let (args, _) = arguments(checked("\"{\\\"a\\\": 1}\""));
        assert!(matches!(args, ToolArguments::Json(_)));
    }

    fn checked(wire: &str) -> CheckedValue {
        serde_json::from_str(wire).unwrap()
    }

    #[test]
    fn repeated_keys_are_not_json_in_a_string_or_an_object() {
        for wire in [
            r#""{\"a\":1,\"a\":2}""#,
            r#""{\"a\":{\"b\":1,\"b\":1}}""#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
        ] {
            let (args, _) = arguments(checked(wire));
            assert!(matches!(args, ToolArguments::NotJson), "{wire}");
        }
        let (args, _) = arguments(checked(r#"{"a":{"b":1}}"#));
        assert!(matches!(args, ToolArguments::Json(_)));
    }
}
