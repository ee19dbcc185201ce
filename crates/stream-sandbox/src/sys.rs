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

/// Bytes of ancillary data for [`FDS_PASSED`] descriptors.
fn fd_control_space() -> usize {
    let payload = u32::try_from(std::mem::size_of::<[RawFd; FDS_PASSED]>()).unwrap_or(u32::MAX);
    // SAFETY: CMSG_SPACE is a pure computation on its argument.
    usize::try_from(unsafe { libc::CMSG_SPACE(payload) }).unwrap_or(usize::MAX)
}

/// An iovec over `byte`.
fn one_byte(byte: &mut [u8; 1]) -> libc::iovec {
    libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    }
}

/// A message of one iovec and a control buffer. The pointers it holds are
/// valid as long as `iov` and `control` are.
fn message(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() as _;
    msg
}

/// How many descriptors a fork server's child gets: stdin, stdout, stderr.
pub(crate) const FDS_PASSED: usize = 3;

/// `sendmsg` of one byte carrying `fds` (`SCM_RIGHTS`) on `sock`.
pub(crate) fn send_fds(sock: BorrowedFd<'_>, fds: [RawFd; FDS_PASSED]) -> Result<(), i32> {
    let mut byte = [b'f'];
    let mut iov = one_byte(&mut byte);
    let mut control = vec![0u8; fd_control_space()];
    let msg = message(&mut iov, &mut control);
    let payload = u32::try_from(std::mem::size_of_val(&fds)).unwrap_or(u32::MAX);
    // SAFETY: the control buffer was sized by CMSG_SPACE for this payload, so
    // it holds one header and the descriptors.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(libc::EINVAL);
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr(),
            libc::CMSG_DATA(cmsg).cast::<RawFd>(),
            FDS_PASSED,
        );
    }
    loop {
        // SAFETY: a valid socket and a message whose buffers outlive the call.
        let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        match rc {
            1 => return Ok(()),
            -1 if errno() == libc::EINTR => {}
            -1 => return Err(errno()),
            _ => return Err(libc::EIO),
        }
    }
}

/// `recvmsg` of one byte and exactly [`FDS_PASSED`] descriptors (marked
/// close-on-exec) on `sock`; `Ok(None)` at end-of-file. Anything else that
/// arrives is closed and is an error.
pub(crate) fn recv_fds(sock: RawFd) -> Result<Option<[OwnedFd; FDS_PASSED]>, i32> {
    let mut byte = [0u8; 1];
    let mut iov = one_byte(&mut byte);
    let mut control = vec![0u8; fd_control_space()];
    let mut msg = message(&mut iov, &mut control);
    let rc = loop {
        // SAFETY: a message whose buffers outlive the call.
        let rc = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if rc != -1 || errno() != libc::EINTR {
            break rc;
        }
    };
    if rc == -1 {
        return Err(errno());
    }
    let mut received = Vec::new();
    // SAFETY: the kernel filled the control buffer and set its length; each
    // SCM_RIGHTS descriptor is new and ours alone.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*cmsg).cmsg_len as usize).saturating_sub(header)
                    / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..count {
                    received.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if rc == 0 && received.is_empty() {
        return Ok(None);
    }
    let truncated = msg.msg_flags & libc::MSG_CTRUNC != 0;
    match <[OwnedFd; FDS_PASSED]>::try_from(received) {
        Ok(fds) if rc == 1 && !truncated => Ok(Some(fds)),
        Ok(_) | Err(_) => Err(libc::EPROTO),
    }
}

/// Whether the process behind `pidfd` is a child of this process (ended or
/// not): `waitid(P_PIDFD, …, WNOHANG | WNOWAIT)` reaps nothing and fails
/// with `ECHILD` for any other process.
pub(crate) fn is_our_child(pidfd: BorrowedFd<'_>) -> Result<bool, i32> {
    // SAFETY: siginfo_t is plain old data; all-zero is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let id = libc::id_t::try_from(pidfd.as_raw_fd()).map_err(|_| libc::EBADF)?;
    loop {
        // SAFETY: a pointer to a live siginfo_t.
        let rc = unsafe {
            libc::waitid(
                libc::P_PIDFD,
                id,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        match rc {
            0 => return Ok(true),
            _ if errno() == libc::ECHILD => return Ok(false),
            _ if errno() == libc::EINTR => {}
            _ => return Err(errno()),
        }
    }
}

/// `dup3(from, to, 0)`: `to` now names what `from` names, inheritable.
pub(crate) fn dup_onto(from: RawFd, to: RawFd) -> Result<(), i32> {
    // SAFETY: integer descriptors; dup3 closes `to` first if it is open.
    if unsafe { libc::dup3(from, to, 0) } == to {
        Ok(())
    } else {
        Err(errno())
    }
}

/// A fork whose child is this process's parent's child (`CLONE_PARENT`),
/// exiting with `SIGCHLD`: 0 in the child, its pid in the caller.
///
/// Only for a single-threaded caller. The raw `clone` skips libc's fork
/// handlers, which reset locks other threads might hold: with one thread,
/// none is held. The child's cached thread id stays the parent's, which
/// only `raise`/`abort` would use (and the server's filter refuses that
/// signal anyway).
pub(crate) fn fork_sibling() -> Result<libc::pid_t, i32> {
    let flags =
        libc::c_ulong::try_from(libc::CLONE_PARENT | libc::SIGCHLD).map_err(|_| libc::EINVAL)?;
    // SAFETY: without CLONE_VM the child gets its own copy of the address
    // space; null stack and tid pointers mean fork semantics.
    let rc = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    match libc::pid_t::try_from(rc) {
        Ok(-1) | Err(_) => Err(errno()),
        Ok(pid) => Ok(pid),
    }
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), i32> {
    let mut fds = [0; 2];
    // SAFETY: a pointer to two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(errno());
    }
    // SAFETY: two new descriptors; we are their only owner.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Fills `buf` from the kernel's random source (`getrandom`, blocking only
/// until it is seeded, which it is long before a fork server runs).
pub(crate) fn fill_random(buf: &mut [u8]) -> Result<(), i32> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: a live buffer and its length.
        let rc = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(rc) {
            Ok(n) => filled += n,
            Err(_) if errno() == libc::EINTR => {}
            Err(_) => return Err(errno()),
        }
    }
    Ok(())
}
