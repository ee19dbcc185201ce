//! Test support shared by the integration and end-to-end tests of thestream.
//!
//! Owns: [`canary`] strings that must never appear where sensitive text is
//! forbidden; [`bin`], which finds (building if needed) the workspace's real
//! binaries so end-to-end tests run them as a user would; and [`packets`], a
//! realistic `stream.sandbox/1` packet with the three proposal tools; and
//! [`raw`], the benches' unit: one raw fsync'd commit on a WAL in use;
//! [`capture`], a writer readable through its clones (captured logs);
//! [`procs`], a process's parent, start time and children from `/proc`. The
//! loopback fakes ([`telegram`], [`provider`], [`stack`]) live in
//! `stream-loopback`, which ships for `thestream demo`, and are re-exported
//! here for tests.
//!
//! Nothing in production code may depend on this crate (guarded by
//! `stream-cli`'s test `production_never_links_the_testkit`).

#![deny(missing_docs)]

pub mod bin;
pub mod canary;
pub mod capture;
pub mod packets;
pub mod procs;
pub mod raw;

pub use stream_loopback::{provider, stack, telegram};
