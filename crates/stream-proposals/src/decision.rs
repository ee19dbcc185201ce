//! Human decisions: `stream.thought.agent.proposal.decision@2`, signed with
//! this place's key and appended only by the local CLI after the authority
//! chain verifies. The proposal id is the identity key (shared with @1), so
//! the first decision wins: an identical retry converges (Ed25519 signatures
//! are deterministic), any different payload conflicts — racing processes
//! included.

use serde_json::json;
use stream_core::canon::canonical_sha256;
use stream_core::payload::{DecidableKind, Disposition, SignatureBytes, SignedProposalDecision};
use stream_core::text::Label;
use stream_core::{EventId, HumanAuthority, NewEvent, PayloadInvalid, SourceName};
use stream_store::{AppendOutcome, Store, StoreError, Tx};

use crate::authority::{Refused, SigningKey, TrustedKeys};
use crate::chain::{ChainError, VerifiedProposal, verify_chain};
use crate::project::{
    CorrectionProjection, ProjectError, VerifiedDecision, decision_of,
    project_verified_correction_in,
};

/// A decision could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The proposal's authority chain did not verify.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// Focus proposals have no approval compiler yet.
    #[error("proposal {proposal} is a focus declaration; focus proposals cannot be decided yet")]
    NotDecidable {
        /// The proposal.
        proposal: EventId,
    },
    /// The decision breaks a rule (edit without text, text out of bounds…).
    #[error(transparent)]
    Invalid(#[from] PayloadInvalid),
    /// A different decision for this proposal is already recorded.
    #[error("proposal {proposal} already has a different decision ({decision})")]
    Conflict {
        /// The proposal.
        proposal: EventId,
        /// The existing decision.
        decision: EventId,
    },
    /// An event could not be built.
    #[error("decision event cannot be built")]
    Build,
}

/// What the operator asked for.
#[derive(Debug, Clone)]
pub struct DecisionRequest {
    /// The proposal.
    pub proposal: EventId,
    /// Accept, edit or reject.
    pub disposition: Disposition,
    /// Edit text (edit only), read from a file by the CLI.
    pub replacement: Option<String>,
    /// Operator/idempotency provenance; derived from the request when absent.
    pub submission_id: Option<Label>,
    /// Who decides.
    pub actor: Label,
    /// This place's key, which signs the decision.
    pub signer: SigningKey,
}

/// How the append went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Newly recorded.
    Recorded(EventId),
    /// The same decision was already recorded.
    Converged(EventId),
}

impl Decided {
    /// The decision event id.
    pub fn id(&self) -> &EventId {
        match self {
            Self::Recorded(id) | Self::Converged(id) => id,
        }
    }
}

/// The default submission id: a digest of the request, so that retrying the
/// same command converges instead of conflicting with itself.
fn default_submission_id(req: &DecisionRequest) -> Result<Label, DecisionError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/submission/1",
        "proposal": req.proposal,
        "disposition": req.disposition,
        "replacement": req.replacement,
        "actor": req.actor,
    }))
    .map_err(|_| DecisionError::Build)?;
    Label::new(format!("sub-{}", digest.short(24))).map_err(|_| DecisionError::Build)
}

/// Builds the signed decision event for a verified proposal.
pub fn decision_event(
    verified: &VerifiedProposal,
    req: &DecisionRequest,
) -> Result<NewEvent, DecisionError> {
    let kind =
        DecidableKind::of(verified.body().kind()).ok_or_else(|| DecisionError::NotDecidable {
            proposal: req.proposal.clone(),
        })?;
    let submission_id = match &req.submission_id {
        Some(id) => id.clone(),
        None => default_submission_id(req)?,
    };
    let mut payload = SignedProposalDecision {
        proposal_event_id: req.proposal.clone(),
        proposal_kind: kind,
        disposition: req.disposition,
        replacement: req.replacement.clone(),
        submission_id,
        actor: req.actor.clone(),
        authority: HumanAuthority,
        proposal_sha256: verified.event().event.payload_sha256.clone(),
        key_id: req.signer.key_id(),
        signature: SignatureBytes::from_bytes([0; 64]),
    };
    stream_core::Payload::validate(&payload)?;
    req.signer
        .sign(&mut payload)
        .map_err(|_| DecisionError::Build)?;
    let source = SourceName::fixed(SourceName::PROPOSALS);
    let root = verified.event().event.root.as_ref();
    NewEvent::build(&source, root, Some(&req.proposal), &payload).map_err(|_| DecisionError::Build)
}

/// Verifies the chain and appends the decision (not its projection, and
/// whatever keys a config trusts).
pub fn record_decision(store: &dyn Store, req: &DecisionRequest) -> Result<Decided, DecisionError> {
    let mut tx = store.begin()?;
    let (decided, _) = decide_in(&mut *tx, req, &TrustedKeys::default())?;
    tx.commit()?;
    Ok(decided)
}

/// A recorded decision, verified once, with the projection a correction
/// gets in the same transaction.
#[derive(Debug)]
pub struct DecisionRecord {
    /// Recorded now or already.
    pub decided: Decided,
    /// The decision as stored, verified against the chain replayed for it
    /// and authorized by the trusted keys: what the materializer takes
    /// instead of replaying the chain again. A refusal when the config
    /// does not list the signing key: the decision is recorded all the
    /// same (a config that lists it applies it) and nothing is projected.
    pub verified: Result<VerifiedDecision, Refused>,
    /// A correction's projection, committed with the decision; a refusal
    /// (the decision is recorded all the same, for `proposal-project` to
    /// retry). `None` for a memory change: the materializer writes files
    /// and runs after this transaction.
    pub correction: Option<Result<CorrectionProjection, ProjectError>>,
}

/// [`record_decision`] and, for a correction, its projection: the chain is
/// replayed once, and every read, the decision and the judgment share one
/// write transaction (one commit). A store failure rolls all of it back.
pub fn record_verified_decision(
    store: &dyn Store,
    req: &DecisionRequest,
    trusted: &TrustedKeys,
) -> Result<DecisionRecord, DecisionError> {
    let mut tx = store.begin()?;
    let (decided, verified) = decide_in(&mut *tx, req, trusted)?;
    let correction = match &verified {
        Ok(verified) => match verified.decision().proposal_kind {
            DecidableKind::SelfCorrection => {
                match project_verified_correction_in(&mut *tx, verified) {
                    Err(ProjectError::Store(e) | ProjectError::Chain(ChainError::Store(e))) => {
                        return Err(e.into());
                    }
                    other => Some(other),
                }
            }
            DecidableKind::MemoryChange => None,
        },
        Err(_) => None,
    };
    tx.commit()?;
    Ok(DecisionRecord {
        decided,
        verified,
        correction,
    })
}

/// Replays the chain and appends the decision inside `tx`; the decision is
/// read back as stored and its envelope and authority checked like
/// [`crate::project::verify_decision`] does.
fn decide_in(
    tx: &mut dyn Tx,
    req: &DecisionRequest,
    trusted: &TrustedKeys,
) -> Result<(Decided, Result<VerifiedDecision, Refused>), DecisionError> {
    let verified = verify_chain(&*tx, &req.proposal)?;
    let event = decision_event(&verified, req)?;
    let decided = match tx.append(&event)? {
        AppendOutcome::Inserted { .. } => Decided::Recorded(event.id),
        AppendOutcome::Converged { .. } => Decided::Converged(event.id),
        AppendOutcome::Conflict => {
            return Err(DecisionError::Conflict {
                proposal: req.proposal.clone(),
                decision: event.id,
            });
        }
    };
    let stored = tx.event(decided.id())?.ok_or(DecisionError::Build)?;
    let decision = match decision_of(&*tx, stored, verified, trusted) {
        Ok(verified) => Ok(verified),
        Err(ProjectError::Unauthorized(refused)) => Err(refused),
        Err(ProjectError::Store(e) | ProjectError::Chain(ChainError::Store(e))) => {
            return Err(e.into());
        }
        Err(
            ProjectError::Chain(ChainError::Broken { .. })
            | ProjectError::DecisionInvalid { .. }
            | ProjectError::TargetInvalid { .. }
            | ProjectError::Conflict { .. }
            | ProjectError::Build,
        ) => return Err(DecisionError::Build),
    };
    Ok((decided, decision))
}
