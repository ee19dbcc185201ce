//! A store wrapper that fails the Nth write of a transaction (feature
//! `conformance`), in the spirit of redb's crash tests: run an operation
//! once per write step with a fault there, and check that each leaves
//! nothing behind and that a clean rerun converges.

#![allow(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use stream_core::canon::Hashed;
use stream_core::{DocumentId, NewEvent, SnapshotId, SourceName, VersionId};

use crate::{AppendOutcome, Progress, RunRow, Store, StoreError, Tx, VersionRow};

/// Something to run just before the next commit.
type CommitHook = Box<dyn FnOnce() + Send>;

/// Wraps a store; the write with index `fail_at` (0-based, counting every
/// append, row write and commit across transactions) fails with
/// `StoreError::Backend("injected fault")`.
pub struct FaultyStore<S> {
    inner: S,
    writes: AtomicUsize,
    fail_at: AtomicUsize,
    /// [`Store::has_room`] checks left before the disk is full
    /// (`usize::MAX`: never).
    room_checks_left: AtomicUsize,
    before_commit: Mutex<Option<CommitHook>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for FaultyStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("inner", &self.inner)
            .field("writes", &self.writes)
            .field("fail_at", &self.fail_at)
            .finish_non_exhaustive()
    }
}

impl<S: Store> FaultyStore<S> {
    /// No fault until [`FaultyStore::fail_at`] is called.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            writes: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(usize::MAX),
            room_checks_left: AtomicUsize::new(usize::MAX),
            before_commit: Mutex::new(None),
        }
    }

    /// Runs `hook` on the committing thread just before the next commit
    /// (of any transaction), before a fault set for that commit: a test can
    /// look at the world, or hold the commit back, while it is pending.
    pub fn before_next_commit(&self, hook: impl FnOnce() + Send + 'static) {
        *self
            .before_commit
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(hook));
    }

    /// Makes [`Store::has_room`] answer `false` (a full disk) until called
    /// with `false`.
    pub fn set_full(&self, full: bool) {
        self.set_room_for(if full { 0 } else { usize::MAX });
    }

    /// Makes the disk fill after `n` more [`Store::has_room`] checks: they
    /// answer as the wrapped store does, every later one `false`.
    pub fn set_room_for(&self, n: usize) {
        self.room_checks_left.store(n, Ordering::SeqCst);
    }

    /// Fails the `n`th write from now (0 = the next one).
    pub fn fail_at(&self, n: usize) {
        self.writes.store(0, Ordering::SeqCst);
        self.fail_at.store(n, Ordering::SeqCst);
    }

    /// Clears the fault; returns how many writes happened since `fail_at`.
    pub fn heal(&self) -> usize {
        self.fail_at.store(usize::MAX, Ordering::SeqCst);
        self.writes.swap(0, Ordering::SeqCst)
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn step(&self) -> Result<(), StoreError> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at.load(Ordering::SeqCst) {
            Err(StoreError::Backend("injected fault".into()))
        } else {
            Ok(())
        }
    }
}

struct FaultyTx<'a, S> {
    inner: Box<dyn Tx + 'a>,
    owner: &'a FaultyStore<S>,
}

crate::delegate_read!([S: Store] FaultyStore<S>, s => s.inner);
crate::delegate_read!([S: Store] FaultyTx<'_, S>, t => t.inner);

impl<S: Store> Store for FaultyStore<S> {
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError> {
        Ok(Box::new(FaultyTx {
            inner: self.inner.begin()?,
            owner: self,
        }))
    }

    fn data_version(&self) -> Result<u64, StoreError> {
        self.inner.data_version()
    }

    fn has_room(&self) -> Result<bool, StoreError> {
        let left = self
            .room_checks_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            });
        if left.is_err() {
            return Ok(false);
        }
        self.inner.has_room()
    }
}

impl<S: Store> Tx for FaultyTx<'_, S> {
    fn append(&mut self, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
        self.owner.step()?;
        self.inner.append(event)
    }
    fn put_hashed(&mut self, blob: &Hashed<&[u8]>) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.put_hashed(blob)
    }
    fn put_snapshot(&mut self, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.put_snapshot(id, bytes)
    }
    fn put_run(&mut self, run: &RunRow) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.put_run(run)
    }
    fn set_progress(&mut self, consumer: &str, progress: &Progress) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.set_progress(consumer, progress)
    }
    fn set_control(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.set_control(key, value)
    }
    fn ensure_document(
        &mut self,
        id: &DocumentId,
        source: &SourceName,
        path: &str,
    ) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.ensure_document(id, source, path)
    }
    fn insert_version(&mut self, version: &VersionRow) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.insert_version(version)
    }
    fn set_current_version(
        &mut self,
        doc: &DocumentId,
        version: &VersionId,
    ) -> Result<(), StoreError> {
        self.owner.step()?;
        self.inner.set_current_version(doc, version)
    }
    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let hook = self
            .owner
            .before_commit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(hook) = hook {
            hook();
        }
        self.owner.step()?;
        self.inner.commit()
    }
}
