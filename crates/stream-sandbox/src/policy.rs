//! What the worker asks of its own sandbox.

/// The limits the worker applies to itself in [`crate::enter`], and the
/// development switch.
///
/// The limits that are invariants of the design are not configurable: no new
/// processes (`RLIMIT_NPROC` 0), no file writes (`RLIMIT_FSIZE` 0) and no core
/// dumps (`RLIMIT_CORE` 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `RLIMIT_AS`: the most virtual memory the worker may map, in bytes.
    pub address_space_bytes: u64,
    /// `RLIMIT_CPU`: CPU seconds before `SIGXCPU`; the hard limit is one
    /// second more, then `SIGKILL`.
    pub cpu_seconds: u64,
    /// `RLIMIT_NOFILE`: one more than the highest descriptor number the worker
    /// may hold. Must leave room for fds 0–2 and the transient Landlock
    /// ruleset descriptor (so at least 4).
    pub open_files: u64,
    /// Development only, off by default: when on, failing to enforce Landlock
    /// or seccomp is reported in the [`crate::Enforcement`] instead of being
    /// an error. The parent's [`crate::verify`] has its own switch and logs
    /// loudly whenever it is on.
    pub allow_unenforced: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            address_space_bytes: 1 << 30,
            cpu_seconds: 30,
            open_files: 8,
            allow_unenforced: false,
        }
    }
}
