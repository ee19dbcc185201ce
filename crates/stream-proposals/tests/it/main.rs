//! stream-proposals: settlement order, atomicity at every write step,
//! replay, failure records, judgments.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cloned_ref_to_slice_refs
)]

mod authority;
mod chain;
mod common;
mod settlement;
mod validate;
