//! The one outcome of a decision: its record, how an existing one is
//! recognised, and how a new one is appended under the identity rule.

use stream_core::payload::{
    MaterializationFailed, MaterializationFailure, MemoryChangeMaterialized,
};
use stream_core::{EventId, NewEvent, Payload, SourceName};
use stream_store::{AppendOutcome, Read, Store, Tx};

use super::error::MaterializeError;

/// Whether an outcome was appended by this call or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Appended now.
    Now,
    /// Already recorded (by an earlier run, or a racing one).
    Already,
}

/// What came of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaterializeOutcome {
    /// `memory.md` changed; the receipt.
    Materialized {
        /// The receipt event.
        receipt: EventId,
        /// Its payload (ids, hashes, byte count).
        payload: Box<MemoryChangeMaterialized>,
        /// Now or already.
        recorded: Recorded,
    },
    /// Refused after revalidation; the failure event.
    Failed {
        /// The failure event.
        event: EventId,
        /// Its reason code.
        reason: MaterializationFailure,
        /// Now or already.
        recorded: Recorded,
    },
    /// A rejection: nothing to materialize, nothing appended.
    Rejected,
}

/// The ids a trusted decision fixes.
pub(super) struct Trusted {
    pub(super) proposal: EventId,
    pub(super) decision: EventId,
    pub(super) root: Option<EventId>,
    pub(super) outcome: EventId,
}

impl Trusted {
    pub(super) fn build<P: Payload>(&self, payload: &P) -> Result<NewEvent, MaterializeError> {
        let source = SourceName::fixed(SourceName::PROPOSALS);
        NewEvent::build(&source, self.root.as_ref(), Some(&self.decision), payload).map_err(|_| {
            MaterializeError::Build {
                decision: self.decision.clone(),
            }
        })
    }
}

/// The decision's outcome, if one is recorded. An event under the outcome
/// id that is not exactly an outcome of this decision fails closed.
pub(super) fn existing_outcome(
    store: &dyn Read,
    trusted: &Trusted,
) -> Result<Option<MaterializeOutcome>, MaterializeError> {
    let Some(event) = store.event(&trusted.outcome)? else {
        return Ok(None);
    };
    let invalid = || MaterializeError::OutcomeInvalid {
        decision: trusted.decision.clone(),
    };
    if let Ok(payload) = event.decode::<MemoryChangeMaterialized>() {
        let ours = payload.decision_event_id == trusted.decision
            && payload.proposal_event_id == trusted.proposal
            && trusted.build(&payload)? == event.event;
        return if ours {
            Ok(Some(MaterializeOutcome::Materialized {
                receipt: event.event.id,
                payload: Box::new(payload),
                recorded: Recorded::Already,
            }))
        } else {
            Err(invalid())
        };
    }
    if let Ok(payload) = event.decode::<MaterializationFailed>() {
        let ours = payload.decision_event_id == trusted.decision
            && payload.proposal_event_id == trusted.proposal
            && trusted.build(&payload)? == event.event;
        return if ours {
            Ok(Some(MaterializeOutcome::Failed {
                event: event.event.id,
                reason: payload.reason,
                recorded: Recorded::Already,
            }))
        } else {
            Err(invalid())
        };
    }
    Err(invalid())
}

/// Appends an outcome in its own transaction; on a conflict (another
/// outcome won), returns that one.
pub(super) fn record<P: Payload>(
    store: &dyn Store,
    trusted: &Trusted,
    payload: &P,
    outcome: impl FnOnce(EventId, Recorded) -> MaterializeOutcome,
) -> Result<MaterializeOutcome, MaterializeError> {
    let mut tx = store.begin()?;
    let recorded = record_in(&mut *tx, trusted, payload, outcome)?;
    tx.commit()?;
    Ok(recorded)
}

/// Appends an outcome inside `tx` (the caller commits); on a conflict
/// (another outcome won), returns that one.
pub(super) fn record_in<P: Payload>(
    tx: &mut dyn Tx,
    trusted: &Trusted,
    payload: &P,
    outcome: impl FnOnce(EventId, Recorded) -> MaterializeOutcome,
) -> Result<MaterializeOutcome, MaterializeError> {
    let event = trusted.build(payload)?;
    if event.id != trusted.outcome {
        return Err(MaterializeError::Build {
            decision: trusted.decision.clone(),
        });
    }
    match tx.append(&event)? {
        AppendOutcome::Inserted { .. } => Ok(outcome(event.id, Recorded::Now)),
        AppendOutcome::Converged { .. } => Ok(outcome(event.id, Recorded::Already)),
        AppendOutcome::Conflict => {
            existing_outcome(&*tx, trusted)?.ok_or_else(|| MaterializeError::OutcomeInvalid {
                decision: trusted.decision.clone(),
            })
        }
    }
}
