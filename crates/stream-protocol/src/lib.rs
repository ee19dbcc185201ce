//! `stream.sandbox/1`: the frames the trusted parent and the sandboxed worker
//! exchange over the worker's stdin and stdout, one JSON object per line.
//!
//! Read [`ParentFrame`] and [`WorkerFrame`] first; [`framing`] reads and
//! writes bounded lines. The protocol is versioned apart from event schemas:
//! a change here bumps [`PROTOCOL`], never an event version.
//!
//! The exchange of one attempt, in order:
//! 1. worker → [`WorkerFrame::Hello`]: protocol and what the sandbox enforced;
//! 2. parent → [`ParentFrame::Packet`]: everything the worker may know;
//! 3. worker → [`WorkerFrame::BrokerRequest`]: the one native provider request;
//! 4. parent → [`ParentFrame::BrokerResponse`]: status and body;
//! 5. worker → [`WorkerFrame::Result`]: the parsed completion or a
//!    content-dark rejection.
//!
//! Any frame out of this order is a protocol violation and ends the attempt.
//! The worker's command-line flags are part of the same contract and live
//! here too ([`ALLOW_UNENFORCED_FLAG`], [`FORK_SERVER_FLAG`]). This crate holds no secrets and does no I/O beyond the reader/writer it is
//! given; the worker links it.

#![deny(missing_docs)]

mod frames;
pub mod framing;
pub mod tools;

pub use frames::*;

/// The worker's development switch, on its command line. With it the worker
/// runs even where Landlock or seccomp cannot be enforced, reporting so in
/// its hello frame; the parent still refuses such a worker unless its own
/// development switch is on. Never passed in production.
pub const ALLOW_UNENFORCED_FLAG: &str = "--allow-unenforced-sandbox";

/// On the worker's command line: the binary is a fork server for the
/// parent (`stream_sandbox::ForkServer`) instead of a worker.
pub const FORK_SERVER_FLAG: &str = "--fork-server";

/// The protocol identifier every packet and hello carries.
pub const PROTOCOL: &str = Protocol::VALUE;

/// The largest frame in either direction, newline included.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// The largest provider response body the parent relays.
pub const MAX_PROVIDER_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The largest image the parent puts in a packet (before base64): the one
/// photo bound, `stream_core::payload::MAX_PHOTO_BYTES`.
#[allow(clippy::cast_possible_truncation)] // 5 MiB fits any usize we build for.
pub const MAX_IMAGE_BYTES: usize = stream_core::payload::MAX_PHOTO_BYTES as usize;

/// At most this many proposal calls in one completion.
pub const MAX_CALLS: usize = 3;
