//! The memory decisions still waiting for their outcome, materialized by
//! the process that holds the context root: a running `serve` picks up a
//! decision recorded elsewhere (a review-only config on another machine,
//! docs/design.md §19) and runs the same [`materialize_verified`].

use stream_core::payload::{DecidableKind, ProposalKind};
use stream_core::payload::{Disposition, ProposalDecision, RecordedDecision};
use stream_core::{Payload as _, SourceName};
use stream_proposals::project::{ProjectError, memory_outcome_id, verify_decision};
use stream_store::{EventQuery, Store};

use super::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, materialize_verified, refuse,
};
use crate::lock::LockError;

/// What one pass did, in counts (no ids of content, no text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingReport {
    /// Decisions materialized (or refused with a recorded failure) now.
    pub settled: u64,
    /// Decisions whose outcome could not be recorded now (logged by id).
    pub unsettled: u64,
}

/// Materializes every accepted or edited memory decision recorded after
/// `cursor` (a `seq` of `system:proposals`) that has no outcome yet, and
/// moves `cursor` past what it looked at. Stops early, leaving `cursor` at
/// the decision, while another process holds the root lock: that process
/// records the outcome, and its commit wakes the caller again.
pub fn materialize_pending(
    store: &dyn Store,
    config: &MaterializeConfig,
    cursor: &mut u64,
) -> Result<PendingReport, MaterializeError> {
    let source = SourceName::fixed(SourceName::PROPOSALS);
    let query = EventQuery {
        event_type: Some(ProposalDecision::TYPE.into()),
        ..EventQuery::source_after(&source, *cursor)
    };
    let mut report = PendingReport::default();
    for event in store.events(&query)? {
        let id = event.id().clone();
        let wanted = match RecordedDecision::decode(&event) {
            Ok(d) => match d.decision().disposition {
                Disposition::Accept | Disposition::Edit => true,
                Disposition::Reject => false,
            },
            // Undecodable: the validator refuses it below, by id.
            Err(_) => true,
        };
        if wanted && store.event(&memory_outcome_id(&id)?)?.is_none() {
            let settled = match verify_decision(store, &id, &config.trusted) {
                Ok(verified) => match verified.proposal().body().kind() {
                    ProposalKind::MemoryChange => {
                        materialize_verified(store, config, &verified).map(Some)
                    }
                    ProposalKind::SelfCorrection | ProposalKind::FocusDeclaration => Ok(None),
                },
                Err(ProjectError::Unauthorized(refused)) => match refused.kind {
                    DecidableKind::MemoryChange => refuse(store, &refused).map(Some),
                    DecidableKind::SelfCorrection => Ok(None),
                },
                Err(e) => Err(e.into()),
            };
            match settled {
                Ok(Some(
                    MaterializeOutcome::Materialized { .. } | MaterializeOutcome::Failed { .. },
                )) => report.settled += 1,
                Ok(Some(MaterializeOutcome::Rejected) | None) => {}
                Err(MaterializeError::Lock(LockError::Held { .. })) => return Ok(report),
                Err(MaterializeError::Store(e)) => return Err(MaterializeError::Store(e)),
                Err(e) => {
                    tracing::error!(decision = %id, error = %e, "memory decision not materialized; `proposal-project` retries it");
                    report.unsettled += 1;
                }
            }
        }
        *cursor = event.seq;
    }
    Ok(report)
}
