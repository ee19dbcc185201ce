//! The backend-independent conformance suite (feature `conformance`).
//!
//! Every backend runs every function here on a fresh, empty store, through
//! [`conformance_suite!`](crate::conformance_suite). Process-level crash and
//! race tests are backend specific and live beside each backend's tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::{Value, json};
use stream_core::canon::{Hashed, sha256, to_canonical_bytes};
use stream_core::ids::{derive_document_id, derive_event_id, derive_version_id};
use stream_core::{Authorship, EventId, NewEvent, RunId, SnapshotId, SourceName};

use crate::{
    AppendOutcome, EventQuery, Progress, RunRow, RunStatus, Store, StoreError, VersionRow,
};

#[path = "conformance_positions.rs"]
mod positions;
pub use positions::*;
#[path = "conformance_model.rs"]
mod model;
pub use model::a_random_history_answers_as_the_model_does;

/// Generates one `#[test]` per conformance function, each on `$fresh`
/// (an expression yielding a fresh `Box<dyn Store>` or `impl Store`). With
/// `optional:`, `$fresh` yields an `Option` and a test without a store
/// returns at once (the expression says why it skipped).
#[macro_export]
macro_rules! conformance_suite {
    (optional: $fresh:expr) => {
        $crate::conformance_suite!(@names @optional $fresh);
    };
    (@names @$how:ident $fresh:expr) => {
        $crate::conformance_suite!(@$how $fresh;
            insert_assigns_gap_free_seq_per_source,
            identical_append_converges,
            a_long_text_round_trips_and_converges,
            conflict_when_source_differs,
            conflict_when_type_differs,
            conflict_when_version_differs,
            conflict_when_authorship_differs,
            conflict_when_sensitivity_differs,
            conflict_when_root_differs,
            conflict_when_parent_differs,
            conflict_when_payload_differs,
            conflict_writes_nothing,
            dropped_transaction_leaves_nothing,
            failure_midway_leaves_nothing,
            seq_stays_gap_free_across_failed_transactions,
            transaction_sees_its_own_writes,
            reads_by_id_source_type_root_and_parent,
            runs_round_trip,
            progress_and_controls_round_trip,
            documents_versions_and_current_pointer,
            versions_are_immutable,
            blobs_are_content_addressed,
            hashed_bytes_are_kept_under_their_digest,
            snapshots_round_trip_through_parts,
            a_snapshot_text_is_the_blob_of_the_same_text,
            payload_hash_must_match_bytes,
            positions_strictly_increase_in_commit_order_across_sources,
            reading_after_the_last_position_returns_nothing,
            an_aborted_transaction_leaves_no_position_visible,
            paging_by_limit_misses_nothing_while_another_writer_appends,
            a_random_history_answers_as_the_model_does
        );
    };
    (@required $fresh:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                let store = $fresh;
                $crate::conformance::$name(&store);
            }
        )*
    };
    (@optional $fresh:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                let Some(store) = $fresh else { return };
                $crate::conformance::$name(&store);
            }
        )*
    };
    ($fresh:expr) => {
        $crate::conformance_suite!(@names @required $fresh);
    };
}

/// A test event on `source` whose identity key is `key`.
pub fn event(source: &str, key: &str, payload: Value) -> NewEvent {
    let bytes = to_canonical_bytes(&payload).unwrap();
    NewEvent {
        id: derive_event_id(source, "test.event", &json!(key)).unwrap(),
        source: SourceName::new(source).unwrap(),
        event_type: "test.event".into(),
        version: 1,
        authorship: Authorship::System,
        sensitive: false,
        root: None,
        parent: None,
        payload_sha256: sha256(&bytes),
        payload: bytes,
    }
}

fn append(store: &dyn Store, e: &NewEvent) -> AppendOutcome {
    store.append(e).unwrap()
}

fn run_row(c: char, status: RunStatus) -> RunRow {
    let hex: String = std::iter::repeat_n(c, 64).collect();
    RunRow {
        run_id: RunId::parse(&hex).unwrap(),
        agent_id: "telegram-conversation".into(),
        agent_version: 18,
        trigger_event_id: EventId::parse(&hex).unwrap(),
        status,
        attempts: 1,
        snapshot_id: Some(SnapshotId::parse(&hex).unwrap()),
    }
}

pub fn insert_assigns_gap_free_seq_per_source(store: &dyn Store) {
    let a = SourceName::new("test:a").unwrap();
    assert_eq!(store.source_head(&a).unwrap(), 0);
    assert_eq!(
        append(store, &event("test:a", "1", json!(1))),
        AppendOutcome::Inserted { seq: 1 }
    );
    assert_eq!(
        append(store, &event("test:b", "1", json!(1))),
        AppendOutcome::Inserted { seq: 1 }
    );
    assert_eq!(
        append(store, &event("test:a", "2", json!(2))),
        AppendOutcome::Inserted { seq: 2 }
    );
    assert_eq!(store.source_head(&a).unwrap(), 2);
    let names: Vec<_> = store
        .sources()
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, ["test:a", "test:b"]);
}

pub fn identical_append_converges(store: &dyn Store) {
    let e = event("test:a", "1", json!({"x": 1}));
    assert_eq!(append(store, &e), AppendOutcome::Inserted { seq: 1 });
    assert_eq!(append(store, &e), AppendOutcome::Converged { seq: 1 });
    assert_eq!(store.source_head(&e.source).unwrap(), 1);
}

/// A message-sized text (which SQLite stores out of its payload, as a
/// blob) comes back byte for byte, the same event converges, and a
/// different text under the same id is a conflict.
pub fn a_long_text_round_trips_and_converges(store: &dyn Store) {
    let text = "canary-text \"quoted\" \\ \n\u{1F600}\u{7}".repeat(20);
    let e = event("test:a", "1", json!({"chatId": 42, "text": text}));
    assert_eq!(append(store, &e), AppendOutcome::Inserted { seq: 1 });
    assert_eq!(store.event(&e.id).unwrap().unwrap().event, e);
    let listed = store.events(&EventQuery::default()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].event, e);
    assert_eq!(append(store, &e), AppendOutcome::Converged { seq: 1 });
    let mut other = event(
        "test:a",
        "1",
        json!({"chatId": 42, "text": text.replace('q', "Q")}),
    );
    other.id = e.id.clone();
    assert_eq!(append(store, &other), AppendOutcome::Conflict);
    // A second event with the same text: both read back whole.
    let twin = event("test:b", "1", json!({"text": text, "twin": true}));
    assert_eq!(append(store, &twin), AppendOutcome::Inserted { seq: 1 });
    assert_eq!(store.event(&twin.id).unwrap().unwrap().event, twin);
    assert_eq!(store.event(&e.id).unwrap().unwrap().event, e);
}

fn conflict_when(store: &dyn Store, change: impl FnOnce(&mut NewEvent)) {
    let original = event("test:a", "1", json!({"x": 1}));
    append(store, &original);
    let mut other = original.clone();
    change(&mut other);
    assert_ne!(other, original, "the change must change something");
    assert_eq!(other.id, original.id);
    assert_eq!(append(store, &other), AppendOutcome::Conflict);
}

pub fn conflict_when_source_differs(store: &dyn Store) {
    conflict_when(store, |e| {
        e.source = SourceName::new("test:elsewhere").unwrap()
    });
}

pub fn conflict_when_type_differs(store: &dyn Store) {
    conflict_when(store, |e| e.event_type = "test.other".into());
}

pub fn conflict_when_version_differs(store: &dyn Store) {
    conflict_when(store, |e| e.version = 2);
}

pub fn conflict_when_authorship_differs(store: &dyn Store) {
    conflict_when(store, |e| e.authorship = Authorship::Agent);
}

pub fn conflict_when_sensitivity_differs(store: &dyn Store) {
    conflict_when(store, |e| e.sensitive = true);
}

pub fn conflict_when_root_differs(store: &dyn Store) {
    conflict_when(store, |e| e.root = Some(event("test:x", "r", json!(0)).id));
}

pub fn conflict_when_parent_differs(store: &dyn Store) {
    conflict_when(store, |e| {
        e.parent = Some(event("test:x", "p", json!(0)).id)
    });
}

pub fn conflict_when_payload_differs(store: &dyn Store) {
    conflict_when(store, |e| {
        let bytes = to_canonical_bytes(&json!({"x": 2})).unwrap();
        e.payload_sha256 = sha256(&bytes);
        e.payload = bytes;
    });
}

pub fn conflict_writes_nothing(store: &dyn Store) {
    let original = event("test:a", "1", json!({"x": 1}));
    append(store, &original);
    let mut other = event("test:a", "1", json!({"x": 2}));
    other.id = original.id.clone();
    let mut tx = store.begin().unwrap();
    tx.append(&event("test:a", "2", json!(2))).unwrap();
    assert_eq!(tx.append(&other).unwrap(), AppendOutcome::Conflict);
    let err = tx
        .append(&other)
        .unwrap()
        .or_conflict(&other.id)
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }));
    drop(tx);
    let stored = store.event(&original.id).unwrap().unwrap();
    assert_eq!(stored.event, original);
    assert_eq!(store.source_head(&original.source).unwrap(), 1);
}

pub fn dropped_transaction_leaves_nothing(store: &dyn Store) {
    let source = SourceName::new("test:a").unwrap();
    let mut tx = store.begin().unwrap();
    for i in 0..3 {
        tx.append(&event("test:a", &i.to_string(), json!(i)))
            .unwrap();
    }
    let blob = tx.put_blob(b"bytes").unwrap();
    tx.put_run(&run_row('1', RunStatus::Completed)).unwrap();
    tx.set_progress(
        "c@1",
        &Progress {
            source: source.clone(),
            seq: 3,
        },
    )
    .unwrap();
    tx.set_control("ingress", &json!("frozen")).unwrap();
    drop(tx);
    assert_eq!(store.source_head(&source).unwrap(), 0);
    assert!(store.blob(&blob).unwrap().is_none());
    assert!(
        store
            .run(&run_row('1', RunStatus::Completed).run_id)
            .unwrap()
            .is_none()
    );
    assert!(store.progress("c@1").unwrap().is_none());
    assert!(store.control("ingress").unwrap().is_none());
}

pub fn failure_midway_leaves_nothing(store: &dyn Store) {
    let source = SourceName::new("test:a").unwrap();
    let doc = derive_document_id("test:a", "memory.md").unwrap();
    let result = (|| {
        let mut tx = store.begin()?;
        tx.append(&event("test:a", "1", json!(1)))?;
        tx.ensure_document(&doc, &source, "memory.md")?;
        // No blob for this version: the backend must refuse, and the
        // caller's `?` drops the transaction.
        let missing = stream_core::canon::sha256(b"never stored");
        tx.insert_version(&VersionRow {
            id: derive_version_id(&doc, &missing, None).unwrap(),
            document_id: doc.clone(),
            sha256: missing,
            size: 12,
            content_type: "text/markdown".into(),
            previous_version: None,
        })?;
        tx.commit()
    })();
    assert!(
        matches!(result, Err(StoreError::Missing { .. })),
        "{result:?}"
    );
    assert_eq!(store.source_head(&source).unwrap(), 0);
    assert!(store.document(&doc).unwrap().is_none());
}

pub fn seq_stays_gap_free_across_failed_transactions(store: &dyn Store) {
    append(store, &event("test:a", "1", json!(1)));
    for attempt in 0..3 {
        let mut tx = store.begin().unwrap();
        tx.append(&event("test:a", &format!("lost-{attempt}"), json!(attempt)))
            .unwrap();
        drop(tx);
    }
    assert_eq!(
        append(store, &event("test:a", "2", json!(2))),
        AppendOutcome::Inserted { seq: 2 }
    );
    let seqs: Vec<u64> = store
        .events(&EventQuery::source_after(
            &SourceName::new("test:a").unwrap(),
            0,
        ))
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, [1, 2]);
}

pub fn transaction_sees_its_own_writes(store: &dyn Store) {
    let e = event("test:a", "1", json!(1));
    let mut tx = store.begin().unwrap();
    tx.append(&e).unwrap();
    tx.set_control("k", &json!({"v": 1})).unwrap();
    assert_eq!(tx.event(&e.id).unwrap().unwrap().seq, 1);
    assert_eq!(tx.control("k").unwrap(), Some(json!({"v": 1})));
    tx.commit().unwrap();
    assert_eq!(store.control("k").unwrap(), Some(json!({"v": 1})));
}

pub fn reads_by_id_source_type_root_and_parent(store: &dyn Store) {
    let root = event("test:a", "root", json!("r"));
    let mut child = event("test:b", "child", json!("c"));
    child.root = Some(root.id.clone());
    child.parent = Some(root.id.clone());
    let mut grandchild = event("test:b", "grandchild", json!("g"));
    grandchild.event_type = "test.other".into();
    grandchild.root = Some(root.id.clone());
    grandchild.parent = Some(child.id.clone());
    for e in [&root, &child, &grandchild] {
        append(store, e);
    }
    assert_eq!(store.event(&child.id).unwrap().unwrap().event, child);
    let ids = |q: EventQuery| -> Vec<EventId> {
        store
            .events(&q)
            .unwrap()
            .into_iter()
            .map(|e| e.event.id)
            .collect()
    };
    let b = SourceName::new("test:b").unwrap();
    assert_eq!(
        ids(EventQuery::source_after(&b, 0)),
        [child.id.clone(), grandchild.id.clone()]
    );
    assert_eq!(
        ids(EventQuery::source_after(&b, 1)),
        [grandchild.id.clone()]
    );
    assert_eq!(
        ids(EventQuery::of_type("test.other")),
        [grandchild.id.clone()]
    );
    assert_eq!(
        ids(EventQuery::rooted_at(&root.id)),
        [child.id.clone(), grandchild.id.clone()]
    );
    assert_eq!(ids(EventQuery::source_before(&b, 2)), [child.id.clone()]);
    assert_eq!(
        ids(EventQuery::source_before(&b, 9).limit(1)),
        [grandchild.id.clone()]
    );
    // Several roots in one read, in commit order across them; an empty
    // list matches nothing.
    let mut other_child = event("test:b", "other-child", json!("o"));
    other_child.root = Some(grandchild.id.clone());
    other_child.parent = Some(grandchild.id.clone());
    append(store, &other_child);
    assert_eq!(
        ids(EventQuery::rooted_at_any(vec![
            grandchild.id.clone(),
            root.id.clone()
        ])),
        [
            child.id.clone(),
            grandchild.id.clone(),
            other_child.id.clone()
        ]
    );
    assert_eq!(
        ids(EventQuery::rooted_at_any(vec![grandchild.id.clone()])),
        [other_child.id.clone()]
    );
    assert!(ids(EventQuery::rooted_at_any(Vec::new())).is_empty());
    let newest_first = EventQuery {
        descending: true,
        ..EventQuery::rooted_at(&root.id)
    };
    assert_eq!(ids(newest_first), [grandchild.id.clone(), child.id.clone()]);
    let limited = EventQuery {
        limit: Some(1),
        ..EventQuery::default()
    };
    assert_eq!(ids(limited), std::slice::from_ref(&root.id));
    assert!(
        store
            .event(&event("test:z", "none", json!(0)).id)
            .unwrap()
            .is_none()
    );
}

pub fn runs_round_trip(store: &dyn Store) {
    let pending = run_row('1', RunStatus::Pending);
    let mut tx = store.begin().unwrap();
    tx.put_run(&pending).unwrap();
    tx.put_run(&run_row('2', RunStatus::Pending)).unwrap();
    tx.commit().unwrap();
    assert_eq!(store.run(&pending.run_id).unwrap(), Some(pending.clone()));
    let completed = RunRow {
        status: RunStatus::Completed,
        attempts: 2,
        ..pending.clone()
    };
    let mut tx = store.begin().unwrap();
    tx.put_run(&completed).unwrap();
    tx.commit().unwrap();
    assert_eq!(store.run(&pending.run_id).unwrap(), Some(completed.clone()));
    let pending_ids: Vec<_> = store
        .runs_with_status(RunStatus::Pending)
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(pending_ids, [run_row('2', RunStatus::Pending).run_id]);
    assert_eq!(
        store.runs_with_status(RunStatus::Completed).unwrap(),
        [completed]
    );
}

pub fn progress_and_controls_round_trip(store: &dyn Store) {
    let source = SourceName::new("telegram:1").unwrap();
    let mut tx = store.begin().unwrap();
    tx.set_progress(
        "agent@1",
        &Progress {
            source: source.clone(),
            seq: 4,
        },
    )
    .unwrap();
    tx.set_control("ingress", &json!({"state": "frozen"}))
        .unwrap();
    tx.commit().unwrap();
    let mut tx = store.begin().unwrap();
    tx.set_progress(
        "agent@1",
        &Progress {
            source: source.clone(),
            seq: 9,
        },
    )
    .unwrap();
    tx.set_control("ingress", &json!({"state": "running"}))
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        store.progress("agent@1").unwrap(),
        Some(Progress { source, seq: 9 })
    );
    assert_eq!(
        store.control("ingress").unwrap(),
        Some(json!({"state": "running"}))
    );
    assert_eq!(store.progress("other@1").unwrap(), None);
}

pub fn documents_versions_and_current_pointer(store: &dyn Store) {
    let source = SourceName::new("filesystem:ctx").unwrap();
    let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
    let mut previous = None;
    for content in [&b"one"[..], b"two"] {
        let mut tx = store.begin().unwrap();
        tx.ensure_document(&doc, &source, "memory.md").unwrap();
        let sha = tx.put_blob(content).unwrap();
        let version = VersionRow {
            id: derive_version_id(&doc, &sha, previous.as_ref()).unwrap(),
            document_id: doc.clone(),
            sha256: sha,
            size: content.len() as u64,
            content_type: "text/markdown".into(),
            previous_version: previous.clone(),
        };
        tx.insert_version(&version).unwrap();
        tx.set_current_version(&doc, &version.id).unwrap();
        tx.commit().unwrap();
        let row = store.document(&doc).unwrap().unwrap();
        assert_eq!(row.current_version.as_ref(), Some(&version.id));
        assert_eq!(store.version(&version.id).unwrap(), Some(version.clone()));
        assert_eq!(
            store.blob(&version.sha256).unwrap().as_deref(),
            Some(content)
        );
        previous = Some(version.id);
    }
    assert_eq!(store.documents(&source).unwrap().len(), 1);
    let mut tx = store.begin().unwrap();
    let other = SourceName::new("filesystem:other").unwrap();
    assert!(matches!(
        tx.ensure_document(&doc, &other, "memory.md"),
        Err(StoreError::DocumentConflict { .. })
    ));
}

pub fn versions_are_immutable(store: &dyn Store) {
    let source = SourceName::new("filesystem:ctx").unwrap();
    let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
    let mut tx = store.begin().unwrap();
    tx.ensure_document(&doc, &source, "memory.md").unwrap();
    let sha = tx.put_blob(b"one").unwrap();
    let version = VersionRow {
        id: derive_version_id(&doc, &sha, None).unwrap(),
        document_id: doc.clone(),
        sha256: sha,
        size: 3,
        content_type: "text/markdown".into(),
        previous_version: None,
    };
    tx.insert_version(&version).unwrap();
    tx.insert_version(&version).unwrap();
    let changed = VersionRow {
        size: 4,
        ..version.clone()
    };
    assert!(matches!(
        tx.insert_version(&changed),
        Err(StoreError::VersionConflict { .. })
    ));
    tx.commit().unwrap();
    assert_eq!(store.version(&version.id).unwrap(), Some(version));
}

pub fn blobs_are_content_addressed(store: &dyn Store) {
    let mut tx = store.begin().unwrap();
    let a = tx.put_blob(b"same").unwrap();
    let b = tx.put_blob(b"same").unwrap();
    tx.commit().unwrap();
    assert_eq!(a, b);
    assert_eq!(a, sha256(b"same"));
    assert_eq!(store.blob(&a).unwrap().as_deref(), Some(&b"same"[..]));
}

pub fn hashed_bytes_are_kept_under_their_digest(store: &dyn Store) {
    let owned = Hashed::new(b"hashed once".to_vec());
    let mut tx = store.begin().unwrap();
    tx.put_hashed(&owned.borrowed()).unwrap();
    // The same bytes again, by either door: one blob.
    tx.put_hashed(&Hashed::new(&b"hashed once"[..])).unwrap();
    assert_eq!(tx.put_blob(b"hashed once").unwrap(), *owned.sha256());
    tx.commit().unwrap();
    assert_eq!(owned.sha256(), &sha256(b"hashed once"));
    assert_eq!(
        store.blob(owned.sha256()).unwrap().as_deref(),
        Some(owned.bytes())
    );
}

pub fn payload_hash_must_match_bytes(store: &dyn Store) {
    let mut e = event("test:a", "1", json!(1));
    e.payload = b"2".to_vec();
    assert!(store.append(&e).is_err());
    assert_eq!(store.source_head(&e.source).unwrap(), 0);
}

pub fn snapshots_round_trip_through_parts(store: &dyn Store) {
    let memory = "canary-memory ".repeat(100);
    let doc = |turn: u32| {
        to_canonical_bytes(&json!({"memory": memory, "turn": turn, "list": [memory, turn]}))
            .unwrap()
    };
    let (one, two) = (doc(1), doc(2));
    let (id1, id2) = (
        SnapshotId::from(sha256(&one)),
        SnapshotId::from(sha256(&two)),
    );
    let mut tx = store.begin().unwrap();
    tx.put_snapshot(&id1, &one).unwrap();
    tx.put_snapshot(&id1, &one).unwrap();
    tx.put_snapshot(&id2, &two).unwrap();
    assert!(matches!(
        tx.put_snapshot(&id1, &two),
        Err(StoreError::SnapshotHash { .. })
    ));
    tx.commit().unwrap();
    assert_eq!(store.snapshot(&id1).unwrap().unwrap().as_bytes(), one);
    assert_eq!(store.snapshot(&id2).unwrap().unwrap().as_bytes(), two);
    let absent = SnapshotId::from(sha256(b"absent"));
    assert!(store.snapshot(&absent).unwrap().is_none());
}

/// A long string of a snapshot (`memory.md`) is stored as the blob of its
/// raw text: the blob a document version of that text already holds.
pub fn a_snapshot_text_is_the_blob_of_the_same_text(store: &dyn Store) {
    let memory = "canary-memory \"line\"\n".repeat(400);
    let mut tx = store.begin().unwrap();
    let blob = tx.put_blob(memory.as_bytes()).unwrap();
    tx.commit().unwrap();
    let bytes = to_canonical_bytes(&json!({"memory": {"text": memory}, "turn": 1})).unwrap();
    let id = SnapshotId::from(sha256(&bytes));
    let mut tx = store.begin().unwrap();
    tx.put_snapshot(&id, &bytes).unwrap();
    tx.commit().unwrap();
    assert_eq!(store.snapshot(&id).unwrap().unwrap().as_bytes(), bytes);
    assert_eq!(
        store.blob(&blob).unwrap().as_deref(),
        Some(memory.as_bytes()),
        "the document's blob, unchanged"
    );
}
