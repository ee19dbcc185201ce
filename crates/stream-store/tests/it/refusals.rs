//! Files that are not ours, or not from this build, are refused before any write.

use stream_store::{Read, SqliteStore, Store, StoreError};

use serde_json::json;
use stream_store::conformance::event;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn corrupt_file_is_refused_and_left_untouched() {
    let dir = dir();
    let path = dir.path().join("store.db");
    let garbage = b"this is not an sqlite database, just some bytes ".repeat(200);
    std::fs::write(&path, &garbage).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn foreign_database_is_refused_and_left_untouched() {
    let dir = dir();
    let path = dir.path().join("store.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE accounts (id INTEGER); INSERT INTO accounts VALUES (1);")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::ForeignDatabase { .. }), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn newer_schema_is_refused() {
    let dir = dir();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
    }
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { found: 99, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("newer"));
}

#[test]
fn reopening_keeps_data_and_schema() {
    let dir = dir();
    let path = dir.path().join("store.db");
    let e = event("test:a", "1", json!(1));
    SqliteStore::open(&path).unwrap().append(&e).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.event(&e.id).unwrap().unwrap().event, e);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}
