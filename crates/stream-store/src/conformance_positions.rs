//! Conformance: events by global position (`Read::events_after_position`,
//! `Read::last_position`), the order a reader of every source pages in.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;
use stream_core::EventId;

use super::event;
use crate::{PositionedEvent, Read, Store};

fn all<R: Read + ?Sized>(store: &R) -> Vec<PositionedEvent> {
    store.events_after_position(0, usize::MAX >> 1).unwrap()
}

fn ids(events: &[PositionedEvent]) -> Vec<EventId> {
    events.iter().map(|p| p.event.event.id.clone()).collect()
}

fn strictly_increasing(events: &[PositionedEvent]) -> bool {
    events.windows(2).all(|w| w[0].position < w[1].position)
}

pub fn positions_strictly_increase_in_commit_order_across_sources(store: &dyn Store) {
    let a1 = event("test:a", "1", json!(1));
    let b1 = event("test:b", "1", json!(1));
    let a2 = event("test:a", "2", json!(2));
    let (c1, b2) = (
        event("test:c", "1", json!(1)),
        event("test:b", "2", json!(2)),
    );
    store.append(&a1).unwrap();
    store.append(&b1).unwrap();
    store.append(&a2).unwrap();
    let mut tx = store.begin().unwrap();
    tx.append(&c1).unwrap();
    tx.append(&b2).unwrap();
    tx.commit().unwrap();
    // A converged retry takes no new position.
    store.append(&a1).unwrap();
    let events = all(store);
    assert_eq!(ids(&events), [a1.id, b1.id, a2.id, c1.id, b2.id]);
    assert!(strictly_increasing(&events), "{events:?}");
    assert!(events[0].position >= 1);
    assert_eq!(
        store.last_position().unwrap(),
        events.last().unwrap().position
    );
    // The same order as every event read without a source.
    let plain: Vec<_> = store.events(&crate::EventQuery::default()).unwrap();
    let unpositioned: Vec<_> = events.into_iter().map(|p| p.event).collect();
    assert_eq!(plain, unpositioned);
}

pub fn reading_after_the_last_position_returns_nothing(store: &dyn Store) {
    assert_eq!(store.last_position().unwrap(), 0);
    assert!(store.events_after_position(0, 10).unwrap().is_empty());
    for i in 0..3 {
        store
            .append(&event("test:a", &i.to_string(), json!(i)))
            .unwrap();
    }
    let last = store.last_position().unwrap();
    assert!(store.events_after_position(last, 10).unwrap().is_empty());
    assert!(
        store
            .events_after_position(last + 100, 10)
            .unwrap()
            .is_empty()
    );
    assert!(store.events_after_position(0, 0).unwrap().is_empty());
    let first = store.events_after_position(0, 1).unwrap();
    assert_eq!(first.len(), 1);
    let rest = store.events_after_position(first[0].position, 10).unwrap();
    assert_eq!(rest.len(), 2);
    assert_eq!(rest.last().unwrap().position, last);
}

pub fn an_aborted_transaction_leaves_no_position_visible(store: &dyn Store) {
    store.append(&event("test:a", "1", json!(1))).unwrap();
    let before = store.last_position().unwrap();
    let mut tx = store.begin().unwrap();
    tx.append(&event("test:a", "lost-1", json!(1))).unwrap();
    tx.append(&event("test:b", "lost-2", json!(2))).unwrap();
    // The transaction sees its own events at their positions; no one
    // else does.
    let own = tx.last_position().unwrap();
    assert!(own > before);
    assert_eq!(tx.events_after_position(before, 10).unwrap().len(), 2);
    assert_eq!(store.last_position().unwrap(), before);
    assert!(store.events_after_position(before, 10).unwrap().is_empty());
    drop(tx);
    assert_eq!(store.last_position().unwrap(), before);
    assert!(store.events_after_position(before, 10).unwrap().is_empty());
    let kept = event("test:a", "2", json!(2));
    store.append(&kept).unwrap();
    let after = store.events_after_position(before, 10).unwrap();
    assert_eq!(ids(&after), [kept.id]);
    assert!(after[0].position > before);
    assert_eq!(all(store).len(), 2);
}

/// A reader pages by `limit` from the last position it saw while another
/// thread appends, one event or a transaction of three at a time: it ends
/// with every event once, in commit order.
pub fn paging_by_limit_misses_nothing_while_another_writer_appends(store: &dyn Store) {
    const ROUNDS: usize = 40;
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..ROUNDS {
                if i % 4 == 0 {
                    let mut tx = store.begin().unwrap();
                    for source in ["test:a", "test:b", "test:c"] {
                        tx.append(&event(source, &format!("tx-{i}"), json!(i)))
                            .unwrap();
                    }
                    tx.commit().unwrap();
                } else {
                    let source = ["test:a", "test:b", "test:c"][i % 3];
                    store
                        .append(&event(source, &format!("one-{i}"), json!(i)))
                        .unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut seen: Vec<PositionedEvent> = Vec::new();
        loop {
            // Read the flag first: a page read after the writer finished
            // that comes back empty means there is nothing left.
            let finished = done.load(Ordering::SeqCst);
            let after = seen.last().map_or(0, |p| p.position);
            let page = store.events_after_position(after, 4).unwrap();
            assert!(page.len() <= 4);
            if page.is_empty() && finished {
                break seen;
            }
            if page.is_empty() {
                std::thread::yield_now();
            }
            seen.extend(page);
        }
    });
    assert!(strictly_increasing(&seen));
    let unique: HashSet<_> = ids(&seen).into_iter().collect();
    assert_eq!(unique.len(), seen.len(), "an event was read twice");
    assert_eq!(seen.len(), ROUNDS / 4 * 3 + (ROUNDS - ROUNDS / 4));
    assert_eq!(seen, all(store), "paging read what one read reads");
}
