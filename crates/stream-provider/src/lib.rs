//! Native provider wire formats: pure request builders and response parsers
//! for `openai-chat` (Chat Completions and compatible servers) and
//! `anthropic-messages` (Anthropic Messages).
//!
//! Read [`build_request`] and [`parse_response`] first. Both are pure
//! functions of their input: the sandboxed worker calls them to build its one
//! request and read its one response, and the trusted parent calls the same
//! functions to check the worker's request (rebuild and compare) and, later,
//! to re-parse the brokered response itself.
//!
//! A parsed response is a neutral [`ParsedCompletion`]: every visible text
//! part (the caller decides that more than one is invalid), whether thinking
//! was present (its text is never kept), every tool call with its arguments
//! either parsed or marked as not JSON, usage and the finish reason. Provider
//! error bodies yield only a sanitized error code ([`parse_error_body`]).
//!
//! [`status_reason`] is the one rule from an HTTP status to a failure reason;
//! [`response_reason`] refines it by the known "request unsupported"
//! messages ([`unsupported_request`]), and [`provider_words`] is the bounded,
//! escaped form in which an error body may be logged or shown.
//! [`carries_raw_tool_call`] is the one rule that says visible text is a tool
//! call the model wrote out instead of making (refused, never a reply).
//!
//! This crate does no I/O, holds no credentials and knows no URLs beyond the
//! path each wire format posts to ([`endpoint_path`]). It does not validate
//! tool arguments: that is the worker's and the parent's job.

#![deny(missing_docs)]

pub mod anthropic;
mod compat;
mod history;
pub mod openai;
mod parsed;
mod raw_call;
mod status;
mod words;

pub use history::{BuildError, offered_tool_names};
pub use parsed::{
    FinishReason, ParseError, ParsedCompletion, ParsedToolCall, ProviderErrorCode, ToolArguments,
    Usage,
};
pub use raw_call::{RAW_CALL_MARKERS, carries_raw_tool_call};
pub use status::status_reason;
pub use words::{
    MAX_PROVIDER_WORDS_CHARS, Unsupported, provider_words, response_reason, unsupported_request,
};

use stream_core::payload::ProviderApi;
use stream_protocol::Packet;

/// The native request body for `packet`, in the wire format the packet names.
///
/// The body carries no credential. Tools are sent with `tool_choice` auto when
/// the packet exposes any and the output mode is text; in strict-JSON mode no
/// tool is offered.
pub fn build_request(packet: &Packet) -> Result<serde_json::Value, BuildError> {
    match packet.provider.api {
        ProviderApi::OpenaiChat => openai::build_request(packet),
        ProviderApi::AnthropicMessages => anthropic::build_request(packet),
    }
}

/// The bytes of the request body the broker sends for `packet`: the
/// serialization of [`build_request`]. The inspector shows a turn's request
/// through this same function, so what it shows is what was sent.
pub fn request_body(packet: &Packet) -> Result<Vec<u8>, BuildError> {
    body_bytes(&build_request(packet)?)
}

/// The bytes sent for a built request body: its compact JSON.
pub fn body_bytes(body: &serde_json::Value) -> Result<Vec<u8>, BuildError> {
    serde_json::to_vec(body).map_err(|_| BuildError::NotSerializable)
}

/// Parses a successful (2xx) response body of wire format `api`.
pub fn parse_response(api: ProviderApi, body: &str) -> Result<ParsedCompletion, ParseError> {
    match api {
        ProviderApi::OpenaiChat => openai::parse_response(body),
        ProviderApi::AnthropicMessages => anthropic::parse_response(body),
    }
}

/// The sanitized error code of a non-2xx body of wire format `api`, if the
/// body has the provider's error shape. The provider's message is never kept:
/// it may echo request content.
pub fn parse_error_body(api: ProviderApi, body: &str) -> Option<ProviderErrorCode> {
    match api {
        ProviderApi::OpenaiChat => openai::parse_error_body(body),
        ProviderApi::AnthropicMessages => anthropic::parse_error_body(body),
    }
}

/// The path a request of wire format `api` is posted to, relative to the
/// configured base URL (`https://api.openai.com/v1` + `/chat/completions`,
/// `https://api.anthropic.com` + `/v1/messages`).
pub fn endpoint_path(api: ProviderApi) -> &'static str {
    match api {
        ProviderApi::OpenaiChat => "/chat/completions",
        ProviderApi::AnthropicMessages => "/v1/messages",
    }
}
