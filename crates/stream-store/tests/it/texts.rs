//! An event's text stored once (schema 11): cut out of its payload into
//! the blob its snapshot's transcript names, and refused by name when that
//! blob is deleted or altered in the SQLite file; likewise an event whose
//! source or type name (schema 12) is deleted.

use rusqlite::Connection;
use serde_json::json;
use stream_core::SnapshotId;
use stream_core::canon::{sha256, to_canonical_bytes};
use stream_store::conformance::event;
use stream_store::{Read, Store, StoreError};

use crate::common::temp_store;

const CANARY: &str = "canary-owner-text";

fn text() -> String {
    format!("{CANARY} \"quoted\" \u{1F600} ").repeat(16)
}

/// How many blobs, and how many event payloads, hold the canary.
fn copies(conn: &Connection) -> (i64, i64) {
    let like = format!("%{CANARY}%");
    let count = |sql: &str| -> i64 { conn.query_row(sql, [&like], |r| r.get(0)).unwrap() };
    (
        count("SELECT count(*) FROM blobs WHERE CAST(bytes AS TEXT) LIKE ?1"),
        count("SELECT count(*) FROM events WHERE CAST(payload AS TEXT) LIKE ?1"),
    )
}

#[test]
fn a_message_and_the_snapshot_showing_it_hold_its_text_once() {
    let (store, path, _dir) = temp_store();
    let text = text();
    let message = event("test:chat", "1", json!({"chatId": 42, "text": text}));
    store.append(&message).unwrap();
    let conn = Connection::open(&path).unwrap();
    let (payload, at, key): (Vec<u8>, i64, Vec<u8>) = conn
        .query_row("SELECT payload, text_at, text_sha FROM events", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(payload, br#"{"chatId":42,"text":""}"#);
    assert_eq!(&payload[at as usize..at as usize + 2], b"\"\"");
    assert_eq!(key, sha256(text.as_bytes()).to_bytes());
    assert_eq!(copies(&conn), (1, 0), "the text is one blob");
    // A snapshot whose transcript shows the message names the same blob.
    let snapshot = to_canonical_bytes(&json!({
        "transcript": [{"eventId": message.id, "role": "user", "text": text}],
        "turn": 1,
    }))
    .unwrap();
    let id = SnapshotId::from(sha256(&snapshot));
    let mut tx = store.begin().unwrap();
    tx.put_snapshot(&id, &snapshot).unwrap();
    tx.commit().unwrap();
    assert_eq!(store.snapshot(&id).unwrap().unwrap().as_bytes(), snapshot);
    assert_eq!(copies(&conn), (1, 0), "still one copy of the text");
    assert_eq!(store.event(&message.id).unwrap().unwrap().event, message);
    // The usage report counts the text once, as the event's.
    let u = store.usage().unwrap();
    assert_eq!((u.other_blobs, u.document_blobs), (0, 0));
    assert!(u.event_bytes > text.len() as u64, "{u:?}");
    assert!(u.snapshot_part_bytes < text.len() as u64, "{u:?}");
}

#[test]
fn an_event_whose_text_blob_is_deleted_or_altered_is_refused_by_name() {
    for (sql, expected) in [
        ("DELETE FROM blobs WHERE sha256 = ?1", "event text: missing"),
        (
            "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'quoted', 'QUOTED') AS BLOB) \
             WHERE sha256 = ?1",
            "event text: altered",
        ),
        (
            "UPDATE blobs SET bytes = x'ff' WHERE sha256 = ?1",
            "event text",
        ),
        (
            "UPDATE events SET text_at = text_at + 1 WHERE text_sha = ?1",
            "event text",
        ),
    ] {
        let (store, path, _dir) = temp_store();
        let message = event("test:chat", "1", json!({"text": text()}));
        store.append(&message).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let key = sha256(text().as_bytes()).to_bytes();
        assert_eq!(conn.execute(sql, [&key[..]]).unwrap(), 1, "{sql}");
        let refusals = [
            store.event(&message.id).map(|_| ()),
            store.events(&Default::default()).map(|_| ()),
            store.append(&message).map(|_| ()),
        ];
        for refusal in refusals {
            match refusal {
                Err(StoreError::InvalidRow { what }) => assert_eq!(what, expected, "{sql}"),
                other => panic!("{sql}: expected a refusal, got {other:?}"),
            }
        }
    }
}

#[test]
fn the_error_of_a_refused_text_holds_none_of_it() {
    let (store, path, _dir) = temp_store();
    let message = event("test:chat", "1", json!({"text": text()}));
    store.append(&message).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    conn.execute("DELETE FROM blobs", []).unwrap();
    let err = store.event(&message.id).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(CANARY), "{shown}");
}

/// Keys are unique without a unique index (schema 13): a text two events
/// hold, and a blob put again, is one row.
#[test]
fn a_text_held_twice_is_one_row() {
    let (store, path, _dir) = temp_store();
    store
        .append(&event("test:chat", "1", json!({"text": text()})))
        .unwrap();
    store
        .append(&event("test:chat", "2", json!({"again": text()})))
        .unwrap();
    let mut tx = store.begin().unwrap();
    tx.put_blob(text().as_bytes()).unwrap();
    tx.commit().unwrap();
    let conn = Connection::open(&path).unwrap();
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM blobs WHERE sha256 = ?1",
            [&sha256(text().as_bytes()).to_bytes()[..]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
}

#[test]
fn an_event_whose_name_is_deleted_is_refused_not_skipped() {
    let (store, path, _dir) = temp_store();
    let e = event("test:chat", "1", json!({"x": 1}));
    store.append(&e).unwrap();
    let conn = Connection::open(&path).unwrap();
    // The foreign key refuses it; a hand edit turns them off.
    assert!(
        conn.execute("DELETE FROM names WHERE name = 'test.event'", [])
            .is_err()
    );
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    conn.execute("DELETE FROM names WHERE name = 'test.event'", [])
        .unwrap();
    for refusal in [
        store.event(&e.id).map(|_| ()),
        store.events(&Default::default()).map(|_| ()),
    ] {
        match refusal {
            Err(StoreError::InvalidRow { what }) => assert_eq!(what, "event name: missing"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
