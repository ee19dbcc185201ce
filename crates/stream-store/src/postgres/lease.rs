//! The serve lease on PostgreSQL: a session advisory lock on a connection
//! of its own, owned by its own thread ([`Asker`]). The session's life is
//! the lease: the server frees the lock when the session ends, however it
//! ends. A refused session is kept to ask again; a holding one pings the
//! server so that this side learns of a lost session too.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::connect::Connector;
use crate::StoreError;
use crate::lease::LeaseLost;

/// The lease's advisory lock key: "tStrLeas" in ASCII (the writer's is
/// "tStrWrit"). Advisory locks are per database, so one store, one lease.
pub(crate) const LEASE_KEY: i64 = 8_382_171_365_723_431_283;

/// Whether a session holds the lease (`$1`, [`LEASE_KEY`]).
pub(crate) const HELD: &str = concat!(
    "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE ",
    advisory_key_held!("l"),
    ")"
);

/// How often the holder asks its session whether it is still there.
const PING_EVERY: Duration = Duration::from_millis(500);

/// The holder gives the lease up when its session has not answered for
/// this long; the server ends a silent session after about 4 s
/// ([`SERVER_SIDE`]), so the holder stops first.
const LOST_AFTER: Duration = Duration::from_secs(3);

/// Per-session settings that make the server end the session of a host
/// that vanished (no FIN ever comes) within about 4 s: keepalives after 2 s
/// idle, every 1 s, 2 missed; 4 s for unacknowledged data. Tuning, not
/// correctness: one the server refuses (`tcp_user_timeout` before 12) is
/// skipped.
const SERVER_SIDE: [&str; 4] = [
    "SET tcp_keepalives_idle = 2",
    "SET tcp_keepalives_interval = 1",
    "SET tcp_keepalives_count = 2",
    "SET tcp_user_timeout = 4000",
];

#[derive(Debug)]
struct Health {
    last_answer: Instant,
    ended: Option<String>,
}

/// A held lock: its thread owns the session.
#[derive(Debug)]
pub(crate) struct PgLease {
    health: Arc<Mutex<Health>>,
    /// Dropped with the lease, which ends the thread and the session.
    _stop: mpsc::Sender<()>,
}

fn lock(health: &Mutex<Health>) -> std::sync::MutexGuard<'_, Health> {
    health.lock().unwrap_or_else(|p| p.into_inner())
}

impl PgLease {
    pub(crate) fn check(&self) -> Result<(), LeaseLost> {
        let health = lock(&self.health);
        if let Some(why) = &health.ended {
            return Err(LeaseLost { why: why.clone() });
        }
        let silent = health.last_answer.elapsed();
        if silent >= LOST_AFTER {
            return Err(LeaseLost {
                why: format!(
                    "the lease's database session has not answered for {} s",
                    silent.as_secs()
                ),
            });
        }
        Ok(())
    }
}

/// A session of its own that asks for the lock when told to, so that a
/// standby asking every 250 ms keeps one connection instead of making one
/// per question. Dropping it closes the session.
#[derive(Debug)]
pub(crate) struct Asker {
    again: mpsc::Sender<()>,
    answers: mpsc::Receiver<Result<bool, StoreError>>,
    health: Arc<Mutex<Health>>,
}

impl Asker {
    /// Starts the session's thread; it connects at the first question.
    pub(crate) fn start(connector: &Connector) -> Result<Self, StoreError> {
        let connector = connector.clone();
        let (again, asked) = mpsc::channel::<()>();
        let (reply, answers) = mpsc::sync_channel::<Result<bool, StoreError>>(1);
        let health = Arc::new(Mutex::new(Health {
            last_answer: Instant::now(),
            ended: None,
        }));
        let shared = Arc::clone(&health);
        std::thread::Builder::new()
            .name("thestream-lease".into())
            .spawn(move || session(&connector, &asked, &reply, &shared))
            .map_err(|e| StoreError::Backend(format!("lease thread: {e}")))?;
        Ok(Self {
            again,
            answers,
            health,
        })
    }

    /// Tries the lock without waiting: `true` when this session now holds
    /// it. An error ends the session (the next asker connects afresh).
    pub(crate) fn ask(&self) -> Result<bool, StoreError> {
        let gone = || StoreError::Backend("the lease's session ended".into());
        self.again.send(()).map_err(|_| gone())?;
        self.answers.recv().map_err(|_| gone())?
    }

    /// The lease this session holds (after `ask` said so).
    pub(crate) fn into_lease(self) -> PgLease {
        PgLease {
            health: self.health,
            _stop: self.again,
        }
    }
}

/// The lease session's thread: connects, tries the lock at each question
/// until it holds it, then keeps it until told to stop.
fn session(
    connector: &Connector,
    asked: &mpsc::Receiver<()>,
    reply: &mpsc::SyncSender<Result<bool, StoreError>>,
    health: &Mutex<Health>,
) {
    if asked.recv().is_err() {
        return;
    }
    let mut client = match connector.connect() {
        Ok(client) => client,
        Err(e) => {
            let _ = reply.send(Err(e));
            return;
        }
    };
    for setting in SERVER_SIDE {
        if let Err(e) = client.batch_execute(setting) {
            tracing::debug!(setting, error = %super::describe(&e), "lease session setting refused");
        }
    }
    loop {
        let got = client
            .query_one(
                "SELECT pg_try_advisory_lock($1) AS got, \
                 set_config('application_name', 'thestream-lease', false)",
                &[&LEASE_KEY],
            )
            .and_then(|row| row.try_get::<_, bool>("got"))
            .map_err(super::backend);
        let (held, failed) = (matches!(got, Ok(true)), got.is_err());
        if held {
            lock(health).last_answer = Instant::now();
        }
        if reply.send(got).is_err() || failed {
            return;
        }
        if held {
            return keep(&mut client, asked, health);
        }
        if asked.recv().is_err() {
            return;
        }
    }
}

/// Pings the session until the lease is dropped or the session is gone.
fn keep(client: &mut postgres::Client, stopped: &mpsc::Receiver<()>, health: &Mutex<Health>) {
    loop {
        match stopped.recv_timeout(PING_EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        match client.simple_query("SELECT 1") {
            Ok(_) => lock(health).last_answer = Instant::now(),
            Err(e) => {
                lock(health).ended = Some(format!(
                    "the lease's database session ended: {}",
                    super::describe(&e)
                ));
                return;
            }
        }
    }
}
