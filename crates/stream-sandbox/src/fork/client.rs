//! The broker's side: starting a fork server and getting a child from it.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use crate::image::WorkerImage;
use crate::spawn::{
    SpawnError, SpawnLimits, StderrMode, WorkerChild, image_command, start_clean, supervise,
};
use crate::sys;

/// The longest a fork's answer may take (it takes well under a
/// millisecond): a server that does not answer is given up on, and the
/// caller spawns, long before the attempt's own deadline.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// A zero read timeout would mean none.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// A running fork server. Dropping it kills and reaps the server; children
/// it made are the caller's own and live on.
#[derive(Debug)]
pub struct ForkServer {
    server: Child,
    pid: libc::pid_t,
    socket: UnixStream,
    /// Every pid this server has answered and we accepted.
    seen: HashSet<libc::pid_t>,
}

/// Why a fork server's answer is not taken as a new child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PidRefusal {
    /// The server's own pid.
    #[error("the server's own pid")]
    ServerItself,
    /// A pid this server answered before.
    #[error("a pid it answered before")]
    AlreadySeen,
    /// The pid of a worker the caller already has (a parked spare or a
    /// running worker).
    #[error("the pid of a worker already in use")]
    InUse,
    /// Not a child of this process.
    #[error("not our child")]
    NotOurChild,
}

/// The one check of a fork server's answer before it is supervised: not
/// the server, never answered before, not a worker the caller has (a
/// server could otherwise hand us a pid we already hold and have it
/// killed or confused with a fresh child), and our own child.
fn vet_answer(
    pid: libc::pid_t,
    server: libc::pid_t,
    seen: &HashSet<libc::pid_t>,
    in_use: &dyn Fn(libc::pid_t) -> bool,
    our_child: impl FnOnce() -> Result<bool, i32>,
) -> Result<(), SpawnError> {
    let refused = |refusal| Err(SpawnError::PidRefused { refusal });
    if pid == server {
        return refused(PidRefusal::ServerItself);
    }
    if seen.contains(&pid) {
        return refused(PidRefusal::AlreadySeen);
    }
    if in_use(pid) {
        return refused(PidRefusal::InUse);
    }
    match our_child() {
        Ok(true) => Ok(()),
        Ok(false) => refused(PidRefusal::NotOurChild),
        Err(errno) => Err(SpawnError::Supervise {
            what: "waitid",
            errno,
        }),
    }
}

impl ForkServer {
    /// Starts `binary` with `args` (which must make it a fork server) and
    /// waits at most `ready_wait` for [`super::READY`]: an empty environment,
    /// `/` as working directory, stdin the socket, stdout and stderr
    /// `/dev/null`. A binary that exits or says anything else is refused.
    pub fn start(binary: &Path, args: &[&OsStr], ready_wait: Duration) -> Result<Self, SpawnError> {
        Self::launch(Command::new(binary), args, ready_wait)
    }

    /// [`ForkServer::start`] from a sealed [`WorkerImage`].
    pub fn start_image(
        image: &WorkerImage,
        args: &[&OsStr],
        ready_wait: Duration,
    ) -> Result<Self, SpawnError> {
        Self::launch(image_command(image), args, ready_wait)
    }

    fn launch(command: Command, args: &[&OsStr], ready_wait: Duration) -> Result<Self, SpawnError> {
        let socket_error = |_| SpawnError::Pipe {
            which: "fork socket",
        };
        let (socket, theirs) = UnixStream::pair().map_err(socket_error)?;
        // The server's end of the socket leaves this process with the
        // command, so that a server that dies before it is ready is seen to.
        let stdio = (
            Stdio::from(OwnedFd::from(theirs)),
            Stdio::null(),
            Stdio::null(),
        );
        let server = start_clean(command, args, stdio)?;
        let pid = libc::pid_t::try_from(server.id()).unwrap_or(0);
        let mut this = Self {
            server,
            pid,
            socket,
            seen: HashSet::new(),
        };
        this.socket
            .set_read_timeout(Some(ready_wait))
            .map_err(socket_error)?;
        let mut ready = [0u8; super::READY.len()];
        if this.socket.read_exact(&mut ready).is_err() || &ready != super::READY {
            return Err(SpawnError::Pipe {
                which: "fork server ready",
            });
        }
        Ok(this)
    }

    /// The server's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// [`ForkServer::fork_among`] for a caller that holds no other worker.
    pub fn fork(&mut self, limits: &SpawnLimits) -> Result<WorkerChild, SpawnError> {
        self.fork_among(limits, &|_| false)
    }

    /// One child of the server, supervised like a spawned worker: its
    /// wall clock runs from this call. Fails if the server does not answer
    /// within 5 s (or the wall clock, if shorter), or answers a pid
    /// `vet_answer` refuses (`in_use` says which pids the caller's other
    /// workers have); then the server should be dropped.
    pub fn fork_among(
        &mut self,
        limits: &SpawnLimits,
        in_use: &dyn Fn(libc::pid_t) -> bool,
    ) -> Result<WorkerChild, SpawnError> {
        let started = Instant::now();
        let pipe_error = |which| move |_: i32| SpawnError::Pipe { which };
        let (child_in, our_in) = sys::pipe().map_err(pipe_error("stdin"))?;
        let (our_out, child_out) = sys::pipe().map_err(pipe_error("stdout"))?;
        // Not captured: the read end goes at once, and the child's writes
        // fail (as a spawned worker's go nowhere).
        let (our_err, child_err) = sys::pipe().map_err(pipe_error("stderr"))?;
        let our_err = match limits.stderr {
            StderrMode::Null => None,
            StderrMode::Capture { .. } => Some(ChildStderr::from(our_err)),
        };
        let fds = [
            child_in.as_raw_fd(),
            child_out.as_raw_fd(),
            child_err.as_raw_fd(),
        ];
        sys::send_fds(self.socket.as_fd(), fds).map_err(|errno| SpawnError::Start { errno })?;
        drop((child_in, child_out, child_err));

        self.socket
            .set_read_timeout(Some(ANSWER_WAIT.min(limits.wall_clock).max(MIN_WAIT)))
            .map_err(|_| SpawnError::Pipe {
                which: "fork socket",
            })?;
        let mut answer = [0u8; 4];
        self.socket
            .read_exact(&mut answer)
            .map_err(|_| SpawnError::Pipe {
                which: "fork server answer",
            })?;
        let pid = i32::from_le_bytes(answer);
        if pid <= 0 {
            return Err(SpawnError::Start {
                errno: pid.checked_neg().unwrap_or(libc::EIO),
            });
        }
        let pidfd = sys::pidfd_open(pid).map_err(|errno| SpawnError::Supervise {
            what: "pidfd_open",
            errno,
        })?;
        vet_answer(pid, self.pid, &self.seen, in_use, || {
            sys::is_our_child(pidfd.as_fd())
        })?;
        self.seen.insert(pid);
        let pipes = (
            ChildStdin::from(our_in),
            ChildStdout::from(our_out),
            our_err,
        );
        supervise(started, pid, pidfd, pipes, limits).inspect_err(|_| {
            let _ = sys::wait4(pid);
        })
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per refusal, in the order they are checked.
    #[test]
    fn vet_answer_table() {
        let seen: HashSet<libc::pid_t> = [40].into();
        let in_use = |pid| pid == 50;
        let rows: [(libc::pid_t, bool, Option<PidRefusal>); 5] = [
            (7, true, Some(PidRefusal::ServerItself)),
            (40, true, Some(PidRefusal::AlreadySeen)),
            (50, true, Some(PidRefusal::InUse)),
            (60, false, Some(PidRefusal::NotOurChild)),
            (60, true, None),
        ];
        for (pid, ours, want) in rows {
            let got = match vet_answer(pid, 7, &seen, &in_use, || Ok(ours)) {
                Ok(()) => None,
                Err(SpawnError::PidRefused { refusal }) => Some(refusal),
                Err(other) => panic!("{pid}: {other}"),
            };
            assert_eq!(got, want, "pid {pid}");
        }
    }
}
