//! The neutral parsed completion both wire formats map to.

use std::fmt;

/// What a provider response said, provider-neutral.
///
/// `Debug` shows counts and lengths only: texts and arguments are model
/// content and never reach a log.
#[derive(Clone, PartialEq, Default)]
pub struct ParsedCompletion {
    /// Every visible text part, in response order (empty parts dropped).
    pub texts: Vec<String>,
    /// Whether thinking or reasoning was present. Its text is never kept.
    pub thinking: bool,
    /// Every tool call, in response order.
    pub tool_calls: Vec<ParsedToolCall>,
    /// Token usage, when the provider reported it.
    pub usage: Option<Usage>,
    /// Why generation stopped, when the provider said.
    pub finish: Option<FinishReason>,
}

impl fmt::Debug for ParsedCompletion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text_lens: Vec<usize> = self.texts.iter().map(|t| t.chars().count()).collect();
        f.debug_struct("ParsedCompletion")
            .field("text_lens", &text_lens)
            .field("thinking", &self.thinking)
            .field("tool_calls", &self.tool_calls)
            .field("usage", &self.usage)
            .field("finish", &self.finish)
            .finish()
    }
}

/// One tool call as the provider returned it.
#[derive(Clone, PartialEq)]
pub struct ParsedToolCall {
    /// The provider's call id.
    pub id: String,
    /// The tool name the model used (model-chosen: may be anything).
    pub name: String,
    /// The arguments, parsed or marked as not JSON.
    pub arguments: ToolArguments,
    /// Size of the arguments as the provider sent them, in bytes (the raw
    /// string for `openai-chat`, the compact serialization for
    /// `anthropic-messages`), for size bounds.
    pub raw_len: usize,
}

impl fmt::Debug for ParsedToolCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.arguments {
            ToolArguments::Json(_) => "json",
            ToolArguments::NotJson => "not-json",
        };
        f.debug_struct("ParsedToolCall")
            .field("id_len", &self.id.len())
            .field("name_len", &self.name.len())
            .field("arguments", &kind)
            .field("raw_len", &self.raw_len)
            .finish()
    }
}

/// Tool call arguments.
#[derive(Clone, PartialEq)]
pub enum ToolArguments {
    /// Parsed JSON (any JSON value; the schema decides whether it is an object).
    Json(serde_json::Value),
    /// Not strict JSON: the provider's argument string was not one JSON
    /// value, or an object in the arguments repeated a key
    /// (`stream_core::json`). Its text is not kept.
    NotJson,
}

impl fmt::Debug for ToolArguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Json(_) => f.write_str("Json(..)"),
            Self::NotJson => f.write_str("NotJson"),
        }
    }
}

/// Token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Prompt/input tokens.
    pub input_tokens: Option<u64>,
    /// Completion/output tokens.
    pub output_tokens: Option<u64>,
}

/// Why generation stopped, provider-neutral.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// Natural end of turn (`stop`, `end_turn`, `stop_sequence`).
    Stop,
    /// The model called tools (`tool_calls`, `tool_use`).
    ToolCalls,
    /// The output token limit was reached (`length`, `max_tokens`).
    Length,
    /// The provider filtered or refused (`content_filter`, `refusal`).
    ContentFilter,
    /// Any other reason the provider gave.
    Other,
}

/// A 2xx body was not a completion of the expected shape. Content-dark: never
/// carries body text (serde's messages can quote it, so they are dropped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The body was not JSON or did not have the wire format's shape.
    #[error("response is not a {api} completion (line {line}, column {column})")]
    Shape {
        /// The wire format expected.
        api: &'static str,
        /// Line of the first problem.
        line: usize,
        /// Column of the first problem.
        column: usize,
    },
    /// An OpenAI response without any choice.
    #[error("response has no choice")]
    NoChoice,
    /// An OpenAI response with more than one choice (we never ask for more).
    #[error("response has {count} choices")]
    MultipleChoices {
        /// How many.
        count: usize,
    },
    /// An Anthropic content block of a type we do not know.
    #[error("response content block {index} has an unknown type")]
    UnknownBlock {
        /// Its position.
        index: usize,
    },
    /// A tool call of a type other than `function` (OpenAI).
    #[error("tool call {index} is not a function call")]
    NotAFunctionCall {
        /// Its position.
        index: usize,
    },
}

impl ParseError {
    pub(crate) fn shape(api: &'static str, e: &serde_json::Error) -> Self {
        Self::Shape {
            api,
            line: e.line(),
            column: e.column(),
        }
    }
}

/// A provider error code: the `type`/`code` of an error body, restricted to
/// `[A-Za-z0-9_.-]{1,64}`. The provider's message is never kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderErrorCode(String);

impl ProviderErrorCode {
    /// Keeps `raw` only when it is a plain code.
    pub fn sanitize(raw: &str) -> Option<Self> {
        let plain = !raw.is_empty()
            && raw.len() <= 64
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        plain.then(|| Self(raw.to_owned()))
    }

    /// The code.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProviderErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_content() {
        let c = ParsedCompletion {
            texts: vec!["canary-text".into()],
            thinking: true,
            tool_calls: vec![ParsedToolCall {
                id: "canary-id".into(),
                name: "canary-name".into(),
                arguments: ToolArguments::Json(serde_json::json!({"a": "canary-arg"})),
                raw_len: 20,
            }],
            usage: None,
            finish: Some(FinishReason::Stop),
        };
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("canary"), "{dbg}");
    }

    #[test]
    fn error_codes_are_sanitized() {
        assert!(ProviderErrorCode::sanitize("invalid_request_error").is_some());
        assert!(ProviderErrorCode::sanitize("bad code with spaces").is_none());
        assert!(ProviderErrorCode::sanitize("").is_none());
        assert!(ProviderErrorCode::sanitize(&"a".repeat(65)).is_none());
    }
}
