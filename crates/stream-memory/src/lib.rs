//! Memory documents: the files of the context root and what they say
//! about themselves.
//!
//! Owns the Markdown frontmatter parser ([`frontmatter::parse`], the `id`
//! every `memory.md` carries) and the filesystem connector ([`scan::scan`]):
//! regular files under a real root directory, recorded in the store as
//! stable documents with immutable versions, a current pointer and one
//! `stream.filesystem.file.changed@1` event per new version, all in one
//! transaction per scan.
//!
//! Read [`scan::scan`] and [`scan::ScanReport`] first.
//!
//! It never writes a file: the materializer and its root lock (which will
//! live here) are the only writers, and they call [`scan::scan`] afterwards.
//! It never follows a symlink and never reads outside the root.

#![deny(missing_docs)]

pub mod frontmatter;
pub mod scan;

pub use frontmatter::{Frontmatter, FrontmatterError};
pub use scan::{ScanError, ScanLimits, ScanReport, scan, scan_with_limits};
