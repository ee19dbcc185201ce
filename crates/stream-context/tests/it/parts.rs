//! Snapshots stored as content-addressed parts: reassembly, sharing, and
//! refusal of a deleted or altered part.

use stream_context::{ContextError, Snapshot, build};
use stream_core::canon::sha256;
use stream_core::ids::derive_run_id;
use stream_core::{SnapshotId, StoredEvent};
use stream_store::{Read, SqliteStore, Store};

use crate::common::*;

fn stored(fx: &Fixture, trigger: &StoredEvent) -> (Snapshot, SnapshotId) {
    let run = derive_run_id(CONVERSATION, 18, trigger.id()).unwrap();
    let s = build(&fx.store, &spec(&all_kinds()), &run, trigger).unwrap();
    let (bytes, id) = s.encode().unwrap();
    let mut tx = fx.store.begin().unwrap();
    tx.put_snapshot(&id, &bytes).unwrap();
    tx.commit().unwrap();
    (s, id)
}

fn parts(store: &SqliteStore) -> (u64, u64) {
    let u = store.usage().unwrap();
    (u.snapshot_parts, u.snapshot_part_bytes)
}

fn memory_text() -> String {
    format!("---\nid: m\n---\n{}", "canary-memory-line\n".repeat(500))
}

#[test]
fn a_snapshot_reassembled_from_parts_hashes_to_its_id() {
    let mut fx = Fixture::new();
    fx.memory(&memory_text());
    let m1 = fx.message("one");
    fx.reply(&m1, "r1");
    let now = fx.message("two");
    let (s, id) = stored(&fx, &now);
    let bytes = fx.store.snapshot(&id).unwrap().unwrap().into_bytes();
    assert_eq!(sha256(&bytes).as_str(), id.as_str());
    assert_eq!(bytes, s.encode().unwrap().0);
    assert_eq!(Snapshot::load(&fx.store, &id).unwrap(), s);
    assert!(parts(&fx.store).0 > 1, "stored as several parts");
}

#[test]
fn a_second_run_sharing_memory_and_transcript_stores_only_its_new_parts() {
    let mut fx = Fixture::new();
    let memory = memory_text();
    fx.memory(&memory);
    let long = |n: u32| format!("message {n}: {}", "words of the conversation ".repeat(12));
    let mut last = fx.message(&long(0));
    for n in 1..6 {
        fx.reply(&last, &long(100 + n));
        last = fx.message(&long(n));
    }
    stored(&fx, &last);
    let before = parts(&fx.store);
    fx.reply(&last, &long(200));
    let next = fx.message(&long(6));
    stored(&fx, &next);
    let after = parts(&fx.store);
    // New: the root and the manifest; the trigger; the previous trigger as
    // a transcript entry, its reply, the new correction target; the
    // capabilities; and the three lists that grew (transcript, evidence,
    // correction targets) with their changed runs (a list of references in
    // short runs, a lone reference inline). The memory text, the earlier
    // exchanges, the lists' unchanged runs and the texts of the message and
    // reply (the blobs their events hold) are shared.
    assert_eq!(after.0 - before.0, 12, "parts added by the second run");
    for text in [long(6), long(200)] {
        assert_eq!(blobs_holding(&fx.store, &text), 1, "one copy of {text:?}");
    }
    assert!(
        after.1 - before.1 < memory.len() as u64,
        "memory.md is not stored again: {} new bytes",
        after.1 - before.1
    );
}

/// How many blobs hold `text`, and that no event payload does.
fn blobs_holding(store: &SqliteStore, text: &str) -> i64 {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let count = |sql: &str| -> i64 { conn.query_row(sql, [text], |r| r.get(0)).unwrap() };
    assert_eq!(
        count("SELECT count(*) FROM events WHERE instr(payload, CAST(?1 AS BLOB)) > 0"),
        0,
        "an event payload holds {text:?}"
    );
    count("SELECT count(*) FROM blobs WHERE instr(bytes, CAST(?1 AS BLOB)) > 0")
}

/// The memory text's blob: the document version's, and the only blob
/// holding the memory text (no snapshot part keeps a second copy).
fn memory_blob(store: &SqliteStore) -> String {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT lower(hex(sha256)) FROM blobs \
             WHERE instr(bytes, CAST('canary-memory-line' AS BLOB)) > 0",
        )
        .unwrap();
    let holding: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let version: String = conn
        .query_row(
            "SELECT lower(hex(sha256)) FROM document_versions",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(holding, [version.clone()], "one copy of the memory text");
    version
}

fn tamper(store: &SqliteStore, sql: &str) {
    let blob = memory_blob(store);
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    assert_eq!(conn.execute(sql, [blob]).unwrap(), 1);
}

#[test]
fn a_snapshot_over_a_64_kib_memory_stores_no_second_copy() {
    let mut fx = Fixture::new();
    let memory = format!(
        "---\nid: m\n---\n{}",
        "canary-memory-line \"quoted\"\tand tabbed\n".repeat(1700)
    );
    assert!(memory.len() >= 64 * 1024);
    fx.memory(&memory);
    let blob_bytes = |store: &SqliteStore| -> i64 {
        rusqlite::Connection::open(store.path())
            .unwrap()
            .query_row("SELECT sum(length(bytes)) FROM blobs", [], |r| r.get(0))
            .unwrap()
    };
    let before = blob_bytes(&fx.store);
    let now = fx.message("two");
    let (s, id) = stored(&fx, &now);
    let added = blob_bytes(&fx.store) - before;
    assert!(added < 8 * 1024, "{added} bytes stored beside the memory");
    memory_blob(&fx.store);
    assert_eq!(Snapshot::load(&fx.store, &id).unwrap(), s);
    assert_eq!(s.memory.unwrap().text, memory);
    let u = fx.store.usage().unwrap();
    assert_eq!(
        u.document_bytes,
        memory.len() as u64,
        "counted once, as a document"
    );
}

#[test]
fn a_deleted_or_altered_part_is_refused_on_retry() {
    for (sql, why) in [
        ("DELETE FROM blobs WHERE sha256 = unhex(?1)", "part missing"),
        (
            "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'canary', 'CANARY') AS BLOB) \
             WHERE sha256 = unhex(?1)",
            "part altered",
        ),
        // No longer UTF-8: still named as altered (its hash is checked first).
        (
            "UPDATE blobs SET bytes = CAST(x'ff' || bytes AS BLOB) WHERE sha256 = unhex(?1)",
            "part altered",
        ),
    ] {
        let mut fx = Fixture::new();
        fx.memory(&memory_text());
        let now = fx.message("two");
        let (_, id) = stored(&fx, &now);
        tamper(&fx.store, sql);
        match Snapshot::load(&fx.store, &id) {
            Err(ContextError::SnapshotInvalid { why: got, .. }) => assert_eq!(got, why, "{sql}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
