//! The PostgreSQL schema, versioned and applied at open under an advisory
//! lock, so two processes opening one empty database create it once.

use postgres::{Client, GenericClient};

use super::backend;
use crate::StoreError;

/// `pg_advisory_xact_lock` key of schema changes ("tStr", as SQLite's
/// application id).
const SCHEMA_LOCK: i64 = 0x7453_7472;

/// The application name in `thestream_schema`.
const APPLICATION: &str = "thestream";

/// Schema steps, applied in order. Index + 1 is the version after it.
/// Never edit a shipped step.
const MIGRATIONS: &[&str] = &[
    // 1: everything the SQLite schema 4 holds, plus per-source heads.
    r#"
    CREATE TABLE thestream_schema (
        application TEXT NOT NULL,
        version     INTEGER NOT NULL
    );
    CREATE TABLE events (
        pos            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id             TEXT NOT NULL UNIQUE,
        source         TEXT NOT NULL,
        seq            BIGINT NOT NULL,
        type           TEXT NOT NULL,
        version        INTEGER NOT NULL,
        authorship     TEXT NOT NULL,
        sensitive      BOOLEAN NOT NULL,
        root           TEXT,
        parent         TEXT,
        payload        BYTEA NOT NULL,
        payload_sha256 TEXT NOT NULL,
        recorded_at    BIGINT NOT NULL,
        UNIQUE (source, seq)
    );
    CREATE INDEX events_by_type ON events (type, pos);
    CREATE INDEX events_by_root ON events (root, pos);
    CREATE INDEX events_by_parent ON events (parent, pos);
    -- The gap-free per-source counter: locked by the appending transaction.
    CREATE TABLE source_heads (
        source TEXT PRIMARY KEY,
        head   BIGINT NOT NULL
    );
    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        bytes  BYTEA NOT NULL
    );
    CREATE TABLE documents (
        doc_id          TEXT PRIMARY KEY,
        source          TEXT NOT NULL,
        path            TEXT NOT NULL,
        current_version TEXT,
        UNIQUE (source, path)
    );
    CREATE TABLE document_versions (
        version_id   TEXT PRIMARY KEY,
        doc_id       TEXT NOT NULL REFERENCES documents (doc_id),
        sha256       TEXT NOT NULL REFERENCES blobs (sha256),
        size         BIGINT NOT NULL,
        content_type TEXT NOT NULL,
        prev_version TEXT
    );
    CREATE TABLE runs (
        pos           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
        seq      BIGINT NOT NULL
    );
    CREATE TABLE controls (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE snapshots (
        id   TEXT PRIMARY KEY,
        root TEXT NOT NULL REFERENCES blobs (sha256)
    );
    INSERT INTO thestream_schema (application, version) VALUES ('thestream', 0);
    "#,
    // 2: snapshot parts may be `tsp2` (SQLite schema 5 says why); nothing
    // in the tables changes.
    "-- snapshot parts may be tsp2",
    // 3: no query reads events by parent (SQLite schema 7).
    "DROP INDEX events_by_parent;",
    // 4: snapshot parts may be `tsp3` (SQLite schema 8).
    "-- snapshot parts may be tsp3",
];

/// The newest PostgreSQL schema version this build knows.
pub const PG_SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Applies missing steps. Refuses, writing nothing, a database holding
/// other tables and no thestream schema, and a newer schema.
pub(crate) fn migrate(client: &mut Client, label: &str) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(backend)?;
    // A second opener waits for the one migrating however long that takes:
    // the writer's lock timeout (`waits`) is for the writer lock's holders.
    tx.batch_execute("SET LOCAL lock_timeout = 0")
        .map_err(backend)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(backend)?;
    let found = current_version(&mut tx, label)?;
    let supported = PG_SCHEMA_VERSION;
    if found > supported {
        return Err(StoreError::NewerSchema { found, supported });
    }
    for (index, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(step).map_err(backend)?;
        let version = i32::try_from(index + 1).unwrap_or(i32::MAX);
        tx.execute("UPDATE thestream_schema SET version = $1", &[&version])
            .map_err(backend)?;
    }
    tx.commit().map_err(backend)
}

/// For a read-only session: the database holds a thestream store at
/// exactly this build's schema. Refuses a foreign database and a newer
/// schema as [`migrate`] does, an empty database as no store, and an older
/// schema (only a writing open migrates). Reads only.
pub(crate) fn check_readable(client: &mut Client, label: &str) -> Result<(), StoreError> {
    let found = current_version(client, label)?;
    let supported = PG_SCHEMA_VERSION;
    match found {
        0 => Err(StoreError::NoStore {
            path: label.to_owned(),
        }),
        found if found > supported => Err(StoreError::NewerSchema { found, supported }),
        found if found < supported => Err(StoreError::OlderSchema { found, supported }),
        _ => Ok(()),
    }
}

/// Tables, views and foreign tables in every schema of the database but
/// the system's, whichever the role may read: any of them, in any schema,
/// is another application's (the catalogs list them all to every role).
const OTHER_TABLES: &str = "SELECT count(*) FROM pg_class c \
     JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') \
     AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
     AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'";

/// The schema version in the database: 0 when it is empty.
fn current_version(tx: &mut impl GenericClient, label: &str) -> Result<u32, StoreError> {
    let foreign = || StoreError::ForeignDatabase {
        path: label.to_owned(),
    };
    let ours: bool = tx
        .query_one("SELECT to_regclass('thestream_schema') IS NOT NULL", &[])
        .map_err(backend)?
        .get(0);
    if !ours {
        let tables: i64 = tx.query_one(OTHER_TABLES, &[]).map_err(backend)?.get(0);
        return if tables == 0 { Ok(0) } else { Err(foreign()) };
    }
    let rows = tx
        .query("SELECT application, version FROM thestream_schema", &[])
        .map_err(backend)?;
    match rows.as_slice() {
        [row] => {
            let application: String = row.get(0);
            let version: i32 = row.get(1);
            if application != APPLICATION {
                return Err(foreign());
            }
            u32::try_from(version).map_err(|_| foreign())
        }
        _ => Err(foreign()),
    }
}
