//! The store against a model: random sequences of appends (new, converging
//! and conflicting), blobs, controls, snapshots and reads, in transactions
//! that commit or are dropped, run on a backend and on [`Model`], a plain
//! in-memory store written from the "must" sentences of [`Read`], [`Tx`]
//! and [`Store`], never by calling a backend. Every answer is compared.
//!
//! Each case writes under names of its own (sources, ids, blob and
//! snapshot bytes, control keys), so cases share one store: a global read
//! (sources, positions) is compared on what this case wrote.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use stream_core::canon::{sha256, to_canonical_bytes};
use stream_core::ids::derive_event_id;
use stream_core::{Authorship, EventId, NewEvent, SnapshotId, SourceName};

use crate::{AppendOutcome, EventQuery, Read, Store, StoreError, Tx};

/// Cases per run; with [`STEPS`] and [`TX_OPS`], well over 10,000
/// operations (the test counts them and says so when fewer ran).
const CASES: u32 = 190;
const STEPS: std::ops::Range<usize> = 20..40;
const TX_OPS: std::ops::Range<usize> = 1..6;
const MIN_OPS: usize = 10_000;

/// One write or read.
#[derive(Debug, Clone)]
enum Op {
    /// Event `key` on source `src` with payload variant `payload` (the
    /// id depends on `key` alone, so another source or payload conflicts),
    /// rooted at event `root` when given.
    Append {
        src: u8,
        key: u8,
        payload: u8,
        root: Option<u8>,
    },
    Blob(u8),
    Control(u8, u8),
    Snapshot(u8),
    /// Snapshot bytes under another snapshot's id: refused.
    SnapshotMismatch(u8),
    Read(Look),
}

/// A read, compared with the model's answer.
#[derive(Debug, Clone)]
enum Look {
    Event(u8),
    After {
        src: u8,
        after: u8,
        limit: Option<u8>,
    },
    Before {
        src: u8,
        before: u8,
        limit: Option<u8>,
    },
    Head(u8),
    Blob(u8),
    Control(u8),
    Snapshot(u8),
    Roots(Vec<u8>),
    /// Store-wide only (positions are handed out at commit).
    Sources,
    Positions {
        page: u8,
    },
}

/// What a case does at the top level.
#[derive(Debug, Clone)]
enum Step {
    /// An op on the store itself (a write in its own transaction).
    Alone(Op),
    /// Ops in one transaction, committed or dropped.
    Tx { ops: Vec<Op>, commit: bool },
}

fn write_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3u8, 0..8u8, 0..3u8, proptest::option::of(0..8u8))
            .prop_map(|(src, key, payload, root)| Op::Append { src, key, payload, root }),
        1 => (0..4u8).prop_map(Op::Blob),
        1 => (0..4u8, 0..3u8).prop_map(|(k, v)| Op::Control(k, v)),
        1 => (0..3u8).prop_map(Op::Snapshot),
        1 => (0..3u8).prop_map(Op::SnapshotMismatch),
    ]
}

fn look(in_tx: bool) -> impl Strategy<Value = Look> {
    let small = proptest::option::of(1..4u8);
    let local = prop_oneof![
        (0..8u8).prop_map(Look::Event),
        (0..3u8, 0..5u8, small.clone()).prop_map(|(src, after, limit)| Look::After {
            src,
            after,
            limit
        }),
        (0..3u8, 1..8u8, small).prop_map(|(src, before, limit)| Look::Before {
            src,
            before,
            limit
        }),
        (0..3u8).prop_map(Look::Head),
        (0..4u8).prop_map(Look::Blob),
        (0..4u8).prop_map(Look::Control),
        (0..3u8).prop_map(Look::Snapshot),
        proptest::collection::vec(0..8u8, 0..3).prop_map(Look::Roots),
    ];
    if in_tx {
        local.boxed()
    } else {
        prop_oneof![
            8 => local,
            1 => Just(Look::Sources),
            1 => (1..6u8).prop_map(|page| Look::Positions { page }),
        ]
        .boxed()
    }
}

fn op(in_tx: bool) -> impl Strategy<Value = Op> {
    prop_oneof![3 => write_op(), 2 => look(in_tx).prop_map(Op::Read)]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        2 => op(false).prop_map(Step::Alone),
        3 => (proptest::collection::vec(op(true), TX_OPS), proptest::bool::weighted(0.75))
            .prop_map(|(ops, commit)| Step::Tx { ops, commit }),
    ];
    proptest::collection::vec(step, STEPS)
}

/// The names one case writes under.
struct Names {
    case: usize,
}

impl Names {
    fn source(&self, src: u8) -> SourceName {
        SourceName::new(format!("test:model-{}-{src}", self.case)).unwrap()
    }

    fn id(&self, key: u8) -> EventId {
        derive_event_id("test:model", "test.model", &json!([self.case, key])).unwrap()
    }

    fn event(&self, src: u8, key: u8, payload: u8, root: Option<u8>) -> NewEvent {
        // Variant 2 carries a long text: SQLite keeps it as a blob of its own.
        let text = match payload {
            2 => format!("canary-model-{} ", self.case).repeat(300),
            _ => String::new(),
        };
        let bytes = to_canonical_bytes(&json!({"v": payload, "text": text})).unwrap();
        NewEvent {
            id: self.id(key),
            source: self.source(src),
            event_type: "test.model".into(),
            version: 1,
            authorship: Authorship::System,
            sensitive: false,
            root: root.map(|r| self.id(r)),
            parent: None,
            payload_sha256: sha256(&bytes),
            payload: bytes,
        }
    }

    fn blob(&self, n: u8) -> Vec<u8> {
        format!("canary-blob-{}-{n}", self.case)
            .repeat(usize::from(n) * 40 + 1)
            .into_bytes()
    }

    fn control(&self, k: u8) -> String {
        format!("test.model.{}.{k}", self.case)
    }

    fn snapshot(&self, n: u8) -> (SnapshotId, Vec<u8>) {
        let memory = format!("canary-snapshot-{}-{n} ", self.case).repeat(200);
        let bytes =
            to_canonical_bytes(&json!({"memory": memory, "n": n, "list": [memory, n]})).unwrap();
        (SnapshotId::from(sha256(&bytes)), bytes)
    }
}

/// The store as its "must" sentences describe it, for one case's names.
#[derive(Debug, Clone, Default)]
struct Model {
    /// Committed (or, in a transaction's copy, written) events in commit
    /// order, each with its `seq`.
    events: Vec<(NewEvent, u64)>,
    /// Blobs, controls and snapshots by the case's number for them.
    blobs: BTreeMap<u8, Vec<u8>>,
    controls: BTreeMap<u8, Value>,
    snapshots: BTreeMap<u8, Vec<u8>>,
}

impl Model {
    /// `append`: an absent id is inserted at its source's next `seq`; a
    /// present one with the same envelope and payload converges on its
    /// `seq`; with anything else it conflicts and nothing is written.
    fn append(&mut self, event: &NewEvent) -> AppendOutcome {
        if let Some((existing, seq)) = self.events.iter().find(|(e, _)| e.id == event.id) {
            return match existing == event {
                true => AppendOutcome::Converged { seq: *seq },
                false => AppendOutcome::Conflict,
            };
        }
        let seq = self.head(&event.source) + 1;
        self.events.push((event.clone(), seq));
        AppendOutcome::Inserted { seq }
    }

    fn head(&self, source: &SourceName) -> u64 {
        self.events
            .iter()
            .filter(|(e, _)| e.source == *source)
            .map(|(_, seq)| *seq)
            .max()
            .unwrap_or(0)
    }

    fn event(&self, id: &EventId) -> Option<(NewEvent, u64)> {
        self.events.iter().find(|(e, _)| e.id == *id).cloned()
    }

    fn of_source(&self, source: &SourceName) -> impl Iterator<Item = &(NewEvent, u64)> {
        self.events.iter().filter(move |(e, _)| e.source == *source)
    }
}

/// An event as a backend answered it, without what the model cannot know
/// (the wall clock).
fn seen(stored: crate::StoredEvent) -> (NewEvent, u64) {
    (stored.event, stored.seq)
}

fn ids(events: impl IntoIterator<Item = (NewEvent, u64)>) -> Vec<(EventId, u64)> {
    events.into_iter().map(|(e, seq)| (e.id, seq)).collect()
}

fn take<T>(items: impl Iterator<Item = T>, limit: Option<u8>) -> Vec<T> {
    items.take(limit.map_or(usize::MAX, usize::from)).collect()
}

/// Compares one read on `reader` (the store, or a transaction) with `model`.
fn compare(
    reader: &dyn Read,
    model: &Model,
    names: &Names,
    look: &Look,
) -> Result<(), TestCaseError> {
    match look {
        Look::Event(key) => {
            let got = reader.event(&names.id(*key)).unwrap().map(seen);
            prop_assert_eq!(got, model.event(&names.id(*key)), "{:?}", look);
        }
        Look::After { src, after, limit } => {
            let query = EventQuery {
                limit: limit.map(usize::from),
                ..EventQuery::source_after(&names.source(*src), u64::from(*after))
            };
            let got = ids(reader.events(&query).unwrap().into_iter().map(seen));
            let want = take(
                model
                    .of_source(&names.source(*src))
                    .filter(|(_, seq)| *seq > u64::from(*after))
                    .cloned(),
                *limit,
            );
            prop_assert_eq!(got, ids(want), "{:?}", look);
        }
        Look::Before { src, before, limit } => {
            let query = EventQuery {
                limit: limit.map(usize::from),
                ..EventQuery::source_before(&names.source(*src), u64::from(*before))
            };
            let got = ids(reader.events(&query).unwrap().into_iter().map(seen));
            let mut want: Vec<_> = model
                .of_source(&names.source(*src))
                .filter(|(_, seq)| *seq < u64::from(*before))
                .cloned()
                .collect();
            want.reverse();
            prop_assert_eq!(got, ids(take(want.into_iter(), *limit)), "{:?}", look);
        }
        Look::Head(src) => {
            let source = names.source(*src);
            prop_assert_eq!(reader.source_head(&source).unwrap(), model.head(&source));
        }
        Look::Blob(n) => {
            let sha = sha256(&names.blob(*n));
            prop_assert_eq!(reader.blob(&sha).unwrap(), model.blobs.get(n).cloned());
        }
        Look::Control(k) => {
            prop_assert_eq!(
                reader.control(&names.control(*k)).unwrap(),
                model.controls.get(k).cloned()
            );
        }
        Look::Snapshot(n) => {
            let (id, _) = names.snapshot(*n);
            let got = reader.snapshot(&id).unwrap().map(|s| s.into_bytes());
            prop_assert_eq!(got, model.snapshots.get(n).cloned());
        }
        Look::Roots(keys) => {
            let roots: Vec<EventId> = keys.iter().map(|k| names.id(*k)).collect();
            let got = ids(reader
                .events(&EventQuery::rooted_at_any(roots.clone()))
                .unwrap()
                .into_iter()
                .map(seen));
            let want = model
                .events
                .iter()
                .filter(|(e, _)| e.root.as_ref().is_some_and(|r| roots.contains(r)))
                .cloned();
            prop_assert_eq!(got, ids(want), "{:?}", look);
        }
        Look::Sources | Look::Positions { .. } => {}
    }
    Ok(())
}

/// The store-wide reads: this case's sources, and its events paged by
/// position from where the case began, in commit order.
fn compare_global(
    store: &dyn Store,
    model: &Model,
    names: &Names,
    start: u64,
    look: &Look,
) -> Result<(), TestCaseError> {
    match look {
        Look::Sources => {
            let prefix = format!("test:model-{}-", names.case);
            let got: BTreeSet<String> = store
                .sources()
                .unwrap()
                .into_iter()
                .map(|s| s.to_string())
                .filter(|s| s.starts_with(&prefix))
                .collect();
            let want: BTreeSet<String> = model
                .events
                .iter()
                .map(|(e, _)| e.source.to_string())
                .collect();
            prop_assert_eq!(got, want);
        }
        Look::Positions { page } => {
            let (mut after, mut got) = (start, Vec::new());
            loop {
                let batch = store
                    .events_after_position(after, usize::from(*page))
                    .unwrap();
                prop_assert!(batch.len() <= usize::from(*page));
                let Some(last) = batch.last() else { break };
                prop_assert!(last.position > after);
                for (one, next) in batch.iter().zip(batch.iter().skip(1)) {
                    prop_assert!(one.position < next.position, "positions increase");
                }
                after = last.position;
                got.extend(batch.into_iter().map(|p| (p.event.event, p.event.seq)));
            }
            prop_assert_eq!(store.last_position().unwrap(), after);
            prop_assert_eq!(ids(got), ids(model.events.iter().cloned()));
        }
        local => compare(store, model, names, local)?,
    }
    Ok(())
}

/// Runs one write on `tx` and on `model`, comparing what each answered.
fn write(tx: &mut dyn Tx, model: &mut Model, names: &Names, op: &Op) -> Result<(), TestCaseError> {
    match op {
        Op::Append {
            src,
            key,
            payload,
            root,
        } => {
            let event = names.event(*src, *key, *payload, *root);
            prop_assert_eq!(tx.append(&event).unwrap(), model.append(&event), "{:?}", op);
        }
        Op::Blob(n) => {
            let bytes = names.blob(*n);
            let sha = tx.put_blob(&bytes).unwrap();
            prop_assert_eq!(&sha, &sha256(&bytes));
            model.blobs.insert(*n, bytes);
        }
        Op::Control(k, v) => {
            let value = json!({"v": v});
            tx.set_control(&names.control(*k), &value).unwrap();
            model.controls.insert(*k, value);
        }
        Op::Snapshot(n) => {
            let (id, bytes) = names.snapshot(*n);
            tx.put_snapshot(&id, &bytes).unwrap();
            model.snapshots.insert(*n, bytes);
        }
        Op::SnapshotMismatch(n) => {
            let (id, _) = names.snapshot(*n);
            let (_, other) = names.snapshot(*n + 1);
            let refused = tx.put_snapshot(&id, &other);
            prop_assert!(
                matches!(refused, Err(StoreError::SnapshotHash { .. })),
                "{refused:?}"
            );
        }
        Op::Read(look) => compare(&*tx, model, names, look)?,
    }
    Ok(())
}

/// One case on `store`, under names of its own.
fn run_case(store: &dyn Store, names: &Names, steps: &[Step]) -> Result<usize, TestCaseError> {
    let start = store.last_position().unwrap();
    let mut model = Model::default();
    let mut ops = 0;
    for step in steps {
        match step {
            Step::Alone(Op::Read(look)) => {
                compare_global(store, &model, names, start, look)?;
                ops += 1;
            }
            Step::Alone(Op::Append {
                src,
                key,
                payload,
                root,
            }) => {
                let event = names.event(*src, *key, *payload, *root);
                prop_assert_eq!(store.append(&event).unwrap(), model.append(&event));
                ops += 1;
            }
            Step::Alone(op) => {
                let mut tx = store.begin().unwrap();
                let mut next = model.clone();
                write(&mut *tx, &mut next, names, op)?;
                tx.commit().unwrap();
                model = next;
                ops += 1;
            }
            Step::Tx {
                ops: tx_ops,
                commit,
            } => {
                // A transaction sees its own writes; it commits all of them
                // or, dropped, none.
                let mut tx = store.begin().unwrap();
                let mut next = model.clone();
                for op in tx_ops {
                    write(&mut *tx, &mut next, names, op)?;
                }
                ops += tx_ops.len();
                if *commit {
                    tx.commit().unwrap();
                    model = next;
                } else {
                    drop(tx);
                }
            }
        }
    }
    // Everything this case committed, read back at the end.
    for look in [Look::Sources, Look::Positions { page: 7 }] {
        compare_global(store, &model, names, start, &look)?;
    }
    for n in 0..3 {
        compare(store, &model, names, &Look::Head(n))?;
        compare(store, &model, names, &Look::Snapshot(n))?;
    }
    Ok(ops)
}

/// Random histories answer on `store` as they do on the model (see the
/// module documentation); at least [`MIN_OPS`] operations per run. A
/// failure prints the smallest history found that still disagrees.
pub fn a_random_history_answers_as_the_model_does(store: &dyn Store) {
    let config = Config {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let (case, ops) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let result = runner.run(&steps(), |steps| {
        let names = Names {
            case: case.fetch_add(1, Ordering::Relaxed),
        };
        ops.fetch_add(run_case(store, &names, &steps)?, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("the store and its model disagree: {e}");
    }
    let ops = ops.into_inner();
    assert!(ops >= MIN_OPS, "only {ops} operations ran");
    eprintln!("store model: {ops} operations agreed");
}
