//! Where an attempt's worker comes from: a fresh spawn, or the one spare
//! worker kept ready while idle (`BrokerConfig::keep_spare`).
//!
//! The spare is spawned from the same sealed image, its hello read and its
//! sandbox report verified by the same [`attempt::launch`] as an inline
//! spawn, then parked (`stream_sandbox::ParkedWorker`): it blocks on its
//! stdin, its watchdog blocks on a channel, and its wall clock is stopped.
//! Taking it restarts the wall clock from the moment the attempt asked for
//! a worker, so the attempt is bounded as before (waiting for a spare being
//! made counts) and idle time never counts against it. Each worker serves one
//! attempt: a taken spare never comes back (a failed attempt kills it). A
//! spare found dead when taken is reaped and the attempt spawns inline.
//!
//! One filler thread refills the slot when an attempt has ended; it blocks
//! on a condition variable between refills, so an idle broker costs no CPU. Dropping the broker
//! stops the filler and kills and reaps the spare.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stream_sandbox::{Enforcement, ParkedWorker, WorkerImage};

use crate::BrokerConfig;
use crate::attempt::{self, Session};
use crate::failure::AttemptError;
use crate::forks::{Forks, Hold};

/// The sealed image, the config, and the optional spare slot.
pub(crate) struct Workers {
    shared: Arc<Shared>,
    filler: Option<JoinHandle<()>>,
}

struct Shared {
    config: BrokerConfig,
    image: WorkerImage,
    spawned: AtomicU64,
    forks: Forks,
    slot: Mutex<Slot>,
    changed: Condvar,
}

#[derive(Default)]
struct Slot {
    /// The spare, its report, and its pid's hold (after it, so released
    /// once it is reaped).
    parked: Option<(ParkedWorker, Enforcement, Hold)>,
    /// The filler should make a spare (the slot was emptied).
    wanted: bool,
    /// The filler is making one now.
    filling: bool,
    closed: bool,
}

impl Shared {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn launch(&self) -> Result<(Session, Enforcement), AttemptError> {
        self.spawned.fetch_add(1, Ordering::SeqCst);
        attempt::launch(&self.config, &self.image, &self.forks)
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("image_len", &self.shared.image.len())
            .field("spawned", &self.shared.spawned.load(Ordering::SeqCst))
            .field("forked", &self.shared.forks.forked())
            .field("keep_spare", &self.shared.config.keep_spare)
            .finish()
    }
}

impl Workers {
    /// Starts the filler (which makes the first spare at once) when the
    /// config keeps a spare.
    pub(crate) fn new(config: BrokerConfig, image: WorkerImage) -> Self {
        let keep_spare = config.keep_spare;
        let forks = Forks::new(&config);
        let shared = Arc::new(Shared {
            config,
            image,
            spawned: AtomicU64::new(0),
            forks,
            slot: Mutex::new(Slot {
                wanted: keep_spare,
                ..Slot::default()
            }),
            changed: Condvar::new(),
        });
        let filler = if keep_spare {
            let for_filler = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("worker-spare".into())
                .spawn(move || fill(&for_filler))
                .map_err(|_| {
                    tracing::warn!("spare worker thread could not start; spawning per attempt")
                })
                .ok()
        } else {
            None
        };
        Self { shared, filler }
    }

    /// Workers made so far, forked or spawned (spares and inline).
    pub(crate) fn spawned(&self) -> u64 {
        self.shared.spawned.load(Ordering::SeqCst)
    }

    /// Of those, the workers forked by the fork server.
    pub(crate) fn forked(&self) -> u64 {
        self.shared.forks.forked()
    }

    /// The fork server's pid, while one runs.
    pub(crate) fn fork_server_pid(&self) -> Option<i32> {
        self.shared.forks.server_pid()
    }

    /// A verified worker for one attempt: the spare when one is parked (or
    /// being made), else a fresh spawn. Blocking.
    pub(crate) fn take(&self) -> Result<(Session, Enforcement), AttemptError> {
        let asked = Instant::now();
        if let Some((parked, sandbox, hold)) = self.take_parked() {
            let pid = parked.pid();
            // The attempt's wall clock starts when it asks for a worker: time
            // spent waiting for a spare being made counts, idle time does not.
            let wall_clock = self
                .shared
                .config
                .spawn
                .wall_clock
                .saturating_sub(asked.elapsed());
            match parked.resume(wall_clock) {
                Ok(child) => return Ok((Session::new(child, &self.shared.config, hold), sandbox)),
                Err(lost) => tracing::warn!(
                    pid,
                    ending = ?lost.ending,
                    "spare worker had ended while idle; spawning a fresh one"
                ),
            }
        }
        self.shared.launch()
    }

    /// Empties the slot, waiting for a spare being made (it started before
    /// any fresh spawn would).
    fn take_parked(&self) -> Option<(ParkedWorker, Enforcement, Hold)> {
        if !self.shared.config.keep_spare {
            return None;
        }
        let mut slot = self.shared.slot();
        while slot.parked.is_none() && slot.filling && !slot.closed {
            slot = self
                .shared
                .changed
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
        slot.parked.take()
    }

    /// Asks the filler for the next spare. Called when an attempt has ended,
    /// not when it takes the spare: a spawn and the new worker's start-up
    /// during the attempt compete for the CPU on its critical path.
    pub(crate) fn refill(&self) {
        if !self.shared.config.keep_spare {
            return;
        }
        let mut slot = self.shared.slot();
        if slot.parked.is_none() && !slot.filling && !slot.closed {
            slot.wanted = true;
            self.shared.changed.notify_all();
        }
    }

    /// The pid of the parked spare, waiting up to `max_wait` for one.
    pub(crate) fn spare_pid(&self, max_wait: Duration) -> Option<i32> {
        let until = Instant::now() + max_wait;
        let mut slot = self.shared.slot();
        loop {
            if let Some((parked, _, _)) = &slot.parked {
                return Some(parked.pid());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || slot.closed {
                return None;
            }
            slot = self
                .shared
                .changed
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The filler: one spare at a time, made when the slot is emptied. A spawn
/// that fails is logged and not retried until the next attempt empties the
/// slot again (that attempt spawns inline and reports the failure itself).
fn fill(shared: &Shared) {
    loop {
        {
            let mut slot = shared.slot();
            let work = |slot: &Slot| slot.closed || (slot.wanted && slot.parked.is_none());
            while !work(&slot) {
                slot = shared
                    .changed
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if slot.closed {
                return;
            }
            slot.wanted = false;
            slot.filling = true;
        }
        let made = shared.launch();
        let mut slot = shared.slot();
        slot.filling = false;
        let closed = slot.closed;
        match made {
            Ok((session, sandbox)) if !closed => {
                let Session { child, hold, .. } = session;
                slot.parked = Some((child.park(), sandbox, hold));
            }
            // Dropping the session kills and reaps the worker.
            Ok(_) => {}
            Err(e) => tracing::warn!(
                reason = e.reason().as_str(),
                error = %e,
                "spare worker could not be prepared"
            ),
        }
        shared.changed.notify_all();
        if closed {
            return;
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let parked = {
            let mut slot = self.shared.slot();
            slot.closed = true;
            self.shared.changed.notify_all();
            slot.parked.take()
        };
        // Kills and reaps the spare.
        drop(parked);
        if let Some(handle) = self.filler.take() {
            let _ = handle.join();
        }
    }
}
