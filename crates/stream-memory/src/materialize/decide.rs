//! A human decision and its materialization in one command, the
//! materializer's preparation running beside the decision's commit.
//!
//! A memory decision makes four flushes, ordered by what a crash may leave:
//! the decision's commit and the temporary file's fsync both before the
//! rename (`memory.md` never holds bytes of a decision that is not durable,
//! nor bytes that are not durable themselves), the root's fsync after it,
//! the receipt's commit last. The first two do not depend on each other:
//! [`decide_and_materialize`] runs [`prepare`] (lock, revalidation, the
//! temporary file written and fsynced) on a thread of its own while the
//! decision commits, and [`finish`] (the rename onwards) only after that
//! commit returned. A failed commit drops the preparation: its temporary
//! file is removed and the lock released, and `memory.md` never changed.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::ScopedJoinHandle;

use stream_core::payload::ProposalKind;
use stream_proposals::chain::{ProposalBody, proposal_kind};
use stream_proposals::decision::{
    DecisionError, DecisionRecord, DecisionRequest, record_verified_decision_with,
};
use stream_proposals::project::VerifiedDecision;
use stream_store::Store;

use super::{MaterializeConfig, MaterializeError, MaterializeOutcome, Prepared, finish, prepare};

/// What [`decide_and_materialize`] did.
#[derive(Debug)]
pub struct DecidedAndMaterialized {
    /// The decision, recorded now or already.
    pub record: DecisionRecord,
    /// A memory decision's materialization (`None` for any other kind).
    /// An error appended nothing: `proposal-project` finishes it later.
    pub materialized: Option<Result<MaterializeOutcome, MaterializeError>>,
}

/// Records decision `req` (as
/// [`record_verified_decision`](stream_proposals::decision::record_verified_decision))
/// and materializes it when it is a memory decision, preparing the write
/// while the decision commits (see the module documentation).
pub fn decide_and_materialize(
    store: &dyn Store,
    config: &MaterializeConfig,
    req: &DecisionRequest,
) -> Result<DecidedAndMaterialized, DecisionError> {
    decide_with(store, config, req, prepare)
}

/// [`decide_and_materialize`] with the preparation passed in, so that a
/// test can make the preparing thread fail.
pub(super) fn decide_with(
    store: &dyn Store,
    config: &MaterializeConfig,
    req: &DecisionRequest,
    prepare: impl Fn(
        &dyn Store,
        &MaterializeConfig,
        &VerifiedDecision,
    ) -> Result<Prepared, MaterializeError>
    + Sync,
) -> Result<DecidedAndMaterialized, DecisionError> {
    let prepare = &prepare;
    // Only a hint, read unverified: it starts the preparing thread before
    // the chain is replayed, so that its start-up overlaps the replay. The
    // verified decision alone decides what is materialized.
    let memory = store
        .event(&req.proposal)?
        .is_some_and(|event| proposal_kind(&event) == Some(ProposalKind::MemoryChange));
    std::thread::scope(|scope| {
        let preparing = if memory {
            let (give, given) = sync_channel::<VerifiedDecision>(1);
            let (done, prepared) = sync_channel(1);
            std::thread::Builder::new()
                .spawn_scoped(scope, move || {
                    if let Ok(verified) = given.recv() {
                        let _ = done.send(prepare(store, config, &verified));
                    }
                })
                .ok()
                .map(|thread| Preparing {
                    give,
                    prepared,
                    thread,
                })
        } else {
            None
        };
        let record = record_verified_decision_with(store, req, &config.trusted, |verified| {
            if let (Some(preparing), ProposalBody::Memory(_)) =
                (&preparing, verified.proposal().body())
            {
                let _ = preparing.give.send(verified.clone());
            }
        });
        // Received whatever the commit did: a preparation dropped
        // unfinished removes its file and releases the lock.
        let (prepared, thread) = preparing.map(Preparing::outcome).unzip();
        let decided = record.map(|record| {
            let materialized = match &record.verified {
                Ok(verified) => match verified.proposal().body() {
                    ProposalBody::Memory(_) => Some(
                        // Not prepared beside the commit (no thread, or a
                        // panic that left nothing visible): prepared now.
                        prepared
                            .flatten()
                            .unwrap_or_else(|| prepare(store, config, verified))
                            .and_then(|p| finish(store, config, p)),
                    ),
                    ProposalBody::Correction(_) | ProposalBody::Focus(_) => None,
                },
                // Not authorized by this config's keys: nothing prepared;
                // the caller records the refusal ([`super::refuse`]).
                Err(_) => None,
            };
            DecidedAndMaterialized {
                record,
                materialized,
            }
        });
        // Joined last, when it has long ended: its exit costs nothing on the
        // way, and a panic in it ends here instead of being raised again by
        // the scope.
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        decided
    })
}

/// The preparing thread and its two ends.
struct Preparing<'scope> {
    give: SyncSender<VerifiedDecision>,
    prepared: Receiver<Result<Prepared, MaterializeError>>,
    thread: ScopedJoinHandle<'scope, ()>,
}

impl<'scope> Preparing<'scope> {
    /// What the thread prepared (`None` when it was given nothing, which
    /// the dropped sender tells it, or panicked), and the thread, to join
    /// once it no longer matters when it ends.
    fn outcome(
        self,
    ) -> (
        Option<Result<Prepared, MaterializeError>>,
        ScopedJoinHandle<'scope, ()>,
    ) {
        drop(self.give);
        (self.prepared.recv().ok(), self.thread)
    }
}
