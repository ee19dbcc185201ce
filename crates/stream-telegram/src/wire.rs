//! The Bot API's JSON, as far as thestream reads it.
//!
//! Inbound types are lenient about *extra* fields (Telegram adds fields
//! without notice) and strict about the ones we rely on. Their `Debug`
//! prints ids only: message text and captions are sensitive.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The response envelope of every Bot API method.
#[derive(Deserialize)]
pub(crate) struct Envelope {
    pub ok: bool,
    #[serde(default)]
    pub result: Option<serde_json::Value>,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<ResponseParameters>,
}

/// `ResponseParameters`: why a request failed and what to do about it.
#[derive(Deserialize, Default)]
pub(crate) struct ResponseParameters {
    #[serde(default)]
    pub retry_after: Option<u64>,
}

/// A Telegram user (or bot).
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct User {
    /// User id.
    pub id: i64,
    /// Whether this is a bot.
    #[serde(default)]
    pub is_bot: bool,
    /// Username without `@`, if any.
    #[serde(default)]
    pub username: Option<String>,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("is_bot", &self.is_bot)
            .finish_non_exhaustive()
    }
}

/// A chat.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Chat {
    /// Chat id (for a private chat, the user's id).
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// The kinds of chat Telegram has. Admission matches on it without a
/// default arm, so a new kind cannot be admitted by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatKind {
    /// One user and the bot.
    Private,
    /// A basic group.
    Group,
    /// A supergroup.
    Supergroup,
    /// A channel.
    Channel,
    /// Anything Telegram may add later.
    Unknown,
}

impl Chat {
    /// The chat's kind.
    pub fn kind(&self) -> ChatKind {
        match self.kind.as_str() {
            "private" => ChatKind::Private,
            "group" => ChatKind::Group,
            "supergroup" => ChatKind::Supergroup,
            "channel" => ChatKind::Channel,
            _ => ChatKind::Unknown,
        }
    }
}

/// One size of a photo.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PhotoSize {
    /// For `getFile`.
    pub file_id: String,
    /// Stable across bots and time.
    pub file_unique_id: String,
    /// Pixels.
    pub width: u32,
    /// Pixels.
    pub height: u32,
    /// Bytes, when Telegram says.
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A special span of a text; offsets and lengths are UTF-16 code units.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct MessageEntity {
    /// `bot_command`, `mention`, `url`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Start, in UTF-16 code units.
    pub offset: usize,
    /// Length, in UTF-16 code units.
    pub length: usize,
}

/// Only the id of the message replied to is kept.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReplyTo {
    /// Its message id.
    pub message_id: i64,
}

/// A message (inbound, or the one `sendMessage` returns).
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Message {
    /// Id within the chat.
    pub message_id: i64,
    /// Sender; absent for channel posts.
    #[serde(default)]
    pub from: Option<User>,
    /// The chat.
    pub chat: Chat,
    /// Unix seconds.
    pub date: i64,
    /// Text, for text messages.
    #[serde(default)]
    pub text: Option<String>,
    /// Entities of `text`.
    #[serde(default)]
    pub entities: Vec<MessageEntity>,
    /// Caption, for media.
    #[serde(default)]
    pub caption: Option<String>,
    /// Entities of `caption`.
    #[serde(default)]
    pub caption_entities: Vec<MessageEntity>,
    /// Photo sizes, smallest first.
    #[serde(default)]
    pub photo: Option<Vec<PhotoSize>>,
    /// The message this one replies to.
    #[serde(default)]
    pub reply_to_message: Option<ReplyTo>,
}

impl fmt::Debug for Message {
    // Text and captions are left out on purpose: they are sensitive.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message")
            .field("message_id", &self.message_id)
            .field("chat", &self.chat)
            .field("date", &self.date)
            .finish_non_exhaustive()
    }
}

/// `File`, as `getFile` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct File {
    /// The id asked for.
    pub file_id: String,
    /// Stable id.
    pub file_unique_id: String,
    /// Bytes, when known.
    #[serde(default)]
    pub file_size: Option<u64>,
    /// Path for the download URL; valid for at least an hour.
    #[serde(default)]
    pub file_path: Option<String>,
}

/// `WebhookInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WebhookInfo {
    /// The webhook URL; empty when none is set.
    pub url: String,
    /// Updates waiting to be delivered.
    #[serde(default)]
    pub pending_update_count: u64,
    /// Unix time of the last delivery error, if any.
    #[serde(default)]
    pub last_error_date: Option<i64>,
}

/// One entry of the bot's command menu (`BotCommand` in the Bot API).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MenuCommand {
    command: String,
    description: String,
}

/// A menu command was outside Telegram's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MenuCommandError {
    /// Commands are 1–32 characters of `[a-z0-9_]`.
    #[error("command names are 1-32 characters of [a-z0-9_] (entry {index})")]
    Name {
        /// Position in the list.
        index: usize,
    },
    /// Descriptions are 1–256 characters.
    #[error("command descriptions are 1-256 characters (entry {index})")]
    Description {
        /// Position in the list.
        index: usize,
    },
}

impl MenuCommand {
    /// Checks Telegram's rules; `index` names the entry in an error.
    pub fn new(
        index: usize,
        command: impl Into<String>,
        description: impl Into<String>,
    ) -> Result<Self, MenuCommandError> {
        let command = command.into();
        let description = description.into();
        let name_ok = (1..=32).contains(&command.len())
            && command
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            return Err(MenuCommandError::Name { index });
        }
        let desc_len = description.trim().chars().count();
        if !(1..=256).contains(&desc_len) {
            return Err(MenuCommandError::Description { index });
        }
        Ok(Self {
            command,
            description: description.trim().to_owned(),
        })
    }

    /// The command without its slash.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Its description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

impl fmt::Debug for MenuCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MenuCommand(/{})", self.command)
    }
}
