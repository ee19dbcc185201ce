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
    let bytes = fx.store.snapshot(&id).unwrap().unwrap();
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
    // New: the root and the manifest; the trigger and its text; the
    // previous trigger as a transcript entry (its text is shared), its reply
    // and the reply's text, the new correction target; the capabilities; and
    // the three lists that grew (transcript, evidence, correction targets)
    // with their changed runs. The memory part, the earlier exchanges and
    // the lists' unchanged runs are shared.
    assert_eq!(after.0 - before.0, 15, "parts added by the second run");
    assert!(
        after.1 - before.1 < memory.len() as u64,
        "memory.md is not stored again: {} new bytes",
        after.1 - before.1
    );
}

fn tamper(store: &SqliteStore, sql: &str) {
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    // The memory part: the only part holding the memory text.
    let part: String = conn
        .query_row(
            "SELECT b.sha256 FROM blobs b WHERE substr(b.bytes, 1, 4) = CAST('tsp1' AS BLOB) \
             AND instr(b.bytes, CAST('canary-memory-line' AS BLOB)) > 0 \
             ORDER BY length(b.bytes) LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(conn.execute(sql, [part]).unwrap(), 1);
}

#[test]
fn a_deleted_or_altered_part_is_refused_on_retry() {
    for (sql, why) in [
        ("DELETE FROM blobs WHERE sha256 = ?1", "part missing"),
        (
            "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'canary', 'CANARY') AS BLOB) \
             WHERE sha256 = ?1",
            "part altered",
        ),
    ] {
        let mut fx = Fixture::new();
        fx.memory(&memory_text());
        let now = fx.message("two");
        let (_, id) = stored(&fx, &now);
        tamper(&fx.store, sql);
        match Snapshot::load(&fx.store, &id) {
            Err(ContextError::SnapshotInvalid { why: got, .. }) => assert_eq!(got, why),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
