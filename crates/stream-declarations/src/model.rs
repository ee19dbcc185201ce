//! The declaration file format (docs/design.md §6): YAML, parsed strictly.
//!
//! Every struct denies unknown fields; closed vocabularies are enums; strings
//! with a shape (ids, paths, event types) are newtypes that check it on
//! input. Rules that span fields live in [`mod@crate::validate`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use stream_core::SourceName;
use stream_core::payload::{BotCommand, ProposalKind};
use stream_core::text::{BoundedText, ReplyText};

/// One declaration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Declaration {
    /// Declaration id, e.g. `telegram-conversation` (also the agent id).
    pub id: DeclarationId,
    /// Declaration version, at least 1. Any capability change bumps it.
    pub version: u32,
    /// The runtime that executes it.
    pub kind: Kind,
    /// What the trusted parent builds as the run's context.
    pub context: Context,
    /// The output contract.
    pub output: Output,
    /// Sensitivity of the input it reads.
    pub input: Input,
    /// Sources and exact documents it reads.
    pub subscriptions: Subscriptions,
    /// The event types it emits as output.
    pub outputs: Vec<EventTypeName>,
    /// Generation limits (`pi` only). API, model and base URL come from the
    /// operator's config, never from a declaration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderLimits>,
    /// The system prompt file, relative to the declaration file; bound into
    /// the fingerprint by its SHA-256 (`pi` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptPath>,
    /// The bounded transcript of a `telegram-conversation` context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<TranscriptLimits>,
    /// Tools, proposals and external actions.
    pub policy: Policy,
    /// Telegram commands it serves, in menu order.
    pub commands: Vec<CommandSpec>,
    /// The fixed replies of a `deterministic` declaration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<FixedReplies>,
}

/// The runtime kinds of the declaration rules (docs/design.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A standard Pi declaration: a conversational LLM run through the worker.
    Pi,
    /// Fixed replies, no provider request.
    Deterministic,
    /// A repair agent.
    Repair,
    /// A Letta Agent SDK agent.
    LettaAgentSdk,
    /// An ATProto agent.
    Atproto,
    /// A review agent.
    Review,
    /// A conceptualizer.
    Conceptualizer,
}

impl Kind {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pi => "pi",
            Self::Deterministic => "deterministic",
            Self::Repair => "repair",
            Self::LettaAgentSdk => "letta-agent-sdk",
            Self::Atproto => "atproto",
            Self::Review => "review",
            Self::Conceptualizer => "conceptualizer",
        }
    }

    /// Every kind.
    pub const ALL: [Kind; 7] = [
        Self::Pi,
        Self::Deterministic,
        Self::Repair,
        Self::LettaAgentSdk,
        Self::Atproto,
        Self::Review,
        Self::Conceptualizer,
    ];
}

/// The context the trusted parent builds for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Context {
    /// The retry-stable Telegram snapshot: bounded transcript, exact memory
    /// version, correction targets, admitted evidence ids (docs/design.md §8).
    TelegramConversation,
    /// The triggering command message only.
    TelegramCommand,
    /// No context.
    None,
}

impl Context {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TelegramConversation => "telegram-conversation",
            Self::TelegramCommand => "telegram-command",
            Self::None => "none",
        }
    }
}

/// The output contract of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Output {
    /// `conversation-text@1`: one reply of 1–4,096 characters.
    ConversationText,
    /// One strict JSON object (tool calls are invalid in this mode).
    StrictJson,
    /// No output.
    None,
}

impl Output {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConversationText => "conversation-text",
            Self::StrictJson => "strict-json",
            Self::None => "none",
        }
    }
}

/// Sensitivity of what a declaration reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Input {
    /// Private content: never logged, never in non-sensitive exports.
    Sensitive,
    /// Public content only.
    Public,
}

impl Input {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sensitive => "sensitive",
            Self::Public => "public",
        }
    }
}

/// `subscriptions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Subscriptions {
    /// Event sources read.
    pub sources: Vec<SourceSelector>,
    /// Documents read: exact (`source` + `path`) or by pattern (`glob`).
    pub documents: Vec<DocumentSubscription>,
}

/// A subscribed source: `telegram` (the configured bot's source,
/// `telegram:<bot-id>`, known only at run time) or an exact source name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceSelector {
    /// The configured bot's Telegram source.
    ConfiguredTelegram,
    /// An exact source name.
    Exact(SourceName),
}

impl SourceSelector {
    const TELEGRAM: &'static str = "telegram";

    /// The wire form.
    pub fn as_str(&self) -> &str {
        match self {
            Self::ConfiguredTelegram => Self::TELEGRAM,
            Self::Exact(name) => name.as_str(),
        }
    }
}

impl Serialize for SourceSelector {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SourceSelector {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == Self::TELEGRAM {
            return Ok(Self::ConfiguredTelegram);
        }
        SourceName::new(s).map(Self::Exact).map_err(|_| {
            serde::de::Error::custom("expected `telegram` or a source name <kind>:<name>")
        })
    }
}

/// One document subscription. Exactly one of `path` (an exact normalized
/// path) and `glob` (a pattern) is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DocumentSubscription {
    /// The document source, e.g. `filesystem:telegram-agent-context`.
    pub source: SourceName,
    /// An exact normalized path, e.g. `memory.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<DocumentPath>,
    /// A pattern; such a subscription is not exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<BoundedText<1, 1024>>,
}

impl DocumentSubscription {
    /// Whether this names one exact document.
    pub fn is_exact(&self) -> bool {
        self.path.is_some() && self.glob.is_none()
    }

    /// Whether this is exactly `source` + `path`.
    pub fn is_exactly(&self, source: &str, path: &str) -> bool {
        self.is_exact()
            && self.source.as_str() == source
            && self.path.as_ref().is_some_and(|p| p.as_str() == path)
    }
}

/// A normalized relative document path: `/`-separated, no empty, `.` or
/// `..` component, no glob metacharacter, no backslash, 1–1,024 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct DocumentPath(String);

/// A path was not a normalized relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "must be a normalized relative path: `/`-separated, no empty, `.` or `..` component, no `*?[]{{}}\\`, 1-1024 bytes"
)]
pub struct PathError;

/// Whether `s` is a normalized relative path (see [`DocumentPath`]).
pub fn is_normalized_relative_path(s: &str) -> bool {
    (1..=1024).contains(&s.len())
        && !s.starts_with('/')
        && !s.chars().any(|c| "*?[]{}\\".contains(c) || c.is_control())
        && s.split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

impl DocumentPath {
    /// Checks the form.
    pub fn new(s: impl Into<String>) -> Result<Self, PathError> {
        let s = s.into();
        if is_normalized_relative_path(&s) {
            Ok(Self(s))
        } else {
            Err(PathError)
        }
    }

    /// The path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for DocumentPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A prompt file path relative to the declaration file's folder; same form
/// as [`DocumentPath`], so it can never leave that folder by `..`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct PromptPath(String);

impl PromptPath {
    /// Checks the form.
    pub fn new(s: impl Into<String>) -> Result<Self, PathError> {
        let s = s.into();
        if is_normalized_relative_path(&s) {
            Ok(Self(s))
        } else {
            Err(PathError)
        }
    }

    /// The path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for PromptPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A declaration id: a slug of 3–64 `[a-z0-9-]`, so that `agent:<id>` is a
/// source name and the id is a label.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct DeclarationId(String);

/// A declaration id was not a slug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be a slug of 3-64 [a-z0-9-]")]
pub struct DeclarationIdError;

impl DeclarationId {
    /// Checks the form.
    pub fn new(s: impl Into<String>) -> Result<Self, DeclarationIdError> {
        let s = s.into();
        let ok = (3..=64).contains(&s.len())
            && s.bytes()
                .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'));
        if ok {
            Ok(Self(s))
        } else {
            Err(DeclarationIdError)
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeclarationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DeclarationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeclarationId({})", self.0)
    }
}

impl<'de> Deserialize<'de> for DeclarationId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// An event type without version: dot-separated lowercase segments
/// `[a-z][a-z0-9-]*`, at least two, at most 128 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct EventTypeName(String);

/// An event type name had the wrong form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be an event type: dot-separated [a-z][a-z0-9-]* segments, at most 128 bytes")]
pub struct EventTypeError;

impl EventTypeName {
    /// Checks the form.
    pub fn new(s: impl Into<String>) -> Result<Self, EventTypeError> {
        let s = s.into();
        let segment_ok = |seg: &str| {
            let mut bytes = seg.bytes();
            bytes.next().is_some_and(|b| b.is_ascii_lowercase())
                && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        };
        if s.len() <= 128 && s.split('.').count() >= 2 && s.split('.').all(segment_ok) {
            Ok(Self(s))
        } else {
            Err(EventTypeError)
        }
    }

    /// The type.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for EventTypeName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `provider`: generation limits only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderLimits {
    /// The most output tokens one provider request may ask for, 1–32,000.
    pub max_output_tokens: u32,
}

/// `transcript`: how much of the chat a `telegram-conversation` snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TranscriptLimits {
    /// The last N turns (owner messages and delivered replies), 1–200.
    pub max_turns: u32,
}

/// `policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// Read-only evidence-acquisition tools. Must be empty: proposal tools
    /// are separate from them.
    pub tools: Vec<String>,
    /// Proposal kinds the model may request.
    pub proposals: Vec<ProposalKind>,
    /// Must be `false`.
    pub external_actions: bool,
}

/// One Telegram command a declaration serves, for `setMyCommands`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSpec {
    /// The command without its slash.
    pub name: BotCommand,
    /// The menu description, 1–256 characters (Telegram's bound).
    pub description: BoundedText<1, 256>,
}

/// The fixed replies of a `deterministic` declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FixedReplies {
    /// The reply to a bare `/focus` (usage text).
    pub focus_usage: ReplyText,
    /// The reply to `/help`.
    pub help: ReplyText,
    /// The reply after an owner's `/correct <text>` was recorded.
    pub correct_ack: ReplyText,
    /// The reply to a message whose model run failed for good: fixed, so it
    /// says nothing of the reason or the content.
    pub run_failed: ReplyText,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_paths_are_normalized_and_exact() {
        for ok in ["memory.md", "notes/a.md", "a b/c.md"] {
            assert!(DocumentPath::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/memory.md",
            "./memory.md",
            "../x",
            "a//b",
            "a/",
            "*.md",
            "mem?.md",
            "a\\b",
            "[ab].md",
            "a/../b",
            "a\nb",
        ] {
            assert!(DocumentPath::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn event_type_names_have_segments() {
        assert!(EventTypeName::new("stream.thought.derived.message.observation").is_ok());
        assert!(EventTypeName::new("stream.thought.agent.memory-change.proposed").is_ok());
        for bad in [
            "stream",
            "Stream.x",
            "stream..x",
            "stream.1x",
            "stream.x@1",
            "",
        ] {
            assert!(EventTypeName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn declaration_ids_are_slugs() {
        assert!(DeclarationId::new("telegram-conversation").is_ok());
        for bad in ["ab", "Telegram", "a_b", &"a".repeat(65)] {
            assert!(DeclarationId::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn source_selectors_round_trip() {
        for s in [
            "telegram",
            "filesystem:telegram-agent-context",
            "telegram:42",
        ] {
            let sel: SourceSelector = serde_json::from_value(serde_json::json!(s)).unwrap();
            assert_eq!(serde_json::to_value(&sel).unwrap(), serde_json::json!(s));
        }
        assert!(serde_json::from_value::<SourceSelector>(serde_json::json!("nope")).is_err());
    }
}
