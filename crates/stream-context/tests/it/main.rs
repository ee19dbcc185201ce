//! stream-context: the snapshot capability rules (docs/design.md §8),
//! "Correction targets" and "Evidence ids" sections, retry stability, and
//! history reconstruction.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cloned_ref_to_slice_refs
)]

mod common;
mod history;
mod parts;
mod snapshot;
