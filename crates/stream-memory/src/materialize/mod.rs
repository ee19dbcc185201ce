//! The bounded memory materializer (`docs/design.md §15`): the only code
//! that writes `memory.md`.
//!
//! [`materialize`] takes one decision id and, in this order:
//!
//! 1. **Trust.** [`verify_decision`] replays the decision's schema, human
//!    authorship and lineage and the proposal's whole authority chain, and
//!    checks its signature against the configured keys. A
//!    forged or malformed decision or proposal is refused here with
//!    [`MaterializeError::Decision`] and *nothing* is appended: no receipt
//!    is ever built from untrusted ids. A decision whose chain verifies but
//!    which the keys do not authorize gets the failure `unauthorized`
//!    ([`refuse`]), recorded under the ids the chain verified. [`materialize_verified`] starts
//!    after this step, from a [`VerifiedDecision`] the command already
//!    holds (only the validator makes one), so the chain is replayed once
//!    per command.
//! 2. **Resolution.** One outcome per decision: if the outcome id already
//!    holds a receipt or a failure, that outcome is returned (idempotent).
//!    A rejection materializes nothing.
//! 3. **The root lock** ([`crate::lock`]); the outcome is looked up again
//!    under it.
//! 4. **Revalidation** (`revalidate.rs`), every check `docs/design.md §15`
//!    names, each refusal a closed, content-dark
//!    [`MaterializationFailure`]
//!    code, in this order: the frozen base version's document, source, path,
//!    content type, size and hash, with the blob re-hashed (`content`); the
//!    configured root is a real directory, not a symlink (`path`,
//!    `symlink`); a scan of the exact configured source, so that the pointer
//!    reflects the disk and an unscannable root is refused before anything
//!    is written (`scan`); the current pointer is exactly the proposal's
//!    version (`stale-base`); `memory.md` is a regular file on the root's
//!    filesystem, opened relative to the root's descriptor without following
//!    links (`path`, `symlink`), and its bytes equal the frozen base
//!    (`stale-base`); old and new Markdown carry frontmatter with the same
//!    nonempty `id` (`frontmatter`); the result fits `max_bytes` (`size`).
//!    Nothing is rebased. Last, that `id` must be the context root's
//!    identity this store recorded (`identity.rs`): another root is
//!    [`MaterializeError::RootMismatch`], nothing written or recorded.
//! 5. **Write**: an owner-only hidden temporary file in the root, fsync, a
//!    last look that the file still holds the base, a check that the lock is
//!    still ours, an atomic rename over `memory.md`, fsync of the root
//!    (`write`), which runs beside step 6 and ends before anything commits.
//! 6. **Scan** of the exact configured source with
//!    [`walk`](crate::scan::walk) and
//!    [`record_in`](crate::scan::Walked::record_in) (`scan`), then
//!    **verification** of
//!    the new immutable version (hash, byte count, predecessor), the current
//!    pointer, the blob and the `file.changed@1` event (`receipt`); the
//!    first materialization records the root's identity.
//! 7. **Receipt**: `stream.thought.agent.memory-change.materialized@1` on
//!    `system:proposals`, rooted at the proposal's root, parented to the
//!    decision, in the same transaction as step 6: the new version and its
//!    receipt commit together, after the file and the root were fsynced.
//!    Any refusal of step 4–6 appends `…materialization.failed@1` with its
//!    reason code instead (step 6's writes roll back) — the same identity,
//!    so a decision has exactly one outcome.
//!
//! `prepare` is steps 2–5 up to the durable temporary file and `finish`
//! the rest. A decision made in the same command ([`crate::decide`]) has
//! committed before either starts: nothing is written into the root before
//! the decision is durable.
//!
//! **Crash recovery.** A crash after the rename and before the receipt
//! leaves `memory.md` holding exactly the bytes this decision produces from
//! the frozen base, and the pointer at the base (this materializer's scan
//! commits with the receipt) or at the version those bytes derive from it
//! (another process scanned in between, e.g. `serve`). A rerun
//! recognises exactly those two states and finishes: mode, fsync, scan,
//! verify, receipt. Any other state is `stale-base`.
//!
//! **Transient failures are not outcomes.** A store error (including a
//! fault inside the scan's transaction), a root lock held by a live process,
//! or lock evidence that cannot be trusted returns a [`MaterializeError`]
//! and appends nothing: the decision stays unresolved for `proposal-project`.
//!
//! Errors and logs carry ids and reason codes only: never proposal text,
//! memory text or paths.

mod compose;
mod error;
mod identity;
mod outcome;
mod pending;
mod revalidate;
mod root;
mod verify;

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use stream_core::payload::DecidableKind;
use stream_core::payload::{
    Disposition, MaterializationFailed, MaterializationFailure, MemoryChangeProposed,
};
use stream_core::{EventId, SourceName};
use stream_proposals::authority::{Refused, TrustedKeys};
use stream_proposals::chain::ProposalBody;
use stream_proposals::project::{
    ProjectError, VerifiedDecision, memory_outcome_id, verify_decision,
};
use stream_store::Store;

use crate::lock::RootLock;

pub use compose::{compose, normalize_newlines};
pub use error::MaterializeError;
pub use identity::ROOT_IDENTITY_CONTROL;
pub use outcome::{MaterializeOutcome, Recorded};
pub use pending::{PendingReport, materialize_pending};
pub use root::lock_name;

use error::Stop;
use outcome::{Trusted, existing_outcome, record, record_in};
use revalidate::{Held, Staged, Written, scan_and_verify, stage, walk_written};
use root::{Renamed, root_identity};

/// Where and how memory may be materialized: from the operator's config,
/// never from a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializeConfig {
    /// The configured context root holding `memory.md`.
    pub root: PathBuf,
    /// The context source, `filesystem:telegram-agent-context`.
    pub source: SourceName,
    /// The largest `memory.md` a materialization may produce
    /// (`max_memory_bytes`).
    pub max_bytes: u64,
    /// The data dir's `locks/` folder.
    pub lock_dir: PathBuf,
    /// The keys whose decisions are applied (`[authority] keys`).
    pub trusted: TrustedKeys,
}

/// Materializes decision `decision_id` (see the module documentation).
pub fn materialize(
    store: &dyn Store,
    config: &MaterializeConfig,
    decision_id: &EventId,
) -> Result<MaterializeOutcome, MaterializeError> {
    materialize_verified(
        store,
        config,
        &verify_decision(store, decision_id, &config.trusted)?,
    )
}

/// Records the one outcome of a memory decision the configured keys do not
/// authorize: `materialization.failed@1` with reason `unauthorized`, under
/// the ids its verified chain fixed. `memory.md` is not touched. An outcome
/// recorded earlier stands (one outcome per decision).
pub fn refuse(
    store: &dyn Store,
    refused: &Refused,
) -> Result<MaterializeOutcome, MaterializeError> {
    match refused.kind {
        DecidableKind::MemoryChange => {}
        DecidableKind::SelfCorrection => {
            return Err(MaterializeError::NotAMemoryDecision {
                decision: refused.decision.clone(),
            });
        }
    }
    let trusted = Trusted {
        proposal: refused.proposal.clone(),
        decision: refused.decision.clone(),
        root: refused.root.clone(),
        outcome: memory_outcome_id(&refused.decision)?,
    };
    if let Some(done) = existing_outcome(store, &trusted)? {
        return Ok(done);
    }
    let reason = MaterializationFailure::Unauthorized;
    let payload = MaterializationFailed {
        proposal_event_id: trusted.proposal.clone(),
        decision_event_id: trusted.decision.clone(),
        reason,
    };
    let outcome = record(store, &trusted, &payload, |event, recorded| {
        MaterializeOutcome::Failed {
            event,
            reason,
            recorded,
        }
    })?;
    tracing::warn!(
        decision = %refused.decision,
        why = refused.reason.as_str(),
        "memory decision not authorized: recorded as failed, memory.md unchanged"
    );
    Ok(outcome)
}

/// [`materialize`] of a decision verified earlier in this command (step 1
/// done once, by the validator that alone makes a [`VerifiedDecision`]):
/// the chain is not replayed again.
pub fn materialize_verified(
    store: &dyn Store,
    config: &MaterializeConfig,
    verified: &VerifiedDecision,
) -> Result<MaterializeOutcome, MaterializeError> {
    finish(store, config, prepare(store, config, verified)?)
}

/// Steps 2–5 short of the rename, for [`finish`]: the outcome already
/// known, or the root lock held and the new bytes in a durable temporary
/// file (or the refusal to record). Dropped unfinished, it removes the
/// temporary file and releases the lock: nothing visible happened.
struct Prepared(Preparation);

impl std::fmt::Debug for Prepared {
    /// Ids and codes only: never the bytes staged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.0 {
            Preparation::Known(_) => "known",
            Preparation::Held { staged: Ok(_), .. } => "staged",
            Preparation::Held {
                staged: Err(reason),
                ..
            } => reason.as_str(),
        };
        f.debug_tuple("Prepared").field(&state).finish()
    }
}

enum Preparation {
    /// An outcome recorded earlier, or a rejection.
    Known(MaterializeOutcome),
    /// Under the root lock: staged, or refused with a reason to record.
    Held {
        lock: RootLock,
        trusted: Trusted,
        staged: Result<Box<Staged>, MaterializationFailure>,
    },
}

/// Steps 2–5 of a verified decision, short of the rename (see
/// [`Prepared`]), run once the decision is durable.
fn prepare(
    store: &dyn Store,
    config: &MaterializeConfig,
    verified: &VerifiedDecision,
) -> Result<Prepared, MaterializeError> {
    let decision_id = verified.id();
    let ProposalBody::Memory(proposal) = verified.proposal().body() else {
        return Err(MaterializeError::NotAMemoryDecision {
            decision: decision_id.clone(),
        });
    };
    let trusted = Trusted {
        proposal: verified.proposal().event().id().clone(),
        decision: decision_id.clone(),
        root: verified.proposal().event().event.root.clone(),
        outcome: memory_outcome_id(decision_id)?,
    };
    let known = |outcome| Ok(Prepared(Preparation::Known(outcome)));
    if let Some(done) = existing_outcome(store, &trusted)? {
        return known(done);
    }
    let Some(text) = accepted_text(verified, proposal)? else {
        tracing::info!(decision = %decision_id, "rejected: nothing to materialize");
        return known(MaterializeOutcome::Rejected);
    };

    let locked_root = root_identity(&config.root);
    let lock = RootLock::acquire(&config.lock_dir, &lock_name(&config.root))?;
    if let Some(done) = existing_outcome(store, &trusted)? {
        lock.release()?;
        return known(done);
    }
    let held = Held {
        lock: &lock,
        root: locked_root,
    };
    let staged = match stage(store, config, proposal, text, &held, &trusted) {
        Ok(staged) => Ok(Box::new(staged)),
        Err(Stop::Fail(reason)) => Err(reason),
        // The lock is released on drop (only if it is still ours).
        Err(Stop::Abort(e)) => return Err(e),
    };
    Ok(Prepared(Preparation::Held {
        lock,
        trusted,
        staged,
    }))
}

/// Steps 5–7 of what [`prepare`] left: the rename, the root's fsync, the
/// scan, its verification and the receipt, or the refusal recorded.
fn finish(
    store: &dyn Store,
    config: &MaterializeConfig,
    prepared: Prepared,
) -> Result<MaterializeOutcome, MaterializeError> {
    finish_with(store, config, prepared, Renamed::make_durable)
}

/// [`finish`] with the step that makes the rename durable passed in, so
/// that a test can hold it back or fail it.
fn finish_with(
    store: &dyn Store,
    config: &MaterializeConfig,
    prepared: Prepared,
    make_durable: impl FnOnce(Renamed) -> Result<(), Stop> + Send,
) -> Result<MaterializeOutcome, MaterializeError> {
    let (lock, trusted, staged) = match prepared.0 {
        Preparation::Known(outcome) => return Ok(outcome),
        Preparation::Held {
            lock,
            trusted,
            staged,
        } => (lock, trusted, staged),
    };
    let receipt = staged
        .map_err(Stop::Fail)
        .and_then(|staged| staged.rename(&lock))
        .and_then(|written| commit_receipt(store, config, written, make_durable, &trusted));
    let outcome = match receipt {
        Ok(outcome) => outcome,
        Err(Stop::Fail(reason)) => {
            let payload = MaterializationFailed {
                proposal_event_id: trusted.proposal.clone(),
                decision_event_id: trusted.decision.clone(),
                reason,
            };
            record(store, &trusted, &payload, |event, recorded| {
                MaterializeOutcome::Failed {
                    event,
                    reason,
                    recorded,
                }
            })?
        }
        // The lock is released on drop (only if it is still ours).
        Err(Stop::Abort(e)) => return Err(e),
    };
    let decision_id = &trusted.decision;
    match &outcome {
        MaterializeOutcome::Materialized {
            receipt, recorded, ..
        } => {
            tracing::info!(decision = %decision_id, receipt = %receipt, ?recorded, "memory materialized");
        }
        MaterializeOutcome::Failed {
            event,
            reason,
            recorded,
        } => {
            tracing::warn!(
                decision = %decision_id,
                event = %event,
                reason = reason.as_str(),
                ?recorded,
                "memory materialization failed"
            );
        }
        MaterializeOutcome::Rejected => {}
    }
    lock.release()?;
    Ok(outcome)
}

/// Step 6 and 7 in one transaction: the scan of the written bytes, their
/// verification and the receipt commit together (one commit). A refusal
/// rolls the scan back with it; the failure is then recorded on its own.
///
/// The root's fsync, which makes the rename durable, runs on its own
/// thread while the scan decides, writes and verifies, and is joined before
/// anything commits; a failed fsync is the `write` failure it was when it
/// ran first. The scan reads the root before that thread starts: a
/// directory being fsynced cannot be listed until the fsync is done.
fn commit_receipt(
    store: &dyn Store,
    config: &MaterializeConfig,
    (written, renamed): (Written, Renamed),
    make_durable: impl FnOnce(Renamed) -> Result<(), Stop> + Send,
    trusted: &Trusted,
) -> Result<MaterializeOutcome, Stop> {
    let walked = walk_written(config, &written);
    let (durable, scanned) = beside(
        move || make_durable(renamed),
        || -> Result<_, Stop> {
            let walked = walked?;
            let mut tx = store.begin()?;
            let payload = scan_and_verify(&mut *tx, config, (walked, written), trusted)?;
            Ok((tx, payload))
        },
    );
    // A panicked fsync thread made nothing durable.
    durable.unwrap_or(Err(Stop::Fail(MaterializationFailure::Write)))?;
    let (mut tx, payload) = scanned?;
    let outcome = record_in(&mut *tx, trusted, &payload, |receipt, recorded| {
        MaterializeOutcome::Materialized {
            receipt,
            payload: Box::new(payload.clone()),
            recorded,
        }
    })
    .map_err(Stop::Abort)?;
    tx.commit()?;
    Ok(outcome)
}

/// Runs `job` on a thread of its own while `meanwhile` runs here, and
/// returns both results once both are done; when no thread can be had,
/// `job` runs here after `meanwhile`. `None`: `job` panicked.
fn beside<A, B, J>(job: J, meanwhile: impl FnOnce() -> B) -> (Option<A>, B)
where
    A: Send,
    J: FnOnce() -> A + Send,
{
    let slot = Mutex::new(Some(job));
    let run = |slot: &Mutex<Option<J>>| {
        let job = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        job.map(|job| job())
    };
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().spawn_scoped(scope, || run(&slot));
        let b = meanwhile();
        let a = match thread {
            Ok(thread) => thread.join().ok().flatten(),
            Err(_) => run(&slot),
        };
        (a, b)
    })
}

/// The text to use, or `None` for a rejection.
fn accepted_text<'a>(
    verified: &'a VerifiedDecision,
    proposal: &'a MemoryChangeProposed,
) -> Result<Option<&'a str>, MaterializeError> {
    let invalid = || {
        MaterializeError::Decision(ProjectError::DecisionInvalid {
            decision: verified.id().clone(),
        })
    };
    match (
        verified.decision().disposition,
        verified.decision().replacement.as_deref(),
    ) {
        (Disposition::Reject, None) => Ok(None),
        (Disposition::Accept, None) => Ok(Some(proposal.proposed_text.as_str())),
        (Disposition::Edit, Some(text)) => Ok(Some(text)),
        (Disposition::Reject | Disposition::Accept, Some(_)) | (Disposition::Edit, None) => {
            Err(invalid())
        }
    }
}

#[cfg(test)]
mod tests;
