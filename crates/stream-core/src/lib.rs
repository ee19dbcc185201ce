//! The vocabulary every other crate of thestream shares.
//!
//! Owns: identifiers and their deterministic derivations ([`ids`]), RFC 8785
//! canonical JSON and SHA-256 ([`canon`]), length-bounded text that counts
//! Unicode scalar values ([`text`]), literal wire fields ([`literal`]), the
//! event envelope ([`event::NewEvent`], [`event::StoredEvent`]) and a strict
//! payload type for every event of the catalog ([`payload`]), the one table
//! of tool-argument bounds ([`bounds`]), and the one
//! strict parser of model-written JSON, which refuses a repeated key
//! ([`json`]), the one rendering rule for untrusted text on a terminal
//! ([`terminal`]), and the system's annotations in what the model reads with
//! the one rule that neutralizes them in untrusted text ([`annotation`]).
//!
//! Start with [`event::Payload`]: it ties each payload type to its catalog
//! row (type, version, authorship, sensitivity, identity key).
//!
//! This crate does no I/O and holds no secrets; the sandboxed worker may link it.

#![deny(missing_docs)]

pub mod annotation;
pub mod bounds;
pub mod canon;
pub mod event;
mod hex_id;
pub mod ids;
pub mod json;
pub mod literal;
pub mod parts;
pub mod payload;
pub mod terminal;
pub mod text;

pub use event::{
    Authorship, EventError, NewEvent, Payload, PayloadInvalid, SourceName, StoredEvent,
};
pub use ids::{DocumentId, EventId, Fingerprint, RunId, Sha256Hex, SnapshotId, VersionId};
pub use literal::{AgentProposed, False, HumanAuthority, MemoryPath, True, Unchecked};
