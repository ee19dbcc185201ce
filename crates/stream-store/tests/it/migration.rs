//! Schema 1 → current: the fixture is a store written by the `demo` of the
//! build before snapshot parts (schema 1, whole snapshot blobs).

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use stream_core::SnapshotId;
use stream_core::canon::sha256;
use stream_store::{Read, SCHEMA_VERSION, SqliteStore, StoreError};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v1-demo.db"
);

/// A store written by the `demo` of the build before schema 4 (schema 3:
/// parts listed again in `snapshot_parts`).
const FIXTURE_V3: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-v3-demo.db"
);

fn fixture_copy() -> (PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::copy(FIXTURE, &path).unwrap();
    (path, dir)
}

fn fixture_v3_copy() -> (PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::copy(FIXTURE_V3, &path).unwrap();
    (path, dir)
}

/// Every run's snapshot id with its whole blob, read with plain SQL.
fn whole_snapshots(path: &Path) -> Vec<(SnapshotId, Vec<u8>)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT r.snapshot_id, b.bytes FROM runs r JOIN blobs b ON b.sha256 = r.snapshot_id \
             ORDER BY r.pos",
        )
        .unwrap();
    stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
    })
    .unwrap()
    .map(|row| {
        let (id, bytes) = row.unwrap();
        (id.parse().unwrap(), bytes)
    })
    .collect()
}

/// A hand edit of the store file, as a tampering or a broken tool would
/// make one.
fn edit(path: &Path, sql: &str, params: impl rusqlite::Params) {
    Connection::open(path)
        .unwrap()
        .execute(sql, params)
        .unwrap();
}

fn user_version(path: &Path) -> u32 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// Every key column that names a blob: (table, column).
const BLOB_KEYS: [(&str, &str); 3] = [
    ("blobs", "sha256"),
    ("snapshots", "root"),
    ("document_versions", "sha256"),
];

/// Since schema 13 a snapshot's id is 32 raw bytes too.
fn assert_raw_snapshot_ids(path: &Path) {
    assert_raw_ids(path, "snapshots", &["id"]);
}

/// Since the binary-key rebuild every blob key and every reference to one
/// is 32 raw bytes, and every reference resolves.
fn assert_raw_keys(path: &Path) {
    let conn = Connection::open(path).unwrap();
    for (table, column) in BLOB_KEYS {
        let (rows, other): (i64, i64) = conn
            .query_row(
                &format!(
                    "SELECT count(*), count(*) FILTER (WHERE typeof({column}) != 'blob' \
                     OR length({column}) != 32) FROM {table}"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(rows > 0, "{table} holds rows to check");
        assert_eq!(other, 0, "{table}.{column}: keys not 32 raw bytes");
    }
    assert_no_dangling_reference(&conn);
}

/// No foreign key dangles, and every reference to a blob (declared as a
/// foreign key before schema 13, not since) names a stored one.
fn assert_no_dangling_reference(conn: &Connection) {
    let dangling = conn
        .prepare("PRAGMA foreign_key_check")
        .unwrap()
        .query([])
        .unwrap()
        .next()
        .unwrap()
        .is_some();
    assert!(!dangling);
    for (table, column) in &BLOB_KEYS[1..] {
        let missing: i64 = conn
            .query_row(
                &format!(
                    "SELECT count(*) FROM {table} r \
                     WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = r.{column})"
                ),
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(missing, 0, "{table}.{column} names a blob not stored");
    }
}

/// Each blob's key (as lowercase hex) with its bytes, and each reference
/// to a blob as (table, row, key), sorted: read with plain SQL so that a
/// store with hex keys and one with raw keys compare.
type Contents = (Vec<(String, Vec<u8>)>, Vec<(String, String, String)>);

/// SQL reading key column `c` as lowercase hex whether stored as hex text
/// (before the rebuilds) or raw bytes (since): `lower(hex(x))` of a hex
/// text key is not that key, so text is read as it is.
fn key(c: &str) -> String {
    format!("CASE typeof({c}) WHEN 'blob' THEN lower(hex({c})) ELSE {c} END")
}

fn contents(path: &Path) -> Contents {
    let conn = Connection::open(path).unwrap();
    let blobs = conn
        .prepare(&format!(
            "SELECT {}, bytes FROM blobs ORDER BY 1",
            key("sha256")
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let references = conn
        .prepare(&format!(
            "SELECT 'snapshots', {}, {} FROM snapshots \
             UNION ALL SELECT 'document_versions', version_id, {} FROM document_versions \
             ORDER BY 1, 2",
            key("id"),
            key("root"),
            key("sha256")
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    (blobs, references)
}

fn assert_migrated(path: &Path, before: &[(SnapshotId, Vec<u8>)]) {
    let store = SqliteStore::open(path).unwrap();
    assert_eq!(user_version(path), SCHEMA_VERSION);
    assert_raw_keys(path);
    for (id, bytes) in before {
        let joined = store.snapshot(id).unwrap().unwrap().into_bytes();
        assert_eq!(&joined, bytes, "reassembled byte-exact");
        assert_eq!(sha256(&joined).as_str(), id.as_str());
        let whole = stream_core::Sha256Hex::parse(id.as_str()).unwrap();
        assert!(store.blob(&whole).unwrap().is_none(), "whole blob removed");
    }
    assert_eq!(store.usage().unwrap().snapshots, before.len() as u64);
    let check: String = Connection::open(path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn the_schema_1_demo_store_migrates_every_snapshot_into_parts() {
    let (path, _dir) = fixture_copy();
    assert_eq!(user_version(&path), 1);
    let before = whole_snapshots(&path);
    assert_eq!(before.len(), 5, "the fixture holds five snapshots");
    assert_migrated(&path, &before);
    // A second open has nothing left to do and changes nothing.
    assert_migrated(&path, &before);
}

#[test]
fn a_whole_snapshot_that_does_not_match_its_id_is_left_whole_and_refused_by_the_store() {
    let (path, _dir) = fixture_copy();
    let before = whole_snapshots(&path);
    let (altered, _) = &before[0];
    edit(
        &path,
        "UPDATE blobs SET bytes = CAST(bytes || x'20' AS BLOB) WHERE sha256 = ?1",
        [altered.as_str()],
    );
    let store = SqliteStore::open(&path).unwrap();
    // The store hashes what it hands out, so a reader need not.
    match store.snapshot(altered) {
        Err(StoreError::SnapshotHash { id }) => assert_eq!(&id, altered),
        other => panic!("an altered whole snapshot was not refused: {other:?}"),
    }
    for (id, bytes) in &before[1..] {
        assert_eq!(store.snapshot(id).unwrap().unwrap().as_bytes(), bytes);
    }
}

#[test]
fn a_migration_stopped_between_transactions_finishes_at_the_next_open() {
    let (path, _dir) = fixture_copy();
    let before = whole_snapshots(&path);
    // One run per transaction, stopped after two: as a kill would leave it.
    assert!(!SqliteStore::migrate_interrupted(&path, 1, 2).unwrap());
    assert_eq!(user_version(&path), 2, "the rewrite is not marked done");
    let rewritten: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM snapshots", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rewritten, 2);
    assert_migrated(&path, &before);
}

#[test]
fn opening_a_current_store_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    // Another connection sees every commit as a change of data_version.
    let observer = Connection::open(&path).unwrap();
    let version = || -> i64 {
        observer
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = version();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(version(), before, "an open of a current store wrote");
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    drop(store);
    assert_eq!(version(), before);
}

#[test]
fn the_schema_3_demo_store_drops_the_part_list_and_keeps_every_snapshot() {
    // Its parts are `tsp1`, written before `tsp2`: they read byte-exact
    // (each joined snapshot hashes to its id).
    let (path, _dir) = fixture_v3_copy();
    assert_eq!(user_version(&path), 3);
    let (ids, listed) = {
        let conn = Connection::open(&path).unwrap();
        let ids: Vec<String> = conn
            .prepare("SELECT id FROM snapshots ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let listed: i64 = conn
            .query_row("SELECT count(*) FROM snapshot_parts", [], |r| r.get(0))
            .unwrap();
        // Every part in the older encoding: this store exercises its reader.
        let v1: i64 = conn
            .query_row(
                "SELECT count(*) FROM blobs WHERE substr(bytes, 1, 4) = CAST('tsp1' AS BLOB)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(v1, listed, "a tsp1-only store");
        (ids, listed)
    };
    assert_eq!(ids.len(), 6, "the fixture holds six snapshots");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    for id in &ids {
        let id: SnapshotId = id.parse().unwrap();
        let bytes = store.snapshot(&id).unwrap().unwrap().into_bytes();
        assert_eq!(sha256(&bytes).as_str(), id.as_str());
    }
    let usage = store.usage().unwrap();
    assert_eq!(usage.snapshots, 6);
    assert_eq!(
        usage.snapshot_parts, listed as u64,
        "parts are recognised by header"
    );
    let list_left: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'snapshot_parts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(list_left, 0);
    let check: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// Schema 6 rebuilds `blobs` with foreign keys off, and schema 13 once
/// more: afterwards every row is there, every reference to
/// one resolves, and a blob is found through the index on its key's first
/// 8 bytes, with no unique index on the whole key (no foreign key names a
/// blob since 13: a reference is checked where it is read).
#[test]
fn the_rebuilt_blob_table_keeps_every_row_and_every_reference() {
    let (path, _dir) = fixture_v3_copy();
    let blobs = |conn: &Connection| -> Vec<(String, Vec<u8>)> {
        conn.prepare(&format!(
            "SELECT {}, bytes FROM blobs ORDER BY 1",
            key("sha256")
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
    };
    let before = blobs(&Connection::open(&path).unwrap());
    assert!(before.len() > 10);
    drop(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    assert_eq!(blobs(&conn), before, "every blob, under its key");
    let schema = |what: &str| -> Vec<String> {
        conn.prepare(&format!(
            "SELECT ifnull(sql, name) FROM sqlite_master WHERE tbl_name = 'blobs' AND type = '{what}'"
        ))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
    };
    let table = schema("table");
    assert!(
        !table[0].contains("WITHOUT ROWID") && !table[0].contains("UNIQUE"),
        "{table:?}"
    );
    assert_eq!(
        schema("index"),
        ["CREATE INDEX blobs_by_key ON blobs (substr(sha256, 1, 8))"]
    );
    assert_no_dangling_reference(&conn);
}

/// The binary-key rebuild keeps every blob under the same key (now its raw
/// bytes) with the same bytes, and every reference to one.
#[test]
fn the_binary_key_rebuild_keeps_every_blob_and_every_reference() {
    let (path, _dir) = fixture_v3_copy();
    let before = contents(&path);
    assert!(before.0.len() > 10 && before.1.len() > 6, "{before:?}");
    assert!(before.0.iter().all(|(key, _)| key.len() == 64));
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(contents(&path), before);
    assert_raw_keys(&path);
    assert_raw_snapshot_ids(&path);
}

/// A fresh store writes raw keys too, through every write that names a
/// blob (a blob, a document version, a snapshot's parts and root).
#[test]
fn a_fresh_store_keys_blobs_by_their_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    stream_store::conformance::documents_versions_and_current_pointer(&store);
    stream_store::conformance::snapshots_round_trip_through_parts(&store);
    assert_raw_keys(&path);
    assert_raw_snapshot_ids(&path);
}

/// The binary-key rebuild is one transaction: one that fails (a key that
/// is not hex, as a hand edit could leave) leaves the store at the version
/// before, untouched, and the next open does it all.
#[test]
fn a_failed_binary_key_rebuild_leaves_the_store_as_it_was() {
    let (path, _dir) = fixture_v3_copy();
    let before = contents(&path);
    edit(
        &path,
        "INSERT INTO blobs (sha256, bytes) VALUES ('not hex', x'00')",
        [],
    );
    assert!(SqliteStore::open(&path).is_err());
    assert_eq!(user_version(&path), 8, "schema 9 not applied");
    let conn = Connection::open(&path).unwrap();
    let text_keys: i64 = conn
        .query_row(
            "SELECT count(*) FROM blobs WHERE typeof(sha256) = 'text'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(text_keys as usize, before.0.len() + 1, "no key rewritten");
    conn.execute("DELETE FROM blobs WHERE sha256 = 'not hex'", [])
        .unwrap();
    assert_eq!(contents(&path), before);
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(contents(&path), before);
    assert_raw_keys(&path);
}

/// Since schema 10 each of these id columns holds 32 raw bytes wherever
/// it is not NULL.
fn assert_raw_ids(path: &Path, table: &str, columns: &[&str]) {
    let other: i64 = Connection::open(path)
        .unwrap()
        .query_row(
            &format!(
                "SELECT count(*) FROM {table} WHERE {}",
                columns
                    .iter()
                    .map(|c| format!(
                        "({c} IS NOT NULL AND (typeof({c}) != 'blob' OR length({c}) != 32))"
                    ))
                    .collect::<Vec<_>>()
                    .join(" OR ")
            ),
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(other, 0, "{table}: ids not 32 raw bytes");
}

/// Every event's source and type is a code, and every name is stored once.
fn assert_names_coded(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        count(
            "SELECT count(*) FROM events WHERE typeof(source) != 'integer' \
             OR typeof(type) != 'integer'"
        ),
        0
    );
    assert_eq!(
        count("SELECT count(*) FROM names"),
        count("SELECT count(*) FROM (SELECT source FROM events UNION SELECT type FROM events)")
    );
}

fn assert_raw_event_ids(path: &Path) {
    assert_raw_ids(path, "events", &["id", "root", "parent", "payload_sha256"]);
}

fn assert_raw_run_ids(path: &Path) {
    assert_raw_ids(path, "runs", &["run_id", "trigger_event", "snapshot_id"]);
}

/// Each row of `sql` (read with plain SQL), as `f` reads it.
fn rows<T>(path: &Path, sql: &str, f: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>) -> Vec<T> {
    Connection::open(path)
        .unwrap()
        .prepare(sql)
        .unwrap()
        .query_map([], f)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// Every event, ids as lowercase hex whether stored as text (before
/// schema 10) or as raw bytes (since).
type EventRow = (
    i64,
    String,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    Vec<u8>,
    String,
    i64,
);

/// A name column as its string: stored so before schema 12, a code into
/// `names` since.
fn name(path: &Path, column: &str) -> String {
    let coded: bool = Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'names'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    if coded {
        format!("(SELECT name FROM names WHERE code = {column})")
    } else {
        column.to_owned()
    }
}

fn events(path: &Path) -> Vec<EventRow> {
    rows(
        path,
        &format!(
            "SELECT pos, {}, {}, seq, {}, {}, {}, payload, {}, recorded_at \
             FROM events ORDER BY pos",
            key("id"),
            name(path, "source"),
            name(path, "type"),
            key("root"),
            key("parent"),
            key("payload_sha256"),
        ),
        |r| EventRow::try_from(r),
    )
}

/// Every run, ids as lowercase hex (as `events`).
type RunRow = (
    i64,
    String,
    String,
    i64,
    String,
    String,
    i64,
    Option<String>,
);

fn runs(path: &Path) -> Vec<RunRow> {
    rows(
        path,
        &format!(
            "SELECT pos, {}, agent_id, agent_version, {}, status, attempts, {} \
             FROM runs ORDER BY pos",
            key("run_id"),
            key("trigger_event"),
            key("snapshot_id"),
        ),
        |r| RunRow::try_from(r),
    )
}

fn sequence(path: &Path, table: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap()
}

/// The binary id rebuild keeps every event and every run, field for
/// field, at its position; reads through the store still find them by id
/// and by root; and the AUTOINCREMENT high-water marks survive, so a
/// position freed by a (hand-)deleted last row is not handed out again.
#[test]
fn the_binary_id_rebuild_keeps_every_event_and_run_and_never_reuses_a_position() {
    let (path, _dir) = fixture_v3_copy();
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DELETE FROM events WHERE pos = (SELECT max(pos) FROM events); \
             DELETE FROM runs WHERE pos = (SELECT max(pos) FROM runs);",
        )
        .unwrap();
    let before = events(&path);
    let runs_before = runs(&path);
    let high_water = (sequence(&path, "events"), sequence(&path, "runs"));
    assert!(before.len() > 10, "{}", before.len());
    assert!(runs_before.len() > 3, "{}", runs_before.len());
    assert!(high_water.0 > before.last().unwrap().0);
    assert!(high_water.1 > runs_before.last().unwrap().0);
    assert!(before.iter().any(|e| e.5.is_some() && e.6.is_some()));
    assert!(runs_before.iter().any(|r| r.7.is_some()));
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(events(&path), before);
    assert_eq!(runs(&path), runs_before);
    assert_raw_event_ids(&path);
    assert_raw_run_ids(&path);
    assert_eq!(
        (sequence(&path, "events"), sequence(&path, "runs")),
        high_water
    );
    for (_, id, ..) in &runs_before {
        let id: stream_core::RunId = id.parse().unwrap();
        assert_eq!(store.run(&id).unwrap().unwrap().run_id, id);
    }
    for (_, id, ..) in &before {
        let id: stream_core::EventId = id.parse().unwrap();
        assert_eq!(store.event(&id).unwrap().unwrap().event.id, id);
    }
    let (_, _, _, _, _, root, ..) = before.iter().find(|e| e.5.is_some()).unwrap();
    let root: stream_core::EventId = root.as_deref().unwrap().parse().unwrap();
    let rooted = store
        .events(&stream_store::EventQuery::rooted_at(&root))
        .unwrap();
    let expected = before
        .iter()
        .filter(|e| e.5.as_deref() == Some(root.as_str()))
        .count();
    assert!(expected > 0);
    assert_eq!(rooted.len(), expected);
    // Since schema 12 sources and types are codes, each name once, and
    // reads by source and by type find what they found before.
    assert_names_coded(&path);
    for (_, _, source, ..) in &before {
        let source = stream_core::SourceName::new(source.clone()).unwrap();
        let listed = store
            .events(&stream_store::EventQuery::source_after(&source, 0))
            .unwrap();
        assert_eq!(
            listed.len(),
            before.iter().filter(|e| e.2 == source.as_str()).count()
        );
    }
    for (_, _, _, _, ty, ..) in &before {
        let listed = store
            .events(&stream_store::EventQuery::of_type(ty))
            .unwrap();
        assert_eq!(listed.len(), before.iter().filter(|e| &e.4 == ty).count());
    }
    drop(store);
    let check: String = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// A fresh store writes raw ids through `append` and `put_run`.
#[test]
fn a_fresh_store_keys_events_and_runs_by_their_raw_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    stream_store::conformance::reads_by_id_source_type_root_and_parent(&store);
    stream_store::conformance::runs_round_trip(&store);
    drop(store);
    assert!(!events(&path).is_empty());
    assert!(runs(&path).iter().any(|r| r.7.is_some()));
    assert_raw_event_ids(&path);
    assert_names_coded(&path);
    assert_raw_run_ids(&path);
}

/// The event rebuild is one transaction: one that fails (an id that is not
/// hex) leaves the store at schema 9 with every event as it was.
#[test]
fn a_failed_event_id_rebuild_leaves_the_store_as_it_was() {
    let (path, _dir) = fixture_v3_copy();
    let before = events(&path);
    edit(
        &path,
        "UPDATE events SET id = 'not hex' WHERE pos = (SELECT min(pos) FROM events)",
        [],
    );
    let edited = events(&path);
    assert!(SqliteStore::open(&path).is_err());
    assert_eq!(user_version(&path), 9, "schema 10 not applied");
    assert_eq!(events(&path), edited, "no event rewritten");
    edit(
        &path,
        "UPDATE events SET id = ?1 WHERE pos = (SELECT min(pos) FROM events)",
        [&before[0].1],
    );
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(events(&path), before);
    assert_raw_event_ids(&path);
}
