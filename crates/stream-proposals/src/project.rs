//! Projection of decisions: an accepted or edited correction becomes a
//! human-authorized judgment through [`record_judgment`]; a rejection
//! creates nothing. Memory decisions are materialized by `stream-memory`,
//! which uses [`verify_decision`] and [`memory_outcome_id`] from here.

use serde_json::json;
use stream_core::ids::derive_event_id;
use stream_core::payload::{
    Criterion, DecidableKind, DeliveryReceipt, Disposition, JudgmentRecorded,
    MemoryChangeMaterialized, ProposalDecision, RecordedDecision,
};
use stream_core::text::ReplyText;
use stream_core::{Authorship, EventId, Payload, SourceName, StoredEvent};
use stream_store::{AppendOutcome, EventQuery, Read, Store, StoreError, Tx};

use crate::authority::{Authority, Refused, TrustedKeys, authorize, legacy_outcome};
use crate::chain::{ChainError, ProposalBody, VerifiedProposal, verify_chain};
use crate::judgment::{JudgedOutput, JudgmentInput, record_judgment};

/// A decision could not be projected.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The proposal's chain did not verify.
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// The decision and its proposal verify, but the decision is not
    /// signed by a key this config lists, or its signature does not cover
    /// it: never applied (`crate::authority::authorize`).
    #[error("decision {} is not authorized here ({})", .0.decision, .0.reason.as_str())]
    Unauthorized(Refused),
    /// The decision event is missing, malformed or forged.
    #[error("decision {decision} is not a valid human decision")]
    DecisionInvalid {
        /// The decision.
        decision: EventId,
    },
    /// The judged output's delivery receipt is gone or does not match.
    #[error("the target delivery receipt of decision {decision} does not verify")]
    TargetInvalid {
        /// The decision.
        decision: EventId,
    },
    /// A different judgment already exists for this decision.
    #[error("judgment {judgment} already exists with different content")]
    Conflict {
        /// The contested judgment.
        judgment: EventId,
    },
    /// An event could not be built.
    #[error("projection event cannot be built")]
    Build,
}

/// A decision whose own lineage and whose proposal's chain verified, and
/// which is authorized by the config's keys. Only
/// this crate's validator makes one ([`verify_decision`], or
/// `record_verified_decision` in `decision.rs`, from the chain it has just
/// replayed), and its parts are read-only: a holder is proof that the chain
/// was replayed once in this command, so the projection and the
/// materializer take it instead of replaying the chain again.
#[derive(Debug, Clone)]
pub struct VerifiedDecision {
    event: StoredEvent,
    decision: ProposalDecision,
    proposal: VerifiedProposal,
    authority: Authority,
}

impl VerifiedDecision {
    /// The decision event.
    pub fn event(&self) -> &StoredEvent {
        &self.event
    }

    /// Its id.
    pub fn id(&self) -> &EventId {
        self.event.id()
    }

    /// Its payload.
    pub fn decision(&self) -> &ProposalDecision {
        &self.decision
    }

    /// The verified proposal.
    pub fn proposal(&self) -> &VerifiedProposal {
        &self.proposal
    }

    /// Why it may be applied: the key that signed it, or legacy.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }
}

/// Verifies a decision event: schema (either version), human authorship,
/// envelope lineage (rooted at the proposal's root, parented to the
/// proposal), the proposal's whole chain, that the kinds agree, and that
/// `trusted` authorizes it.
pub fn verify_decision(
    store: &dyn Read,
    decision_id: &EventId,
    trusted: &TrustedKeys,
) -> Result<VerifiedDecision, ProjectError> {
    let invalid = || ProjectError::DecisionInvalid {
        decision: decision_id.clone(),
    };
    let event = store.event(decision_id)?.ok_or_else(invalid)?;
    let recorded = RecordedDecision::decode(&event).map_err(|_| invalid())?;
    let proposal = verify_chain(store, &recorded.decision().proposal_event_id)?;
    decision_of(store, event, proposal, trusted)
}

/// The decision half of [`verify_decision`], against a proposal whose chain
/// verified in this command: schema, human authorship, envelope lineage,
/// that it decides exactly this proposal, that the kinds agree, and its
/// authority.
pub(crate) fn decision_of(
    store: &dyn Read,
    event: StoredEvent,
    proposal: VerifiedProposal,
    trusted: &TrustedKeys,
) -> Result<VerifiedDecision, ProjectError> {
    let invalid = || ProjectError::DecisionInvalid {
        decision: event.id().clone(),
    };
    let recorded = RecordedDecision::decode(&event).map_err(|_| invalid())?;
    let decision = recorded.decision();
    let source = SourceName::fixed(SourceName::PROPOSALS);
    let expected = recorded
        .build(
            &source,
            proposal.event().event.root.as_ref(),
            Some(&decision.proposal_event_id),
        )
        .map_err(|_| invalid())?;
    let kind_matches = DecidableKind::of(proposal.body().kind()) == Some(decision.proposal_kind);
    if expected != event.event
        || event.event.authorship != Authorship::Human
        || decision.proposal_event_id != *proposal.event().id()
        || !kind_matches
    {
        return Err(invalid());
    }
    let authorized = authorize(
        &recorded,
        &proposal.event().event.payload_sha256,
        trusted,
        || legacy_outcome(store, event.id(), decision.proposal_kind),
    )?;
    match authorized {
        Ok(authority) => Ok(VerifiedDecision {
            event,
            decision,
            proposal,
            authority,
        }),
        Err(reason) => Err(ProjectError::Unauthorized(Refused {
            decision: event.id().clone(),
            proposal: proposal.event().id().clone(),
            root: proposal.event().event.root.clone(),
            kind: decision.proposal_kind,
            reason,
        })),
    }
}

/// The id the judgment of a correction decision has (one per decision).
pub fn judgment_id(decision: &EventId) -> Result<EventId, ProjectError> {
    derive_event_id(
        SourceName::JUDGMENTS,
        JudgmentRecorded::TYPE,
        &json!(decision),
    )
    .map_err(|_| ProjectError::Build)
}

/// The id a memory decision's outcome has, materialized or failed.
pub fn memory_outcome_id(decision: &EventId) -> Result<EventId, ProjectError> {
    derive_event_id(
        SourceName::PROPOSALS,
        MemoryChangeMaterialized::TYPE,
        &json!(decision),
    )
    .map_err(|_| ProjectError::Build)
}

/// What projecting a correction decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorrectionProjection {
    /// A judgment was recorded (or already was): its id.
    Judgment(EventId),
    /// Rejected: no judgment.
    Rejected,
}

/// Projects an accepted or edited correction into a judgment with kind
/// `correct`, criterion `agent-self-correction` v1, the decision's human
/// actor, the exact target delivery receipt, the decision as feedback
/// source, `qualityEligible: true`, `externalExportEligible: false`, and the
/// replacement rebuilt as a full output under the frozen target contract.
/// Idempotent: a rerun converges on the same judgment.
pub fn project_correction(
    store: &dyn Store,
    decision_id: &EventId,
    trusted: &TrustedKeys,
) -> Result<CorrectionProjection, ProjectError> {
    project_verified_correction(store, &verify_decision(store, decision_id, trusted)?)
}

/// [`project_correction`] of a decision verified earlier in this command:
/// the chain is not replayed again.
pub fn project_verified_correction(
    store: &dyn Store,
    verified: &VerifiedDecision,
) -> Result<CorrectionProjection, ProjectError> {
    let mut tx = store.begin()?;
    let projected = project_verified_correction_in(&mut *tx, verified)?;
    tx.commit()?;
    Ok(projected)
}

/// The projection inside a write transaction (the decision's own, when it
/// is recorded in this command). A conflict appends nothing.
pub(crate) fn project_verified_correction_in(
    tx: &mut dyn Tx,
    verified: &VerifiedDecision,
) -> Result<CorrectionProjection, ProjectError> {
    let decision_id = verified.id();
    let ProposalBody::Correction(proposal) = verified.proposal().body() else {
        return Err(ProjectError::DecisionInvalid {
            decision: decision_id.clone(),
        });
    };
    let invalid = || ProjectError::DecisionInvalid {
        decision: decision_id.clone(),
    };
    let replacement = match (
        verified.decision().disposition,
        &verified.decision().replacement,
    ) {
        (Disposition::Reject, _) => return Ok(CorrectionProjection::Rejected),
        (Disposition::Accept, None) => proposal.replacement.text.clone(),
        (Disposition::Edit, Some(text)) => ReplyText::new(text.clone()).map_err(|_| invalid())?,
        (Disposition::Accept, Some(_)) | (Disposition::Edit, None) => return Err(invalid()),
    };
    let target = &proposal.target;
    let receipt = tx
        .event(&target.delivery_receipt_event_id)?
        .ok_or_else(|| ProjectError::TargetInvalid {
            decision: decision_id.clone(),
        })?;
    let receipt_ok = receipt.decode::<DeliveryReceipt>().is_ok_and(|r| {
        r.output_event_id == target.output_event_id
            && r.source_root_event_id == target.source_root_event_id
    });
    if !receipt_ok {
        return Err(ProjectError::TargetInvalid {
            decision: decision_id.clone(),
        });
    }
    let judgment = record_judgment(&JudgmentInput {
        criterion: Criterion::AgentSelfCorrection,
        actor: verified.decision().actor.clone(),
        target: JudgedOutput {
            delivery_receipt_event_id: target.delivery_receipt_event_id.clone(),
            output_event_id: target.output_event_id.clone(),
            run_id: target.run_id.clone(),
            source_root_event_id: target.source_root_event_id.clone(),
            output_contract: target.output_contract,
        },
        feedback_source_event_id: decision_id.clone(),
        replacement,
    })
    .map_err(|_| ProjectError::Build)?;
    match tx.append(&judgment)? {
        AppendOutcome::Inserted { .. } | AppendOutcome::Converged { .. } => {
            Ok(CorrectionProjection::Judgment(judgment.id))
        }
        AppendOutcome::Conflict => Err(ProjectError::Conflict {
            judgment: judgment.id,
        }),
    }
}

/// Every decision event, oldest first.
pub fn decisions(store: &dyn Read) -> Result<Vec<StoredEvent>, StoreError> {
    let source = SourceName::fixed(SourceName::PROPOSALS);
    let query = EventQuery {
        event_type: Some(ProposalDecision::TYPE.into()),
        ..EventQuery::source_after(&source, 0)
    };
    store.events(&query)
}
