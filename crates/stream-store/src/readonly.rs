//! [`ReadOnlyStore`]: a store opened for reading only, for a process that
//! must never change it (the inspector).

use std::path::Path;

use crate::postgres::readonly::PostgresReader;
use crate::sqlite::readonly::SqliteReader;
use crate::{Read, StoreError, StoreUsage};

/// A store opened for reading only. It implements [`Read`] and nothing
/// that writes (not [`crate::Store`], no `begin`), and its connection is
/// read-only too: SQLite opened `mode=ro` with `query_only`, PostgreSQL a
/// session whose every transaction is read-only.
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
    Postgres(PostgresReader),
}

impl ReadOnlyStore {
    /// Opens the store file (`store.db`) at `path` for reading. What this
    /// does to the file and its `-wal`/`-shm` is in `sqlite::readonly`'s
    /// documentation (nothing to `store.db` and `store.db-wal`).
    pub fn open_sqlite(path: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Sqlite(SqliteReader::open(path)?),
        })
    }

    /// Connects to the PostgreSQL database at `url` in a read-only
    /// session (`default_transaction_read_only`; TLS as
    /// [`crate::PostgresStore::open`] decides). No error repeats the URL.
    /// A role granted only `SELECT` on the store's tables is enough
    /// (docs/postgres.md), `data_version` included.
    pub fn open_postgres(url: &str) -> Result<Self, StoreError> {
        Ok(Self {
            backend: Backend::Postgres(PostgresReader::open(url)?),
        })
    }

    /// A counter that moves whenever another connection commits, as
    /// [`crate::Store::data_version`]: poll it, and read again when it moved.
    pub fn data_version(&self) -> Result<u64, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.data_version(),
            Backend::Postgres(p) => p.data_version(),
        }
    }

    /// The store's size by kind, as `backup` and `doctor` report it. Not
    /// cheap: aggregates over every blob, 1.5 s for a SQLite store of
    /// 10^5 events (53 MB, release build); compute it on request, not for
    /// every page view. `last_position` (5 us) and `data_version` (1 us)
    /// are what to poll.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.usage(),
            Backend::Postgres(p) => p.usage(),
        }
    }

    fn inner(&self) -> &dyn Read {
        match &self.backend {
            Backend::Sqlite(s) => s,
            Backend::Postgres(p) => p,
        }
    }
}

crate::delegate_read!([] ReadOnlyStore, s => s.inner());
