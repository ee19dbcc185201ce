//! A fork server: one sandboxed process that makes each attempt's worker by
//! forking instead of executing the binary again.
//!
//! A cold worker spends about 3 ms of CPU on `exec`, loading, sandbox entry
//! and warming its code paths before an attempt can start; a fork of a
//! process that has done all that once takes a fraction of it. The fork
//! server is that process: the worker binary started with a flag, in a
//! sandbox of its own ([`crate::enter_fork_server`]), warmed once. It never
//! reads a packet, a model's output or anything but the broker's messages.
//!
//! The exchange, over a Unix socket that is the server's stdin:
//!
//! 1. the server, once in its sandbox and warmed, writes [`READY`];
//! 2. the broker sends one byte carrying a child's stdin, stdout and stderr
//!    (`SCM_RIGHTS`);
//! 3. the server forks with `CLONE_PARENT`, so that the child is the
//!    broker's own (supervised through a pidfd, reaped with `wait4`, exactly
//!    as a spawned worker), and answers the child's pid (4 bytes, little
//!    endian; a negative errno if the fork failed).
//!
//! The child first gets `AT_RANDOM` bytes and a stack-protector canary of
//! its own (`reseed`), then puts the three descriptors on 0–2, closes everything else,
//! and narrows itself to a worker's sandbox before it reads anything: its
//! own fresh namespaces, `RLIMIT_NPROC` 0, the worker's seccomp filter on
//! top of the server's ([`crate::enter`]'s stages c and f, which the server
//! skipped, and the part of stage b it could not take). Then it serves one
//! attempt, like a spawned worker, and exits.
//!
//! The broker trusts the server's answer no further than it must: the pid
//! must be its own child, not the server, not one the server answered
//! before and not a worker the broker already has
//! ([`ForkServer::fork_among`]); the
//! child's hello, with its sandbox report, is then verified as any
//! worker's.

mod client;
mod reseed;
mod server;

pub use client::{ForkServer, PidRefusal};
pub use server::serve_forks;

/// What a fork server writes once it is ready to fork.
pub const READY: &[u8; 8] = b"tsfork1\n";
