//! `ReadOnlyStore` on SQLite: it refuses what is not a current store
//! without creating or changing anything, reads everything without
//! changing `store.db` or its WAL, and sees a writer's commits as they
//! land. What SQLite does to the `-wal`/`-shm` companions is measured here
//! and documented in `sqlite::readonly`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;
use stream_core::canon::sha256;
use stream_store::conformance::{self, event};
use stream_store::{
    EventQuery, Read, ReadOnlyStore, RunStatus, SCHEMA_VERSION, SqliteStore, Store, StoreError,
};

const CANARY: &str = "canary-readonly-7c1d";

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn bytes(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A store holding a row of every kind (the conformance bodies that write
/// them), and an event whose text is the canary.
fn full_store(path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).unwrap();
    conformance::documents_versions_and_current_pointer(&store);
    conformance::snapshots_round_trip_through_parts(&store);
    conformance::runs_round_trip(&store);
    conformance::progress_and_controls_round_trip(&store);
    for i in 0..5 {
        let text = format!("{CANARY} message {i} {}", "x".repeat(300));
        store
            .append(&event("test:chat", &i.to_string(), json!({"text": text})))
            .unwrap();
    }
    store
}

/// Every read the `Read` trait has, over everything in the store, plus
/// `usage` and `data_version`. Returns how many events it read.
fn read_everything(ro: &ReadOnlyStore) -> usize {
    let all = ro.events_after_position(0, 1 << 20).unwrap();
    assert_eq!(
        ro.last_position().unwrap(),
        all.last().map_or(0, |p| p.position)
    );
    for p in &all {
        assert_eq!(
            ro.event(&p.event.event.id).unwrap().as_ref(),
            Some(&p.event)
        );
    }
    for source in ro.sources().unwrap() {
        let head = ro.source_head(&source).unwrap();
        let events = ro.events(&EventQuery::source_after(&source, 0)).unwrap();
        assert_eq!(events.len() as u64, head);
        for doc in ro.documents(&source).unwrap() {
            let version = doc.current_version.as_ref().unwrap();
            let version = ro.version(version).unwrap().unwrap();
            assert!(ro.blob(&version.sha256).unwrap().is_some());
        }
    }
    for status in [RunStatus::Pending, RunStatus::Completed, RunStatus::Failed] {
        for run in ro.runs_with_status(status).unwrap() {
            if let Some(snapshot) = &run.snapshot_id {
                let _ = ro.snapshot(snapshot);
            }
        }
    }
    let _ = ro.progress("c@1").unwrap();
    let _ = ro.control("ingress").unwrap();
    assert!(ro.usage().unwrap().events >= all.len() as u64);
    ro.data_version().unwrap();
    all.len()
}

#[test]
fn a_missing_file_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(matches!(err, StoreError::NoStore { .. }), "{err:?}");
    assert!(err.to_string().contains("serve"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn an_empty_file_is_no_store_and_stays_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::write(&path, b"").unwrap();
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(matches!(err, StoreError::NoStore { .. }), "{err:?}");
    assert_eq!(bytes(&path).unwrap(), b"");
}

#[test]
fn a_newer_schema_is_refused_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let before = bytes(&path);
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::NewerSchema { found: 99, .. }),
        "{err:?}"
    );
    assert_eq!(bytes(&path), before);
}

/// The store of an older build is refused, naming both versions and
/// `serve`, and left as it was: only a writing open migrates.
#[test]
fn an_older_schema_is_refused_naming_serve_and_left_unmigrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/store-v1-demo.db"
    );
    std::fs::copy(fixture, &path).unwrap();
    let before = bytes(&path);
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::OlderSchema { found: 1, supported } if supported == SCHEMA_VERSION),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("serve"), "{text}");
    assert!(text.contains(" 1 ") && text.contains(&format!("({SCHEMA_VERSION})")));
    assert_eq!(bytes(&path), before);
    // A writing open migrates it; then it opens read-only.
    drop(SqliteStore::open(&path).unwrap());
    ReadOnlyStore::open_sqlite(&path).unwrap();
}

#[test]
fn foreign_and_corrupt_files_are_refused_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::write(&path, b"not a database at all ".repeat(200)).unwrap();
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    std::fs::remove_file(&path).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE accounts (id INTEGER)")
        .unwrap();
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(matches!(err, StoreError::ForeignDatabase { .. }), "{err:?}");
    let err = ReadOnlyStore::open_sqlite(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

/// `serve` stopped cleanly (no `-wal`, no `-shm`): a read-only session
/// that reads everything leaves `store.db` byte for byte and its mode as
/// it was (a loose 0644 is not tightened: that is a writer's job). SQLite
/// creates an empty `-wal` and a `-shm` with the file's mode, and leaves
/// them; the `-shm` holds no row data; the next writing open cleans up.
#[test]
fn reading_everything_after_a_clean_stop_leaves_the_store_file_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(full_store(&path));
    let (wal, shm) = (companion(&path, "-wal"), companion(&path, "-shm"));
    assert!(!wal.exists() && !shm.exists(), "a clean stop removes both");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = bytes(&path).unwrap();
    let ro = ReadOnlyStore::open_sqlite(&path).unwrap();
    assert!(read_everything(&ro) >= 5);
    drop(ro);
    assert_eq!(bytes(&path).unwrap(), before, "store.db unchanged");
    assert_eq!(mode(&path), 0o644, "never chmod");
    assert_eq!(bytes(&wal).unwrap(), b"", "an empty WAL, left behind");
    assert_eq!(mode(&wal), 0o644, "the file's mode");
    let shm_bytes = bytes(&shm).unwrap();
    assert_eq!(mode(&shm), 0o644);
    let canary = CANARY.as_bytes();
    assert!(!shm_bytes.windows(canary.len()).any(|w| w == canary));
    // The next writer tightens, checkpoints and removes them.
    drop(SqliteStore::open(&path).unwrap());
    assert!(!wal.exists() && !shm.exists());
    assert_eq!(mode(&path), 0o600);
}

/// A writer is open and idle with commits in its WAL: a read-only session
/// that reads everything changes neither `store.db` nor `store.db-wal`
/// (it never checkpoints). It does write to `store.db-shm`: a reader that
/// finds no read mark at the WAL's end sets one there.
#[test]
fn reading_everything_beside_an_idle_writer_leaves_the_file_and_wal_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let writer = full_store(&path);
    let (wal, shm) = (companion(&path, "-wal"), companion(&path, "-shm"));
    let before = (bytes(&path).unwrap(), bytes(&wal).unwrap());
    assert!(!before.1.is_empty(), "commits are in the WAL");
    let shm_before = bytes(&shm).unwrap();
    let ro = ReadOnlyStore::open_sqlite(&path).unwrap();
    assert!(read_everything(&ro) >= 5);
    drop(ro);
    assert_eq!(
        (bytes(&path).unwrap(), bytes(&wal).unwrap()),
        before,
        "store.db and store.db-wal unchanged"
    );
    assert_ne!(bytes(&shm).unwrap(), shm_before, "the reader's read mark");
    drop(writer);
}

/// Each commit of a writer in another connection moves `data_version`,
/// and the next `events_after_position` returns exactly it: opened before
/// the writer (no WAL yet), across a checkpoint that empties the WAL, and
/// after the writer closed.
#[test]
fn a_concurrent_writers_commits_are_each_seen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(full_store(&path));
    let ro = ReadOnlyStore::open_sqlite(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    let mut seen = ro.last_position().unwrap();
    let mut version = ro.data_version().unwrap();
    for i in 0..30 {
        if i == 15 {
            rusqlite::Connection::open(&path)
                .unwrap()
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .unwrap();
        }
        let e = event("test:live", &i.to_string(), json!(i));
        writer.append(&e).unwrap();
        let now = ro.data_version().unwrap();
        assert_ne!(now, version, "commit {i} moved data_version");
        version = now;
        let page = ro.events_after_position(seen, 100).unwrap();
        assert_eq!(page.len(), 1, "commit {i}");
        assert_eq!(page[0].event.event, e);
        seen = page[0].position;
        assert_eq!(ro.data_version().unwrap(), version, "reading moves nothing");
    }
    drop(writer);
    assert!(
        companion(&path, "-wal").exists(),
        "a writer closing beside a reader leaves its WAL"
    );
    assert_eq!(ro.last_position().unwrap(), seen);
    let e = event("test:live", "after", json!("after"));
    SqliteStore::open(&path).unwrap().append(&e).unwrap();
    assert_ne!(ro.data_version().unwrap(), version);
    let page = ro.events_after_position(seen, 100).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].event.event.payload_sha256, sha256(&e.payload));
}

/// Errors name the file and never carry stored text.
#[test]
fn a_read_only_error_carries_no_stored_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(full_store(&path));
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 3")
        .unwrap();
    let err = ReadOnlyStore::open_sqlite(&path).unwrap_err();
    assert!(matches!(err, StoreError::OlderSchema { found: 3, .. }));
    assert!(!format!("{err} {err:?}").contains(CANARY));
}
