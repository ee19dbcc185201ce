//! Telegram channel events: the inbound message, the delivery receipt and
//! the permanent delivery failure.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::event::{Authorship, Payload};
use crate::ids::{EventId, RunId, Sha256Hex};
use crate::string_literal;
use crate::text::{BoundedText, Label};

string_literal!(
    /// Only private chats are admitted.
    PrivateChat = "private"
);

/// A command of ours, parsed from a `bot_command` entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BotCommand {
    /// `/focus [description]`.
    Focus,
    /// `/correct <text>`.
    Correct,
    /// `/help`.
    Help,
}

impl BotCommand {
    /// The command without its slash.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Focus => "focus",
            Self::Correct => "correct",
            Self::Help => "help",
        }
    }
}

/// A parsed command and the text after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandRef {
    /// Which command.
    pub name: BotCommand,
    /// The rest of the message after the command, trimmed; may be empty.
    pub args: BoundedText<0, 4096>,
}

/// The stored photo of a message: the largest size under the cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PhotoRef {
    /// Telegram's file id (for re-download, not identity).
    pub file_id: BoundedText<1, 256>,
    /// Telegram's stable file id.
    pub file_unique_id: BoundedText<1, 256>,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// Bytes stored.
    pub size: u64,
    /// The content-addressed blob holding the bytes.
    pub blob_sha256: Sha256Hex,
    /// Media type, e.g. `image/jpeg`.
    pub content_type: Label,
}

/// The largest photo stored and sent to a model, in bytes: the one bound
/// for ingress and the packet (`stream_protocol::MAX_IMAGE_BYTES` is it).
pub const MAX_PHOTO_BYTES: u64 = 5 * 1024 * 1024;

/// Whether a photo of `size` bytes is over [`MAX_PHOTO_BYTES`]: the one
/// decision, for ingress (not stored, a fixed reply) and the packet (never
/// sent).
pub fn photo_too_large(size: u64) -> bool {
    size > MAX_PHOTO_BYTES
}

/// `stream.telegram.message.received@1`: one admitted owner message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MessageReceived {
    /// Telegram update id: the identity key.
    pub update_id: i64,
    /// Message id within the chat.
    pub message_id: i64,
    /// Chat id.
    pub chat_id: i64,
    /// Always `private`.
    pub chat_type: PrivateChat,
    /// Sender user id.
    pub sender_id: i64,
    /// Telegram's `date` (Unix seconds): an external timestamp.
    pub date: i64,
    /// Text or caption, if any.
    pub text: Option<BoundedText<1, 4096>>,
    /// Photo, if any.
    pub photo: Option<PhotoRef>,
    /// The message came with a photo over [`MAX_PHOTO_BYTES`], not stored
    /// (`photo` is `None`): it is answered with a fixed reply. Absent when
    /// false, so events without it keep their bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub photo_too_large: bool,
    /// The message this one replies to, if any.
    pub reply_to_message_id: Option<i64>,
    /// A command of ours: the message's first `bot_command` entity, when it
    /// names one of ours (see `stream_telegram::commands`).
    pub command: Option<CommandRef>,
}

impl Payload for MessageReceived {
    const TYPE: &'static str = "stream.telegram.message.received";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::External;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.update_id)
    }
}

/// `stream.telegram.delivery.receipt@1`: an output was really sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeliveryReceipt {
    /// The delivered output: the identity key.
    pub output_event_id: EventId,
    /// The run that produced it.
    pub run_id: RunId,
    /// Chat it was sent to.
    pub chat_id: i64,
    /// Telegram's message id of the sent message (never 0); for a reply
    /// split over several messages, the first (the one replying to the
    /// owner's message).
    pub message_id: i64,
    /// Telegram's `date` of the sent message.
    pub date: i64,
    /// The sender of the root message.
    pub root_sender_id: i64,
    /// The inbound message that started the chain.
    pub source_root_event_id: EventId,
    /// The message ids after the first, in order, when the reply was longer
    /// than one Telegram message. Absent (not `[]`) for a one-message
    /// reply, so every receipt written before splitting existed keeps its
    /// exact bytes and id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continuation_message_ids: Vec<i64>,
}

impl DeliveryReceipt {
    /// Every message id of the delivery, the first one first.
    pub fn message_ids(&self) -> impl Iterator<Item = i64> + '_ {
        std::iter::once(self.message_id).chain(self.continuation_message_ids.iter().copied())
    }
}

impl Payload for DeliveryReceipt {
    const TYPE: &'static str = "stream.telegram.delivery.receipt";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.output_event_id)
    }

    fn validate(&self) -> Result<(), crate::event::PayloadInvalid> {
        if self.message_id == 0 {
            // A message_id of 0 means scheduled, not sent: not a delivery.
            return Err(crate::event::PayloadInvalid::new(
                "messageId",
                "0 is not a delivery",
            ));
        }
        if self.continuation_message_ids.contains(&0) {
            return Err(crate::event::PayloadInvalid::new(
                "continuationMessageIds",
                "0 is not a delivery",
            ));
        }
        Ok(())
    }
}

/// `stream.telegram.delivery.failed@1`: Telegram refused an output for good
/// (a 4xx other than 429 that concerns the message, not the bot), so it is
/// not sent again. Content-dark: codes and ids only, never Telegram's
/// description (which may quote the text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeliveryFailed {
    /// The refused output: the identity key.
    pub output_event_id: EventId,
    /// The run that produced it.
    pub run_id: RunId,
    /// Chat it was for.
    pub chat_id: i64,
    /// Telegram's `error_code` (400–499, never 429).
    pub error_code: i64,
    /// Messages of a split reply already sent before the refusal, in order.
    pub sent_message_ids: Vec<i64>,
    /// The inbound message that started the chain.
    pub source_root_event_id: EventId,
}

impl Payload for DeliveryFailed {
    const TYPE: &'static str = "stream.telegram.delivery.failed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = false;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.output_event_id)
    }

    fn validate(&self) -> Result<(), crate::event::PayloadInvalid> {
        if !(400..500).contains(&self.error_code) || self.error_code == 429 {
            return Err(crate::event::PayloadInvalid::new(
                "errorCode",
                "a permanent refusal is a 4xx other than 429",
            ));
        }
        if self.sent_message_ids.contains(&0) {
            return Err(crate::event::PayloadInvalid::new(
                "sentMessageIds",
                "0 is not a delivery",
            ));
        }
        Ok(())
    }
}
