//! The materializer's errors: a [`MaterializeError`] appends nothing; a
//! [`Stop`] is how an attempt stops short of a receipt.

use stream_core::EventId;
use stream_core::payload::MaterializationFailure;
use stream_proposals::project::ProjectError;
use stream_store::StoreError;

use crate::lock::LockError;

/// Nothing was appended. Ids, codes and OS errors only.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    /// The decision or its proposal's chain does not verify (forged,
    /// malformed, missing): refused before anything else.
    #[error(transparent)]
    Decision(#[from] ProjectError),
    /// The decision is not about a memory change.
    #[error("decision {decision} is not a memory-change decision")]
    NotAMemoryDecision {
        /// The decision.
        decision: EventId,
    },
    /// The outcome id holds an event that is not a valid outcome of this
    /// decision.
    #[error("the outcome of decision {decision} exists but does not verify")]
    OutcomeInvalid {
        /// The decision.
        decision: EventId,
    },
    /// The root lock is held by a live process, or its evidence cannot be
    /// trusted (fails closed).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The store failed; nothing was claimed and a rerun continues.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The configured context root is not the one this store
    /// materializes into: its `memory.md` carries another frontmatter `id`
    /// than the one recorded at the first materialization. Nothing is
    /// written to either root; fix the config (ids only in the message).
    #[error(
        "this store materializes into the context root whose memory.md has id {recorded:?}; \
         the configured root's memory.md has id {configured:?}: refused, nothing written"
    )]
    RootMismatch {
        /// The identity recorded at the first materialization.
        recorded: String,
        /// The identity of the configured root.
        configured: String,
    },
    /// The recorded context-root identity does not read as one (fails
    /// closed).
    #[error("the recorded context-root identity does not verify (decision {decision})")]
    RootIdentityInvalid {
        /// The decision.
        decision: EventId,
    },
    /// An id or event could not be built.
    #[error("an event for decision {decision} cannot be built")]
    Build {
        /// The decision.
        decision: EventId,
    },
}

/// How an attempt stopped short of a receipt.
#[derive(Debug)]
pub(super) enum Stop {
    /// A refusal with a reason code: recorded as the decision's outcome.
    Fail(MaterializationFailure),
    /// A transient or trust failure: nothing recorded.
    Abort(MaterializeError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Self::Abort(MaterializeError::Store(e))
    }
}

pub(super) fn fail<T>(reason: MaterializationFailure) -> Result<T, Stop> {
    Err(Stop::Fail(reason))
}
