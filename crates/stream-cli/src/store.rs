//! The configured store, whichever backend holds it.

use std::time::Duration;

use stream_store::{
    Lease, LeaseAttempt, LeaseHolder, LeaseLost, LeaseState, PostgresStore, ReadOnlyStore,
    SqliteStore, Store, StoreError, Tx,
};

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

    /// Takes the serve lease without waiting (`stream_store::lease`).
    pub fn try_lease(&self, holder: LeaseHolder) -> Result<LeaseAttempt, StoreError> {
        match self {
            Self::Sqlite(s) => s.try_lease(holder),
            Self::Postgres(s) => s.try_lease(holder),
        }
    }

    /// Whether someone holds the serve lease, without keeping it.
    pub fn lease_state(&self) -> Result<LeaseState, StoreError> {
        match self {
            Self::Sqlite(s) => s.lease_state(),
            Self::Postgres(s) => s.lease_state(),
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

/// Activation waits for a serve that holds the lease, wherever it runs.
impl stream_engine::cooperation::ServeLease for OpenedStore {
    fn held(&self) -> Option<bool> {
        match self.lease_state() {
            Ok(LeaseState::Free) => Some(false),
            Ok(LeaseState::Taken(_)) => Some(true),
            Err(_) => None,
        }
    }
}

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

/// How often a standby asks for the lease, and how long a `serve` that
/// found it taken keeps asking before it refuses (a probe holds SQLite's
/// lock for an instant: `stream_store::lease`).
const LEASE_POLL: Duration = Duration::from_millis(250);
const LEASE_REFUSE_AFTER: u32 = 4;

/// The one refusal of a command that needs the serve lease while another
/// process holds it (exit 2), naming the holder: host, pid and start.
pub fn lease_taken(holder: Option<&LeaseHolder>, needs: &str) -> Failure {
    let who = holder.map_or_else(
        || "another thestream (not yet named)".to_owned(),
        |h| format!("another thestream ({h})"),
    );
    Failure::usage(anyhow::anyhow!(
        "{who} holds this store's serve lease: {needs}"
    ))
}

/// Takes the serve lease for this process, or refuses naming its holder
/// ([`lease_taken`]) after a few quick tries.
pub fn take_lease(store: &OpenedStore, needs: &str) -> Result<Lease, Failure> {
    let mut tries = 0;
    loop {
        match store.try_lease(LeaseHolder::this_process())? {
            LeaseAttempt::Held(lease) => return Ok(lease),
            LeaseAttempt::Taken(holder) => {
                tries += 1;
                if tries >= LEASE_REFUSE_AFTER {
                    return Err(lease_taken(holder.as_ref(), needs));
                }
            }
        }
        std::thread::sleep(LEASE_POLL);
    }
}

/// Waits for the serve lease (`serve --standby`), saying once that it
/// waits and for whom (and again when the holder changes).
pub async fn wait_for_lease(store: &OpenedStore) -> Result<Lease, Failure> {
    let mut told: Option<Option<LeaseHolder>> = None;
    loop {
        let attempt = tokio::task::block_in_place(|| store.try_lease(LeaseHolder::this_process()))?;
        match attempt {
            LeaseAttempt::Held(lease) => {
                if told.is_some() {
                    tracing::info!("standby: took the serve lease; serving");
                }
                return Ok(lease);
            }
            LeaseAttempt::Taken(holder) => {
                if told.as_ref() != Some(&holder) {
                    match &holder {
                        Some(h) => {
                            tracing::info!(holder = %h, "standby: waiting for the serve lease")
                        }
                        None => tracing::info!(
                            "standby: waiting for the serve lease (holder not yet named)"
                        ),
                    }
                    told = Some(holder);
                }
            }
        }
        tokio::time::sleep(LEASE_POLL).await;
    }
}

/// Completes when the lease is lost, with why; never while it holds.
pub async fn lease_lost(lease: &Lease) -> LeaseLost {
    loop {
        if let Err(lost) = lease.check() {
            return lost;
        }
        tokio::time::sleep(LEASE_POLL).await;
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
