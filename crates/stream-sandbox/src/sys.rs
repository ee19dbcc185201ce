//! The few raw Linux calls this crate makes, each wrapped once with its
//! safety argument. Errors are plain errnos; callers name what failed.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// The calling thread's errno after a failed call.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `close_range(first, ~0, flags)`: closes (or, with `CLOSE_RANGE_CLOEXEC`,
/// marks close-on-exec) every descriptor from `first` up.
///
/// One syscall, no allocation.
pub(crate) fn close_range_from(first: u32, flags: u32) -> Result<(), i32> {
    // SAFETY: close_range takes plain integers. Closing descriptors that Rust
    // objects own would be unsound only if those objects were used afterwards;
    // the parent only marks (`CLOSE_RANGE_CLOEXEC`, nothing closes), and the
    // worker closes at start-up before any descriptor above 2 is owned by
    // anything.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, flags) };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// Whether descriptor `fd` is open.
pub(crate) fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads the descriptor flags; an invalid fd gives EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// Sets `O_NONBLOCK` on our end of a pipe (a pipe's two ends are separate open
/// file descriptions, so the child's end is unaffected).
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<(), i32> {
    let raw = fd.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor we borrow; no memory is involved.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags == -1 {
        return Err(errno());
    }
    // SAFETY: as above.
    let rc = unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    if rc == -1 { Err(errno()) } else { Ok(()) }
}

/// Waits until `fd` has one of `events` (or hang-up/error), or `deadline`
/// passes. `Ok(true)` when ready, `Ok(false)` at the deadline.
pub(crate) fn poll_until(fd: BorrowedFd<'_>, events: i16, deadline: Instant) -> Result<bool, i32> {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(false);
        }
        let left = deadline - now;
        // Round up so that a sub-millisecond remainder still waits.
        let ms = left
            .as_millis()
            .saturating_add(u128::from(!left.subsec_nanos().is_multiple_of(1_000_000)));
        let timeout = i32::try_from(ms).unwrap_or(i32::MAX);
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, length 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout) };
        match rc {
            -1 => {
                let e = errno();
                if e != libc::EINTR {
                    return Err(e);
                }
            }
            0 => {}
            _ => return Ok(true),
        }
    }
}

/// Whether `fd` has one of `events` (or hang-up/error) right now.
pub(crate) fn poll_now(fd: BorrowedFd<'_>, events: i16) -> Result<bool, i32> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd, length 1; a zero timeout never blocks.
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        match rc {
            -1 => {
                let e = errno();
                if e != libc::EINTR {
                    return Err(e);
                }
            }
            0 => return Ok(false),
            _ => return Ok(true),
        }
    }
}

/// `pidfd_open(pid, 0)`: a descriptor naming this exact process, immune to
/// pid reuse.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd, i32> {
    // SAFETY: plain integer arguments.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if rc < 0 {
        return Err(errno());
    }
    let fd = RawFd::try_from(rc).map_err(|_| libc::EBADF)?;
    // SAFETY: the kernel just returned this new descriptor; we are its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pidfd_send_signal(pidfd, SIGKILL)`. A process already reaped gives
/// `ESRCH`, never another process.
pub(crate) fn pidfd_kill(pidfd: BorrowedFd<'_>) -> Result<(), i32> {
    // SAFETY: a borrowed valid descriptor, a null siginfo and zero flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// `wait4(pid, 0)`: blocks until the child ends; its status and rusage.
pub(crate) fn wait4(pid: libc::pid_t) -> Result<(i32, libc::rusage), i32> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pointers to two live locals.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            return Ok((status, usage));
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC)`: an
/// anonymous file that can be sealed and executed. Kernels before 6.3 do not
/// know `MFD_EXEC` (there every memfd is executable): retried without it.
pub(crate) fn memfd_create_sealable(name: &std::ffi::CStr) -> Result<OwnedFd, i32> {
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    for flags in [base | libc::MFD_EXEC, base] {
        // SAFETY: a valid NUL-terminated name and integer flags.
        let rc = unsafe { libc::memfd_create(name.as_ptr(), flags) };
        if rc >= 0 {
            // SAFETY: the kernel just returned this new descriptor; we are its
            // only owner.
            return Ok(unsafe { OwnedFd::from_raw_fd(rc) });
        }
        let e = errno();
        if e != libc::EINVAL {
            return Err(e);
        }
    }
    Err(libc::EINVAL)
}

/// Seals a memfd against every change: no write, no resize, no new seal.
pub(crate) fn seal_all(fd: RawFd) -> Result<(), i32> {
    let seals = libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS with integer flags on a descriptor the caller owns.
    let rc = unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) };
    if rc == -1 { Err(errno()) } else { Ok(()) }
}
