//! Frame types. Every object denies unknown fields; tags are explicit.

use serde::{Deserialize, Serialize};
use stream_core::payload::{ProviderApi, RunFailureReason, ThinkingMarker};
use stream_core::{EventId, RunId, string_literal};

string_literal!(
    /// The literal protocol identifier, `stream.sandbox/1`.
    Protocol = "stream.sandbox/1"
);

/// Frames the parent sends to the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frame", deny_unknown_fields)]
pub enum ParentFrame {
    /// Everything the worker may know for one attempt.
    #[serde(rename = "packet")]
    Packet(Box<Packet>),
    /// The answer to the worker's one provider request.
    #[serde(rename = "broker.response")]
    BrokerResponse(BrokerResponse),
}

/// Frames the worker sends to the parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frame", deny_unknown_fields)]
pub enum WorkerFrame {
    /// First frame: the worker is sandboxed and speaks this protocol.
    #[serde(rename = "hello")]
    Hello(Hello),
    /// The one native provider request.
    #[serde(rename = "broker.request")]
    BrokerRequest(BrokerRequest),
    /// The parsed completion, or a rejection.
    #[serde(rename = "result")]
    Result(WorkerResult),
    /// The worker could not go on (content-dark).
    #[serde(rename = "error")]
    Error(WorkerError),
}

/// `hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Hello {
    /// `stream.sandbox/1`.
    pub protocol: Protocol,
    /// The worker's crate version.
    pub worker_version: String,
    /// What the sandbox enforced, as the sandbox crate reports it. Carried
    /// opaque here so this crate stays dependency-light; the parent parses
    /// it strictly and refuses a worker that did not enforce the sandbox.
    pub sandbox: serde_json::Value,
}

/// Which provider and model, and the generation limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderSpec {
    /// Wire format.
    pub api: ProviderApi,
    /// Model name.
    pub model: String,
    /// Upper bound on output tokens.
    pub max_output_tokens: u32,
    /// What the request carries for the server behind an `openai-chat` base
    /// URL. Omitted on the wire when `openai`, so a default packet is the
    /// same bytes as before the field existed; a worker that does not know
    /// another mode refuses the packet (unknown field) rather than guess.
    #[serde(default, skip_serializing_if = "ProviderCompat::is_openai")]
    pub compat: ProviderCompat,
}

/// The OpenAI-compatible server an `openai-chat` request is shaped for
/// (`[provider] compat`). Anthropic requests ignore it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderCompat {
    /// OpenAI itself and servers that follow its current spec.
    #[default]
    Openai,
    /// Ollama's `/v1` compatibility layer.
    Ollama,
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// vLLM's OpenAI-compatible server.
    Vllm,
}

impl ProviderCompat {
    /// Every mode, in documentation order.
    pub const ALL: [Self; 4] = [Self::Openai, Self::Ollama, Self::LlamaCpp, Self::Vllm];

    /// The config and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Ollama => "ollama",
            Self::LlamaCpp => "llama-cpp",
            Self::Vllm => "vllm",
        }
    }

    /// Whether this is the default mode.
    pub fn is_openai(&self) -> bool {
        matches!(self, Self::Openai)
    }
}

/// How the model must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputMode {
    /// Conversation text, with proposal tools allowed.
    Text,
    /// A strict JSON document; any tool call is invalid.
    StrictJson,
}

/// An image of a user turn, carried inline (the worker has no filesystem).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Image {
    /// Media type, e.g. `image/jpeg`.
    pub media_type: String,
    /// Standard base64 of the bytes (at most [`crate::MAX_IMAGE_BYTES`] decoded).
    pub data_base64: String,
}

/// One tool call as history carries it: canonical arguments, a stable
/// synthetic id (never the provider's original call id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HistoryToolCall {
    /// `^[A-Za-z0-9_-]{1,64}$`, valid for every provider.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Canonical arguments.
    pub arguments: serde_json::Value,
}

/// One message of provider-neutral history. Adapters map it to each
/// provider's native shape and ordering rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "kebab-case", deny_unknown_fields)]
pub enum HistoryMessage {
    /// The owner's message.
    User {
        /// Text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Image, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image: Option<Image>,
    },
    /// An assistant message: text, tool calls, or both.
    Assistant {
        /// Text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Tool calls, if any.
        #[serde(default, rename = "toolCalls", skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<HistoryToolCall>,
    },
    /// The result of one earlier tool call.
    ToolResult {
        /// The call it answers.
        #[serde(rename = "callId")]
        call_id: String,
        /// The normalized result text.
        content: String,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ToolDef {
    /// Fixed tool name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Strict JSON Schema (2020-12) of its arguments.
    pub input_schema: serde_json::Value,
}

/// What the snapshot admits, as the worker needs it for its own validation.
/// The memory target itself (path, version, hash) never reaches the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capability {
    /// Whether a memory target exists.
    pub memory_target: bool,
    /// Admitted correction target output ids, oldest first.
    pub correction_targets: Vec<EventId>,
    /// Admitted evidence ids.
    pub evidence_ids: Vec<EventId>,
    /// At most this many calls (3).
    pub max_calls: u32,
}

/// `packet`: everything the worker may know for one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Packet {
    /// `stream.sandbox/1`.
    pub protocol: Protocol,
    /// The run.
    pub run_id: RunId,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// Provider, model and limits.
    pub provider: ProviderSpec,
    /// The system prompt.
    pub system: String,
    /// Earlier turns.
    pub history: Vec<HistoryMessage>,
    /// The current user turn (a `user` message).
    pub user: HistoryMessage,
    /// Exposed tools (declared and capable only).
    pub tools: Vec<ToolDef>,
    /// Admitted targets and evidence.
    pub capability: Capability,
    /// Output mode.
    pub output_mode: OutputMode,
}

/// `broker.request`: the one native request body the worker built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrokerRequest {
    /// The provider's native JSON request body, without credentials.
    pub body: serde_json::Value,
}

/// `broker.response`: what the provider answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BrokerResponse {
    /// HTTP status.
    pub status: u16,
    /// Body text, at most [`crate::MAX_PROVIDER_BODY_BYTES`].
    pub body: String,
}

string_literal!(
    /// The content-dark result every captured call gets.
    Captured = "captured"
);

/// The result the worker gives a captured call instead of running anything:
/// content-dark, and it ends the agent loop (no follow-up request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallResult {
    /// Literal `captured`.
    pub status: Captured,
    /// Literal `true`.
    pub terminate: stream_core::True,
}

/// One captured proposal call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapturedCall {
    /// Tool name.
    pub tool: String,
    /// The provider's call id (never durable).
    pub call_id: String,
    /// The arguments, as parsed from the provider response.
    pub arguments: serde_json::Value,
    /// The content-dark result the call was answered with.
    pub result: CallResult,
}

/// A completion the worker accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Completion {
    /// The visible text part, if any (at most one).
    pub text: Option<String>,
    /// Whether thinking was present (its text is never carried).
    pub thinking: ThinkingMarker,
    /// Captured calls, in response order (0–3, at most one per tool).
    pub calls: Vec<CapturedCall>,
}

/// `result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkerResult {
    /// The completion passed the worker's validation.
    Completed(Completion),
    /// The completion was refused: no proposal may come of it.
    Rejected {
        /// Content-dark reason.
        reason: RunFailureReason,
    },
}

/// Why a worker stopped without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerErrorCode {
    /// The sandbox could not be entered.
    Sandbox,
    /// A frame was malformed, oversized or out of order.
    Protocol,
    /// The packet was not usable (unknown tool schema, bad image, …).
    Packet,
}

/// `error`: content-dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkerError {
    /// What went wrong.
    pub code: WorkerErrorCode,
}
