//! Human decisions on proposals and the memory materialization outcomes.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::HumanAuthority;
use crate::event::{Authorship, Payload, PayloadInvalid, SourceName};
use crate::ids::{DocumentId, EventId, Sha256Hex, VersionId};
use crate::payload::ProposalKind;
use crate::text::{Label, char_len};

/// The proposal kinds a human can decide. Focus proposals have no approval
/// compiler yet, so they are not decidable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecidableKind {
    /// A memory change.
    MemoryChange,
    /// A self-correction.
    SelfCorrection,
}

impl DecidableKind {
    /// The decidable kind of a proposal kind; focus is not decidable.
    pub fn of(kind: ProposalKind) -> Option<Self> {
        match kind {
            ProposalKind::MemoryChange => Some(Self::MemoryChange),
            ProposalKind::SelfCorrection => Some(Self::SelfCorrection),
            ProposalKind::FocusDeclaration => None,
        }
    }

    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MemoryChange => "memory-change",
            Self::SelfCorrection => "self-correction",
        }
    }

    /// The bound on a replacement for this kind, in Unicode scalar values.
    pub fn replacement_max_chars(self) -> usize {
        match self {
            Self::MemoryChange => 32768,
            Self::SelfCorrection => 4096,
        }
    }
}

/// What the human decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Disposition {
    /// Use the proposed text or correction.
    Accept,
    /// Use the operator's exact replacement.
    Edit,
    /// Refuse; no replacement.
    Reject,
}

impl Disposition {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Edit => "edit",
            Self::Reject => "reject",
        }
    }
}

/// `stream.thought.agent.proposal.decision@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProposalDecision {
    /// The proposal decided: the identity key, so the first decision wins.
    pub proposal_event_id: EventId,
    /// Its kind.
    pub proposal_kind: DecidableKind,
    /// The disposition.
    pub disposition: Disposition,
    /// Edit only: the operator's exact replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// Operator/idempotency provenance; not the uniqueness boundary.
    pub submission_id: Label,
    /// Who decided.
    pub actor: Label,
    /// Literal `human`.
    pub authority: HumanAuthority,
}

impl Payload for ProposalDecision {
    const TYPE: &'static str = "stream.thought.agent.proposal.decision";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::Human;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.proposal_event_id)
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        match (self.disposition, &self.replacement) {
            (Disposition::Edit, Some(text)) => {
                let len = char_len(text);
                if len == 0 || len > self.proposal_kind.replacement_max_chars() {
                    return Err(PayloadInvalid::new(
                        "replacement",
                        "outside the proposal's bounds",
                    ));
                }
                Ok(())
            }
            (Disposition::Edit, None) => {
                Err(PayloadInvalid::new("replacement", "edit requires it"))
            }
            (Disposition::Accept | Disposition::Reject, Some(_)) => Err(PayloadInvalid::new(
                "replacement",
                "only edit may carry one",
            )),
            (Disposition::Accept | Disposition::Reject, None) => Ok(()),
        }
    }
}

/// `stream.thought.agent.memory-change.materialized@1`: the receipt that
/// `memory.md` really changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemoryChangeMaterialized {
    /// The proposal.
    pub proposal_event_id: EventId,
    /// The decision: the identity key.
    pub decision_event_id: EventId,
    /// The context source.
    pub source: SourceName,
    /// The document.
    pub document_id: DocumentId,
    /// The frozen base version.
    pub base_version_id: VersionId,
    /// Its SHA-256.
    pub base_sha256: Sha256Hex,
    /// The version the scan recorded after the write.
    pub new_version_id: VersionId,
    /// Its SHA-256.
    pub new_sha256: Sha256Hex,
    /// Bytes written.
    pub byte_count: u64,
    /// The scan's `file.changed@1` event for the new version.
    pub file_event_id: EventId,
}

impl Payload for MemoryChangeMaterialized {
    const TYPE: &'static str = "stream.thought.agent.memory-change.materialized";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.decision_event_id)
    }
}

/// Why a materialization failed: a closed set of content-dark codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MaterializationFailure {
    /// The document moved on since the proposal's base version.
    StaleBase,
    /// The root or file path is not where it must be.
    Path,
    /// A symlink where a real directory or regular file must be.
    Symlink,
    /// Frontmatter missing, malformed, or its id changed.
    Frontmatter,
    /// The result would exceed the configured size limit.
    Size,
    /// Writing, syncing or renaming failed.
    Write,
    /// The scan after the write failed.
    Scan,
    /// The new version, pointer, file event or hash did not verify.
    Receipt,
    /// The stored base content did not verify.
    Content,
    /// The decision is not signed by a key the config holding the context
    /// root lists (or its signature does not cover it).
    Unauthorized,
}

impl MaterializationFailure {
    /// The stable wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StaleBase => "stale-base",
            Self::Path => "path",
            Self::Symlink => "symlink",
            Self::Frontmatter => "frontmatter",
            Self::Size => "size",
            Self::Write => "write",
            Self::Scan => "scan",
            Self::Receipt => "receipt",
            Self::Content => "content",
            Self::Unauthorized => "unauthorized",
        }
    }

    /// Every code, for golden tests.
    pub const ALL: [MaterializationFailure; 10] = [
        Self::StaleBase,
        Self::Path,
        Self::Symlink,
        Self::Frontmatter,
        Self::Size,
        Self::Write,
        Self::Scan,
        Self::Receipt,
        Self::Content,
        Self::Unauthorized,
    ];
}

/// `stream.thought.agent.memory-change.materialization.failed@1`.
///
/// Shares its identity space with [`MemoryChangeMaterialized`]: one outcome
/// per decision, so a failure and a success for one decision conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MaterializationFailed {
    /// The proposal.
    pub proposal_event_id: EventId,
    /// The decision: the identity key.
    pub decision_event_id: EventId,
    /// Content-dark reason.
    pub reason: MaterializationFailure,
}

impl Payload for MaterializationFailed {
    const TYPE: &'static str = "stream.thought.agent.memory-change.materialization.failed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = false;
    const IDENTITY_TYPE: &'static str = MemoryChangeMaterialized::TYPE;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.decision_event_id)
    }
}
