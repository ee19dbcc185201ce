//! The fork server's side: the loop that makes one child per message.

use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::AssertUnwindSafe;

use crate::enforcement::Enforcement;
use crate::enter::{SandboxError, narrow_child};
use crate::policy::Policy;
use crate::sys;

/// The server's end of the broker's socket.
const SOCKET: i32 = 0;

/// Exit status of a child whose descriptors could not be put on 0–2: it
/// has no stdout to say so on.
const EXIT_NO_STDIO: i32 = 125;

/// Exit status of a child whose attempt panicked (a Rust `main`'s).
const EXIT_PANIC: i32 = 101;

/// Exit status of a child that could not get a canary of its own: it must
/// not run with its siblings'.
const EXIT_NO_RESEED: i32 = 124;

/// Serves forks until the broker closes the socket (`Ok`), after
/// [`crate::enter_fork_server`] returned `server` with `policy`.
///
/// In each child, `attempt` is called once with the child's own report (or
/// why narrowing failed, and then it must only report that), with the
/// child's pipes on 0–2; the child exits with the code it returns. The
/// server itself never calls `attempt`.
pub fn serve_forks(
    policy: &Policy,
    server: &Enforcement,
    mut attempt: impl FnMut(Result<Enforcement, SandboxError>) -> u8,
) -> Result<(), SandboxError> {
    let fail = |what: &'static str| move |errno| SandboxError::ForkServer { what, errno };
    write_all(super::READY).map_err(fail("ready"))?;
    loop {
        let fds = match sys::recv_fds(SOCKET) {
            Ok(Some(fds)) => fds,
            Ok(None) => return Ok(()),
            Err(errno) => return Err(fail("recvmsg")(errno)),
        };
        let answer = match sys::fork_sibling() {
            Ok(0) => {
                if super::reseed::reseed().is_err() {
                    std::process::exit(EXIT_NO_RESEED);
                }
                // A panic ends the child here, with a fixed status, instead
                // of unwinding through the server's frames in the child.
                let code = match stdio_from(fds) {
                    Ok(()) => std::panic::catch_unwind(AssertUnwindSafe(|| {
                        attempt(narrow_child(policy, server))
                    }))
                    .map_or(EXIT_PANIC, i32::from),
                    Err(_) => EXIT_NO_STDIO,
                };
                std::process::exit(code);
            }
            Ok(pid) => pid,
            Err(errno) => -errno,
        };
        drop(fds);
        write_all(&answer.to_le_bytes()).map_err(fail("pid"))?;
    }
}

/// In the child: the three descriptors on 0–2 (the socket on 0 goes with
/// it), nothing else open.
fn stdio_from(fds: [OwnedFd; sys::FDS_PASSED]) -> Result<(), i32> {
    for (to, fd) in (0..).zip(&fds) {
        sys::dup_onto(fd.as_raw_fd(), to)?;
    }
    drop(fds);
    // Nothing in the fork server owns a descriptor above 2 but these.
    sys::close_range_from(3, 0)
}

fn write_all(mut bytes: &[u8]) -> Result<(), i32> {
    while !bytes.is_empty() {
        // SAFETY: a live buffer and its length.
        let rc = unsafe { libc::write(SOCKET, bytes.as_ptr().cast(), bytes.len()) };
        match usize::try_from(rc) {
            Ok(0) => return Err(libc::EPIPE),
            Ok(n) => bytes = &bytes[n.min(bytes.len())..],
            Err(_) if sys::errno() == libc::EINTR => {}
            Err(_) => return Err(sys::errno()),
        }
    }
    Ok(())
}
