//! The worker side: entering the sandbox, stage by stage.

mod fds;
mod landlock;
mod namespaces;
mod privs;
mod rlimits;
mod seccomp;

use crate::enforcement::{
    Enforcement, LandlockReport, LandlockStatus, RlimitReport, SeccompReport,
};
use crate::policy::Policy;

/// Why [`enter`] refused. Carries errnos, counts and stage names, never content.
///
/// After an error the process is partly restricted in an unspecified way: the
/// caller must exit without reading its input.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Descriptor 0, 1 or 2 is closed (a later open would silently take its number).
    #[error("standard descriptor {fd} is not open")]
    StdioMissing {
        /// The closed descriptor.
        fd: i32,
    },
    /// `/proc/self` could not be read to count threads or descriptors.
    #[error("/proc/self/{what} is unreadable (errno {errno})")]
    ProcUnavailable {
        /// `task` or `fd`.
        what: &'static str,
        /// The errno of the failed read.
        errno: i32,
    },
    /// More than one thread: seccomp, Landlock and `no_new_privs` would bind
    /// only the calling thread, and user namespaces would be refused.
    #[error("the process has {threads} threads; the sandbox must be entered single-threaded")]
    MultiThreaded {
        /// Threads counted in `/proc/self/task`.
        threads: usize,
    },
    /// Descriptors above 2 could not be closed.
    #[error("close_range(3, ~0) failed (errno {errno})")]
    CloseInherited {
        /// The errno of `close_range`.
        errno: i32,
    },
    /// A resource limit could not be set or read back.
    #[error("rlimit {resource} could not be set (errno {errno})")]
    Rlimit {
        /// The resource, e.g. `RLIMIT_AS`.
        resource: &'static str,
        /// The errno of `setrlimit`/`getrlimit`.
        errno: i32,
    },
    /// The policy asks for a limit the sandbox cannot work with.
    #[error("policy limit {resource} = {value} is below the minimum {minimum}")]
    PolicyTooTight {
        /// The resource, e.g. `RLIMIT_NOFILE`.
        resource: &'static str,
        /// The configured value.
        value: u64,
        /// The smallest value that works.
        minimum: u64,
    },
    /// A `prctl` failed.
    #[error("prctl({option}) failed (errno {errno})")]
    Prctl {
        /// The option, e.g. `PR_SET_NO_NEW_PRIVS`.
        option: &'static str,
        /// The errno of `prctl`.
        errno: i32,
    },
    /// The Landlock ruleset could not be built or applied.
    #[error("Landlock ruleset failed")]
    Landlock(#[source] ::landlock::RulesetError),
    /// Landlock is not (fully) in force and the development switch is off.
    #[error("Landlock is {status:?} (kernel ABI {kernel_abi:?}); refusing to run unsandboxed")]
    LandlockNotEnforced {
        /// The kernel's Landlock ABI, `None` without Landlock.
        kernel_abi: Option<u32>,
        /// What was achieved.
        status: LandlockStatus,
    },
    /// A fork server's exchange with the broker failed.
    #[error("fork server: {what} failed (errno {errno})")]
    ForkServer {
        /// The step, e.g. `recvmsg`.
        what: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// The seccomp program could not be compiled (a bug in the allowlist).
    #[error("seccomp filter could not be compiled")]
    SeccompBuild(#[source] seccompiler::BackendError),
    /// The seccomp filter could not be installed and the development switch is off.
    #[error("seccomp filter could not be installed; refusing to run unsandboxed")]
    SeccompInstall(#[source] seccompiler::Error),
}

/// Enters the worker sandbox. Call it first thing in `main`, while the process
/// is single-threaded and before reading anything; on `Err`, exit at once.
///
/// The stages, in order (each fails closed unless noted):
///
/// - **a. Descriptors.** Fds 0–2 must be open; the process must have exactly
///   one thread; every descriptor from 3 up is counted and closed
///   (`close_range`), so nothing inherited survives into later stages.
/// - **b. Rlimits** (soft = hard, so they cannot be raised again):
///   `RLIMIT_AS`, `RLIMIT_CPU` (hard one second above soft), `RLIMIT_NOFILE`
///   from the [`Policy`]; `RLIMIT_NPROC`, `RLIMIT_FSIZE`, `RLIMIT_CORE` 0.
///   Set before the namespaces so that a user namespace, whose capabilities
///   do not reach the initial namespace, cannot lift them.
/// - **c. Namespaces**: new user, then network, mount and IPC namespaces, each
///   tried on its own. Refusals are *not* fatal (unprivileged user namespaces
///   may be forbidden); the report says which were entered.
/// - **d. `PR_SET_NO_NEW_PRIVS`** (required by Landlock and seccomp for an
///   unprivileged process) and `PR_SET_DUMPABLE` 0.
/// - **e. Landlock**: one ruleset handling every filesystem right, every
///   network right and every scope of the kernel's ABI, with no rule, so
///   everything it handles is denied. Not fully enforced → error unless
///   `allow_unenforced`.
/// - **f. Seccomp**: an allowlist (stdin reads, stdout/stderr writes, anonymous
///   non-executable memory, clocks, random bytes, signal return and masks,
///   futex, exit). Every other syscall fails with `EPERM`; a syscall of another
///   architecture kills the process. Last, because the earlier stages need
///   syscalls it forbids. Not installed → error unless `allow_unenforced`.
pub fn enter(policy: &Policy) -> Result<Enforcement, SandboxError> {
    enter_as(policy, Role::Worker)
}

/// Enters a fork server's sandbox: [`enter`]'s stages a, b (without
/// `RLIMIT_NPROC`), d and e, and stage f with the fork server's own
/// allowlist (the worker's, plus what making one child per attempt needs:
/// [`crate::fork`]). No process limit and no namespaces: each child takes
/// those itself, fresh, with a Landlock layer and the worker's filter,
/// before it reads anything ([`crate::fork::serve_forks`]), so every
/// attempt's process ends with a worker's whole sandbox.
pub fn enter_fork_server(policy: &Policy) -> Result<Enforcement, SandboxError> {
    enter_as(policy, Role::ForkServer)
}

/// Which process enters: a worker, which serves one attempt, or a fork
/// server, which never reads a packet and makes the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Worker,
    ForkServer,
}

fn enter_as(policy: &Policy, role: Role) -> Result<Enforcement, SandboxError> {
    let fds = fds::close_inherited()?;
    let rlimits = rlimits::apply(policy, role)?;
    let namespaces = match role {
        Role::Worker => namespaces::enter(),
        Role::ForkServer => namespaces::none(),
    };
    let (no_new_privs, dumpable) = privs::restrict()?;
    let landlock = landlock_stage(policy)?;
    let seccomp = seccomp_stage(policy, role)?;
    Ok(Enforcement {
        fds,
        rlimits,
        namespaces,
        no_new_privs,
        dumpable,
        landlock,
        seccomp,
    })
}

/// Stage e, failing closed unless the development switch is on.
fn landlock_stage(policy: &Policy) -> Result<LandlockReport, SandboxError> {
    let landlock = landlock::restrict_self()?;
    match landlock.status {
        LandlockStatus::FullyEnforced => Ok(landlock),
        LandlockStatus::PartiallyEnforced | LandlockStatus::NotEnforced => {
            if policy.allow_unenforced {
                Ok(landlock)
            } else {
                Err(SandboxError::LandlockNotEnforced {
                    kernel_abi: landlock.kernel_abi,
                    status: landlock.status,
                })
            }
        }
    }
}

/// Stage f, failing closed unless the development switch is on.
fn seccomp_stage(policy: &Policy, role: Role) -> Result<SeccompReport, SandboxError> {
    match seccomp::install(role) {
        Ok(report) => Ok(report),
        Err(SandboxError::SeccompInstall(_)) if policy.allow_unenforced => {
            Ok(seccomp::not_installed())
        }
        Err(e) => Err(e),
    }
}

/// A fork server's child, first thing after the fork and with only fds 0–2
/// open: the stages its server left out, in [`enter`]'s order, so that it
/// ends with a worker's sandbox. `RLIMIT_NPROC` 0; its own new user,
/// network, mount and IPC namespaces (fresh for each child, as for a
/// spawned worker); a Landlock layer of its own on the server's, so that
/// siblings are in separate Landlock domains (whose scopes keep signals
/// and abstract sockets apart, as between spawned workers); the worker's
/// seccomp allowlist, stacked on the server's (the kernel applies both, so
/// the child can do only what both allow). `no_new_privs`, not dumpable
/// and the other rlimits it inherits from the server. Returns the child's
/// report.
pub(crate) fn narrow_child(
    policy: &Policy,
    server: &Enforcement,
) -> Result<Enforcement, SandboxError> {
    let processes = rlimits::no_processes()?;
    let namespaces = namespaces::enter();
    let landlock = landlock_stage(policy)?;
    let seccomp = seccomp_stage(policy, Role::Worker)?;
    Ok(Enforcement {
        rlimits: RlimitReport {
            processes,
            ..server.rlimits
        },
        namespaces,
        landlock,
        seccomp,
        ..server.clone()
    })
}

#[cfg(test)]
mod tests {
    //! Each layer alone, applied to one short-lived thread of the test binary
    //! (Landlock, seccomp and `no_new_privs` bind the calling thread and the
    //! threads it later creates, nothing else), so each is shown to deny on its
    //! own and not only behind the next one.

    use super::*;
    use crate::enforcement::SeccompStatus;
    use std::io::ErrorKind;

    fn on_fresh_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    #[test]
    fn landlock_alone_denies_files_with_eacces() {
        let outcome = on_fresh_thread(|| {
            // The ruleset sets no_new_privs on this thread itself.
            let report = landlock::restrict_self().unwrap();
            let open = std::fs::File::open("/etc/hostname").map(drop);
            let list = std::fs::read_dir("/").map(drop);
            (report, open, list)
        });
        let (report, open, list) = outcome;
        assert_eq!(
            report.status,
            LandlockStatus::FullyEnforced,
            "this kernel does not enforce Landlock (kernel ABI {:?}): the layer cannot be tested",
            report.kernel_abi
        );
        assert_eq!(open.unwrap_err().kind(), ErrorKind::PermissionDenied);
        assert_eq!(list.unwrap_err().raw_os_error(), Some(libc::EACCES));
        // The rest of the process is untouched.
        assert!(std::fs::read_dir("/").is_ok());
    }

    #[test]
    fn seccomp_alone_denies_with_eperm_and_keeps_memory_and_time() {
        let outcome = on_fresh_thread(|| {
            let report = seccomp::install(Role::Worker).unwrap();
            let open = std::fs::File::open("/etc/hostname").map(drop);
            // SAFETY: plain integer arguments.
            let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
            let socket_errno = crate::sys::errno();
            let big = vec![7u8; 8 << 20];
            let now = std::time::SystemTime::now();
            (report, open, socket, socket_errno, big.len(), now)
        });
        let (report, open, socket, socket_errno, len, _now) = outcome;
        assert_eq!(report.status, SeccompStatus::Installed);
        assert_eq!(open.unwrap_err().raw_os_error(), Some(libc::EPERM));
        assert_eq!((socket, socket_errno), (-1, libc::EPERM));
        assert_eq!(len, 8 << 20);
        assert!(std::fs::File::open("/etc/hostname").is_ok());
    }
}
