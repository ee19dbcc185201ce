//! "Decide a proposal", the one home of it: [`decide`] records a human
//! decision (its chain replayed once, a correction's judgment in the same
//! transaction) and then applies it: a memory change is materialized from
//! the decision verified by that replay, in this order: the decision
//! commits, then the new bytes are prepared, then renamed. Nothing is
//! written into the context root before the decision is durable; a crash
//! between the two leaves a durable decision without an outcome, which the
//! `serve` holding the root ([`materialize_pending`]) or
//! `proposal-project` ([`project`]) materializes later.
//!
//! It lives here because this is the crate that sees both the proposals
//! (`stream-proposals`, which cannot see memory) and the materializer. The
//! CLI parses, calls one function and renders what it returns.
//!
//! [`materialize_pending`]: crate::materialize::materialize_pending

use std::time::{Duration, Instant};

use stream_core::EventId;
use stream_core::payload::{DecidableKind, Disposition};
use stream_proposals::authority::{Refused, TrustedKeys};
use stream_proposals::decision::{
    Decided, DecisionError, DecisionRequest, record_verified_decision,
};
use stream_proposals::project::{
    CorrectionProjection, ProjectError, VerifiedDecision, project_verified_correction,
    verify_decision,
};
use stream_store::Store;

use crate::lock::LockError;
use crate::materialize::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, materialize_verified, refuse,
};

/// Where a decision is made: with a config that holds the context root,
/// or a review-only one (no `[context]`), which records memory decisions
/// for the `serve` that holds `memory.md`.
#[derive(Debug, Clone)]
pub enum Place {
    /// No context root here: memory decisions are recorded only.
    ReviewOnly(TrustedKeys),
    /// The context root and how to materialize into it.
    Root(MaterializeConfig),
}

impl Place {
    /// The keys whose decisions this place applies.
    pub fn trusted(&self) -> &TrustedKeys {
        match self {
            Self::ReviewOnly(trusted) => trusted,
            Self::Root(config) => &config.trusted,
        }
    }
}

/// What [`decide`] did: the decision, and what applying it came to.
#[derive(Debug)]
pub struct Decision {
    /// Recorded now or already.
    pub decided: Decided,
    /// The decision applied, or why not (it is recorded all the same, and
    /// `proposal-project` retries what an error left).
    pub applied: Result<Applied, ApplyError>,
}

/// What applying one decision came to.
#[derive(Debug)]
pub enum Applied {
    /// A correction's projection: its judgment, or nothing (rejected).
    Correction(CorrectionProjection),
    /// A memory decision's one outcome (or a rejection).
    Memory(MaterializeOutcome),
    /// A memory decision recorded at a review-only place: the `serve` that
    /// holds `memory.md` materializes it if its config lists the key.
    LeftToServe,
    /// The chain verifies but this place's keys do not authorize the
    /// decision: never applied. Where this place holds the root, a memory
    /// change's one outcome is the failure `unauthorized`, recorded here.
    Unauthorized {
        /// Why.
        refused: Refused,
        /// The outcome recorded for a memory change, if any.
        outcome: Option<MaterializeOutcome>,
    },
}

/// A recorded decision that could not be applied now; nothing of its
/// application was recorded.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The decision or its correction did not verify or project.
    #[error(transparent)]
    Project(#[from] ProjectError),
    /// The materializer appended nothing (a store fault, a held lock…).
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
}

/// Records decision `req` and applies it (see the module documentation).
/// An error records nothing.
pub fn decide(
    store: &dyn Store,
    place: &Place,
    req: &DecisionRequest,
) -> Result<Decision, DecisionError> {
    let record = record_verified_decision(store, req, place.trusted())?;
    let applied = match (record.verified, record.correction) {
        (Ok(_), Some(projected)) => projected.map(Applied::Correction).map_err(Into::into),
        (Ok(verified), None) => apply_memory(store, place, &verified),
        (Err(refused), _) => match (refused.kind, place) {
            // Recorded, signed: the serve that holds memory.md applies it
            // if its config lists this key.
            (DecidableKind::MemoryChange, Place::ReviewOnly(_)) => Ok(Applied::LeftToServe),
            (DecidableKind::MemoryChange, Place::Root(_)) | (DecidableKind::SelfCorrection, _) => {
                unauthorized(store, place, refused)
            }
        },
    };
    Ok(Decision {
        decided: record.decided,
        applied,
    })
}

/// Applies a decision recorded earlier (`proposal-project`): its chain
/// replayed once, then projected, materialized or refused as [`decide`]
/// does. An outcome recorded earlier stands.
pub fn project(
    store: &dyn Store,
    place: &Place,
    decision: &EventId,
) -> Result<Applied, ApplyError> {
    match verify_decision(store, decision, place.trusted()) {
        Ok(verified) => match verified.decision().proposal_kind {
            DecidableKind::SelfCorrection => Ok(Applied::Correction(project_verified_correction(
                store, &verified,
            )?)),
            DecidableKind::MemoryChange => apply_memory(store, place, &verified),
        },
        // An unauthorized decision is refused at every run, its refusal
        // recorded or not: it needs the operator's eye.
        Err(ProjectError::Unauthorized(refused)) => unauthorized(store, place, refused),
        Err(e) => Err(e.into()),
    }
}

/// A verified memory decision: materialized where this place holds the
/// root; else left to the serve that does (a rejection has nothing to
/// leave).
fn apply_memory(
    store: &dyn Store,
    place: &Place,
    verified: &VerifiedDecision,
) -> Result<Applied, ApplyError> {
    match place {
        Place::Root(config) => Ok(Applied::Memory(materialize_waiting(
            store, config, verified,
        )?)),
        Place::ReviewOnly(_) => match verified.decision().disposition {
            Disposition::Reject => Ok(Applied::Memory(MaterializeOutcome::Rejected)),
            Disposition::Accept | Disposition::Edit => Ok(Applied::LeftToServe),
        },
    }
}

/// A decision this place's keys do not authorize: a memory change's
/// refusal is recorded where this place holds the root; a correction's is
/// logged, not appended (its judgment is recorded by the first config that
/// lists its key).
fn unauthorized(store: &dyn Store, place: &Place, refused: Refused) -> Result<Applied, ApplyError> {
    let outcome = match (refused.kind, place) {
        (DecidableKind::MemoryChange, Place::Root(_)) => Some(refuse(store, &refused)?),
        (DecidableKind::MemoryChange, Place::ReviewOnly(_))
        | (DecidableKind::SelfCorrection, _) => None,
    };
    tracing::warn!(
        decision = %refused.decision,
        why = refused.reason.as_str(),
        "decision not authorized by [authority] keys: not applied"
    );
    Ok(Applied::Unauthorized { refused, outcome })
}

/// How long a decision waits while another live process holds the root
/// lock (a materialization holds it for milliseconds): identical decisions
/// racing each other then all converge on the one outcome. A lock still
/// held after this is the error; `proposal-project` finishes later.
const LOCK_WAIT: Duration = Duration::from_secs(3);
const LOCK_POLL: Duration = Duration::from_millis(25);

/// [`materialize_verified`], waiting up to [`LOCK_WAIT`] for a root lock
/// another live process holds. The chain is not replayed while waiting.
fn materialize_waiting(
    store: &dyn Store,
    config: &MaterializeConfig,
    verified: &VerifiedDecision,
) -> Result<MaterializeOutcome, MaterializeError> {
    let started = Instant::now();
    loop {
        match materialize_verified(store, config, verified) {
            Err(MaterializeError::Lock(LockError::Held { .. }))
                if started.elapsed() < LOCK_WAIT =>
            {
                std::thread::sleep(LOCK_POLL);
            }
            other => return other,
        }
    }
}
