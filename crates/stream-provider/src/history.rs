//! Checks on the neutral history every wire format relies on.
//!
//! The packet's history must already follow the order docs/design.md §12
//! prescribes: an assistant message with tool
//! calls is followed at once by exactly one tool result per call (in any
//! order), before anything else. Both providers need that order (OpenAI wants
//! the `role: "tool"` messages right after the assistant message, Anthropic
//! the `tool_result` blocks first in the next user message), so it is checked
//! once here rather than repaired differently per provider. History may open
//! with an assistant turn (a bounded transcript window can start with a
//! reply); the Anthropic adapter then opens with a fixed placeholder user
//! turn, because Messages expects the user to speak first.

use std::collections::HashSet;

use stream_protocol::{HistoryMessage, Image, MAX_IMAGE_BYTES, Packet};

/// The packet cannot be turned into a native request. Carries positions,
/// never content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A user message with neither text nor image.
    #[error("history message {index} is an empty user turn")]
    EmptyUserTurn {
        /// Position in history (`history.len()` for the current turn).
        index: usize,
    },
    /// An assistant message with neither text nor tool calls.
    #[error("history message {index} is an empty assistant turn")]
    EmptyAssistantTurn {
        /// Position in history.
        index: usize,
    },
    /// The current turn is not a user message.
    #[error("the current turn is not a user message")]
    CurrentTurnNotUser,
    /// A tool result that does not answer a call of the assistant message
    /// right before it.
    #[error("history message {index} is a tool result without a matching call")]
    ToolResultWithoutCall {
        /// Position in history.
        index: usize,
    },
    /// Tool calls not all answered before the next message.
    #[error("history message {index} leaves tool calls unanswered")]
    UnansweredToolCall {
        /// Position of the message that came too early.
        index: usize,
    },
    /// A history tool call id outside `^[A-Za-z0-9_-]{1,64}$`, or repeated.
    #[error("history message {index} has an invalid or repeated tool call id")]
    BadToolCallId {
        /// Position in history.
        index: usize,
    },
    /// History tool call arguments that cannot be written as canonical JSON.
    #[error("history message {index} has tool call arguments that are not I-JSON")]
    ArgumentsNotCanonical {
        /// Position in history.
        index: usize,
    },
    /// An image with an unsupported media type, non-base64 data or over the cap.
    #[error("history message {index} has an unusable image")]
    BadImage {
        /// Position in history (`history.len()` for the current turn).
        index: usize,
    },
    /// The built body did not serialize (it always does: a JSON value).
    #[error("the request body did not serialize")]
    NotSerializable,
}

/// Media types both providers accept.
pub(crate) const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

fn image_ok(image: &Image) -> bool {
    let max_b64 = MAX_IMAGE_BYTES.div_ceil(3) * 4;
    IMAGE_TYPES.contains(&image.media_type.as_str())
        && !image.data_base64.is_empty()
        && image.data_base64.len() <= max_b64
        && image.data_base64.len().is_multiple_of(4)
        && image
            .data_base64
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

fn id_ok(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

fn check_user(
    text: &Option<String>,
    image: &Option<Image>,
    index: usize,
) -> Result<(), BuildError> {
    let has_text = text.as_deref().is_some_and(|t| !t.is_empty());
    if !has_text && image.is_none() {
        return Err(BuildError::EmptyUserTurn { index });
    }
    if let Some(image) = image
        && !image_ok(image)
    {
        return Err(BuildError::BadImage { index });
    }
    Ok(())
}

/// Checks the packet's history and current turn (see the module doc).
pub(crate) fn check(packet: &Packet) -> Result<(), BuildError> {
    if let Some(HistoryMessage::ToolResult { .. }) = packet.history.first() {
        return Err(BuildError::ToolResultWithoutCall { index: 0 });
    }
    let mut pending: Vec<&str> = Vec::new();
    let mut seen_ids: HashSet<&str> = HashSet::new();
    for (index, message) in packet.history.iter().enumerate() {
        match message {
            HistoryMessage::ToolResult { call_id, .. } => {
                let Some(pos) = pending.iter().position(|p| p == call_id) else {
                    return Err(BuildError::ToolResultWithoutCall { index });
                };
                pending.swap_remove(pos);
                continue;
            }
            HistoryMessage::User { text, image } => {
                if !pending.is_empty() {
                    return Err(BuildError::UnansweredToolCall { index });
                }
                check_user(text, image, index)?;
            }
            HistoryMessage::Assistant { text, tool_calls } => {
                if !pending.is_empty() {
                    return Err(BuildError::UnansweredToolCall { index });
                }
                let has_text = text.as_deref().is_some_and(|t| !t.is_empty());
                if !has_text && tool_calls.is_empty() {
                    return Err(BuildError::EmptyAssistantTurn { index });
                }
                for call in tool_calls {
                    if !id_ok(&call.id) || !seen_ids.insert(call.id.as_str()) {
                        return Err(BuildError::BadToolCallId { index });
                    }
                    pending.push(call.id.as_str());
                }
            }
        }
    }
    let index = packet.history.len();
    if !pending.is_empty() {
        return Err(BuildError::UnansweredToolCall { index });
    }
    match &packet.user {
        HistoryMessage::User { text, image } => check_user(text, image, index),
        HistoryMessage::Assistant { .. } | HistoryMessage::ToolResult { .. } => {
            Err(BuildError::CurrentTurnNotUser)
        }
    }
}

/// Whether tools are offered: text mode and at least one exposed tool.
pub(crate) fn offers_tools(packet: &Packet) -> bool {
    match packet.output_mode {
        stream_protocol::OutputMode::Text => !packet.tools.is_empty(),
        stream_protocol::OutputMode::StrictJson => false,
    }
}

/// The names of the tools the request offers, by the `offers_tools` rule.
pub fn offered_tool_names(packet: &Packet) -> Vec<&str> {
    if offers_tools(packet) {
        packet.tools.iter().map(|t| t.name.as_str()).collect()
    } else {
        Vec::new()
    }
}

/// A non-empty text, or none.
pub(crate) fn nonempty(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|t| !t.is_empty())
}
