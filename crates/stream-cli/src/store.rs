//! The configured store, whichever backend holds it.

use stream_store::{PostgresStore, ReadOnlyStore, SqliteStore, Store, StoreError, Tx};

use crate::config::{Config, StoreBackend};
use crate::exit::Failure;

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

    /// The store as messages name it: the SQLite file, or the PostgreSQL
    /// database's label (never its URL).
    pub fn label(&self) -> String {
        match self {
            Self::Sqlite(s) => s.path().display().to_string(),
            Self::Postgres(s) => s.label().to_owned(),
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

/// Opens the configured store for reading only (`thestream inspect`):
/// the SQLite file in the data dir, or the PostgreSQL database whose URL
/// is in the variable `[store] url_env` names. Unlike
/// [`crate::cmd::open_store`] it creates and tightens nothing, the data
/// dir included: a missing store or one of an older schema is refused
/// (exit 2, saying to run `serve` once).
pub fn open_read_only(config: &Config) -> Result<ReadOnlyStore, Failure> {
    Ok(match config.store.backend {
        StoreBackend::Sqlite => ReadOnlyStore::open_sqlite(&config.store_path())?,
        StoreBackend::Postgres => {
            let url = crate::cmd::secret(&config.store.url_env, "store.url_env")?;
            ReadOnlyStore::open_postgres(&url)?
        }
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config(data_dir: &Path) -> Config {
        let text = format!("data_dir = {:?}\n", data_dir.display().to_string());
        Config::parse(&text, Path::new("thestream.toml")).unwrap()
    }

    #[test]
    fn a_missing_store_is_a_usage_error_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let refused = open_read_only(&config(&data)).unwrap_err();
        assert!(matches!(refused, Failure::Usage(_)), "{refused:?}");
        assert!(refused.error().to_string().contains("serve"));
        assert!(!data.exists(), "the data dir is not created");
    }

    #[test]
    fn the_store_serve_made_opens_read_only() {
        use stream_store::Read;
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        drop(SqliteStore::open(&config.store_path()).unwrap());
        let store = open_read_only(&config).unwrap();
        assert_eq!(store.last_position().unwrap(), 0);
    }
}
