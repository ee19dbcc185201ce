//! Wake-ups of a running `serve`: every commit made through the serve's
//! store is signalled at once to the tasks that wait for new work, and a
//! slow timer on [`Store::data_version`] notices commits made by another
//! process (a CLI decision, `thestream activate`).
//!
//! Why `data_version` on a timer rather than inotify on the WAL file: it
//! needs no new dependency and no file-system assumption (a WAL that is
//! checkpointed, truncated or replaced is still seen), one `PRAGMA` on an
//! idle connection costs microseconds, and the only cross-process writes
//! a running serve must follow (activation's control rows, decisions that
//! shape the next turn) tolerate a second of delay.

use std::sync::Arc;
use std::time::Duration;

use stream_core::canon::Hashed;
use stream_core::{DocumentId, NewEvent, SnapshotId, SourceName, VersionId};
use stream_store::{AppendOutcome, Progress, Recovery, RunRow, Store, StoreError, Tx, VersionRow};
use tokio::sync::watch;

/// How often a running serve asks the store whether another process
/// committed (no busy loop: at least a second between checks).
pub const FOREIGN_COMMIT_CHECK: Duration = Duration::from_secs(1);

/// The sending side of a wake-up signal (every commit, or every settled
/// trigger).
#[derive(Debug, Clone, Default)]
pub struct Commits(Arc<watch::Sender<u64>>);

impl Commits {
    /// A new signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signals that something was committed.
    pub fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that wakes at the next commit.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// A store that signals every commit made through it.
pub struct Signalling {
    inner: Arc<dyn Store>,
    commits: Commits,
}

impl std::fmt::Debug for Signalling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signalling").finish_non_exhaustive()
    }
}

impl Signalling {
    /// Wraps `inner`; everything committed through the result bumps the
    /// returned [`Commits`].
    pub fn wrap(inner: Arc<dyn Store>) -> (Arc<dyn Store>, Commits) {
        let commits = Commits::new();
        let store = Arc::new(Self {
            inner,
            commits: commits.clone(),
        });
        (store, commits)
    }
}

stream_store::delegate_read!([] Signalling, s => s.inner);
stream_store::delegate_read!([] SignallingTx<'_>, t => t.inner);

impl Store for Signalling {
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError> {
        Ok(Box::new(SignallingTx {
            inner: self.inner.begin()?,
            commits: &self.commits,
        }))
    }

    fn data_version(&self) -> Result<u64, StoreError> {
        self.inner.data_version()
    }

    fn has_room(&self) -> Result<bool, StoreError> {
        self.inner.has_room()
    }
}

struct SignallingTx<'a> {
    inner: Box<dyn Tx + 'a>,
    commits: &'a Commits,
}

impl Tx for SignallingTx<'_> {
    fn append(&mut self, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
        self.inner.append(event)
    }
    fn put_hashed(&mut self, blob: &Hashed<&[u8]>) -> Result<(), StoreError> {
        self.inner.put_hashed(blob)
    }
    fn put_snapshot(&mut self, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.put_snapshot(id, bytes)
    }
    fn put_run(&mut self, run: &RunRow) -> Result<(), StoreError> {
        self.inner.put_run(run)
    }
    fn set_progress(&mut self, consumer: &str, progress: &Progress) -> Result<(), StoreError> {
        self.inner.set_progress(consumer, progress)
    }
    fn set_control(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        self.inner.set_control(key, value)
    }
    fn ensure_document(
        &mut self,
        id: &DocumentId,
        source: &SourceName,
        path: &str,
    ) -> Result<(), StoreError> {
        self.inner.ensure_document(id, source, path)
    }
    fn insert_version(&mut self, version: &VersionRow) -> Result<(), StoreError> {
        self.inner.insert_version(version)
    }
    fn set_current_version(
        &mut self,
        doc: &DocumentId,
        version: &VersionId,
    ) -> Result<(), StoreError> {
        self.inner.set_current_version(doc, version)
    }
    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let commits = self.commits;
        self.inner.commit()?;
        // Signalled after the commit, so a woken task reads what it wakes for.
        commits.bump();
        Ok(())
    }
}

/// Bumps every signal of `wake` whenever the store's data version moved since the last
/// check, i.e. when another process committed (our own commits were
/// signalled already; the extra wake-up they cause here is one cheap pass).
/// A blocking loop on its own thread: at rest it wakes once per `every` and
/// touches no async runtime (a timer task plus `spawn_blocking` cost ~4
/// context switches a check). Returns when `stop` says so or is dropped,
/// or with the error of a store that must stop ([`Recovery::Stop`]: a
/// failed sync), which ends `serve`. Says once when the disk fills up and
/// once when it has room again.
pub fn watch_foreign_commits(
    store: &dyn Store,
    wake: &[Commits],
    every: Duration,
    stop: &std::sync::mpsc::Receiver<()>,
) -> Result<(), StoreError> {
    use std::sync::mpsc::RecvTimeoutError;
    // The baseline is taken at once: a write landing before the first
    // check must still count as a change.
    let mut last = store.data_version().ok();
    let mut room = true;
    loop {
        match stop.recv_timeout(every) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
        room = report_room(store, room);
        let now = match store.data_version() {
            Ok(v) => v,
            Err(e) => match e.recovery() {
                Recovery::Stop => return Err(e),
                Recovery::Retry | Recovery::AwaitSpace => {
                    tracing::warn!(error = %e, "store data version unreadable; retrying");
                    continue;
                }
            },
        };
        if last.is_some_and(|l| l != now) {
            wake.iter().for_each(Commits::bump);
        }
        last = Some(now);
    }
}

/// Whether the store's disk has room now, logged when it changes from
/// `had`: while it is full, replies wait unsent (their receipts could not
/// be stored) and updates stay unconfirmed at Telegram until stored.
fn report_room(store: &dyn Store, had: bool) -> bool {
    let has = match store.has_room() {
        Ok(has) => has,
        Err(e) => {
            tracing::warn!(error = %e, "free space of the store's disk unreadable");
            return had;
        }
    };
    match (had, has) {
        (true, false) => tracing::error!(
            "the disk holding the store is full: refusing new work (no reply sent, no update \
             confirmed) until space returns"
        ),
        (false, true) => tracing::info!("the disk holding the store has room again: resuming"),
        (true, true) | (false, false) => {}
    }
    has
}

/// A growing wait between failed passes: 250 ms doubling to 30 s, reset
/// by a pass that succeeds.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// A pass succeeded.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// A pass failed: how long to wait before the next one.
    pub fn failed(&mut self) -> Duration {
        let wait = Duration::from_millis(250)
            .saturating_mul(1 << self.failures.min(7))
            .min(Duration::from_secs(30));
        self.failures = self.failures.saturating_add(1);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream_store::SqliteStore;

    #[test]
    fn a_commit_through_the_wrapper_is_signalled_and_a_rollback_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        let (store, commits) = Signalling::wrap(Arc::new(sqlite));
        let mut rx = commits.subscribe();
        rx.borrow_and_update();
        {
            let mut tx = store.begin().unwrap();
            tx.set_control("k", &serde_json::json!(1)).unwrap();
            // Dropped: rolled back.
        }
        assert!(!rx.has_changed().unwrap_or(true), "a rollback wakes no one");
        let mut tx = store.begin().unwrap();
        tx.set_control("k", &serde_json::json!(2)).unwrap();
        tx.commit().unwrap();
        assert!(rx.has_changed().unwrap_or(false), "a commit wakes");
        assert_eq!(store.control("k").unwrap(), Some(serde_json::json!(2)));
    }

    #[test]
    fn backoff_grows_to_its_cap_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<u128> = (0..10).map(|_| b.failed().as_millis()).collect();
        assert_eq!(
            waits,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        b.reset();
        assert_eq!(b.failed(), Duration::from_millis(250));
    }
}
