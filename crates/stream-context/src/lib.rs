//! The context of one run, built once by the trusted parent and stored.
//!
//! Owns: the retry-stable [`Snapshot`] — the bounded transcript of the chat
//! (owner messages and delivered replies with their effective text), the
//! exact current `memory.md` version, the correction targets by every rule of
//! `docs/design.md §8`, the admitted evidence ids, the exposed tools, the
//! prompt and the declaration fingerprint — and
//! [`packet::build`], which turns a snapshot into the worker's packet. Also
//! [`correct::owner_correction_target`]: the reply an owner's `/correct`
//! targets.
//!
//! Start with [`build`] and [`Snapshot::load`]. History for later turns is
//! rebuilt here from completed-run receipts and proposal events only
//! ([`history`]), never from reply text or traces.
//!
//! This crate only reads the store: the engine stores the snapshot bytes in
//! the run's transaction, and a retry loads those bytes instead of rebuilding.

#![deny(missing_docs)]

mod build;
pub mod correct;
pub mod history;
pub mod packet;
mod snapshot;

use std::collections::BTreeSet;

pub use build::build;
pub use snapshot::*;
use stream_core::payload::ProposalKind;
use stream_core::text::Label;
use stream_core::{EventId, Fingerprint, SnapshotId};
use stream_store::StoreError;

/// What the declaration contributes to a snapshot.
#[derive(Debug, Clone)]
pub struct ContextSpec {
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// Declaration fingerprint.
    pub declaration_fingerprint: Fingerprint,
    /// The proposals the declaration lists.
    pub proposals: BTreeSet<ProposalKind>,
    /// The prompt text (its hash is part of the fingerprint).
    pub prompt: String,
    /// How many earlier owner messages (with their replies) to keep.
    pub transcript_messages: usize,
    /// The conversation-history agents whose replies may be corrected
    /// (the `pi` conversation declaration, any version).
    pub history_agents: BTreeSet<String>,
    /// Whether the declaration subscribes to `memory.md` exactly.
    pub memory_subscribed: bool,
}

/// Why a snapshot could not be built or loaded. Carries ids, never content.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The trigger is not an admitted owner message.
    #[error("trigger {id} is not a stored owner message")]
    TriggerInvalid {
        /// The trigger.
        id: EventId,
    },
    /// A stored event in the chain did not decode.
    #[error("stored event {id} does not decode")]
    EventInvalid {
        /// The event.
        id: EventId,
    },
    /// A value could not be canonicalized.
    #[error("snapshot part cannot be canonicalized")]
    Canonical,
    /// No snapshot is stored under this id.
    #[error("snapshot {id} is not stored")]
    SnapshotMissing {
        /// The snapshot.
        id: SnapshotId,
    },
    /// The stored snapshot does not verify.
    #[error("snapshot {id} is invalid: {why}")]
    SnapshotInvalid {
        /// The snapshot.
        id: SnapshotId,
        /// Which check failed.
        why: &'static str,
    },
    /// An image blob the packet needs is missing or too large.
    #[error("image {sha256} is missing or over the cap")]
    Image {
        /// The blob.
        sha256: String,
    },
    /// An image blob's bytes differ from the snapshot's hash or size.
    #[error("image {sha256} does not match the snapshot's hash and size")]
    ImageMismatch {
        /// The blob the snapshot names.
        sha256: String,
    },
}
