//! Pieces shared by several payloads: provider, provenance, targets, outputs.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer, Serialize};

use crate::event::SourceName;
use crate::ids::{DocumentId, EventId, Fingerprint, RunId, Sha256Hex, SnapshotId, VersionId};
use crate::literal::MemoryPath;
use crate::text::{BoundedText, Label, ReplyText};

/// The provider wire format a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderApi {
    /// OpenAI Chat Completions and compatible servers.
    #[serde(rename = "openai-chat")]
    OpenaiChat,
    /// Anthropic Messages.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
}

impl ProviderApi {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenaiChat => "openai-chat",
            Self::AnthropicMessages => "anthropic-messages",
        }
    }
}

/// A model name as the provider spells it.
pub type ModelName = BoundedText<1, 256>;

/// Which provider and model produced a completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProviderRef {
    /// Wire format.
    pub api: ProviderApi,
    /// Model name.
    pub model: ModelName,
}

/// The output contract of a conversation reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OutputContract {
    /// `conversation-text@1`: one text of 1–4,096 characters.
    #[serde(rename = "conversation-text@1")]
    ConversationText1,
}

impl OutputContract {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConversationText1 => "conversation-text@1",
        }
    }
}

/// A full output under its contract: what a correction replaces a reply with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConversationOutput {
    /// The contract the output satisfies.
    pub contract: OutputContract,
    /// The reply text.
    pub text: ReplyText,
}

/// The three proposal kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProposalKind {
    /// `request_memory_change`.
    MemoryChange,
    /// `submit_correction`.
    SelfCorrection,
    /// `propose_focus`.
    FocusDeclaration,
}

impl ProposalKind {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MemoryChange => "memory-change",
            Self::SelfCorrection => "self-correction",
            Self::FocusDeclaration => "focus-declaration",
        }
    }

    /// The fixed tool name the model calls.
    pub fn tool_name(self) -> &'static str {
        match self {
            Self::MemoryChange => "request_memory_change",
            Self::SelfCorrection => "submit_correction",
            Self::FocusDeclaration => "propose_focus",
        }
    }

    /// The kind behind a tool name; `None` for any other name.
    pub fn from_tool_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.tool_name() == name)
    }

    /// All kinds, in acknowledgment order.
    pub const ALL: [ProposalKind; 3] = [
        Self::MemoryChange,
        Self::SelfCorrection,
        Self::FocusDeclaration,
    ];
}

/// Exact provenance of the run that proposed something.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proposer {
    /// The proposing run.
    pub run_id: RunId,
    /// The output event the run produced.
    pub output_event_id: EventId,
    /// The inbound event that triggered the run.
    pub trigger_event_id: EventId,
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// Declaration fingerprint, capability manifest included.
    pub declaration_fingerprint: Fingerprint,
    /// Provider and model.
    pub provider: ProviderRef,
    /// The retry-stable context snapshot.
    pub context_snapshot_id: SnapshotId,
}

/// The exact `memory.md` version a memory proposal is bound to. The trusted
/// parent fills it from the snapshot; the model never names any of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemoryTarget {
    /// Always `filesystem:telegram-agent-context`.
    pub source: SourceName,
    /// Stable document id.
    pub document_id: DocumentId,
    /// Always `memory.md`.
    pub path: MemoryPath,
    /// Immutable version id.
    pub version_id: VersionId,
    /// SHA-256 of the version's bytes.
    pub sha256: Sha256Hex,
    /// Content type of the version.
    pub content_type: Label,
}

/// A prior delivered assistant turn a correction may target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CorrectionTarget {
    /// The completed run that produced the turn.
    pub run_id: RunId,
    /// Its one canonical output event.
    pub output_event_id: EventId,
    /// The same-chat delivery receipt of that output.
    pub delivery_receipt_event_id: EventId,
    /// The Telegram message that started the target's chain.
    pub source_root_event_id: EventId,
    /// The output contract of the completed run.
    pub output_contract: OutputContract,
}

/// Cited evidence: unique, at most 16.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct EvidenceIds(Vec<EventId>);

/// Evidence ids were repeated or too many.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// More than [`EvidenceIds::MAX`].
    #[error("at most 16 evidence ids are allowed, found {0}")]
    TooMany(usize),
    /// An id appears twice.
    #[error("evidence ids must be unique")]
    Duplicate,
}

impl EvidenceIds {
    /// The most a proposal may cite.
    pub const MAX: usize = crate::bounds::EVIDENCE_IDS_MAX;

    /// Checks count and uniqueness.
    pub fn new(ids: Vec<EventId>) -> Result<Self, EvidenceError> {
        if ids.len() > Self::MAX {
            return Err(EvidenceError::TooMany(ids.len()));
        }
        let mut seen = HashSet::new();
        if !ids.iter().all(|id| seen.insert(id)) {
            return Err(EvidenceError::Duplicate);
        }
        Ok(Self(ids))
    }

    /// The ids, in the order cited.
    pub fn as_slice(&self) -> &[EventId] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for EvidenceIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ids = Vec::<EventId>::deserialize(d)?;
        Self::new(ids).map_err(serde::de::Error::custom)
    }
}
