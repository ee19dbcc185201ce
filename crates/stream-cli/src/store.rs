//! The configured store, whichever backend holds it.

use stream_store::{PostgresStore, SqliteStore, Store, StoreError, Tx};

/// The store `[store] backend` names.
#[derive(Debug)]
pub enum OpenedStore {
    /// The SQLite file in the data dir.
    Sqlite(SqliteStore),
    /// The PostgreSQL database named by the URL in `[store] url_env`.
    Postgres(PostgresStore),
}

impl OpenedStore {
    fn inner(&self) -> &dyn Store {
        match self {
            Self::Sqlite(s) => s,
            Self::Postgres(s) => s,
        }
    }

    /// The store's size and its bytes by kind.
    pub fn usage(&self) -> Result<stream_store::StoreUsage, StoreError> {
        match self {
            Self::Sqlite(s) => s.usage(),
            Self::Postgres(s) => s.usage(),
        }
    }
}

stream_store::delegate_read!([] OpenedStore, s => s.inner());

impl Store for OpenedStore {
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError> {
        self.inner().begin()
    }

    fn data_version(&self) -> Result<u64, StoreError> {
        self.inner().data_version()
    }

    fn has_room(&self) -> Result<bool, StoreError> {
        self.inner().has_room()
    }
}
