//! Schema versions, applied in order at open. SQL steps run in one
//! transaction each; a data rewrite runs in bounded transactions that each
//! commit, so a store killed in the middle reopens and finishes it.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use stream_core::SnapshotId;
use stream_core::canon::sha256;

use crate::StoreError;
use crate::sqlite::parts::{KeyForm, put_snapshot};
use crate::sqlite::{backend, classify};

/// `PRAGMA application_id` of a thestream store ("tStr").
const APPLICATION_ID: i32 = 0x7453_7472;

/// One schema version.
enum Step {
    /// DDL, applied with the version bump in one transaction.
    Sql(&'static str),
    /// DDL rebuilding a table that others refer to, applied like `Sql` but
    /// with foreign keys off (SQLite's procedure for such changes: they
    /// cannot be switched inside a transaction, and dropping the old table
    /// with them on would delete through the references), and every
    /// reference checked before the commit.
    Rebuild(&'static str),
    /// A data rewrite in bounded, resumable transactions.
    Rewrite(fn(&Connection, &Budget) -> Result<Done, StoreError>),
}

/// SQL replacing table `$t` by its rebuilt copy `${t}_raw` (filled in `pos`
/// order) so that its AUTOINCREMENT high-water mark is the old one when
/// that was higher: a position freed by a deleted last row is never handed
/// out again. (`sqlite_sequence` has no unique name, hence no upsert.)
#[rustfmt::skip]
macro_rules! replace_keeping_high_water {
    ($t:literal) => {
        concat!(
            "UPDATE sqlite_sequence SET seq = (SELECT max(seq) FROM sqlite_sequence \
                 WHERE name IN ('", $t, "', '", $t, "_raw')) \
             WHERE name = '", $t, "_raw'; \
             INSERT INTO sqlite_sequence (name, seq) \
                 SELECT '", $t, "_raw', seq FROM sqlite_sequence WHERE name = '", $t, "' \
                 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '", $t, "_raw'); \
             DROP TABLE ", $t, "; \
             ALTER TABLE ", $t, "_raw RENAME TO ", $t, ";"
        )
    };
}

/// Schema migrations, applied in order at open. Index + 1 is the
/// `user_version` after applying it. Never edit a shipped migration.
const MIGRATIONS: &[Step] = &[
    // 1: events, blobs, documents, runs, progress, controls.
    Step::Sql(
        r#"
    CREATE TABLE events (
        pos            INTEGER PRIMARY KEY AUTOINCREMENT,
        id             TEXT NOT NULL UNIQUE,
        source         TEXT NOT NULL,
        seq            INTEGER NOT NULL,
        type           TEXT NOT NULL,
        version        INTEGER NOT NULL,
        authorship     TEXT NOT NULL,
        sensitive      INTEGER NOT NULL,
        root           TEXT,
        parent         TEXT,
        payload        BLOB NOT NULL,
        payload_sha256 TEXT NOT NULL,
        recorded_at    INTEGER NOT NULL,
        UNIQUE (source, seq)
    );
    CREATE INDEX events_by_type ON events (type, pos);
    CREATE INDEX events_by_root ON events (root, pos);
    CREATE INDEX events_by_parent ON events (parent, pos);
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        bytes  BLOB NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE documents (
        doc_id          TEXT PRIMARY KEY,
        source          TEXT NOT NULL,
        path            TEXT NOT NULL,
        current_version TEXT,
        UNIQUE (source, path)
    ) WITHOUT ROWID;
    CREATE TABLE document_versions (
        version_id   TEXT PRIMARY KEY,
        doc_id       TEXT NOT NULL REFERENCES documents (doc_id),
        sha256       TEXT NOT NULL REFERENCES blobs (sha256),
        size         INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        prev_version TEXT
    ) WITHOUT ROWID;
    CREATE TABLE runs (
        pos           INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id        TEXT NOT NULL UNIQUE,
        agent_id      TEXT NOT NULL,
        agent_version INTEGER NOT NULL,
        trigger_event TEXT NOT NULL,
        status        TEXT NOT NULL,
        attempts      INTEGER NOT NULL,
        snapshot_id   TEXT
    );
    CREATE INDEX runs_by_status ON runs (status, pos);
    CREATE TABLE progress (
        consumer TEXT PRIMARY KEY,
        source   TEXT NOT NULL,
        seq      INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE controls (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    ),
    // 2: snapshots stored as content-addressed parts (docs/design.md §4).
    Step::Sql(
        r#"
    CREATE TABLE snapshots (
        id   TEXT PRIMARY KEY,
        root TEXT NOT NULL REFERENCES blobs (sha256)
    ) WITHOUT ROWID;
    CREATE TABLE snapshot_parts (
        sha256 TEXT PRIMARY KEY REFERENCES blobs (sha256)
    ) WITHOUT ROWID;
    "#,
    ),
    // 3: every whole snapshot blob of schema 1 rewritten into parts.
    Step::Rewrite(rewrite_whole_snapshots),
    // 4: parts are recognised by their header (`stream_core::parts::HEADER`),
    // so the table listing their keys again (about 1.4 KiB a turn) goes.
    // Migration 3 still sees it; the parts it writes are not listed, and
    // its whole blobs (JSON) cannot be parts.
    Step::Sql("DROP TABLE snapshot_parts;"),
    // 5: snapshot parts may be `tsp2`, with text blobs (a long string kept
    // as its raw text, the document version's blob). A build that knows
    // only `tsp1` would take such a part for a tampered one and fail runs
    // and decisions; at this version it refuses the store untouched
    // instead. Nothing in the tables changes.
    Step::Sql("-- snapshot parts may be tsp2"),
    // 6: `blobs` becomes a rowid table with a unique key. Without rowid,
    // every comparison of a lookup with a row that overflows its page (a
    // photo, a memory version) read the row's whole overflow chain: in a
    // store with large blobs, finding a small part cost four times as
    // much, and the authority chain finds dozens a decision. One
    // transaction: a store killed during it reopens at schema 5.
    Step::Rebuild(
        r#"
    CREATE TABLE blobs_by_rowid (
        sha256 TEXT NOT NULL UNIQUE,
        bytes  BLOB NOT NULL
    );
    INSERT INTO blobs_by_rowid (sha256, bytes) SELECT sha256, bytes FROM blobs;
    DROP TABLE blobs;
    ALTER TABLE blobs_by_rowid RENAME TO blobs;
    "#,
    ),
    // 7: no query reads events by parent (about 0.3 KiB a turn, and a
    // write on every append).
    Step::Sql("DROP INDEX events_by_parent;"),
    // 8: snapshot parts may be `tsp3`, the ids in their literals packed to
    // raw bytes (about 0.8 KiB a turn). As at 5: a build that knows only
    // `tsp2` refuses the store untouched instead of failing runs and
    // decisions on parts it cannot read. Nothing in the tables changes.
    Step::Sql("-- snapshot parts may be tsp3"),
    // 9, the binary-key rebuild: every blob key, and each reference to one,
    // is the SHA-256's 32 raw bytes instead of its 64 hex digits (twice a
    // blob: row and unique index; ~17 blobs a turn; measured alone, the
    // context bench went from 13.3 to 12.1 KiB stored a turn). The API still speaks
    // hex (`Sha256Hex::to_bytes`/`from_bytes` at the edges). Snapshot ids
    // stay hex (`runs.snapshot_id` became raw at 10). The PostgreSQL
    // backend keeps hex keys: its schema is not changed here. One
    // transaction: a store killed during it reopens at the version
    // before and does it again.
    Step::Rebuild(
        r#"
    CREATE TABLE blobs_raw (
        sha256 BLOB NOT NULL UNIQUE,
        bytes  BLOB NOT NULL
    );
    INSERT INTO blobs_raw (sha256, bytes) SELECT unhex(sha256), bytes FROM blobs;
    DROP TABLE blobs;
    ALTER TABLE blobs_raw RENAME TO blobs;
    CREATE TABLE snapshots_raw (
        id   TEXT PRIMARY KEY,
        root BLOB NOT NULL REFERENCES blobs (sha256)
    ) WITHOUT ROWID;
    INSERT INTO snapshots_raw (id, root) SELECT id, unhex(root) FROM snapshots;
    DROP TABLE snapshots;
    ALTER TABLE snapshots_raw RENAME TO snapshots;
    CREATE TABLE document_versions_raw (
        version_id   TEXT PRIMARY KEY,
        doc_id       TEXT NOT NULL REFERENCES documents (doc_id),
        sha256       BLOB NOT NULL REFERENCES blobs (sha256),
        size         INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        prev_version TEXT
    ) WITHOUT ROWID;
    INSERT INTO document_versions_raw
        SELECT version_id, doc_id, unhex(sha256), size, content_type, prev_version
        FROM document_versions;
    DROP TABLE document_versions;
    ALTER TABLE document_versions_raw RENAME TO document_versions;
    "#,
    ),
    // 10, the binary event and run ids: an event's id, root, parent and
    // payload hash, and a run's id, trigger and snapshot id, are their 32
    // raw bytes instead of 64 hex digits (each id twice where an index
    // holds it too; measured, the context bench went from 11.2 to 9.9 KiB
    // stored a turn). Payloads stay canonical JSON, readable by SQL.
    // Positions and the AUTOINCREMENT high-water marks are kept, so no
    // position is ever handed out twice. PostgreSQL keeps hex, as at 9.
    // One transaction, like 9.
    Step::Rebuild(concat!(
        r#"
    CREATE TABLE events_raw (
        pos            INTEGER PRIMARY KEY AUTOINCREMENT,
        id             BLOB NOT NULL UNIQUE,
        source         TEXT NOT NULL,
        seq            INTEGER NOT NULL,
        type           TEXT NOT NULL,
        version        INTEGER NOT NULL,
        authorship     TEXT NOT NULL,
        sensitive      INTEGER NOT NULL,
        root           BLOB,
        parent         BLOB,
        payload        BLOB NOT NULL,
        payload_sha256 BLOB NOT NULL,
        recorded_at    INTEGER NOT NULL,
        UNIQUE (source, seq)
    );
    INSERT INTO events_raw
        SELECT pos, unhex(id), source, seq, type, version, authorship, sensitive,
               unhex(root), unhex(parent), payload, unhex(payload_sha256), recorded_at
        FROM events ORDER BY pos;
    "#,
        replace_keeping_high_water!("events"),
        r#"
    CREATE INDEX events_by_type ON events (type, pos);
    CREATE INDEX events_by_root ON events (root, pos);
    CREATE TABLE runs_raw (
        pos           INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id        BLOB NOT NULL UNIQUE,
        agent_id      TEXT NOT NULL,
        agent_version INTEGER NOT NULL,
        trigger_event BLOB NOT NULL,
        status        TEXT NOT NULL,
        attempts      INTEGER NOT NULL,
        snapshot_id   BLOB
    );
    INSERT INTO runs_raw
        SELECT pos, unhex(run_id), agent_id, agent_version, unhex(trigger_event), status,
               attempts, unhex(snapshot_id)
        FROM runs ORDER BY pos;
    "#,
        replace_keeping_high_water!("runs"),
        r#"
    CREATE INDEX runs_by_status ON runs (status, pos);
    "#,
    )),
    // 11: an event's longest text (a message, a reply) is stored once, as
    // the text blob its snapshots' transcripts name too
    // (`stream_core::parts::cut_text`): the payload keeps `""` at `text_at`
    // and `text_sha` names the blob (about 0.8 KiB a turn). Events written
    // before keep their whole payloads. PostgreSQL keeps whole payloads.
    Step::Sql(
        r#"
    ALTER TABLE events ADD COLUMN text_at INTEGER;
    ALTER TABLE events ADD COLUMN text_sha BLOB;
    "#,
    ),
    // 12: an event's source and type are codes into `names` instead of
    // their strings, in the row and in the (source, seq) and type indexes
    // (about 0.5 KiB a turn: four events, each naming two strings of 20 to
    // 42 bytes, each twice). Codes are never reassigned. Positions and the
    // high-water mark are kept, as at 10. PostgreSQL keeps the strings.
    Step::Rebuild(concat!(
        r#"
    CREATE TABLE names (
        code INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    );
    INSERT INTO names (name) SELECT source FROM events UNION SELECT type FROM events;
    CREATE TABLE events_raw (
        pos            INTEGER PRIMARY KEY AUTOINCREMENT,
        id             BLOB NOT NULL UNIQUE,
        source         INTEGER NOT NULL REFERENCES names (code),
        seq            INTEGER NOT NULL,
        type           INTEGER NOT NULL REFERENCES names (code),
        version        INTEGER NOT NULL,
        authorship     TEXT NOT NULL,
        sensitive      INTEGER NOT NULL,
        root           BLOB,
        parent         BLOB,
        payload        BLOB NOT NULL,
        payload_sha256 BLOB NOT NULL,
        recorded_at    INTEGER NOT NULL,
        text_at        INTEGER,
        text_sha       BLOB,
        UNIQUE (source, seq)
    );
    INSERT INTO events_raw
        SELECT e.pos, e.id, s.code, e.seq, t.code, e.version, e.authorship, e.sensitive,
               e.root, e.parent, e.payload, e.payload_sha256, e.recorded_at, e.text_at,
               e.text_sha
        FROM events e JOIN names s ON s.name = e.source JOIN names t ON t.name = e.type
        ORDER BY e.pos;
    "#,
        replace_keeping_high_water!("events"),
        r#"
    CREATE INDEX events_by_type ON events (type, pos);
    CREATE INDEX events_by_root ON events (root, pos);
    "#,
    )),
    // 13: a blob is found by an index on the first 8 bytes of its key
    // (`sqlite::blob_key`) instead of a unique index on all 32, a third the
    // size (about 0.5 KiB a turn); the row still holds the whole key, and
    // every lookup compares it. Keys are unique because `INSERT_BLOB` stores
    // a key only when it finds none, inside the one write transaction. A
    // foreign key needs a unique parent, so `snapshots.root`,
    // `document_versions.sha256` and `events.text_sha` no longer declare
    // theirs: what they name is checked where it is read (a missing or
    // altered blob is a typed refusal), as it always was. Rows keep their
    // order. A snapshot's id becomes its 32 raw bytes, the last id kept as
    // hex (as at 10).
    Step::Rebuild(
        r#"
    CREATE TABLE blobs_raw (
        sha256 BLOB NOT NULL,
        bytes  BLOB NOT NULL
    );
    INSERT INTO blobs_raw (rowid, sha256, bytes) SELECT rowid, sha256, bytes FROM blobs ORDER BY rowid;
    DROP TABLE blobs;
    ALTER TABLE blobs_raw RENAME TO blobs;
    CREATE INDEX blobs_by_key ON blobs (substr(sha256, 1, 8));
    CREATE TABLE snapshots_raw (
        id   BLOB PRIMARY KEY,
        root BLOB NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO snapshots_raw (id, root) SELECT unhex(id), root FROM snapshots;
    DROP TABLE snapshots;
    ALTER TABLE snapshots_raw RENAME TO snapshots;
    CREATE TABLE document_versions_raw (
        version_id   TEXT PRIMARY KEY,
        doc_id       TEXT NOT NULL REFERENCES documents (doc_id),
        sha256       BLOB NOT NULL,
        size         INTEGER NOT NULL,
        content_type TEXT NOT NULL,
        prev_version TEXT
    ) WITHOUT ROWID;
    INSERT INTO document_versions_raw SELECT * FROM document_versions;
    DROP TABLE document_versions;
    ALTER TABLE document_versions_raw RENAME TO document_versions;
    "#,
    ),
];

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// How much of a rewrite one open may do: rows per transaction, and (for
/// tests that stop a migration half-way) how many transactions.
pub(crate) struct Budget {
    pub rows: usize,
    pub transactions: Option<usize>,
}

impl Budget {
    pub(crate) const OPEN: Self = Self {
        rows: 32,
        transactions: None,
    };
}

/// Whether a rewrite finished or stopped at its budget.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Done {
    Finished,
    Stopped,
}

/// Reads application id, schema version and table count; refuses what is
/// not ours before any write.
pub(crate) fn check_identity(path: &Path, conn: &Connection) -> Result<(), StoreError> {
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let user_version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    if app_id == APPLICATION_ID {
        if user_version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                found: user_version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(())
    } else if app_id == 0 && tables == 0 && user_version == 0 {
        Ok(())
    } else {
        Err(StoreError::ForeignDatabase {
            path: path.display().to_string(),
        })
    }
}

/// For a read-only open: the store is ours at exactly this build's schema.
/// Refuses, besides what [`check_identity`] refuses, an empty file (no
/// store yet) and an older schema, which only a writing open migrates.
pub(crate) fn check_readable(path: &Path, conn: &Connection) -> Result<(), StoreError> {
    check_identity(path, conn)?;
    if is_current(path, conn)? {
        return Ok(());
    }
    let found: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    if app_id == APPLICATION_ID {
        Err(StoreError::OlderSchema {
            found,
            supported: SCHEMA_VERSION,
        })
    } else {
        // check_identity let it through: empty, nothing created in it yet.
        Err(StoreError::NoStore {
            path: path.display().to_string(),
        })
    }
}

pub(crate) fn migrate(path: &Path, conn: &Connection, budget: &Budget) -> Result<Done, StoreError> {
    if is_current(path, conn)? {
        return Ok(Done::Finished);
    }
    loop {
        // Foreign keys can only be switched outside a transaction, so the
        // next step is read before it is re-read under the write lock.
        let peeked: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(path, e))?;
        let keys_off = matches!(MIGRATIONS.get(peeked as usize), Some(Step::Rebuild(_)));
        if keys_off {
            set_foreign_keys(path, conn, false)?;
        }
        let step = apply_next(path, conn, keys_off);
        if keys_off {
            set_foreign_keys(path, conn, true)?;
        }
        match step? {
            Next::Finished => return Ok(Done::Finished),
            Next::Applied => {}
            Next::Rewrite(current, rewrite) => {
                if rewrite(conn, budget)? == Done::Stopped {
                    return Ok(Done::Stopped);
                }
                bump(conn, current)?;
            }
        }
    }
}

/// What one pass of [`migrate`] did.
enum Next {
    Finished,
    /// A step was applied, or another process moved the version on.
    Applied,
    /// The step at this version is a rewrite, to run in its own
    /// transactions.
    Rewrite(u32, fn(&Connection, &Budget) -> Result<Done, StoreError>),
}

/// Applies the step at the current version in one transaction, the version
/// re-read under the write lock (another process may have migrated).
/// `keys_off`: foreign keys were switched off for a rebuild.
fn apply_next(path: &Path, conn: &Connection, keys_off: bool) -> Result<Next, StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| classify(path, e))?;
    let next = (|| {
        let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        conn.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))?;
        let bump =
            |c: &Connection| c.execute_batch(&format!("PRAGMA user_version = {}", current + 1));
        match MIGRATIONS.get(current as usize) {
            None => Ok(Next::Finished),
            Some(Step::Sql(sql)) => {
                conn.execute_batch(sql)?;
                bump(conn)?;
                Ok(Next::Applied)
            }
            // Reached by another process's progress since the peek: read
            // again with foreign keys off.
            Some(Step::Rebuild(_)) if !keys_off => Ok(Next::Applied),
            Some(Step::Rebuild(sql)) => {
                conn.execute_batch(sql)?;
                let dangling = conn
                    .prepare("PRAGMA foreign_key_check")?
                    .query([])?
                    .next()?
                    .is_some();
                if dangling {
                    return Err(rusqlite::Error::SqliteFailure(
                        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY),
                        Some("a rebuilt table left a dangling reference".into()),
                    ));
                }
                bump(conn)?;
                Ok(Next::Applied)
            }
            Some(Step::Rewrite(rewrite)) => Ok(Next::Rewrite(current, *rewrite)),
        }
    })();
    match next {
        Ok(next) => {
            conn.execute_batch("COMMIT")
                .map_err(|e| classify(path, e))?;
            Ok(next)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(classify(path, e))
        }
    }
}

fn set_foreign_keys(path: &Path, conn: &Connection, on: bool) -> Result<(), StoreError> {
    let value = if on { "ON" } else { "OFF" };
    conn.execute_batch(&format!("PRAGMA foreign_keys = {value}"))
        .map_err(|e| classify(path, e))
}

/// Whether the store is ours at the newest schema already, read without a
/// write transaction: an open of a current store writes nothing (a write
/// here cost every command a commit and, at exit, a checkpoint). Versions
/// only grow and each is set in the transaction finishing its step, so a
/// current version read outside a transaction is final.
fn is_current(path: &Path, conn: &Connection) -> Result<bool, StoreError> {
    let read = |pragma: &str| -> Result<i64, StoreError> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
            .map_err(|e| classify(path, e))
    };
    Ok(read("application_id")? == i64::from(APPLICATION_ID)
        && read("user_version")? == i64::from(SCHEMA_VERSION))
}

/// Sets `user_version` to `from + 1` unless another process already did.
fn bump(conn: &Connection, from: u32) -> Result<(), StoreError> {
    in_tx(conn, |c| {
        let current: u32 = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if current == from {
            c.execute_batch(&format!("PRAGMA user_version = {}", from + 1))?;
        }
        Ok(())
    })
}

fn in_tx<T>(
    conn: &Connection,
    body: impl FnOnce(&Connection) -> Result<T, rusqlite::Error>,
) -> Result<T, StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
    match body(conn) {
        Ok(value) => {
            conn.execute_batch("COMMIT").map_err(backend)?;
            Ok(value)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(backend(e))
        }
    }
}

/// Schema 3: each run's whole snapshot blob becomes parts, `budget.rows`
/// runs per transaction, in run order. A blob that does not hash to its id
/// is left whole, so loading it is refused exactly as before.
fn rewrite_whole_snapshots(conn: &Connection, budget: &Budget) -> Result<Done, StoreError> {
    let mut after = 0i64;
    let mut transactions = 0usize;
    loop {
        if budget.transactions.is_some_and(|n| transactions >= n) {
            return Ok(Done::Stopped);
        }
        transactions += 1;
        conn.execute_batch("BEGIN IMMEDIATE").map_err(backend)?;
        let result = rewrite_batch(conn, after, budget.rows);
        match result {
            Ok(Some(last)) => {
                conn.execute_batch("COMMIT").map_err(backend)?;
                after = last;
            }
            Ok(None) => {
                conn.execute_batch("COMMIT").map_err(backend)?;
                return Ok(Done::Finished);
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
    }
}

/// Rewrites the snapshots of up to `rows` runs after `after`; the last
/// run position handled, or `None` when there were none.
fn rewrite_batch(conn: &Connection, after: i64, rows: usize) -> Result<Option<i64>, StoreError> {
    let runs: Vec<(i64, String)> = conn
        .prepare(
            "SELECT pos, snapshot_id FROM runs WHERE pos > ?1 AND snapshot_id IS NOT NULL \
             ORDER BY pos LIMIT ?2",
        )
        .and_then(|mut stmt| {
            stmt.query_map(rusqlite::params![after, rows as i64], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .collect()
        })
        .map_err(backend)?;
    let Some(last) = runs.last().map(|(pos, _)| *pos) else {
        return Ok(None);
    };
    for (_, id) in runs {
        let done: bool = conn
            .query_row("SELECT 1 FROM snapshots WHERE id = ?1", [&id], |_| Ok(true))
            .optional()
            .map_err(backend)?
            .unwrap_or(false);
        if done {
            continue;
        }
        let whole: Option<Vec<u8>> = conn
            .query_row("SELECT bytes FROM blobs WHERE sha256 = ?1", [&id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(backend)?;
        let Some(whole) = whole else { continue };
        let Ok(snapshot) = id.parse::<SnapshotId>() else {
            continue;
        };
        if sha256(&whole).as_str() != id {
            continue;
        }
        put_snapshot(conn, &snapshot, &whole, KeyForm::Hex)?;
        conn.execute(
            "DELETE FROM blobs WHERE sha256 = ?1 \
             AND NOT EXISTS (SELECT 1 FROM document_versions WHERE sha256 = ?1) \
             AND NOT EXISTS (SELECT 1 FROM snapshot_parts WHERE sha256 = ?1)",
            [&id],
        )
        .map_err(backend)?;
    }
    Ok(Some(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::PG_SCHEMA_VERSION;

    /// A new part header needs a new schema version on both backends, so
    /// that an older build refuses the store rather than read the new
    /// parts as tampered ones: (header, SQLite version, PostgreSQL version
    /// that first let it be written), newest last.
    #[test]
    fn the_part_header_written_now_came_with_a_schema_version_of_its_own() {
        let headers: &[(&[u8], u32, u32)] = &[
            (stream_core::parts::HEADER_V1, 2, 1),
            (stream_core::parts::HEADER_V2, 5, 2),
            (stream_core::parts::HEADER, 8, 4),
        ];
        let (newest, sqlite, postgres) = headers[headers.len() - 1];
        assert_eq!(newest, stream_core::parts::HEADER);
        assert!(sqlite <= SCHEMA_VERSION && postgres <= PG_SCHEMA_VERSION);
        assert!(
            headers
                .windows(2)
                .all(|w| w[0].1 < w[1].1 && w[0].2 < w[1].2)
        );
    }

    /// A blob is found through the index of its key, whose entries are
    /// small, never by comparing the key with whole rows: in a table
    /// without rowid each such comparison with a row larger than its page
    /// (a photo, a memory version) reads the row's overflow chain.
    #[test]
    fn a_blob_is_found_through_its_key_index_not_by_comparing_whole_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        drop(crate::SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        rusqlite::vtab::array::load_module(&conn).unwrap();
        // Every statement the store looks a blob up by key with (schema 13:
        // by the index on the key's first 8 bytes), as the store runs it.
        for query in [
            &*crate::sqlite::READ_BLOB,
            &*crate::sqlite::parts::READ_LEVEL,
            &*crate::sqlite::parts::STORED_KEYS,
            &*crate::sqlite::INSERT_BLOB,
            &*crate::sqlite::events::READ_EVENT,
        ] {
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {query}"))
                .unwrap();
            // Unbound parameters are NULL; a plan does not run the query.
            let mut rows = stmt.raw_query();
            let mut plan = Vec::new();
            while let Some(row) = rows.next().unwrap() {
                plan.push(row.get::<_, String>(3).unwrap());
            }
            // The blob table's name or alias, then its index.
            assert!(
                plan.iter().any(|step| step.starts_with("SEARCH ")
                    && step.contains(" USING INDEX blobs_by_key ")),
                "{query}: {plan:?}"
            );
        }
    }
}
