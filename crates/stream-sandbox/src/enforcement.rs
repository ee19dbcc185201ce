//! What the worker's sandbox achieved (the wire report of its hello frame),
//! and the parent's decision on it.
//!
//! The report is produced by [`crate::enter`] before the worker reads any
//! input, so a worker can only misreport if its binary itself is hostile; the
//! parent pins the binary by its SHA-256 (the bundle id) for that reason.

use serde::{Deserialize, Serialize};

/// What each stage of [`crate::enter`] achieved, in stage order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Enforcement {
    /// Stage a: descriptors.
    pub fds: FdReport,
    /// Stage b: resource limits, as read back after setting them.
    pub rlimits: RlimitReport,
    /// Stage c: the namespaces entered.
    pub namespaces: NamespaceReport,
    /// Stage d: `PR_SET_NO_NEW_PRIVS` is set.
    pub no_new_privs: bool,
    /// Stage d: the process is no longer dumpable (no ptrace attach by
    /// same-uid processes, no core).
    pub dumpable: bool,
    /// Stage e: Landlock.
    pub landlock: LandlockReport,
    /// Stage f: seccomp.
    pub seccomp: SeccompReport,
}

/// Stage a: descriptors beyond 0–2 found open and closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FdReport {
    /// How many descriptors numbered 3 and above were open on entry (all
    /// closed before any other stage ran). The parent's [`crate::spawn`]
    /// leaves none, so anything but 0 means another launcher.
    pub inherited_closed: u32,
}

/// Stage b: the soft limits in force (the hard limits equal them, except
/// CPU whose hard limit is one second more). `u64::MAX` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RlimitReport {
    /// `RLIMIT_AS`, bytes.
    pub address_space_bytes: u64,
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
    /// `RLIMIT_NPROC`: 0, no new process.
    pub processes: u64,
    /// `RLIMIT_FSIZE`, bytes: 0, no file may grow.
    pub file_size_bytes: u64,
    /// `RLIMIT_CORE`, bytes: 0, no core dump.
    pub core_bytes: u64,
}

/// Stage c: which new namespaces the process entered. A refusal is not fatal
/// (a machine may forbid unprivileged user namespaces); it is reported here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamespaceReport {
    /// `CLONE_NEWUSER`.
    pub user: bool,
    /// `CLONE_NEWNET`: no interface but a down loopback.
    pub network: bool,
    /// `CLONE_NEWNS`.
    pub mount: bool,
    /// `CLONE_NEWIPC`.
    pub ipc: bool,
}

/// Stage e: the Landlock ruleset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LandlockReport {
    /// The ABI version the kernel reports, or `None` when it has no Landlock
    /// (not built in, or not enabled at boot).
    pub kernel_abi: Option<u32>,
    /// The ABI whose every right the ruleset handles: the kernel's, capped at
    /// the newest the `landlock` crate knows. 0 when unsupported.
    pub ruleset_abi: u32,
    /// How the ruleset was enforced.
    pub status: LandlockStatus,
}

/// Whether the Landlock ruleset is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockStatus {
    /// Every right of `rulesetAbi` is handled and none is allowed.
    FullyEnforced,
    /// The kernel took the ruleset but not every requested right.
    PartiallyEnforced,
    /// No ruleset is in force.
    NotEnforced,
}

/// Stage f: the seccomp filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SeccompReport {
    /// Whether the filter is installed.
    pub status: SeccompStatus,
    /// The architecture the filter checks (any other kills the process).
    pub arch: SeccompArch,
    /// How many syscalls the allowlist admits (some only with argument
    /// conditions); every other fails with `EPERM`.
    pub allowed_syscalls: u32,
}

/// Whether the seccomp filter is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeccompStatus {
    /// The allowlist filter is installed.
    Installed,
    /// No filter is installed.
    NotInstalled,
}

/// The architectures the filter is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeccompArch {
    /// `AUDIT_ARCH_X86_64` (x32 syscall numbers are not on the allowlist).
    X86_64,
    /// `AUDIT_ARCH_AARCH64`.
    Aarch64,
}

/// One thing an [`Enforcement`] lacks that the parent requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Missing {
    /// `no_new_privs` is not set.
    NoNewPrivs,
    /// The Landlock ruleset is not (fully) in force.
    Landlock,
    /// The seccomp filter is not installed.
    Seccomp,
    /// `RLIMIT_NPROC` is not 0.
    ProcessLimit,
    /// `RLIMIT_FSIZE` is not 0.
    FileSizeLimit,
    /// `RLIMIT_CORE` is not 0.
    CoreLimit,
    /// `RLIMIT_AS` is unlimited.
    AddressSpaceLimit,
    /// `RLIMIT_CPU` is unlimited.
    CpuLimit,
    /// `RLIMIT_NOFILE` is unlimited.
    OpenFilesLimit,
}

impl Missing {
    /// The stable code of this shortfall.
    pub fn as_str(self) -> &'static str {
        match self {
            Missing::NoNewPrivs => "no-new-privs",
            Missing::Landlock => "landlock",
            Missing::Seccomp => "seccomp",
            Missing::ProcessLimit => "process-limit",
            Missing::FileSizeLimit => "file-size-limit",
            Missing::CoreLimit => "core-limit",
            Missing::AddressSpaceLimit => "address-space-limit",
            Missing::CpuLimit => "cpu-limit",
            Missing::OpenFilesLimit => "open-files-limit",
        }
    }

    /// Every shortfall, in the order [`verify`] checks them.
    pub const ALL: [Missing; 9] = [
        Missing::NoNewPrivs,
        Missing::Landlock,
        Missing::Seccomp,
        Missing::ProcessLimit,
        Missing::FileSizeLimit,
        Missing::CoreLimit,
        Missing::AddressSpaceLimit,
        Missing::CpuLimit,
        Missing::OpenFilesLimit,
    ];
}

/// The parent's refusal of a worker whose sandbox lacks something required.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("worker sandbox not enforced: {}", codes(.missing))]
pub struct NotEnforced {
    /// What is lacking, in check order; never empty.
    pub missing: Vec<Missing>,
}

fn codes(missing: &[Missing]) -> String {
    missing
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Everything `enforcement` lacks that the parent requires, in check order.
fn shortfalls(enforcement: &Enforcement) -> Vec<Missing> {
    let mut missing = Vec::new();
    if !enforcement.no_new_privs {
        missing.push(Missing::NoNewPrivs);
    }
    match enforcement.landlock.status {
        LandlockStatus::FullyEnforced => {}
        // The ruleset asks for exactly the rights of the kernel's own ABI, so
        // anything short of all of them is an anomaly: fail closed.
        LandlockStatus::PartiallyEnforced | LandlockStatus::NotEnforced => {
            missing.push(Missing::Landlock)
        }
    }
    match enforcement.seccomp.status {
        SeccompStatus::Installed => {}
        SeccompStatus::NotInstalled => missing.push(Missing::Seccomp),
    }
    let limits = &enforcement.rlimits;
    if limits.processes != 0 {
        missing.push(Missing::ProcessLimit);
    }
    if limits.file_size_bytes != 0 {
        missing.push(Missing::FileSizeLimit);
    }
    if limits.core_bytes != 0 {
        missing.push(Missing::CoreLimit);
    }
    if limits.address_space_bytes == u64::MAX {
        missing.push(Missing::AddressSpaceLimit);
    }
    if limits.cpu_seconds == u64::MAX {
        missing.push(Missing::CpuLimit);
    }
    if limits.open_files == u64::MAX {
        missing.push(Missing::OpenFilesLimit);
    }
    missing
}

/// The parent's check of a worker's hello-frame report: refuses unless
/// `no_new_privs`, Landlock (fully enforced), seccomp and the fixed rlimits are
/// all in force. Namespaces are reported but not required.
///
/// `allow_unenforced` is the development switch (off by default): with it on,
/// every call logs a `warn!` that the switch is on, an `error!` naming what is
/// lacking if anything is, and accepts the worker.
pub fn verify(enforcement: &Enforcement, allow_unenforced: bool) -> Result<(), NotEnforced> {
    let missing = shortfalls(enforcement);
    match (missing.is_empty(), allow_unenforced) {
        (true, false) => Ok(()),
        (true, true) => {
            tracing::warn!(
                "sandbox development switch allow_unenforced is ON: a worker lacking \
                 Landlock or seccomp would be accepted; never run like this in production"
            );
            Ok(())
        }
        (false, true) => {
            tracing::warn!(
                "sandbox development switch allow_unenforced is ON: a worker lacking \
                 Landlock or seccomp would be accepted; never run like this in production"
            );
            tracing::error!(
                missing = %codes(&missing),
                "worker sandbox NOT ENFORCED; running it anyway because allow_unenforced is on"
            );
            Ok(())
        }
        (false, false) => {
            tracing::error!(missing = %codes(&missing), "worker sandbox not enforced; refused");
            Err(NotEnforced { missing })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enforced() -> Enforcement {
        Enforcement {
            fds: FdReport {
                inherited_closed: 0,
            },
            rlimits: RlimitReport {
                address_space_bytes: 1 << 30,
                cpu_seconds: 30,
                open_files: 8,
                processes: 0,
                file_size_bytes: 0,
                core_bytes: 0,
            },
            namespaces: NamespaceReport {
                user: false,
                network: false,
                mount: false,
                ipc: false,
            },
            no_new_privs: true,
            dumpable: false,
            landlock: LandlockReport {
                kernel_abi: Some(7),
                ruleset_abi: 7,
                status: LandlockStatus::FullyEnforced,
            },
            seccomp: SeccompReport {
                status: SeccompStatus::Installed,
                arch: SeccompArch::X86_64,
                allowed_syscalls: 27,
            },
        }
    }

    #[test]
    fn every_shortfall_has_a_distinct_code() {
        let mut codes: Vec<_> = Missing::ALL.iter().map(|m| m.as_str()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Missing::ALL.len());
    }

    #[test]
    fn namespaces_are_not_required() {
        assert_eq!(verify(&enforced(), false), Ok(()));
    }

    #[test]
    fn shortfalls_are_listed_in_check_order() {
        let mut e = enforced();
        e.no_new_privs = false;
        e.seccomp.status = SeccompStatus::NotInstalled;
        e.rlimits.cpu_seconds = u64::MAX;
        assert_eq!(
            shortfalls(&e),
            vec![Missing::NoNewPrivs, Missing::Seccomp, Missing::CpuLimit]
        );
    }
}
