//! The parent side: spawning the worker and supervising it.
//!
//! One [`WorkerChild`] per worker process. A watchdog thread kills the child
//! at its wall-clock deadline whatever the parent is doing; every read and
//! write on the pipes, and every wait, also stops at that deadline, so a
//! parent that only reads and waits to the end may stop the watchdog early
//! ([`WorkerChild::stop_watchdog`]). A child parked as a spare
//! ([`crate::ParkedWorker`]) has its clock stopped, and restarted in full
//! when it is taken. Reads count every byte
//! that arrives on stdout and kill the child the moment the count passes the
//! output cap. Kills go through a pidfd, so a reaped child's pid, even if
//! reused, is never signalled.
//!
//! Bytes that pass through here (frames, stderr) may be sensitive: nothing in
//! this module logs them, and no error or `Debug` output carries them.

use std::ffi::OsStr;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::image::WorkerImage;
use crate::sys;

/// What happens to the child's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StderrMode {
    /// Connected to `/dev/null`.
    Null,
    /// Piped and kept, at most `cap` bytes; more kills the child for output.
    Capture {
        /// The most stderr bytes kept.
        cap: usize,
    },
}

/// The parent's limits on one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnLimits {
    /// From spawn to kill, whatever happens in between.
    pub wall_clock: Duration,
    /// The most stdout bytes the child may write in its whole life; one more
    /// and it is killed.
    pub output_cap: u64,
    /// The longest line (frame) [`WorkerChild::read_line`] returns, newline
    /// excluded; longer kills the child for output.
    pub line_cap: usize,
    /// What happens to stderr.
    pub stderr: StderrMode,
}

impl Default for SpawnLimits {
    fn default() -> Self {
        Self {
            wall_clock: Duration::from_secs(120),
            output_cap: 8 << 20,
            line_cap: 4 << 20,
            stderr: StderrMode::Null,
        }
    }
}

/// Why the child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `fork`/`exec` failed (missing binary, not executable, no
    /// `close_range`, …).
    #[error("worker could not be started (errno {errno})")]
    Start {
        /// The errno reported by the launch.
        errno: i32,
    },
    /// A pipe of the child was missing after spawn.
    #[error("worker pipe {which} missing after spawn")]
    Pipe {
        /// `stdin`, `stdout` or `stderr`.
        which: &'static str,
    },
    /// Setting up supervision failed; the child has been killed and reaped.
    #[error("worker supervision could not be set up: {what} (errno {errno})")]
    Supervise {
        /// What failed.
        what: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// A fork server answered a pid it cannot have just made; the server
    /// must be dropped (`crate::fork::vet_answer` says why).
    #[error("fork server answered a pid it cannot have made: {refusal}")]
    PidRefused {
        /// Why.
        refusal: crate::fork::PidRefusal,
    },
}

/// Why a read, write or wait on the child failed. Never carries the bytes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChildIoError {
    /// The deadline passed; the child has been killed.
    #[error("worker deadline passed; killed")]
    TimedOut,
    /// The child wrote more than the output cap; it has been killed.
    #[error("worker wrote more than {cap} bytes; killed")]
    OutputCapExceeded {
        /// The cap.
        cap: u64,
    },
    /// A line longer than the line cap; the child has been killed.
    #[error("worker line longer than {cap} bytes; killed")]
    LineTooLong {
        /// The cap.
        cap: usize,
    },
    /// The child was already killed for output (its stderr passed its cap,
    /// or an earlier read passed the output or line cap).
    #[error("worker was killed for output")]
    KilledForOutput,
    /// Stdout ended in the middle of a line.
    #[error("worker output ended inside a line of {bytes} bytes")]
    UnterminatedLine {
        /// Bytes after the last newline.
        bytes: usize,
    },
    /// A line to send contains a newline (frames are single lines).
    #[error("line to send contains a newline")]
    LineContainsNewline,
    /// The child no longer reads its stdin (it exited or closed it).
    #[error("worker stdin is closed")]
    StdinClosed,
    /// Any other I/O failure.
    #[error("worker {what} failed (errno {errno})")]
    Io {
        /// What failed.
        what: &'static str,
        /// Its errno.
        errno: i32,
    },
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// A signal the parent did not send ended it (e.g. `SIGSYS`, `SIGXCPU`,
    /// `SIGSEGV`, `SIGABRT`).
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// Killed by the parent at the wall-clock or read/wait deadline.
    KilledForTime,
    /// Killed by the parent for writing more than the output or line cap.
    KilledForOutput,
    /// Killed at the parent's request ([`WorkerChild::kill`] or drop).
    KilledByParent,
}

/// The end of a child: how, and what it used (from `wait4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// How it ended.
    pub ending: Ending,
    /// Peak resident set size (`ru_maxrss`), KiB, as the kernel reports it:
    /// the larger of the worker's own peak and the parent's anonymous memory
    /// copied into the child at fork (the kernel folds the pre-`exec` image's
    /// high-water mark in). An upper bound on the worker's own peak.
    pub peak_rss_kib: u64,
    /// User CPU time.
    pub user_cpu: Duration,
    /// System CPU time.
    pub system_cpu: Duration,
}

/// Why the parent killed the child; the first reason recorded wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum KillReason {
    Time = 1,
    Output = 2,
    Parent = 3,
}

const NO_KILL: u8 = 0;

impl KillReason {
    fn decode(raw: u8) -> Option<Self> {
        [Self::Time, Self::Output, Self::Parent]
            .into_iter()
            .find(|r| *r as u8 == raw)
    }
}

/// What the watchdog is told: a new deadline (`None`: the clock is stopped,
/// the child is parked and no I/O happens), or that the child is reaped.
enum Watch {
    Until(Option<Instant>),
    Stop,
}

/// The one place that kills the child: records the first reason, then SIGKILL.
#[derive(Debug)]
struct Killer {
    pidfd: OwnedFd,
    reason: AtomicU8,
}

impl Killer {
    fn kill(&self, reason: KillReason) {
        let _first =
            self.reason
                .compare_exchange(NO_KILL, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
        // ESRCH (already reaped) is the only expected failure and harmless.
        let _ = sys::pidfd_kill(self.pidfd.as_fd());
    }

    fn reason(&self) -> Option<KillReason> {
        KillReason::decode(self.reason.load(Ordering::SeqCst))
    }
}

/// A running (or ended) worker. Dropping it kills and reaps the child.
pub struct WorkerChild {
    pid: libc::pid_t,
    killer: Arc<Killer>,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    pending: Vec<u8>,
    stdout_eof: bool,
    received: u64,
    output_cap: u64,
    line_cap: usize,
    deadline: Instant,
    watchdog: Option<(Sender<Watch>, JoinHandle<()>)>,
    stderr: Option<Receiver<Vec<u8>>>,
    stderr_bytes: Vec<u8>,
    ended: Option<Ended>,
}

impl std::fmt::Debug for WorkerChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerChild")
            .field("pid", &self.pid)
            .field("received", &self.received)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// Marks every descriptor of the parent from 3 up close-on-exec, just
/// before a spawn, so the child inherits only the pipes `Command` puts on
/// 0–2. In the parent rather than in a `pre_exec` hook: a hook makes the
/// standard library fork (copying the page tables of the whole parent, and
/// write-protecting every page it then writes: about a sixth of a running
/// `serve`'s CPU) instead of `posix_spawn`. The parent never executes
/// anything else, so the mark changes nothing for it. A descriptor that
/// another thread opens without close-on-exec between this mark and the
/// spawn would reach the worker, whose sandbox entry closes every
/// descriptor from 3 up before it reads anything and reports how many.
fn inherit_only_stdio() -> Result<(), SpawnError> {
    sys::close_range_from(3, libc::CLOSE_RANGE_CLOEXEC).map_err(|errno| SpawnError::Start { errno })
}

/// Starts `binary` with `args` as a worker: an empty environment, `/` as
/// working directory, only fds 0–2 (stdin and stdout piped, stderr per
/// `limits`), and the wall-clock deadline armed.
pub fn spawn(
    binary: &Path,
    args: &[&OsStr],
    limits: &SpawnLimits,
) -> Result<WorkerChild, SpawnError> {
    start(Instant::now(), Command::new(binary), args, limits)
}

/// [`spawn`] from a sealed [`WorkerImage`]: the child executes the image's
/// descriptor (its `argv[0]` is the file it was loaded from), never a path
/// on disk.
pub fn spawn_image(
    image: &WorkerImage,
    args: &[&OsStr],
    limits: &SpawnLimits,
) -> Result<WorkerChild, SpawnError> {
    start(Instant::now(), image_command(image), args, limits)
}

/// A command that executes `image`'s descriptor with its `argv[0]`.
pub(crate) fn image_command(image: &WorkerImage) -> Command {
    let (exec, arg0) = image.exec_path();
    let mut command = Command::new(exec);
    command.arg0(arg0);
    command
}

/// The one way a worker process (or a fork server) is started: `args`, an
/// empty environment, `/` as working directory, `stdio` on 0–2 and nothing
/// else inherited. The command (which may hold descriptors handed to the
/// child) is dropped before this returns.
pub(crate) fn start_clean(
    mut command: Command,
    args: &[&OsStr],
    (stdin, stdout, stderr): (Stdio, Stdio, Stdio),
) -> Result<std::process::Child, SpawnError> {
    command
        .args(args)
        .env_clear()
        .current_dir("/")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr);
    inherit_only_stdio()?;
    command.spawn().map_err(|e| SpawnError::Start {
        errno: e.raw_os_error().unwrap_or(0),
    })
}

fn start(
    started: Instant,
    command: Command,
    args: &[&OsStr],
    limits: &SpawnLimits,
) -> Result<WorkerChild, SpawnError> {
    let stderr = match limits.stderr {
        StderrMode::Null => Stdio::null(),
        StderrMode::Capture { .. } => Stdio::piped(),
    };
    let mut child = start_clean(command, args, (Stdio::piped(), Stdio::piped(), stderr))?;
    let pid = libc::pid_t::try_from(child.id()).map_err(|_| SpawnError::Supervise {
        what: "pid out of range",
        errno: 0,
    })?;

    // Until the pidfd exists, a failure kills through std (the child is
    // unreaped, so its pid cannot have been reused).
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(errno) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SpawnError::Supervise {
                what: "pidfd_open",
                errno,
            });
        }
    };
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), stderr) = pipes else {
        let _ = sys::pidfd_kill(pidfd.as_fd());
        let _ = child.wait();
        return Err(SpawnError::Pipe {
            which: "stdin/stdout",
        });
    };
    supervise(started, pid, pidfd, (stdin, stdout, stderr), limits).inspect_err(|_| {
        let _ = child.wait();
    })
}

/// A started child's pipes: stdin, stdout, and stderr when captured.
pub(crate) type Pipes = (ChildStdin, ChildStdout, Option<ChildStderr>);

/// Supervision of a started, unreaped child (spawned, or forked by a
/// [`crate::ForkServer`]): its stdin and stdout non-blocking, its stderr
/// read and capped, its watchdog armed at `started + limits.wall_clock`.
/// On `Err` the child has been killed; the caller reaps it.
pub(crate) fn supervise(
    started: Instant,
    pid: libc::pid_t,
    pidfd: OwnedFd,
    (stdin, stdout, stderr): Pipes,
    limits: &SpawnLimits,
) -> Result<WorkerChild, SpawnError> {
    let killer = Arc::new(Killer {
        pidfd,
        reason: AtomicU8::new(NO_KILL),
    });
    let fail = |what: &'static str, errno: i32| {
        killer.kill(KillReason::Parent);
        SpawnError::Supervise { what, errno }
    };
    let deadline = started + limits.wall_clock;
    for fd in [stdin.as_fd(), stdout.as_fd()] {
        if let Err(errno) = sys::set_nonblocking(fd) {
            return Err(fail("O_NONBLOCK", errno));
        }
    }

    let stderr = match (limits.stderr, stderr) {
        (StderrMode::Null, _) => None,
        (StderrMode::Capture { cap }, Some(pipe)) => {
            Some(start_stderr_reader(pipe, cap, killer.clone()))
        }
        (StderrMode::Capture { .. }, None) => return Err(fail("stderr pipe", 0)),
    };

    let (stop, stopped) = mpsc::channel::<Watch>();
    let dog_killer = killer.clone();
    let watchdog = std::thread::Builder::new()
        .name("worker-watchdog".into())
        .spawn(move || watch(&stopped, deadline, &dog_killer));
    let watchdog = match watchdog {
        Ok(handle) => handle,
        Err(e) => return Err(fail("watchdog thread", e.raw_os_error().unwrap_or(0))),
    };

    Ok(WorkerChild {
        pid,
        killer,
        stdin: Some(stdin),
        stdout,
        pending: Vec::new(),
        stdout_eof: false,
        received: 0,
        output_cap: limits.output_cap,
        line_cap: limits.line_cap,
        deadline,
        watchdog: Some((stop, watchdog)),
        stderr,
        stderr_bytes: Vec::new(),
        ended: None,
    })
}

/// The watchdog: kills for time at the deadline in force. A stopped clock
/// blocks on the channel alone (no wake-ups while a spare is parked).
fn watch(orders: &Receiver<Watch>, deadline: Instant, killer: &Killer) {
    let mut until = Some(deadline);
    loop {
        let order = match until {
            Some(at) => orders.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => orders.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match order {
            Ok(Watch::Until(next)) => until = next,
            Err(RecvTimeoutError::Timeout) => {
                killer.kill(KillReason::Time);
                return;
            }
            Ok(Watch::Stop) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Reads stderr on its own thread (so a chatty child never blocks on a full
/// pipe), keeps at most `cap` bytes, and kills the child for output past it.
fn start_stderr_reader(
    mut pipe: ChildStderr,
    cap: usize,
    killer: Arc<Killer>,
) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let reader = move || {
        let mut kept = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    if kept.len() + n > cap {
                        let room = cap - kept.len();
                        kept.extend_from_slice(&chunk[..room]);
                        killer.kill(KillReason::Output);
                        break;
                    }
                    kept.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(kept);
    };
    // Without a thread, stderr is simply dropped (the child then gets EPIPE);
    // supervision does not depend on it.
    let _ = std::thread::Builder::new()
        .name("worker-stderr".into())
        .spawn(reader);
    rx
}

impl WorkerChild {
    /// The child's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Bytes received on stdout so far.
    pub fn bytes_received(&self) -> u64 {
        self.received
    }

    fn violate(&self, reason: KillReason) {
        self.killer.kill(reason);
    }

    /// When the child's pipes closed because the parent killed it for a
    /// violation, that violation is the answer, not "end of output".
    fn violation(&self) -> Option<ChildIoError> {
        match self.killer.reason() {
            Some(KillReason::Time) => Some(ChildIoError::TimedOut),
            Some(KillReason::Output) => Some(ChildIoError::KilledForOutput),
            Some(KillReason::Parent) | None => None,
        }
    }

    /// Writes `line` and a newline to the child's stdin, waiting for room at
    /// most until the wall-clock deadline (then the child is killed).
    pub fn write_line(&mut self, line: &[u8]) -> Result<(), ChildIoError> {
        if line.contains(&b'\n') {
            return Err(ChildIoError::LineContainsNewline);
        }
        // One write, so the child wakes once per frame rather than twice.
        let mut framed = Vec::with_capacity(line.len() + 1);
        framed.extend_from_slice(line);
        framed.push(b'\n');
        self.write_all(&framed)
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<(), ChildIoError> {
        let deadline = self.deadline;
        while !bytes.is_empty() {
            let stdin = self.stdin.as_mut().ok_or(ChildIoError::StdinClosed)?;
            match stdin.write(bytes) {
                Ok(0) => return Err(ChildIoError::StdinClosed),
                Ok(n) => bytes = &bytes[n..],
                Err(e) => match e.kind() {
                    ErrorKind::WouldBlock => {
                        let ready = sys::poll_until(stdin.as_fd(), libc::POLLOUT, deadline)
                            .map_err(|errno| ChildIoError::Io {
                                what: "poll stdin",
                                errno,
                            })?;
                        if !ready {
                            self.violate(KillReason::Time);
                            return Err(ChildIoError::TimedOut);
                        }
                    }
                    ErrorKind::Interrupted => {}
                    ErrorKind::BrokenPipe => {
                        return Err(self.violation().unwrap_or(ChildIoError::StdinClosed));
                    }
                    _ => {
                        return Err(ChildIoError::Io {
                            what: "write stdin",
                            errno: e.raw_os_error().unwrap_or(0),
                        });
                    }
                },
            }
        }
        Ok(())
    }

    /// Closes the child's stdin (it then reads end-of-file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Reads one line from the child's stdout, without its newline, waiting at
    /// most `max_wait` (and never past the wall-clock deadline). `Ok(None)` at
    /// end of output. Passing the wait, the output cap or the line cap kills
    /// the child; output that ends because the child was killed for a
    /// violation reports that violation.
    pub fn read_line(&mut self, max_wait: Duration) -> Result<Option<Vec<u8>>, ChildIoError> {
        let deadline = (Instant::now() + max_wait).min(self.deadline);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                if pos > self.line_cap {
                    self.violate(KillReason::Output);
                    return Err(ChildIoError::LineTooLong { cap: self.line_cap });
                }
                let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
                line.pop();
                return Ok(Some(line));
            }
            if self.pending.len() > self.line_cap {
                self.violate(KillReason::Output);
                return Err(ChildIoError::LineTooLong { cap: self.line_cap });
            }
            if self.stdout_eof {
                if let Some(violation) = self.violation() {
                    return Err(violation);
                }
                return if self.pending.is_empty() {
                    Ok(None)
                } else {
                    Err(ChildIoError::UnterminatedLine {
                        bytes: self.pending.len(),
                    })
                };
            }
            let ready =
                sys::poll_until(self.stdout.as_fd(), libc::POLLIN, deadline).map_err(|errno| {
                    ChildIoError::Io {
                        what: "poll stdout",
                        errno,
                    }
                })?;
            if !ready {
                self.violate(KillReason::Time);
                return Err(ChildIoError::TimedOut);
            }
            match self.stdout.read(&mut chunk) {
                Ok(0) => self.stdout_eof = true,
                Ok(n) => {
                    self.received = self.received.saturating_add(n as u64);
                    if self.received > self.output_cap {
                        self.violate(KillReason::Output);
                        return Err(ChildIoError::OutputCapExceeded {
                            cap: self.output_cap,
                        });
                    }
                    self.pending.extend_from_slice(&chunk[..n]);
                }
                Err(e) => match e.kind() {
                    ErrorKind::WouldBlock | ErrorKind::Interrupted => {}
                    _ => {
                        return Err(ChildIoError::Io {
                            what: "read stdout",
                            errno: e.raw_os_error().unwrap_or(0),
                        });
                    }
                },
            }
        }
    }

    /// From here the caller only reads and waits until the child is reaped
    /// (each [`WorkerChild::read_line`] and [`WorkerChild::wait`] kills at
    /// the same deadline itself): the watchdog thread is told to stop now,
    /// so that it has exited by the reap, which joins it, rather than being
    /// woken then, on the way from the child's exit to its status.
    pub fn stop_watchdog(&mut self) {
        if let Some((orders, _)) = &self.watchdog {
            let _ = orders.send(Watch::Stop);
        }
    }

    /// Kills the child (reported as [`Ending::KilledByParent`] unless a
    /// violation came first). Call [`WorkerChild::wait`] to reap it.
    pub fn kill(&mut self) {
        self.violate(KillReason::Parent);
    }

    /// Waits for the child to end, at most `max_wait` (and never past the
    /// wall-clock deadline; then it is killed for time), reaps it and says
    /// how it ended. Calling it again returns the same answer.
    pub fn wait(&mut self, max_wait: Duration) -> Result<Ended, ChildIoError> {
        if let Some(ended) = self.ended {
            return Ok(ended);
        }
        let deadline = (Instant::now() + max_wait).min(self.deadline);
        let exited = sys::poll_until(self.killer.pidfd.as_fd(), libc::POLLIN, deadline).map_err(
            |errno| ChildIoError::Io {
                what: "poll pidfd",
                errno,
            },
        )?;
        if !exited {
            self.violate(KillReason::Time);
        }
        self.reap()
    }

    pub(crate) fn reap(&mut self) -> Result<Ended, ChildIoError> {
        let (status, usage) = sys::wait4(self.pid).map_err(|errno| ChildIoError::Io {
            what: "wait4",
            errno,
        })?;
        self.stdin = None;
        if let Some((stop, handle)) = self.watchdog.take() {
            let _ = stop.send(Watch::Stop);
            let _ = handle.join();
        }
        if let Some(rx) = self.stderr.take() {
            // The child is gone, so its stderr is at end-of-file; the short
            // bound only matters if something else still holds the pipe.
            if let Ok(bytes) = rx.recv_timeout(Duration::from_secs(1)) {
                self.stderr_bytes = bytes;
            }
        }
        let status = std::process::ExitStatus::from_raw(status);
        // A violation the parent recorded is how the child ended, even if it
        // managed to exit on its own before the signal landed.
        let ending = match self.killer.reason() {
            Some(KillReason::Time) => Ending::KilledForTime,
            Some(KillReason::Output) => Ending::KilledForOutput,
            Some(KillReason::Parent) => Ending::KilledByParent,
            None => match (status.code(), status.signal()) {
                (Some(code), _) => Ending::Exited { code },
                (None, Some(signal)) => Ending::Signaled { signal },
                (None, None) => Ending::Signaled { signal: 0 },
            },
        };
        let ended = Ended {
            ending,
            peak_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
            user_cpu: timeval(usage.ru_utime),
            system_cpu: timeval(usage.ru_stime),
        };
        self.ended = Some(ended);
        Ok(ended)
    }

    /// Stops the wall clock (`None`) or restarts it in full from now. A
    /// failed send means the watchdog already fired: the child is dead, and
    /// [`WorkerChild::has_ended`] says so.
    pub(crate) fn set_clock(&mut self, wall_clock: Option<Duration>) {
        let until = wall_clock.map(|w| Instant::now() + w);
        if let Some(at) = until {
            self.deadline = at;
        }
        if let Some((orders, _)) = &self.watchdog {
            let _ = orders.send(Watch::Until(until));
        }
    }

    /// Whether the child has exited (or been killed): its pidfd is readable.
    /// Does not block and does not reap.
    pub(crate) fn has_ended(&self) -> Result<bool, ChildIoError> {
        if self.ended.is_some() {
            return Ok(true);
        }
        sys::poll_now(self.killer.pidfd.as_fd(), libc::POLLIN).map_err(|errno| ChildIoError::Io {
            what: "poll pidfd",
            errno,
        })
    }

    /// The stderr bytes kept (with [`StderrMode::Capture`], after
    /// [`WorkerChild::wait`]). May hold sensitive text: never log it.
    pub fn captured_stderr(&self) -> &[u8] {
        &self.stderr_bytes
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    let secs = u64::try_from(tv.tv_sec).unwrap_or(0);
    let micros = u32::try_from(tv.tv_usec).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(u64::from(micros))
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        if self.ended.is_none() {
            self.violate(KillReason::Parent);
            let _ = self.reap();
        }
    }
}
