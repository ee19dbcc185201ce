//! Snapshot parts edited in the SQLite file: the refusal names the bad
//! part, found level by level after the whole failed its hash.

use rusqlite::Connection;
use stream_core::canon::{sha256, to_canonical_bytes};
use stream_core::parts::split;
use stream_core::{Sha256Hex, SnapshotId};
use stream_store::{PartFault, Read, SqliteStore, Store, StoreError};

/// A document whose deepest part (two levels below the root) holds the
/// `y`s; stored as a snapshot. Returns the store, its id and that part.
fn stored(dir: &tempfile::TempDir) -> (SqliteStore, SnapshotId, String) {
    let bytes = to_canonical_bytes(&serde_json::json!({
        "a": "x".repeat(400),
        "b": {"c": "y".repeat(300), "d": [1, 2, 3]},
    }))
    .unwrap();
    let id = SnapshotId::from(sha256(&bytes));
    let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
    let mut tx = store.begin().unwrap();
    tx.put_snapshot(&id, &bytes).unwrap();
    tx.commit().unwrap();
    let deepest = split(&bytes)
        .parts
        .into_iter()
        .filter(|(_, part)| part.windows(300).any(|w| w.iter().all(|b| *b == b'y')))
        .min_by_key(|(_, part)| part.len())
        .unwrap()
        .0;
    assert_eq!(store.snapshot(&id).unwrap().unwrap().as_bytes(), bytes);
    (store, id, Sha256Hex::from_bytes(deepest).to_string())
}

#[test]
fn a_deleted_or_altered_deep_part_is_named_in_the_refusal() {
    for (sql, expected) in [
        (
            "DELETE FROM blobs WHERE sha256 = unhex(?1)",
            PartFault::Missing,
        ),
        (
            "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'yyy', 'yyz') AS BLOB) \
             WHERE sha256 = unhex(?1)",
            PartFault::Altered,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (store, id, part) = stored(&dir);
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        assert_eq!(conn.execute(sql, [&part]).unwrap(), 1, "{sql}");
        match store.snapshot(&id) {
            Err(StoreError::SnapshotPart {
                id: got,
                part: named,
                fault,
            }) => {
                assert_eq!((got, named, fault), (id.clone(), part.clone(), expected));
            }
            other => panic!("expected a refusal naming {part}, got {other:?}"),
        }
    }
}

#[test]
fn the_debug_of_snapshot_bytes_shows_the_id_and_length_not_the_text() {
    let dir = tempfile::tempdir().unwrap();
    let (store, id, _) = stored(&dir);
    let read = store.snapshot(&id).unwrap().unwrap();
    let shown = format!("{read:?}");
    assert!(
        shown.contains(&id.as_str()[..12]) && shown.contains("len: "),
        "{shown}"
    );
    assert!(
        !shown.contains("xxxx") && !shown.contains("yyyy"),
        "{shown}"
    );
}
