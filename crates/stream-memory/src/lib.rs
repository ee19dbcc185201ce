//! Memory documents: the files of the context root, what they say about
//! themselves, and the one bounded way a human decision changes them.
//!
//! Owns the Markdown frontmatter parser ([`frontmatter::parse`], the `id`
//! every `memory.md` carries), the filesystem connector ([`scan::scan`]):
//! regular files under a real root directory, recorded in the store as
//! stable documents with immutable versions, a current pointer and one
//! `stream.filesystem.file.changed@1` event per new version, all in one
//! transaction per scan), the owner-only root lock ([`lock::RootLock`]) and
//! the memory materializer ([`mod@materialize`]): an accepted or
//! edited memory decision, revalidated against the frozen base, written
//! atomically, scanned, verified and receipted. [`review`] is what a
//! reviewer sees: a proposal's diff computed with the materializer's own
//! byte composition, and the audit log of every `memory.md` version;
//! [`blame`] says which version brought each line of the current one.
//! [`decide`] is the one home of "decide a proposal": record the decision,
//! then project or materialize it.
//!
//! Read [`decide::decide`] (where a human decision enters),
//! [`materialize::materialize_verified`] (the one way `memory.md` is
//! written, from `decide` and from `serve`'s
//! [`materialize::materialize_pending`]) and [`scan::scan`] first.
//!
//! The materializer is the only writer of `memory.md`, and it writes only
//! after the shared authority-chain validator passes; the scan never writes
//! a file. Nothing here follows a symlink or reads outside the root.

#![deny(missing_docs)]

pub mod blame;
pub mod decide;
pub mod frontmatter;
pub mod lock;
pub mod materialize;
pub mod review;
pub mod scan;

pub use frontmatter::{Frontmatter, FrontmatterError};
pub use lock::{LockError, RootLock};
pub use materialize::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, Recorded, materialize,
    materialize_verified,
};
pub use scan::{ScanError, ScanLimits, ScanReport, Walked, scan, scan_with_limits, walk};
