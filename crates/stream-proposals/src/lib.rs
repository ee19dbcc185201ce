//! The trusted machinery between a model's completion and durable state.
//!
//! Owns: the fixed acknowledgments of tool-only completions ([`ack`]), the
//! atomic settlement of a run in the settlement order (docs/design.md §11) ([`settle`]: output, 0–3
//! proposals, completed-run receipt, run row, consumer progress), the
//! settlement of failed attempts, human judgments ([`judgment`]), the shared
//! authority-chain validator ([`chain::verify_chain`]), human decisions
//! ([`decision`]), their projection into judgments ([`project`]), and the
//! review view-model of proposals ([`review`]: list, show, staleness,
//! evidence, redaction).
//!
//! Start with [`settle::Settlement::assemble`] and [`settle::commit`]. A
//! proposal built here is inert: nothing in this crate applies it.

#![deny(missing_docs)]

pub mod ack;
pub mod authority;
pub mod chain;
pub mod decision;
pub mod judgment;
pub mod project;
pub mod review;
pub mod settle;
#[cfg(feature = "testing")]
pub mod testing;
pub mod validate;

use stream_core::{EventError, EventId};
use stream_store::StoreError;

/// Why a settlement or judgment could not be recorded. Ids only, never content.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    /// The store failed; nothing of the settlement was written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An event could not be built (canonicalization or a payload rule).
    #[error(transparent)]
    Event(#[from] EventError),
    /// A proposal needs the provenance of a model run (provider, snapshot).
    #[error("run has no provider or snapshot provenance for a proposal")]
    MissingProvenance,
    /// A completion with neither visible text nor a proposal.
    #[error("a completion needs visible text or at least one proposal")]
    EmptyCompletion,
    /// Two proposals of one kind, or more than three.
    #[error("a completion may carry at most one proposal of each kind")]
    DuplicateKind,
    /// A fixed reply was to be committed with an attempt that is not final.
    #[error("only a final failure is answered with the failed-run reply")]
    NotFinal,
    /// An event of the settlement already exists with other content.
    #[error("event {id} already exists with different content")]
    Conflict {
        /// The contested id.
        id: EventId,
    },
}
