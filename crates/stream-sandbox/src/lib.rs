//! The isolation of the model worker, and the parent's spawn and supervision of it.
//!
//! Owns both halves of the worker's trust boundary (docs/design.md §9):
//!
//! - **Worker side:** [`enter`], called by `thestream-worker` first thing, while
//!   it is single-threaded and before it reads anything. It applies, in this
//!   order and failing closed, (a) only fds 0–2 open, (b) rlimits, (c) new
//!   user, network, mount and IPC namespaces where the kernel permits, (d)
//!   `no_new_privs` and not dumpable, (e) a Landlock ruleset that handles every
//!   right of the best ABI available and allows none, (f) a seccomp-BPF
//!   allowlist whose every other syscall fails with `EPERM`. It returns an
//!   [`Enforcement`] report for the worker's hello frame.
//! - **Parent side:** [`verify`] refuses an [`Enforcement`] without Landlock or
//!   seccomp unless the development switch is on (and then logs loudly on every
//!   call); [`spawn`] starts the worker with an empty environment, only fds 0–2,
//!   piped stdin/stdout, a wall-clock deadline and an output cap, and returns a
//!   [`WorkerChild`] to talk to it one bounded line at a time;
//!   [`spawn_image`] does the same from a [`WorkerImage`], the binary sealed
//!   in memory once so that the worker executed is the worker hashed;
//!   [`WorkerChild::park`] stops a spare's wall clock until one attempt
//!   takes it ([`ParkedWorker::resume`] restarts it in full).
//! - **Fork server** ([`fork`]): [`enter_fork_server`] and
//!   [`fork::serve_forks`] on the worker side, [`ForkServer`] on the
//!   parent's. Each child is the parent's own and narrows itself to a
//!   worker's sandbox before it reads anything, so a forked worker is
//!   supervised and verified exactly as a spawned one.
//!
//! Read [`enter`], [`Enforcement`] and [`WorkerChild`] first. The stages and
//! why they come in this order are documented on [`enter`].
//!
//! This crate knows nothing of packets, providers, the store or credentials:
//! it isolates and supervises one process, whatever it speaks. Linux only
//! (x86_64 and aarch64 for the seccomp filter).

#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!("stream-sandbox supports Linux only");

mod enforcement;
mod enter;
pub mod fork;
mod image;
mod park;
mod policy;
mod spawn;
mod sys;

pub use enforcement::{
    Enforcement, FdReport, LandlockReport, LandlockStatus, Missing, NamespaceReport, NotEnforced,
    RlimitReport, SeccompArch, SeccompReport, SeccompStatus, verify,
};
pub use enter::{SandboxError, enter, enter_fork_server};
pub use fork::ForkServer;
pub use image::{ImageError, WorkerImage};
pub use park::{ParkedEnded, ParkedWorker};
pub use policy::Policy;
pub use spawn::{
    ChildIoError, Ended, Ending, SpawnError, SpawnLimits, StderrMode, WorkerChild, spawn,
    spawn_image,
};
