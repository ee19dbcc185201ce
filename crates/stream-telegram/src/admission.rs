//! Admission: which updates may be stored at all.
//!
//! Only a new message in the configured owner's private chat, sent by the
//! owner, is admitted. Everything else is dropped before any of its content
//! is kept; the caller counts the [`DropReason`] and logs the update id and
//! the reason code, nothing more.

use serde_json::Value;
use stream_core::payload::CommandRef;
use stream_core::text::BoundedText;

use crate::commands::parse_command;
use crate::wire::{ChatKind, Message, PhotoSize};

/// Why an update was not stored: a closed set of content-free codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Not JSON, no `update_id`, or a message whose fields have the wrong types.
    Malformed,
    /// An update carrying nothing but its id.
    NoMessage,
    /// `edited_message` (or `edited_business_message`): edits are not new turns.
    EditedMessage,
    /// `channel_post` or `edited_channel_post`.
    ChannelPost,
    /// `callback_query`.
    CallbackQuery,
    /// Any other update kind (inline queries, membership changes, …).
    UnsupportedUpdate,
    /// A group or supergroup chat.
    GroupChat,
    /// A channel chat.
    ChannelChat,
    /// A chat type this build does not know.
    UnknownChat,
    /// A message without a sender.
    NoSender,
    /// Someone other than the owner, a bot, or a chat that is not the
    /// owner's own (also every sender when no owner is configured).
    ForeignSender,
    /// Neither text, caption nor photo (stickers, voice, …).
    NoContent,
    /// Text longer than 4,096 characters.
    TextTooLong,
    /// Every size of the photo is over the one photo bound. Not a drop any
    /// more: ingress stores the message without it, to be answered with a
    /// fixed reply (the code stays, for counts logged before).
    PhotoTooLarge,
    /// `getFile` or the download failed after the client's retries.
    PhotoDownloadFailed,
}

impl DropReason {
    /// The stable code logged and counted.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::NoMessage => "no-message",
            Self::EditedMessage => "edited-message",
            Self::ChannelPost => "channel-post",
            Self::CallbackQuery => "callback-query",
            Self::UnsupportedUpdate => "unsupported-update",
            Self::GroupChat => "group-chat",
            Self::ChannelChat => "channel-chat",
            Self::UnknownChat => "unknown-chat",
            Self::NoSender => "no-sender",
            Self::ForeignSender => "foreign-sender",
            Self::NoContent => "no-content",
            Self::TextTooLong => "text-too-long",
            Self::PhotoTooLarge => "photo-too-large",
            Self::PhotoDownloadFailed => "photo-download-failed",
        }
    }

    /// Every code, for golden tests and counters.
    pub const ALL: [DropReason; 15] = [
        Self::Malformed,
        Self::NoMessage,
        Self::EditedMessage,
        Self::ChannelPost,
        Self::CallbackQuery,
        Self::UnsupportedUpdate,
        Self::GroupChat,
        Self::ChannelChat,
        Self::UnknownChat,
        Self::NoSender,
        Self::ForeignSender,
        Self::NoContent,
        Self::TextTooLong,
        Self::PhotoTooLarge,
        Self::PhotoDownloadFailed,
    ];
}

/// An update that was not admitted: its id when it had one, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// `update_id`, when the update had a readable one.
    pub update_id: Option<i64>,
    /// Why.
    pub reason: DropReason,
}

/// An admitted owner message, before its photo (if any) is downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// `update_id`.
    pub update_id: i64,
    /// `message_id`.
    pub message_id: i64,
    /// The owner's private chat.
    pub chat_id: i64,
    /// The owner.
    pub sender_id: i64,
    /// Telegram's `date`.
    pub date: i64,
    /// Text or caption.
    pub text: Option<BoundedText<1, 4096>>,
    /// Photo sizes, largest first; empty when there is no photo.
    pub photo_sizes: Vec<PhotoSize>,
    /// `reply_to_message.message_id`.
    pub reply_to_message_id: Option<i64>,
    /// A command of ours.
    pub command: Option<CommandRef>,
}

/// The update id of a raw update, if it has one.
pub fn update_id_of(update: &Value) -> Option<i64> {
    update.get("update_id").and_then(Value::as_i64)
}

/// Decides whether `update` is a new message of `owner_user_id` in their
/// private chat, and extracts what will be stored. `bot_username` decides
/// which `/command@bot` are ours.
pub fn admit(update: &Value, owner_user_id: i64, bot_username: &str) -> Result<Admitted, Dropped> {
    let update_id = update_id_of(update);
    let drop = |reason| Dropped { update_id, reason };
    let (Some(update_id), Some(fields)) = (update_id, update.as_object()) else {
        return Err(drop(DropReason::Malformed));
    };
    let Some(raw_message) = fields.get("message") else {
        let reason = if fields.keys().all(|k| k == "update_id") {
            DropReason::NoMessage
        } else if fields.contains_key("edited_message")
            || fields.contains_key("edited_business_message")
        {
            DropReason::EditedMessage
        } else if fields.contains_key("channel_post") || fields.contains_key("edited_channel_post")
        {
            DropReason::ChannelPost
        } else if fields.contains_key("callback_query") {
            DropReason::CallbackQuery
        } else {
            DropReason::UnsupportedUpdate
        };
        return Err(drop(reason));
    };
    let message: Message =
        serde_json::from_value(raw_message.clone()).map_err(|_| drop(DropReason::Malformed))?;

    match message.chat.kind() {
        ChatKind::Private => {}
        ChatKind::Group | ChatKind::Supergroup => return Err(drop(DropReason::GroupChat)),
        ChatKind::Channel => return Err(drop(DropReason::ChannelChat)),
        ChatKind::Unknown => return Err(drop(DropReason::UnknownChat)),
    }
    let Some(sender) = &message.from else {
        return Err(drop(DropReason::NoSender));
    };
    let is_owner = owner_user_id > 0
        && sender.id == owner_user_id
        && !sender.is_bot
        && message.chat.id == owner_user_id;
    if !is_owner {
        return Err(drop(DropReason::ForeignSender));
    }

    let (raw_text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (Some(text.as_str()), message.entities.as_slice()),
        (None, Some(caption)) => (Some(caption.as_str()), message.caption_entities.as_slice()),
        (None, None) => (None, &[][..]),
    };
    let raw_text = raw_text.filter(|t| !t.is_empty());
    let text = match raw_text {
        Some(t) => Some(BoundedText::new(t).map_err(|_| drop(DropReason::TextTooLong))?),
        None => None,
    };
    let mut photo_sizes = message.photo.clone().unwrap_or_default();
    photo_sizes.sort_by(|a, b| {
        let area = |p: &PhotoSize| u64::from(p.width) * u64::from(p.height);
        area(b)
            .cmp(&area(a))
            .then(b.file_size.unwrap_or(0).cmp(&a.file_size.unwrap_or(0)))
    });
    if text.is_none() && photo_sizes.is_empty() {
        return Err(drop(DropReason::NoContent));
    }
    let command = raw_text.and_then(|t| parse_command(t, entities, bot_username));
    Ok(Admitted {
        update_id,
        message_id: message.message_id,
        chat_id: message.chat.id,
        sender_id: sender.id,
        date: message.date,
        text,
        photo_sizes,
        reply_to_message_id: message.reply_to_message.map(|r| r.message_id),
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("update_id".to_owned()),
                        Just("message".to_owned()),
                        Just("chat".to_owned()),
                        Just("from".to_owned()),
                        Just("text".to_owned()),
                        Just("entities".to_owned()),
                        Just("photo".to_owned()),
                        "[a-z_]{1,8}",
                    ],
                    inner,
                    0..5,
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Any JSON at all: admission answers, never panics, and admits only
        /// the owner.
        #[test]
        fn arbitrary_updates_never_panic(update in json_value()) {
            if let Ok(admitted) = admit(&update, 7, "OurBot") {
                prop_assert_eq!((admitted.sender_id, admitted.chat_id), (7, 7));
            }
        }
    }
}
