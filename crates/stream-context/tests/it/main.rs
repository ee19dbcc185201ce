//! stream-context: the snapshot rules of `docs/design.md §8`
//! (capabilities, correction targets, evidence ids), retry stability, and
//! history reconstruction.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cloned_ref_to_slice_refs
)]

mod common;
mod correct;
mod history;
mod parts;
mod snapshot;
