//! The PostgreSQL backend: the same rules as SQLite on a server, for a bot
//! whose decisions are made from other machines (docs/design.md §4).
//!
//! Two connections, each on its own thread ([`session`]): a reader for the
//! store's reads, which `LISTEN`s for commits ([`Store::data_version`]),
//! and a writer holding one transaction at a time. Write transactions take
//! one advisory lock, as SQLite has one writer; appends lock their source's
//! head row, so `seq` is gap-free and commits in order per source; every
//! commit `NOTIFY`s, so a `serve` elsewhere notices a decision.

/// The `pg_locks` condition of a granted `bigint` advisory lock of this
/// database whose key is `$1`: the key's high half shows in `classid`, its
/// low half in `objid`, with `objsubid` 1 (the lease's and the writer's
/// holders are found by it). Any role may read `pg_locks`.
macro_rules! advisory_key_held {
    ($locks:literal) => {
        concat!(
            $locks,
            ".locktype = 'advisory' AND ",
            $locks,
            ".granted AND ",
            $locks,
            ".objsubid = 1 AND ",
            $locks,
            ".database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND (",
            $locks,
            ".classid::bigint << 32 | ",
            $locks,
            ".objid::bigint) = $1"
        )
    };
}

mod connect;
pub(crate) mod lease;
mod read;
pub(crate) mod readonly;
mod schema;
mod session;
mod tls;
pub(crate) mod usage;
mod waits;
mod write;

use std::sync::{Mutex, MutexGuard};

use fallible_iterator::FallibleIterator;

use stream_core::canon::Hashed;
use stream_core::{
    DocumentId, EventId, NewEvent, RunId, Sha256Hex, SnapshotId, SourceName, StoredEvent, VersionId,
};

pub use schema::PG_SCHEMA_VERSION;
pub use tls::TlsRefusal;

use connect::Connector;
use session::Session;

use crate::lease::{Lease, LeaseAttempt, LeaseHolder, LeaseState};
use crate::{
    AppendOutcome, DocumentRow, EventQuery, Progress, Read, RunRow, RunStatus, Store, StoreError,
    Tx, VersionRow,
};

/// The notification channel every commit signals.
const COMMITS: &str = "thestream_commit";

/// Every write transaction takes this advisory lock first, as SQLite's
/// `BEGIN IMMEDIATE` takes its one write lock: writers commit one at a time,
/// so `pos` order is commit order and a read-then-write decision of the
/// layers above sees no concurrent writer (docs/design.md §4). The key is
/// "tStrWrit" in ASCII. A session holding it elsewhere makes a write wait,
/// named in the log ([`waits::begin_writing`]).
const BEGIN: &str = "BEGIN; SELECT pg_advisory_xact_lock(8382171365908834676)";

/// The writer lock's key, as [`BEGIN`] spells it.
const WRITER_LOCK: i64 = 8_382_171_365_908_834_676;

/// A client error as text: the SQLSTATE and the server's primary message,
/// never its detail (which can quote row values, i.e. content).
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

pub(crate) fn backend(e: postgres::Error) -> StoreError {
    StoreError::Backend(format!("postgres: {}", describe(&e)))
}

/// A store in one PostgreSQL database.
pub struct PostgresStore {
    label: String,
    /// Kept for the lease's own session ([`PostgresStore::try_lease`]).
    connector: Connector,
    /// The session that asked for the lease and was refused, kept to ask
    /// again.
    lease_asker: Mutex<Option<lease::Asker>>,
    reader: Session,
    writer: Mutex<Session>,
    /// Commit notifications seen by the reader so far.
    commits: Mutex<u64>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.label)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (a libpq URL or key/value string;
    /// TLS unless `sslmode=disable` to this machine, `tls::policy`) and
    /// applies migrations. Refuses,
    /// writing nothing, a database holding other tables and a newer schema.
    /// No error repeats the URL.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let connector = Connector::parse(url)?;
        let label = connector.label().to_owned();
        let writer = Session::open(connector.with_setup(waits::writer_setup()))?;
        let schema_label = label.clone();
        writer.call(move |c| schema::migrate(c.client()?, &schema_label))?;
        let reader = Session::open(connector.with_setup(waits::reader_setup(
            "LISTEN thestream_commit; SET application_name = 'thestream-listener'",
        )))?;
        Ok(Self {
            label,
            connector,
            lease_asker: Mutex::new(None),
            reader,
            writer: Mutex::new(writer),
            commits: Mutex::new(0),
        })
    }

    /// `postgres://host:port/dbname`, for messages (no user, no password).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Takes the serve lease without waiting (`lease`): a session
    /// advisory lock on a connection of its own; once held, `holder` is
    /// written to the control row [`crate::LEASE_ROW`]. When another
    /// session holds it, that row names the holder.
    pub fn try_lease(&self, holder: LeaseHolder) -> Result<LeaseAttempt, StoreError> {
        let mut slot = self.lease_asker.lock().unwrap_or_else(|p| p.into_inner());
        let asker = match slot.take() {
            Some(asker) => asker,
            None => lease::Asker::start(&self.connector)?,
        };
        if !asker.ask()? {
            *slot = Some(asker);
            drop(slot);
            let named = self
                .control(crate::LEASE_ROW)?
                .and_then(|row| serde_json::from_value(row).ok());
            return Ok(LeaseAttempt::Taken(named));
        }
        drop(slot);
        let held = asker.into_lease();
        let row = serde_json::to_value(&holder).map_err(|e| StoreError::Backend(e.to_string()))?;
        let mut tx = self.begin()?;
        tx.set_control(crate::LEASE_ROW, &row)?;
        tx.commit()?;
        Ok(LeaseAttempt::Held(Lease::postgres(holder, held)))
    }

    /// Runs `f` on the writer's connection, outside any transaction.
    #[cfg(test)]
    pub(crate) fn raw_writer<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut session::Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        lock(&self.writer).call(f)
    }

    /// Runs `f` on the reader's connection.
    #[cfg(test)]
    pub(crate) fn raw_reader<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut session::Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.reader.call(f)
    }

    /// Whether a session holds the serve lease, read from `pg_locks`
    /// (taking nothing).
    pub fn lease_state(&self) -> Result<LeaseState, StoreError> {
        let taken = self.reader.call(|c| {
            let row = c
                .client()?
                .query_one(lease::HELD, &[&lease::LEASE_KEY])
                .map_err(backend)?;
            row.try_get::<_, bool>(0).map_err(backend)
        })?;
        if !taken {
            return Ok(LeaseState::Free);
        }
        Ok(LeaseState::Taken(
            self.control(crate::LEASE_ROW)?
                .and_then(|row| serde_json::from_value(row).ok()),
        ))
    }
}

/// Counts the commit notifications `listener` has received (every commit
/// through any store on this database sends one; listening needs no
/// privilege, so a read-only role's session counts them too), plus its
/// reconnections: notifications sent while it was disconnected are lost,
/// so a new connection counts as a change. `commits` keeps the count.
fn commits_seen(listener: &Session, commits: &Mutex<u64>) -> Result<u64, StoreError> {
    let (seen, generation) = listener.call(|c| {
        let client = c.client()?;
        let mut seen = 0u64;
        // An empty round trip: the nonblocking iterator below does not
        // drive the socket itself, this reads what the server sent.
        client.batch_execute("").map_err(backend)?;
        {
            let mut notifications = client.notifications();
            let mut iter = notifications.iter();
            while let Some(n) = iter.next().map_err(backend)? {
                if n.channel() == COMMITS {
                    seen += 1;
                }
            }
        }
        Ok((seen, c.generation()))
    })?;
    let mut commits = lock(commits);
    *commits = commits.wrapping_add(seen);
    Ok(commits.wrapping_add(generation))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a thread panicked mid-call; the connection
    // thread is unaffected and a transaction left open was rolled back.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs a read on the reader outside any transaction, or on the writer
/// inside the caller's.
trait Exec {
    fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut session::Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError>;
}

impl Exec for PostgresStore {
    fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut session::Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.reader.call(f)
    }
}

impl Exec for PgTx<'_> {
    fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut session::Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let generation = self.generation;
        self.session.call(move |c| {
            c.in_transaction(generation)?;
            f(c)
        })
    }
}

macro_rules! impl_read {
    ($ty:ty) => {
        impl Read for $ty {
            fn event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
                let id = id.clone();
                self.exec(move |c| read::read_event(c, &id))
            }
            fn events(&self, query: &EventQuery) -> Result<Vec<StoredEvent>, StoreError> {
                let query = query.clone();
                self.exec(move |c| read::read_events(c, &query))
            }
            fn source_head(&self, source: &SourceName) -> Result<u64, StoreError> {
                let source = source.clone();
                self.exec(move |c| read::read_head(c, &source))
            }
            fn sources(&self) -> Result<Vec<SourceName>, StoreError> {
                self.exec(read::read_sources)
            }
            fn run(&self, id: &RunId) -> Result<Option<RunRow>, StoreError> {
                let id = id.clone();
                self.exec(move |c| read::read_run(c, &id))
            }
            fn runs_with_status(&self, status: RunStatus) -> Result<Vec<RunRow>, StoreError> {
                self.exec(move |c| read::read_runs_with_status(c, status))
            }
            fn progress(&self, consumer: &str) -> Result<Option<Progress>, StoreError> {
                let consumer = consumer.to_owned();
                self.exec(move |c| read::read_progress(c, &consumer))
            }
            fn control(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
                let key = key.to_owned();
                self.exec(move |c| read::read_control(c, &key))
            }
            fn document(&self, id: &DocumentId) -> Result<Option<DocumentRow>, StoreError> {
                let id = id.clone();
                self.exec(move |c| read::read_document(c, &id))
            }
            fn documents(&self, source: &SourceName) -> Result<Vec<DocumentRow>, StoreError> {
                let source = source.clone();
                self.exec(move |c| read::read_documents(c, &source))
            }
            fn version(&self, id: &VersionId) -> Result<Option<VersionRow>, StoreError> {
                let id = id.clone();
                self.exec(move |c| read::read_version(c, &id))
            }
            fn blob(&self, sha256: &Sha256Hex) -> Result<Option<Vec<u8>>, StoreError> {
                let sha256 = sha256.clone();
                self.exec(move |c| read::read_blob(c, &sha256))
            }
            fn snapshot(
                &self,
                id: &SnapshotId,
            ) -> Result<Option<crate::SnapshotBytes>, StoreError> {
                let id = id.clone();
                self.exec(move |c| read::read_snapshot(c, &id))
            }
            fn events_after_position(
                &self,
                after: u64,
                limit: usize,
            ) -> Result<Vec<crate::PositionedEvent>, StoreError> {
                self.exec(move |c| read::read_events_after_position(c, after, limit))
            }
            fn last_position(&self) -> Result<u64, StoreError> {
                self.exec(read::read_last_position)
            }
        }
    };
}

impl_read!(PostgresStore);
impl_read!(PgTx<'_>);
impl_read!(readonly::PostgresReader);

impl Store for PostgresStore {
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError> {
        let session = lock(&self.writer);
        let generation = waits::begin_writing(&session)?;
        Ok(Box::new(PgTx {
            session,
            generation,
            finished: false,
        }))
    }

    fn data_version(&self) -> Result<u64, StoreError> {
        commits_seen(&self.reader, &self.commits)
    }

    /// The server's disk is not visible from here. A server out of space
    /// refuses the receipt's commit, so a reply sent then is sent again
    /// once it has room (at-least-once, as after a crash).
    fn has_room(&self) -> Result<bool, StoreError> {
        Ok(true)
    }
}

/// An open transaction on the writer connection.
struct PgTx<'a> {
    session: MutexGuard<'a, Session>,
    generation: u64,
    finished: bool,
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Queued before the guard is released, so it runs before the
            // next BEGIN; a lost connection has rolled back already.
            self.session.queue(|c| {
                if let Ok(client) = c.client() {
                    let _ = client.batch_execute("ROLLBACK");
                }
            });
        }
    }
}

impl Tx for PgTx<'_> {
    fn append(&mut self, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
        let event = event.clone();
        self.exec(move |c| write::append(c, &event))
    }

    fn put_hashed(&mut self, blob: &Hashed<&[u8]>) -> Result<(), StoreError> {
        let (sha, bytes) = (blob.sha256().clone(), blob.bytes().to_vec());
        self.exec(move |c| write::put_hashed(c, &sha, &bytes))
    }

    fn put_snapshot(&mut self, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
        let (id, bytes) = (id.clone(), bytes.to_vec());
        self.exec(move |c| write::put_snapshot(c, &id, &bytes))
    }

    fn put_run(&mut self, run: &RunRow) -> Result<(), StoreError> {
        let run = run.clone();
        self.exec(move |c| write::put_run(c, &run))
    }

    fn set_progress(&mut self, consumer: &str, progress: &Progress) -> Result<(), StoreError> {
        let (consumer, progress) = (consumer.to_owned(), progress.clone());
        self.exec(move |c| write::set_progress(c, &consumer, &progress))
    }

    fn set_control(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        let (key, value) = (key.to_owned(), value.clone());
        self.exec(move |c| write::set_control(c, &key, &value))
    }

    fn ensure_document(
        &mut self,
        id: &DocumentId,
        source: &SourceName,
        path: &str,
    ) -> Result<(), StoreError> {
        let (id, source, path) = (id.clone(), source.clone(), path.to_owned());
        self.exec(move |c| write::ensure_document(c, &id, &source, &path))
    }

    fn insert_version(&mut self, version: &VersionRow) -> Result<(), StoreError> {
        let version = version.clone();
        self.exec(move |c| write::insert_version(c, &version))
    }

    fn set_current_version(
        &mut self,
        doc: &DocumentId,
        version: &VersionId,
    ) -> Result<(), StoreError> {
        let (doc, version) = (doc.clone(), version.clone());
        self.exec(move |c| write::set_current_version(c, &doc, &version))
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        let generation = self.generation;
        let result = self.session.call(move |c| {
            let client = c.in_transaction(generation)?;
            client
                .batch_execute("NOTIFY thestream_commit; COMMIT")
                .map_err(backend)
        });
        // On a failed COMMIT the server has rolled back; Drop's ROLLBACK
        // is then a harmless warning.
        self.finished = result.is_ok();
        result
    }
}
