//! Stage d: `no_new_privs` and not dumpable.

use super::SandboxError;
use crate::sys;

fn prctl(
    option: libc::c_int,
    name: &'static str,
    value: libc::c_ulong,
) -> Result<(), SandboxError> {
    // SAFETY: both options take one integer argument and ignore the rest.
    let rc = unsafe {
        libc::prctl(
            option,
            value,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(SandboxError::Prctl {
            option: name,
            errno: sys::errno(),
        })
    }
}

fn get(option: libc::c_int, name: &'static str) -> Result<bool, SandboxError> {
    // SAFETY: the getters take no further arguments.
    let rc = unsafe {
        libc::prctl(
            option,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        return Err(SandboxError::Prctl {
            option: name,
            errno: sys::errno(),
        });
    }
    Ok(rc != 0)
}

/// Sets both and reads them back: `(no_new_privs, dumpable)`.
pub(super) fn restrict() -> Result<(bool, bool), SandboxError> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, "PR_SET_NO_NEW_PRIVS", 1)?;
    prctl(libc::PR_SET_DUMPABLE, "PR_SET_DUMPABLE", 0)?;
    Ok((
        get(libc::PR_GET_NO_NEW_PRIVS, "PR_GET_NO_NEW_PRIVS")?,
        get(libc::PR_GET_DUMPABLE, "PR_GET_DUMPABLE")?,
    ))
}
