//! A spare worker: spawned, its first output read and judged by the parent,
//! then parked with its wall clock stopped until one attempt takes it.
//!
//! Parking exists so that spawn and sandbox entry leave an attempt's
//! critical path without weakening supervision: a parked worker can do no
//! I/O with the parent (this type has no read or write), its watchdog blocks
//! on a channel (no wake-ups), and taking it restarts its wall clock, so
//! idle time never counts against the attempt and the attempt is still
//! bounded. A worker that ended while parked is found when taken.

use std::time::Duration;

use crate::spawn::{Ending, WorkerChild};

/// A parked worker. Dropping it kills and reaps it.
#[derive(Debug)]
pub struct ParkedWorker {
    child: WorkerChild,
}

/// The parked worker had ended (crashed, killed) before it was taken; it has
/// been reaped.
#[derive(Debug, thiserror::Error)]
#[error("parked worker had ended before it was taken ({ending:?})")]
pub struct ParkedEnded {
    /// How it ended, when the reap could say.
    pub ending: Option<Ending>,
}

impl WorkerChild {
    /// Parks the child: stops its wall clock. The caller has read (and
    /// judged) everything it wants from it before the packet; bytes it
    /// writes meanwhile stay in the pipe and count against the output cap
    /// when read.
    pub fn park(mut self) -> ParkedWorker {
        self.set_clock(None);
        ParkedWorker { child: self }
    }
}

impl ParkedWorker {
    /// The worker's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.child.pid()
    }

    /// Takes the worker for one use: restarts its wall clock in full from
    /// now (`wall_clock`), then checks that it is still alive. One that ended
    /// while parked is reaped and refused.
    pub fn resume(mut self, wall_clock: Duration) -> Result<WorkerChild, ParkedEnded> {
        self.child.set_clock(Some(wall_clock));
        match self.child.has_ended() {
            Ok(false) => Ok(self.child),
            Ok(true) => Err(ParkedEnded {
                ending: self.child.reap().ok().map(|ended| ended.ending),
            }),
            // Cannot tell: refuse it (dropping kills and reaps).
            Err(_) => Err(ParkedEnded { ending: None }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::{SpawnLimits, spawn};
    use std::ffi::OsStr;
    use std::path::Path;
    use std::time::Instant;

    fn limits(wall_clock: Duration) -> SpawnLimits {
        SpawnLimits {
            wall_clock,
            ..SpawnLimits::default()
        }
    }

    /// `sh -c 'echo hello; read line; echo "got $line"'`: a hello, then one
    /// blocking read of its stdin.
    fn greeter(wall_clock: Duration) -> WorkerChild {
        let script: &OsStr = "echo hello; read line; echo got-$line".as_ref();
        let mut child = spawn(
            Path::new("/bin/sh"),
            &["-c".as_ref(), script],
            &limits(wall_clock),
        )
        .unwrap();
        assert_eq!(child.read_line(wall_clock).unwrap().unwrap(), b"hello");
        child
    }

    #[test]
    fn a_parked_worker_outlives_its_wall_clock_and_gets_a_full_one_when_taken() {
        let wall = Duration::from_millis(300);
        let parked = greeter(wall).park();
        std::thread::sleep(wall * 3);
        let mut child = parked.resume(wall).unwrap();
        child.write_line(b"x").unwrap();
        assert_eq!(child.read_line(wall).unwrap().unwrap(), b"got-x");
        let ended = child.wait(wall).unwrap();
        assert_eq!(ended.ending, Ending::Exited { code: 0 });
    }

    #[test]
    fn a_taken_worker_is_still_killed_for_time_at_its_restarted_deadline() {
        let wall = Duration::from_millis(200);
        let parked = greeter(Duration::from_secs(20)).park();
        let t = Instant::now();
        let mut child = parked.resume(wall).unwrap();
        let ended = child.wait(Duration::from_secs(20)).unwrap();
        assert_eq!(ended.ending, Ending::KilledForTime);
        assert!(t.elapsed() >= wall);
    }

    #[test]
    fn a_parked_worker_that_died_is_refused_when_taken() {
        let parked = greeter(Duration::from_secs(20)).park();
        // SAFETY: signalling our own unreaped child.
        assert_eq!(unsafe { libc::kill(parked.pid(), libc::SIGKILL) }, 0);
        let pid = parked.pid();
        while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap()
            .contains(") Z ")
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let refused = parked.resume(Duration::from_secs(20)).unwrap_err();
        assert_eq!(
            refused.ending,
            Some(Ending::Signaled {
                signal: libc::SIGKILL
            })
        );
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn dropping_a_parked_worker_kills_and_reaps_it() {
        let parked = greeter(Duration::from_secs(20)).park();
        let pid = parked.pid();
        drop(parked);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
