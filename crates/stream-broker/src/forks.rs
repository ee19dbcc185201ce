//! Where a fresh worker comes from with [`BrokerConfig::fork_server`]: a
//! child of the broker's fork server (`stream_sandbox::fork`), started from
//! the same sealed image on first use, restarted if it fails, and given up
//! for this broker when it cannot start or keeps failing. Without one, or
//! when it fails, the worker is spawned as before. Either way the worker's
//! hello and sandbox report are then verified by the same
//! [`crate::attempt::launch`]. Dropping the broker kills and reaps the
//! server; its children are the broker's own and are supervised as any
//! worker.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use stream_protocol::FORK_SERVER_FLAG;
use stream_sandbox::{ForkServer, SpawnError, SpawnLimits, WorkerChild, WorkerImage};

use crate::BrokerConfig;

/// How long a starting server may take to enter its sandbox and warm up.
const READY_WAIT: Duration = Duration::from_secs(10);

/// Failed forks in a row after which the broker stops restarting it.
const MAX_FAILURES: u32 = 3;

pub(crate) struct Forks {
    enabled: bool,
    forked: AtomicU64,
    state: Mutex<State>,
    held: Held,
}

/// The pids of the workers the broker holds, parked or in an attempt, forked
/// or spawned: a fork server answering one of them is refused.
#[derive(Clone, Default)]
struct Held(Arc<Mutex<HashSet<i32>>>);

impl Held {
    fn pids(&self) -> std::sync::MutexGuard<'_, HashSet<i32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One held worker's pid, released when dropped: declared after the
/// worker it stands for, so that the worker is reaped first.
pub(crate) struct Hold {
    pid: i32,
    held: Held,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.held.pids().remove(&self.pid);
    }
}

enum State {
    Stopped { failures: u32 },
    Running(ForkServer),
    GivenUp,
}

impl Forks {
    pub(crate) fn new(config: &BrokerConfig) -> Self {
        Self {
            enabled: config.fork_server,
            forked: AtomicU64::new(0),
            state: Mutex::new(State::Stopped { failures: 0 }),
            held: Held::default(),
        }
    }

    /// Marks `pid`, a worker just made, as held until the [`Hold`] drops.
    pub(crate) fn hold(&self, pid: i32) -> Hold {
        self.held.pids().insert(pid);
        Hold {
            pid,
            held: self.held.clone(),
        }
    }

    /// A forked worker, its wall clock armed; `Ok(None)` when there is no
    /// server to fork from (then the caller spawns). A server that answers
    /// a pid it cannot have made is killed and never restarted, and the
    /// attempt fails (fail closed: it may have been subverted).
    pub(crate) fn child(
        &self,
        image: &WorkerImage,
        args: &[&OsStr],
        limits: &SpawnLimits,
    ) -> Result<Option<WorkerChild>, SpawnError> {
        if !self.enabled {
            return Ok(None);
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut server, failures) =
            match std::mem::replace(&mut *state, State::Stopped { failures: 0 }) {
                State::GivenUp => {
                    *state = State::GivenUp;
                    return Ok(None);
                }
                // A running server has not failed since its last fork.
                State::Running(server) => (server, 0),
                State::Stopped { failures } => match start(image, args) {
                    Some(server) => (server, failures),
                    None => {
                        *state = State::GivenUp;
                        return Ok(None);
                    }
                },
            };
        let held = self.held.clone();
        match server.fork_among(limits, &|pid| held.pids().contains(&pid)) {
            Ok(child) => {
                self.forked.fetch_add(1, Ordering::SeqCst);
                *state = State::Running(server);
                Ok(Some(child))
            }
            Err(e @ SpawnError::PidRefused { .. }) => {
                drop(server);
                tracing::warn!(error = %e, "fork server refused; spawning workers from now on");
                *state = State::GivenUp;
                Err(e)
            }
            Err(e) => {
                // Dropping the server kills and reaps it.
                drop(server);
                let failures = failures + 1;
                tracing::warn!(error = %e, failures, "fork server failed; spawning this worker");
                *state = if failures >= MAX_FAILURES {
                    tracing::warn!(
                        "fork server failed {failures} times in a row; spawning workers from now on"
                    );
                    State::GivenUp
                } else {
                    State::Stopped { failures }
                };
                Ok(None)
            }
        }
    }

    /// Workers forked so far.
    pub(crate) fn forked(&self) -> u64 {
        self.forked.load(Ordering::SeqCst)
    }

    /// The running server's pid.
    pub(crate) fn server_pid(&self) -> Option<i32> {
        match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Running(server) => Some(server.pid()),
            State::Stopped { .. } | State::GivenUp => None,
        }
    }
}

fn start(image: &WorkerImage, args: &[&OsStr]) -> Option<ForkServer> {
    start_server(image, args)
        .inspect_err(|e| {
            tracing::warn!(error = %e, "fork server could not start; spawning workers from now on");
        })
        .ok()
}

/// Starts a fork server from `image`: the worker's `args` and the flag.
/// The one way, for attempts and the self-test alike.
pub(crate) fn start_server(image: &WorkerImage, args: &[&OsStr]) -> Result<ForkServer, SpawnError> {
    let mut with_flag = args.to_vec();
    with_flag.push(FORK_SERVER_FLAG.as_ref());
    ForkServer::start_image(image, &with_flag, READY_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's pid is held from its launch until its hold drops (after
    /// the worker is reaped), so a fork server answering it meanwhile is
    /// refused (`stream_sandbox::fork::PidRefusal::InUse`).
    #[test]
    fn a_held_pid_is_in_use_until_its_hold_drops() {
        let config = crate::BrokerConfig::new("w".into(), String::new(), String::new());
        let forks = Forks::new(&config);
        let spare = forks.hold(41);
        let running = forks.hold(42);
        assert!(forks.held.pids().contains(&41) && forks.held.pids().contains(&42));
        drop(running);
        assert!(!forks.held.pids().contains(&42));
        assert!(forks.held.pids().contains(&41));
        drop(spare);
        assert!(forks.held.pids().is_empty());
    }
}
