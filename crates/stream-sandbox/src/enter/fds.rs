//! Stage a: only descriptors 0–2, and a single thread.

use super::SandboxError;
use crate::enforcement::FdReport;
use crate::sys;

/// Entries of a `/proc/self` folder. The listing itself holds one descriptor
/// while it runs.
fn count_entries(what: &'static str) -> Result<usize, SandboxError> {
    let dir = std::fs::read_dir(format!("/proc/self/{what}")).map_err(|e| {
        SandboxError::ProcUnavailable {
            what,
            errno: e.raw_os_error().unwrap_or(0),
        }
    })?;
    let mut n = 0;
    for entry in dir {
        entry.map_err(|e| SandboxError::ProcUnavailable {
            what,
            errno: e.raw_os_error().unwrap_or(0),
        })?;
        n += 1;
    }
    Ok(n)
}

/// Checks fds 0–2 and the thread count, then closes every descriptor from 3 up.
pub(super) fn close_inherited() -> Result<FdReport, SandboxError> {
    for fd in 0..=2 {
        if !sys::fd_is_open(fd) {
            return Err(SandboxError::StdioMissing { fd });
        }
    }
    let threads = count_entries("task")?;
    if threads != 1 {
        return Err(SandboxError::MultiThreaded { threads });
    }
    // 0, 1, 2 and the listing's own descriptor; anything else was inherited.
    let open = count_entries("fd")?;
    let inherited = open.saturating_sub(4);
    sys::close_range_from(3, 0).map_err(|errno| SandboxError::CloseInherited { errno })?;
    Ok(FdReport {
        inherited_closed: u32::try_from(inherited).unwrap_or(u32::MAX),
    })
}
