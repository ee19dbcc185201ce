//! Stage b: resource limits, soft = hard so that they cannot be raised again.

use super::{Role, SandboxError};
use crate::enforcement::RlimitReport;
use crate::policy::Policy;
use crate::sys;

/// Fds 0–2 plus the transient Landlock ruleset descriptor.
const MIN_OPEN_FILES: u64 = 4;
/// Below this the Rust runtime and a worker cannot even start parsing.
const MIN_ADDRESS_SPACE: u64 = 64 << 20;

/// The type glibc and musl give the `RLIMIT_*` constants.
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn set(resource: Resource, name: &'static str, soft: u64, hard: u64) -> Result<u64, SandboxError> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: a pointer to a live rlimit.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(SandboxError::Rlimit {
            resource: name,
            errno: sys::errno(),
        });
    }
    current(resource, name)
}

/// The soft limit in force.
fn current(resource: Resource, name: &'static str) -> Result<u64, SandboxError> {
    let mut read = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a pointer to a live rlimit.
    if unsafe { libc::getrlimit(resource, &mut read) } != 0 {
        return Err(SandboxError::Rlimit {
            resource: name,
            errno: sys::errno(),
        });
    }
    Ok(read.rlim_cur)
}

/// The limits of `policy`; `RLIMIT_NPROC` 0 for a worker, left as it is
/// (and reported as read) for a fork server, which must fork.
pub(super) fn apply(policy: &Policy, role: Role) -> Result<RlimitReport, SandboxError> {
    if policy.open_files < MIN_OPEN_FILES {
        return Err(SandboxError::PolicyTooTight {
            resource: "RLIMIT_NOFILE",
            value: policy.open_files,
            minimum: MIN_OPEN_FILES,
        });
    }
    if policy.address_space_bytes < MIN_ADDRESS_SPACE {
        return Err(SandboxError::PolicyTooTight {
            resource: "RLIMIT_AS",
            value: policy.address_space_bytes,
            minimum: MIN_ADDRESS_SPACE,
        });
    }
    if policy.cpu_seconds == 0 {
        return Err(SandboxError::PolicyTooTight {
            resource: "RLIMIT_CPU",
            value: 0,
            minimum: 1,
        });
    }
    let as_bytes = policy.address_space_bytes;
    let cpu = policy.cpu_seconds;
    let files = policy.open_files;
    Ok(RlimitReport {
        address_space_bytes: set(libc::RLIMIT_AS, "RLIMIT_AS", as_bytes, as_bytes)?,
        cpu_seconds: set(libc::RLIMIT_CPU, "RLIMIT_CPU", cpu, cpu.saturating_add(1))?,
        open_files: set(libc::RLIMIT_NOFILE, "RLIMIT_NOFILE", files, files)?,
        processes: match role {
            Role::Worker => no_processes()?,
            Role::ForkServer => current(libc::RLIMIT_NPROC, "RLIMIT_NPROC")?,
        },
        file_size_bytes: set(libc::RLIMIT_FSIZE, "RLIMIT_FSIZE", 0, 0)?,
        core_bytes: set(libc::RLIMIT_CORE, "RLIMIT_CORE", 0, 0)?,
    })
}

/// `RLIMIT_NPROC` 0: a worker (or a fork server's child) makes no process.
pub(super) fn no_processes() -> Result<u64, SandboxError> {
    set(libc::RLIMIT_NPROC, "RLIMIT_NPROC", 0, 0)
}
