//! The SQLite backend: WAL, `synchronous=FULL`, one writer connection per
//! process, `BEGIN IMMEDIATE`, and a busy timeout so that a running `serve`
//! and a CLI decision can write one file safely.

pub(crate) mod events;
pub(crate) mod migrate;
pub(crate) mod parts;
pub(crate) mod readonly;
pub(crate) mod usage;

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};
use stream_core::{
    DocumentId, EventId, NewEvent, RunId, Sha256Hex, SnapshotId, SourceName, StoredEvent,
    VersionId,
    canon::{Hashed, sha256},
};

use crate::{
    AppendOutcome, DiskFault, DocumentRow, EventQuery, Progress, Read, Recovery, RunRow, RunStatus,
    Store, StoreError, Tx, VersionRow,
};
use events::{
    insert_event, read_event, read_events, read_events_after_position, read_last_position,
};
use migrate::{Budget, check_identity, migrate};
use parts::{KeyForm, put_snapshot, read_snapshot};

const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A store in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    /// The fault that stopped this store ([`Recovery::Stop`]): from then
    /// on nothing is begun or committed through it.
    stopped: OnceLock<(DiskFault, i32)>,
}

pub(crate) fn backend(e: rusqlite::Error) -> StoreError {
    match disk_fault(&e) {
        Some((fault, code)) => StoreError::Disk { fault, code },
        None => StoreError::Backend(e.to_string()),
    }
}

/// The one classification of SQLite's I/O failures (its unix VFS turns
/// ENOSPC on a write into `SQLITE_FULL`, a failed `fsync` into
/// `SQLITE_IOERR_FSYNC`, anything else into another `SQLITE_IOERR_*`).
/// An I/O error it does not name is [`DiskFault::Io`], which stops serve.
fn disk_fault(e: &rusqlite::Error) -> Option<(DiskFault, i32)> {
    use rusqlite::ffi;
    let code = e.sqlite_extended_error_code()?;
    let fault = match code & 0xff {
        ffi::SQLITE_FULL => DiskFault::Full,
        ffi::SQLITE_IOERR => match code {
            ffi::SQLITE_IOERR_FSYNC | ffi::SQLITE_IOERR_DIR_FSYNC => DiskFault::Sync,
            _ => DiskFault::Io,
        },
        _ => return None,
    };
    Some((fault, code))
}

pub(crate) fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.display().to_string(),
        },
        _ => backend(e),
    }
}

pub(crate) fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A poisoned lock only means another thread panicked mid-call; SQLite
    // rolls back any open transaction, so the connection is still sound.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn configure(path: &Path, conn: &Connection) -> Result<(), StoreError> {
    configure_reads(conn)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Backend(format!(
            "journal mode is {mode}, not wal"
        )));
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(|e| classify(path, e))
}

/// What every connection that reads needs, the read-only one's included:
/// none of it writes to the file.
pub(crate) fn configure_reads(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
    // Without it, a cached statement is compiled again after every new
    // binding (the bundled SQLite has STAT4; `sqlite::tests` says more).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(backend)?;
    // A level of snapshot parts is read with its keys bound as one array.
    rusqlite::vtab::array::load_module(conn).map_err(backend)?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, applying migrations.
    ///
    /// Refuses a corrupt file, a database of another application, and a
    /// schema newer than this build, without writing anything. The file
    /// and its `-wal`/`-shm` are owner-only (0600), created so or tightened.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        crate::private::make_private(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let writer = Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))?;
        writer.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
        check_identity(path, &writer)?;
        configure(path, &writer)?;
        migrate(path, &writer, &Budget::OPEN)?;
        let reader = Connection::open_with_flags(path, flags).map_err(|e| classify(path, e))?;
        configure(path, &reader)?;
        Ok(Self {
            path: path.to_owned(),
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            stopped: OnceLock::new(),
        })
    }

    /// After a failed sync the kernel may have dropped pages it never
    /// wrote, and a later sync that succeeds proves nothing (PostgreSQL's
    /// "fsyncgate"): once a fault whose [`StoreError::recovery`] is
    /// [`Recovery::Stop`] was seen, every later begin, commit and data
    /// version check fails with it, so that nothing more is committed or
    /// confirmed on the strength of this process's view of the file.
    fn check_stopped(&self) -> Result<(), StoreError> {
        match self.stopped.get() {
            Some(&(fault, code)) => Err(StoreError::Disk { fault, code }),
            None => Ok(()),
        }
    }

    /// Passes `result` on, remembering a fault that stops the store.
    fn seen<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(e @ StoreError::Disk { fault, code }) = &result
            && e.recovery() == Recovery::Stop
        {
            let _ = self.stopped.set((*fault, *code));
        }
        result
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the serve lease without waiting (`lease`): an
    /// exclusive `flock` on `store.db.lease` beside the file, which names
    /// its holder.
    pub fn try_lease(&self, holder: crate::LeaseHolder) -> Result<crate::LeaseAttempt, StoreError> {
        crate::lease::try_file(&self.path, holder)
    }

    /// Whether someone holds the serve lease, without keeping it.
    pub fn lease_state(&self) -> Result<crate::LeaseState, StoreError> {
        crate::lease::probe_file(&self.path)
    }

    /// Opens `path` and migrates it, but stops a data rewrite after
    /// `transactions` committed transactions of `rows` rows each, as a kill
    /// between two of them would. Returns whether the migration finished.
    #[cfg(feature = "conformance")]
    pub fn migrate_interrupted(
        path: &Path,
        rows: usize,
        transactions: usize,
    ) -> Result<bool, StoreError> {
        let conn = Connection::open(path).map_err(|e| classify(path, e))?;
        check_identity(path, &conn)?;
        configure(path, &conn)?;
        let budget = Budget {
            rows,
            transactions: Some(transactions),
        };
        Ok(migrate(path, &conn, &budget)? == migrate::Done::Finished)
    }

    /// Runs `f` on the reader connection (statistics and backup read
    /// through it while other connections write).
    pub(crate) fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> T) -> T {
        f(&lock(&self.reader))
    }
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn invalid(what: &str) -> StoreError {
    StoreError::InvalidRow {
        what: what.to_owned(),
    }
}

fn parse_id<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, StoreError> {
    s.parse().map_err(|_| invalid(what))
}

/// An id or blob key as stored: 32 raw bytes (blob keys since the
/// binary-key rebuild, event and run ids since schema 10), turned back
/// into the hex the API speaks by the caller's `from_bytes`.
pub(crate) fn raw_key(raw: &[u8], what: &str) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(raw).map_err(|_| invalid(what))
}

/// `query_row` on a statement kept in the connection's cache: these run on
/// every turn, and parsing their SQL each time showed in profiles.
pub(crate) fn cached_row<T, P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(params, f)
}

/// `execute` on a statement kept in the connection's cache.
fn cached_execute<P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(params)
}

pub(crate) fn to_i64(n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError::Backend("integer out of range".into()))
}

// --- reads shared by the store (reader connection) and a transaction (writer) ---

/// Where blob column `column` equals key `key` (SQL expressions): through
/// the index on the key's first 8 bytes (schema 13), then the whole key.
/// Every lookup of a blob by key is written with it.
pub(crate) fn blob_key(column: &str, key: &str) -> String {
    format!("substr({column}, 1, 8) = substr({key}, 1, 8) AND {column} = {key}")
}

/// Stores blob `?2` under key `?1` unless a blob has that key: keys are
/// unique because every insert is this one, inside the single write
/// transaction (schema 13 has no unique index to do it). Written once, not
/// on each of the dozen inserts of a turn.
pub(crate) static INSERT_BLOB: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO blobs (sha256, bytes) SELECT ?1, ?2 \
         WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE {})",
        blob_key("sha256", "?1")
    )
});

/// One blob's bytes by key.
pub(crate) static READ_BLOB: LazyLock<String> =
    LazyLock::new(|| format!("SELECT bytes FROM blobs WHERE {}", blob_key("sha256", "?1")));

/// Stores `bytes` under their SHA-256, once.
pub(crate) fn insert_blob(c: &Connection, bytes: &[u8]) -> Result<Sha256Hex, StoreError> {
    let blob = Hashed::new(bytes);
    insert_hashed(c, &blob)?;
    Ok(blob.sha256().clone())
}

fn insert_hashed(c: &Connection, blob: &Hashed<&[u8]>) -> Result<(), StoreError> {
    cached_execute(
        c,
        &INSERT_BLOB,
        params![blob.sha256().to_bytes(), blob.bytes()],
    )
    .map_err(backend)?;
    Ok(())
}

fn read_head(c: &Connection, source: &SourceName) -> Result<u64, StoreError> {
    let head: i64 = cached_row(
        c,
        "SELECT COALESCE(MAX(seq), 0) FROM events \
         WHERE source = (SELECT code FROM names WHERE name = ?1)",
        [source.as_str()],
        |r| r.get(0),
    )
    .map_err(backend)?;
    u64::try_from(head).map_err(|_| invalid("seq"))
}

/// Every source, one index seek per source: `SELECT DISTINCT` walked the
/// whole `(source, seq)` index, 26 ms at 10^5 events on every delivery pass.
/// The index holds codes (schema 12), so the names are sorted after.
const SOURCES_SQL: &str = "WITH RECURSIVE s (source) AS ( \
       SELECT MIN(source) FROM events \
       UNION ALL \
       SELECT (SELECT MIN(source) FROM events WHERE source > s.source) FROM s \
       WHERE s.source IS NOT NULL) \
     SELECT n.name FROM s JOIN names n ON n.code = s.source";

fn read_sources(c: &Connection) -> Result<Vec<SourceName>, StoreError> {
    let mut stmt = c.prepare_cached(SOURCES_SQL).map_err(backend)?;
    let mut names = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    names.sort();
    names
        .into_iter()
        .map(|n| SourceName::new(n).map_err(|_| invalid("source")))
        .collect()
}

const RUN_COLUMNS: &str =
    "run_id, agent_id, agent_version, trigger_event, status, attempts, snapshot_id";

// Ids as their 32 raw bytes (schema 10).
type RawRun = (Vec<u8>, String, i64, Vec<u8>, String, i64, Option<Vec<u8>>);

fn raw_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawRun> {
    RawRun::try_from(r)
}

fn decode_run(raw: RawRun) -> Result<RunRow, StoreError> {
    let (run_id, agent_id, version, trigger, status, attempts, snapshot) = raw;
    let what = "run";
    Ok(RunRow {
        run_id: RunId::from_bytes(raw_key(&run_id, what)?),
        agent_id,
        agent_version: u32::try_from(version).map_err(|_| invalid(what))?,
        trigger_event_id: EventId::from_bytes(raw_key(&trigger, what)?),
        status: RunStatus::parse(&status).ok_or_else(|| invalid(what))?,
        attempts: u32::try_from(attempts).map_err(|_| invalid(what))?,
        snapshot_id: snapshot
            .as_deref()
            .map(|s| raw_key(s, what).map(SnapshotId::from_bytes))
            .transpose()?,
    })
}

fn read_run(c: &Connection, id: &RunId) -> Result<Option<RunRow>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?1");
    cached_row(c, &sql, [id.to_bytes()], raw_run)
        .optional()
        .map_err(backend)?
        .map(decode_run)
        .transpose()
}

fn read_runs_with_status(c: &Connection, status: RunStatus) -> Result<Vec<RunRow>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE status = ?1 ORDER BY pos");
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt
        .query_map([status.as_str()], raw_run)
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    rows.into_iter().map(decode_run).collect()
}

fn read_progress(c: &Connection, consumer: &str) -> Result<Option<Progress>, StoreError> {
    let row: Option<(String, i64)> = cached_row(
        c,
        "SELECT source, seq FROM progress WHERE consumer = ?1",
        [consumer],
        |r| r.try_into(),
    )
    .optional()
    .map_err(backend)?;
    row.map(|(source, seq)| {
        Ok(Progress {
            source: SourceName::new(source).map_err(|_| invalid("progress"))?,
            seq: u64::try_from(seq).map_err(|_| invalid("progress"))?,
        })
    })
    .transpose()
}

fn read_control(c: &Connection, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
    let row: Option<String> =
        cached_row(c, "SELECT value FROM controls WHERE key = ?1", [key], |r| {
            r.get(0)
        })
        .optional()
        .map_err(backend)?;
    row.map(|v| serde_json::from_str(&v).map_err(|_| invalid("control")))
        .transpose()
}

type RawDoc = (String, String, String, Option<String>);

fn decode_doc(raw: RawDoc) -> Result<DocumentRow, StoreError> {
    let (id, source, path, current) = raw;
    Ok(DocumentRow {
        id: parse_id(&id, "document")?,
        source: SourceName::new(source).map_err(|_| invalid("document"))?,
        path,
        current_version: current
            .as_deref()
            .map(|s| parse_id(s, "document"))
            .transpose()?,
    })
}

fn raw_doc(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawDoc> {
    RawDoc::try_from(r)
}

fn read_document(c: &Connection, id: &DocumentId) -> Result<Option<DocumentRow>, StoreError> {
    cached_row(
        c,
        "SELECT doc_id, source, path, current_version FROM documents WHERE doc_id = ?1",
        [id.as_str()],
        raw_doc,
    )
    .optional()
    .map_err(backend)?
    .map(decode_doc)
    .transpose()
}

fn read_documents(c: &Connection, source: &SourceName) -> Result<Vec<DocumentRow>, StoreError> {
    let mut stmt = c
        .prepare_cached(
            "SELECT doc_id, source, path, current_version FROM documents WHERE source = ?1 ORDER BY path",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map([source.as_str()], raw_doc)
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    rows.into_iter().map(decode_doc).collect()
}

type RawVersion = (String, String, Vec<u8>, i64, String, Option<String>);

fn read_version(c: &Connection, id: &VersionId) -> Result<Option<VersionRow>, StoreError> {
    let row: Option<RawVersion> = cached_row(
        c,
        "SELECT version_id, doc_id, sha256, size, content_type, prev_version \
             FROM document_versions WHERE version_id = ?1",
        [id.as_str()],
        |r| r.try_into(),
    )
    .optional()
    .map_err(backend)?;
    row.map(|(id, doc, sha, size, content_type, prev)| {
        let what = "document version";
        Ok(VersionRow {
            id: parse_id(&id, what)?,
            document_id: parse_id(&doc, what)?,
            sha256: Sha256Hex::from_bytes(raw_key(&sha, what)?),
            size: u64::try_from(size).map_err(|_| invalid(what))?,
            content_type,
            previous_version: prev.as_deref().map(|s| parse_id(s, what)).transpose()?,
        })
    })
    .transpose()
}

pub(crate) fn read_blob(c: &Connection, sha: &Sha256Hex) -> Result<Option<Vec<u8>>, StoreError> {
    c.prepare_cached(&READ_BLOB)
        .and_then(|mut s| s.query_row([sha.to_bytes()], |r| r.get(0)).optional())
        .map_err(backend)
}

macro_rules! impl_read {
    ($ty:ty, $conn:ident => $get:expr) => {
        impl Read for $ty {
            fn event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
                let $conn = self;
                read_event(&$get, id)
            }
            fn events(&self, query: &EventQuery) -> Result<Vec<StoredEvent>, StoreError> {
                let $conn = self;
                read_events(&$get, query)
            }
            fn source_head(&self, source: &SourceName) -> Result<u64, StoreError> {
                let $conn = self;
                read_head(&$get, source)
            }
            fn sources(&self) -> Result<Vec<SourceName>, StoreError> {
                let $conn = self;
                read_sources(&$get)
            }
            fn run(&self, id: &RunId) -> Result<Option<RunRow>, StoreError> {
                let $conn = self;
                read_run(&$get, id)
            }
            fn runs_with_status(&self, status: RunStatus) -> Result<Vec<RunRow>, StoreError> {
                let $conn = self;
                read_runs_with_status(&$get, status)
            }
            fn progress(&self, consumer: &str) -> Result<Option<Progress>, StoreError> {
                let $conn = self;
                read_progress(&$get, consumer)
            }
            fn control(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
                let $conn = self;
                read_control(&$get, key)
            }
            fn document(&self, id: &DocumentId) -> Result<Option<DocumentRow>, StoreError> {
                let $conn = self;
                read_document(&$get, id)
            }
            fn documents(&self, source: &SourceName) -> Result<Vec<DocumentRow>, StoreError> {
                let $conn = self;
                read_documents(&$get, source)
            }
            fn version(&self, id: &VersionId) -> Result<Option<VersionRow>, StoreError> {
                let $conn = self;
                read_version(&$get, id)
            }
            fn blob(&self, sha256: &Sha256Hex) -> Result<Option<Vec<u8>>, StoreError> {
                let $conn = self;
                read_blob(&$get, sha256)
            }
            fn snapshot(
                &self,
                id: &SnapshotId,
            ) -> Result<Option<crate::SnapshotBytes>, StoreError> {
                let $conn = self;
                read_snapshot(&$get, id)
            }
            fn events_after_position(
                &self,
                after: u64,
                limit: usize,
            ) -> Result<Vec<crate::PositionedEvent>, StoreError> {
                let $conn = self;
                read_events_after_position(&$get, after, limit)
            }
            fn last_position(&self) -> Result<u64, StoreError> {
                let $conn = self;
                read_last_position(&$get)
            }
        }
    };
}

impl_read!(SqliteStore, s => lock(&s.reader));
impl_read!(SqliteTx<'_>, t => t.conn);
impl_read!(readonly::SqliteReader, s => lock(&s.conn));

impl Store for SqliteStore {
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError> {
        self.check_stopped()?;
        let conn = lock(&self.writer);
        self.seen(
            cached_execute(&conn, "BEGIN IMMEDIATE", []).map_err(|e| classify(&self.path, e)),
        )?;
        Ok(Box::new(SqliteTx {
            conn,
            store: self,
            finished: false,
        }))
    }

    fn data_version(&self) -> Result<u64, StoreError> {
        self.check_stopped()?;
        // The reader never writes, so every commit (the writer connection's
        // included) changes its data_version.
        self.seen(data_version(&lock(&self.reader)))
    }

    fn has_room(&self) -> Result<bool, StoreError> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let fs = rustix::fs::statvfs(dir)
            .map_err(|e| StoreError::Backend(format!("free space of the store's folder: {e}")))?;
        Ok(fs.f_bavail.saturating_mul(fs.f_frsize) >= crate::COMMIT_ROOM)
    }
}

/// `PRAGMA data_version` of a connection: it changes at every commit made
/// by another connection, so on one that never writes, at every commit.
pub(crate) fn data_version(c: &Connection) -> Result<u64, StoreError> {
    c.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
        .map(|v| v.unsigned_abs())
        .map_err(backend)
}

/// An open `BEGIN IMMEDIATE` transaction on the writer connection.
struct SqliteTx<'a> {
    conn: MutexGuard<'a, Connection>,
    store: &'a SqliteStore,
    finished: bool,
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Rollback on drop; if it fails the connection's next BEGIN fails
            // loudly rather than committing half a transaction.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

impl Tx for SqliteTx<'_> {
    fn append(&mut self, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
        // Refuse an envelope whose hash does not match its bytes: the
        // identity rule compares hashes, so they must be true.
        if sha256(&event.payload) != event.payload_sha256 {
            return Err(invalid("payload hash"));
        }
        if let Some(existing) = read_event(&self.conn, &event.id)? {
            return Ok(if crate::same_content(&existing, event) {
                AppendOutcome::Converged { seq: existing.seq }
            } else {
                AppendOutcome::Conflict
            });
        }
        let seq = read_head(&self.conn, &event.source)? + 1;
        insert_event(&self.conn, event, seq)?;
        Ok(AppendOutcome::Inserted { seq })
    }

    fn put_hashed(&mut self, blob: &Hashed<&[u8]>) -> Result<(), StoreError> {
        insert_hashed(&self.conn, blob)
    }

    fn put_snapshot(&mut self, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
        put_snapshot(&self.conn, id, bytes, KeyForm::Raw)
    }

    fn put_run(&mut self, run: &RunRow) -> Result<(), StoreError> {
        cached_execute(&self.conn,
                "INSERT INTO runs (run_id, agent_id, agent_version, trigger_event, status, attempts, snapshot_id) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                 ON CONFLICT (run_id) DO UPDATE SET agent_id = ?2, agent_version = ?3, \
                 trigger_event = ?4, status = ?5, attempts = ?6, snapshot_id = ?7",
                params![
                    run.run_id.to_bytes(),
                    run.agent_id,
                    run.agent_version,
                    run.trigger_event_id.to_bytes(),
                    run.status.as_str(),
                    run.attempts,
                    run.snapshot_id.as_ref().map(|s| s.to_bytes()),
                ],
            )
            .map_err(backend)?;
        Ok(())
    }

    fn set_progress(&mut self, consumer: &str, progress: &Progress) -> Result<(), StoreError> {
        cached_execute(
            &self.conn,
            "INSERT INTO progress (consumer, source, seq) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (consumer) DO UPDATE SET source = ?2, seq = ?3",
            params![consumer, progress.source.as_str(), to_i64(progress.seq)?],
        )
        .map_err(backend)?;
        Ok(())
    }

    fn set_control(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        cached_execute(
            &self.conn,
            "INSERT INTO controls (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = ?2",
            params![key, value.to_string()],
        )
        .map_err(backend)?;
        Ok(())
    }

    fn ensure_document(
        &mut self,
        id: &DocumentId,
        source: &SourceName,
        path: &str,
    ) -> Result<(), StoreError> {
        match read_document(&self.conn, id)? {
            Some(doc) if doc.source == *source && doc.path == path => Ok(()),
            Some(_) => Err(StoreError::DocumentConflict { id: id.clone() }),
            None => {
                cached_execute(&self.conn,
                        "INSERT INTO documents (doc_id, source, path, current_version) VALUES (?1, ?2, ?3, NULL)",
                        params![id.as_str(), source.as_str(), path],
                    )
                    .map_err(|e| match e.sqlite_error_code() {
                        Some(ErrorCode::ConstraintViolation) => {
                            StoreError::DocumentConflict { id: id.clone() }
                        }
                        _ => backend(e),
                    })?;
                Ok(())
            }
        }
    }

    fn insert_version(&mut self, version: &VersionRow) -> Result<(), StoreError> {
        if let Some(existing) = read_version(&self.conn, &version.id)? {
            return if existing == *version {
                Ok(())
            } else {
                Err(StoreError::VersionConflict {
                    id: version.id.clone(),
                })
            };
        }
        if read_document(&self.conn, &version.document_id)?.is_none() {
            return Err(StoreError::Missing {
                what: format!("document {}", version.document_id),
            });
        }
        if read_blob(&self.conn, &version.sha256)?.is_none() {
            return Err(StoreError::Missing {
                what: format!("blob {}", version.sha256),
            });
        }
        cached_execute(&self.conn,
                "INSERT INTO document_versions (version_id, doc_id, sha256, size, content_type, prev_version) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    version.id.as_str(),
                    version.document_id.as_str(),
                    version.sha256.to_bytes(),
                    to_i64(version.size)?,
                    version.content_type,
                    version.previous_version.as_ref().map(VersionId::as_str),
                ],
            )
            .map_err(backend)?;
        Ok(())
    }

    fn set_current_version(
        &mut self,
        doc: &DocumentId,
        version: &VersionId,
    ) -> Result<(), StoreError> {
        match read_version(&self.conn, version)? {
            Some(v) if v.document_id == *doc => {}
            Some(_) | None => {
                return Err(StoreError::Missing {
                    what: format!("version {version} of document {doc}"),
                });
            }
        }
        cached_execute(
            &self.conn,
            "UPDATE documents SET current_version = ?2 WHERE doc_id = ?1",
            params![doc.as_str(), version.as_str()],
        )
        .map_err(backend)?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        // A fault seen by another transaction since this one began.
        self.store.check_stopped()?;
        let result = self.store.seen(
            cached_execute(&self.conn, "COMMIT", [])
                .map(drop)
                .map_err(backend),
        );
        // On a failed COMMIT, Drop rolls back.
        self.finished = result.is_ok();
        result
    }
}

#[cfg(test)]
mod tests;
