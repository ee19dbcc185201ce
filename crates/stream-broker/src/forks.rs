//! Where a fresh worker comes from with [`BrokerConfig::fork_server`]: a
//! child of the broker's fork server (`stream_sandbox::fork`), started from
//! the same sealed image on first use, restarted if it fails, and given up
//! for this broker when it cannot start or keeps failing. Without one, or
//! when it fails, the worker is spawned as before. Either way the worker's
//! hello and sandbox report are then verified by the same
//! [`crate::attempt::launch`]. Dropping the broker kills and reaps the
//! server; its children are the broker's own and are supervised as any
//! worker.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use stream_protocol::FORK_SERVER_FLAG;
use stream_sandbox::{ForkServer, SpawnLimits, WorkerChild, WorkerImage};

use crate::BrokerConfig;

/// How long a starting server may take to enter its sandbox and warm up.
const READY_WAIT: Duration = Duration::from_secs(10);

/// Failed forks in a row after which the broker stops restarting it.
const MAX_FAILURES: u32 = 3;

pub(crate) struct Forks {
    enabled: bool,
    forked: AtomicU64,
    state: Mutex<State>,
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
        }
    }

    /// A forked worker, its wall clock armed; `None` when there is no
    /// server to fork from (then the caller spawns).
    pub(crate) fn child(
        &self,
        image: &WorkerImage,
        args: &[&OsStr],
        limits: &SpawnLimits,
    ) -> Option<WorkerChild> {
        if !self.enabled {
            return None;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut server, failures) =
            match std::mem::replace(&mut *state, State::Stopped { failures: 0 }) {
                State::GivenUp => {
                    *state = State::GivenUp;
                    return None;
                }
                // A running server has not failed since its last fork.
                State::Running(server) => (server, 0),
                State::Stopped { failures } => match start(image, args) {
                    Some(server) => (server, failures),
                    None => {
                        *state = State::GivenUp;
                        return None;
                    }
                },
            };
        match server.fork(limits) {
            Ok(child) => {
                self.forked.fetch_add(1, Ordering::SeqCst);
                *state = State::Running(server);
                Some(child)
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
                None
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
    let mut with_flag = args.to_vec();
    with_flag.push(FORK_SERVER_FLAG.as_ref());
    ForkServer::start_image(image, &with_flag, READY_WAIT)
        .inspect_err(|e| {
            tracing::warn!(error = %e, "fork server could not start; spawning workers from now on");
        })
        .ok()
}
