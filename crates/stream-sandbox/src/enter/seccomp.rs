//! Stage f: the seccomp-BPF allowlist.
//!
//! Allowed: what reading stdin, writing stdout/stderr, allocating memory,
//! telling time, getting random bytes and exiting need, plus what the Rust
//! runtime needs for those (signal return and masks for its stack-overflow
//! handler and `abort`, futex for its locks). Everything else fails with
//! `EPERM`, so a probe can observe the refusal. A syscall made under another
//! architecture's convention (e.g. `int 0x80` on x86_64) kills the process:
//! its numbers mean nothing to this list. x32 syscall numbers (with bit 30
//! set) are on no list, so they fail with `EPERM`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{Role, SandboxError};
use crate::enforcement::{SeccompArch, SeccompReport, SeccompStatus};

#[cfg(target_arch = "x86_64")]
const ARCH: (TargetArch, SeccompArch) = (TargetArch::x86_64, SeccompArch::X86_64);
#[cfg(target_arch = "aarch64")]
const ARCH: (TargetArch, SeccompArch) = (TargetArch::aarch64, SeccompArch::Aarch64);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the seccomp allowlist is written for x86_64 and aarch64 only");

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// `arg == value`, comparing the low 32 bits (the argument is a C `int`).
fn arg_eq(arg: u8, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .map_err(SandboxError::SeccompBuild)
}

/// `arg & mask == value`.
fn arg_masked(arg: u8, mask: u64, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(mask),
        value,
    )
    .map_err(SandboxError::SeccompBuild)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(SandboxError::SeccompBuild)
}

/// The allowlist. `pid` is this process, the only one `tgkill` may signal.
fn allowlist(pid: libc::pid_t) -> Result<Rules, SandboxError> {
    let mut rules: Rules = BTreeMap::new();
    let exec_bit = libc::PROT_EXEC as u64;
    let anonymous = libc::MAP_ANONYMOUS as u64;

    // Reading stdin, and only stdin.
    for nr in [libc::SYS_read, libc::SYS_readv] {
        rules.insert(nr, vec![rule(vec![arg_eq(0, 0)?])?]);
    }
    // Writing stdout and stderr, and nothing else.
    for nr in [libc::SYS_write, libc::SYS_writev] {
        rules.insert(
            nr,
            vec![rule(vec![arg_eq(0, 1)?])?, rule(vec![arg_eq(0, 2)?])?],
        );
    }
    // Memory: anonymous mappings, never executable.
    rules.insert(
        libc::SYS_mmap,
        vec![rule(vec![
            arg_masked(2, exec_bit, 0)?,
            arg_masked(3, anonymous, anonymous)?,
        ])?],
    );
    rules.insert(
        libc::SYS_mprotect,
        vec![rule(vec![arg_masked(2, exec_bit, 0)?])?],
    );
    for nr in [
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_madvise,
    ] {
        rules.insert(nr, vec![]);
    }
    // Time (normally served by the vDSO without a syscall) and randomness.
    for nr in [
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
    ] {
        rules.insert(nr, vec![]);
    }
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_time, vec![]);
    // The Rust runtime: signal frames, masks and handlers (stack-overflow
    // handler, abort), its locks, and an interrupted call's restart.
    for nr in [
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_futex,
        libc::SYS_sched_yield,
        libc::SYS_restart_syscall,
        libc::SYS_getpid,
        libc::SYS_gettid,
    ] {
        rules.insert(nr, vec![]);
    }
    // `abort` raises SIGABRT on itself, and on nothing else.
    let own_pid = u64::try_from(pid).unwrap_or(u64::MAX);
    rules.insert(libc::SYS_tgkill, vec![rule(vec![arg_eq(0, own_pid)?])?]);
    // Exiting.
    for nr in [libc::SYS_exit, libc::SYS_exit_group] {
        rules.insert(nr, vec![]);
    }
    Ok(rules)
}

/// What a fork server may do besides a worker's: each rule as narrow as
/// making one child per attempt allows ([`crate::fork`]). Its children
/// stack the worker's filter on this one before they read anything.
fn add_fork_server(rules: &mut Rules) -> Result<(), SandboxError> {
    // A fork whose child is the parent's (the broker's, which supervises
    // and reaps it), and nothing else `clone` can do: no thread, no shared
    // memory or descriptors, no namespace. `clone3` stays denied.
    let flags = (libc::CLONE_PARENT | libc::SIGCHLD) as u64;
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![
            SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, flags)
                .map_err(SandboxError::SeccompBuild)?,
        ])?],
    );
    // The broker's socket is stdin: a child's pipes come in, its pid goes back.
    rules.insert(libc::SYS_recvmsg, vec![rule(vec![arg_eq(0, 0)?])?]);
    if let Some(write) = rules.get_mut(&libc::SYS_write) {
        write.push(rule(vec![arg_eq(0, 0)?])?);
    }
    // The child: its pipes onto 0, 1 and 2, then nothing else open.
    rules.insert(
        libc::SYS_dup3,
        vec![
            rule(vec![arg_eq(1, 0)?, arg_eq(2, 0)?])?,
            rule(vec![arg_eq(1, 1)?, arg_eq(2, 0)?])?,
            rule(vec![arg_eq(1, 2)?, arg_eq(2, 0)?])?,
        ],
    );
    rules.insert(libc::SYS_close, vec![]);
    rules.insert(libc::SYS_close_range, vec![]);
    // The child's narrowing: RLIMIT_NPROC 0 on itself, its own namespaces
    // (one flag a call, as a worker enters them), its own Landlock layer,
    // the worker's filter.
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![
            arg_eq(0, 0)?,
            arg_eq(1, libc::RLIMIT_NPROC as u64)?,
        ])?],
    );
    let mut unshare = Vec::new();
    for flag in [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWIPC,
    ] {
        unshare.push(rule(vec![arg_eq(0, flag as u64)?])?);
    }
    rules.insert(libc::SYS_unshare, unshare);
    // Its own Landlock layer (a ruleset with no rule; its descriptor is
    // closed at once).
    rules.insert(libc::SYS_landlock_create_ruleset, vec![]);
    rules.insert(libc::SYS_landlock_restrict_self, vec![]);
    // Landlock and seccompiler set no_new_privs (already set) first.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![arg_eq(0, libc::PR_SET_NO_NEW_PRIVS as u64)?])?],
    );
    rules.insert(
        libc::SYS_seccomp,
        vec![rule(vec![arg_eq(
            0,
            u64::from(libc::SECCOMP_SET_MODE_FILTER),
        )?])?],
    );
    Ok(())
}

fn compile(pid: libc::pid_t, role: Role) -> Result<(BpfProgram, u32), SandboxError> {
    let mut rules = allowlist(pid)?;
    match role {
        Role::Worker => {}
        Role::ForkServer => add_fork_server(&mut rules)?,
    }
    let allowed = u32::try_from(rules.len()).unwrap_or(u32::MAX);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        ARCH.0,
    )
    .map_err(SandboxError::SeccompBuild)?;
    let program = BpfProgram::try_from(filter).map_err(SandboxError::SeccompBuild)?;
    Ok((program, allowed))
}

/// Compiles and installs `role`'s filter on the calling thread (and the
/// threads it creates later; the process is single-threaded when
/// [`super::enter`] or a fork server's child calls this).
pub(super) fn install(role: Role) -> Result<SeccompReport, SandboxError> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let (program, allowed) = compile(pid, role)?;
    seccompiler::apply_filter(&program).map_err(SandboxError::SeccompInstall)?;
    Ok(SeccompReport {
        status: SeccompStatus::Installed,
        arch: ARCH.1,
        allowed_syscalls: allowed,
    })
}

/// The report when the filter could not be installed (development switch on).
pub(super) fn not_installed() -> SeccompReport {
    SeccompReport {
        status: SeccompStatus::NotInstalled,
        arch: ARCH.1,
        allowed_syscalls: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_compiles_and_omits_every_escape() {
        let rules = allowlist(1).unwrap();
        for nr in [
            libc::SYS_openat,
            libc::SYS_open_by_handle_at,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_io_uring_setup,
            libc::SYS_process_vm_writev,
            libc::SYS_kill,
            libc::SYS_pidfd_open,
            libc::SYS_prctl,
            libc::SYS_seccomp,
            libc::SYS_prlimit64,
            libc::SYS_memfd_create,
            libc::SYS_bpf,
            libc::SYS_mount,
            libc::SYS_ioctl,
            libc::SYS_close,
        ] {
            assert!(!rules.contains_key(&nr), "syscall {nr} must not be allowed");
        }
        assert!(compile(1, Role::Worker).is_ok());
    }

    /// The fork server adds only what making a child needs: still no file,
    /// socket, exec, trace, thread or other process's signal.
    #[test]
    fn fork_server_allowlist_compiles_and_adds_only_the_fork() {
        let worker = allowlist(1).unwrap();
        let mut server = allowlist(1).unwrap();
        add_fork_server(&mut server).unwrap();
        let added: Vec<i64> = server
            .keys()
            .filter(|nr| !worker.contains_key(nr))
            .copied()
            .collect();
        let mut expected = vec![
            libc::SYS_clone,
            libc::SYS_recvmsg,
            libc::SYS_dup3,
            libc::SYS_close,
            libc::SYS_close_range,
            libc::SYS_prlimit64,
            libc::SYS_unshare,
            libc::SYS_prctl,
            libc::SYS_seccomp,
            libc::SYS_landlock_create_ruleset,
            libc::SYS_landlock_restrict_self,
        ];
        expected.sort_unstable();
        assert_eq!(added, expected);
        for nr in [
            libc::SYS_openat,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_sendmsg,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_clone3,
            libc::SYS_setns,
            libc::SYS_kill,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_open,
            libc::SYS_mount,
        ] {
            assert!(
                !server.contains_key(&nr),
                "syscall {nr} must not be allowed"
            );
        }
        assert!(compile(1, Role::ForkServer).is_ok());
    }
}
