//! The three agent proposal events. Each is sensitive, agent-authored, and
//! inert: a proposal is not a judgment and never changes effective output.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::canon::sha256;
use crate::event::{Authorship, Payload, PayloadInvalid};
use crate::ids::{Fingerprint, Sha256Hex};
use crate::payload::common::{
    ConversationOutput, CorrectionTarget, EvidenceIds, MemoryTarget, ProposalKind, Proposer,
};
use crate::payload::focus::{FocusAuthority, FocusDeclaration, FocusResolution};
use crate::text::{MemoryText, ReasonText};
use crate::{AgentProposed, False};

/// `request_memory_change.operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryOperation {
    /// Append normalized text to the frozen document.
    Append,
    /// Replace the whole document (frontmatter identity preserved).
    ReplaceDocument,
}

impl MemoryOperation {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::ReplaceDocument => "replace-document",
        }
    }
}

/// `stream.thought.agent.memory-change.proposed@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemoryChangeProposed {
    /// Literal `agent-proposed`.
    pub proposal_state: AgentProposed,
    /// Exact provenance of the proposing run.
    pub proposer: Proposer,
    /// The exact parent-bound memory version.
    pub target: MemoryTarget,
    /// Append or replace.
    pub operation: MemoryOperation,
    /// The validated proposed text.
    pub proposed_text: MemoryText,
    /// Its length in Unicode scalar values.
    pub proposed_text_length: u32,
    /// SHA-256 of its UTF-8 bytes.
    pub proposed_text_sha256: Sha256Hex,
    /// Why the model asked.
    pub reason: ReasonText,
    /// Snapshot-admitted evidence.
    pub evidence_event_ids: EvidenceIds,
    /// Literal `false`.
    pub publication_eligible: False,
}

impl MemoryChangeProposed {
    /// Length and hash fields for `text`, as the payload must carry them.
    pub fn text_facts(text: &MemoryText) -> (u32, Sha256Hex) {
        let len = u32::try_from(text.char_len()).unwrap_or(u32::MAX);
        (len, sha256(text.as_str().as_bytes()))
    }
}

impl Payload for MemoryChangeProposed {
    const TYPE: &'static str = "stream.thought.agent.memory-change.proposed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::Agent;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.proposer.run_id, ProposalKind::MemoryChange.as_str()])
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        let (len, hash) = Self::text_facts(&self.proposed_text);
        if len != self.proposed_text_length {
            return Err(PayloadInvalid::new(
                "proposedTextLength",
                "does not match proposedText",
            ));
        }
        if hash != self.proposed_text_sha256 {
            return Err(PayloadInvalid::new(
                "proposedTextSha256",
                "does not match proposedText",
            ));
        }
        if self.target.source.as_str() != crate::SourceName::CONTEXT {
            return Err(PayloadInvalid::new(
                "target.source",
                "must be the context source",
            ));
        }
        Ok(())
    }
}

/// `stream.thought.agent.correction.proposed@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CorrectionProposed {
    /// Literal `agent-proposed`.
    pub proposal_state: AgentProposed,
    /// Exact provenance of the proposing run.
    pub proposer: Proposer,
    /// The exact delivered turn being corrected (never `latest`).
    pub target: CorrectionTarget,
    /// The full replacement output under the target's contract.
    pub replacement: ConversationOutput,
    /// Why the model asked.
    pub reason: ReasonText,
    /// Snapshot-admitted evidence.
    pub evidence_event_ids: EvidenceIds,
    /// Literal `false`: only a human judgment makes it quality data.
    pub quality_eligible: False,
    /// Literal `false`.
    pub external_export_eligible: False,
    /// Literal `false`.
    pub publication_eligible: False,
}

impl Payload for CorrectionProposed {
    const TYPE: &'static str = "stream.thought.agent.correction.proposed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::Agent;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.proposer.run_id, ProposalKind::SelfCorrection.as_str()])
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        if self.replacement.contract != self.target.output_contract {
            return Err(PayloadInvalid::new(
                "replacement.contract",
                "must match the target's",
            ));
        }
        Ok(())
    }
}

/// `stream.thought.focus.declaration.proposed@1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusDeclarationProposed {
    /// Literal `agent-proposed`.
    pub proposal_state: AgentProposed,
    /// Exact provenance of the proposing run.
    pub proposer: Proposer,
    /// The strict declaration.
    pub declaration: FocusDeclaration,
    /// Its canonical fingerprint, recomputed by the trusted parent.
    pub fingerprint: Fingerprint,
    /// Dependency resolution: explicitly unchecked.
    pub resolution: FocusResolution,
    /// Every authority flag literally false.
    pub authority: FocusAuthority,
}

impl Payload for FocusDeclarationProposed {
    const TYPE: &'static str = "stream.thought.focus.declaration.proposed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::Agent;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!([
            self.proposer.run_id,
            ProposalKind::FocusDeclaration.as_str()
        ])
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        self.declaration.validate()?;
        let expected = focus_fingerprint(&self.declaration)
            .map_err(|_| PayloadInvalid::new("declaration", "cannot be canonicalized"))?;
        if expected != self.fingerprint {
            return Err(PayloadInvalid::new(
                "fingerprint",
                "does not match the declaration",
            ));
        }
        Ok(())
    }
}

/// The canonical fingerprint of a focus declaration.
pub fn focus_fingerprint(
    declaration: &FocusDeclaration,
) -> Result<Fingerprint, crate::canon::CanonError> {
    let digest = crate::canon::canonical_sha256(&json!({
        "ns": "thestream/focus/1",
        "declaration": declaration,
    }))?;
    Ok(digest.into())
}
