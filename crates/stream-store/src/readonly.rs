//! [`ReadOnlyStore`]: a store opened for reading only, for a process that
//! must never change it (the inspector).

use std::path::Path;

use crate::sqlite_readonly::SqliteReader;
use crate::{Read, StoreError, StoreUsage};

/// A store opened for reading only. It implements [`Read`] and nothing
/// that writes (not [`crate::Store`], no `begin`), and its connection is
/// read-only too: SQLite opened `mode=ro` with `query_only`.
///
/// It never creates, migrates or changes the mode of a store: a missing
/// store is [`StoreError::NoStore`], an older schema
/// [`StoreError::OlderSchema`] (run `serve` once), a newer one
/// [`StoreError::NewerSchema`].
#[derive(Debug)]
pub struct ReadOnlyStore {
    backend: Backend,
}

#[derive(Debug)]
enum Backend {
    Sqlite(SqliteReader),
}

impl ReadOnlyStore {
    /// Opens the store file (`store.db`) at `path` for reading. What this
    /// does to the file and its `-wal`/`-shm` is in `sqlite_readonly`'s
    /// documentation (nothing to `store.db` and `store.db-wal`).
    pub fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Sqlite(SqliteReader::open(path)?),
        })
    }

    /// A counter that moves whenever another connection commits, as
    /// [`crate::Store::data_version`]: poll it, and read again when it moved.
    pub fn data_version(&self) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.data_version(),
        }
    }

    /// The store's size by kind, as `backup` and `doctor` report it: a few
    /// aggregate queries over the blobs (not for every page view of a
    /// large store).
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.usage(),
        }
    }

    fn inner(&self) -> &dyn Read {
        match &self.backend {
            Backend::Sqlite(s) => s,
        }
    }
}

crate::delegate_read!([] ReadOnlyStore, s => s.inner());
