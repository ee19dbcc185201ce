//! Two OS processes on one file: racing appends and SIGKILL mid-transaction.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde_json::json;
use stream_core::SourceName;
use stream_store::conformance::event;
use stream_store::{AppendOutcome, EventQuery, Progress, Read, SqliteStore, Store};

use crate::common::{child_role, race, spawn_child, temp_store};

const ENTRY: &str = "processes::child_process_entry";

/// Not a test of its own: the body a child process runs, chosen by env var.
/// Run without a role (as part of the normal suite) it does nothing.
#[test]
fn child_process_entry() {
    let Some((role, db, arg)) = child_role() else {
        return;
    };
    let store = SqliteStore::open(&db).unwrap();
    match role.as_str() {
        "race" => race(&store, &db.with_extension("go"), &arg),
        "hold" => {
            let mut tx = store.begin().unwrap();
            for i in 0..50 {
                tx.append(&event("test:held", &i.to_string(), json!(i)))
                    .unwrap();
            }
            let source = SourceName::new("test:held").unwrap();
            tx.set_progress("held@1", &Progress { source, seq: 50 })
                .unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(60));
            tx.commit().unwrap();
        }
        "churn" => {
            let source = SourceName::new("test:churn").unwrap();
            for round in 0.. {
                let mut tx = store.begin().unwrap();
                for part in 0..5 {
                    tx.append(&event(
                        "test:churn",
                        &format!("{round}-{part}"),
                        json!(round),
                    ))
                    .unwrap();
                }
                let seq = tx.source_head(&source).unwrap();
                tx.set_progress(
                    "churn@1",
                    &Progress {
                        source: source.clone(),
                        seq,
                    },
                )
                .unwrap();
                tx.commit().unwrap();
                println!("COMMITTED {round}");
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// A child process and a persistent reader of its stdout.
struct ChildProc {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

fn start(role: &str, db: &std::path::Path, arg: &str) -> ChildProc {
    let mut child = spawn_child(ENTRY, role, db, arg);
    let out = BufReader::new(child.stdout.take().unwrap());
    ChildProc { child, out }
}

fn read_line(p: &mut ChildProc) -> String {
    loop {
        let mut line = String::new();
        assert!(p.out.read_line(&mut line).unwrap() > 0, "child ended early");
        // libtest prints "test name ... " before our marker on the same line.
        for marker in ["OUTCOME", "READY", "COMMITTED"] {
            if let Some(at) = line.find(marker) {
                return line[at..].trim().to_owned();
            }
        }
    }
}

fn sigkill(p: &mut ChildProc) {
    let child = &mut p.child;
    let pid = i32::try_from(child.id()).unwrap();
    // SAFETY: sending a signal to our own child has no memory-safety effect.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    child.wait().unwrap();
}

#[test]
fn racing_processes_same_id_different_payloads_one_wins() {
    for round in 0..4 {
        let (_store, path, _dir) = temp_store();
        let key = format!("contested-{round}");
        let mut a = start("race", &path, &format!("{key}/from-a"));
        let mut b = start("race", &path, &format!("{key}/from-b"));
        std::thread::sleep(Duration::from_millis(150));
        std::fs::write(path.with_extension("go"), b"").unwrap();
        let mut outcomes = vec![read_line(&mut a), read_line(&mut b)];
        a.child.wait().unwrap();
        b.child.wait().unwrap();
        outcomes.sort();
        assert_eq!(
            outcomes,
            ["OUTCOME conflict", "OUTCOME inserted"],
            "round {round}"
        );
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(
            reopened
                .source_head(&SourceName::new("test:race").unwrap())
                .unwrap(),
            1
        );
    }
}

#[test]
fn sigkill_mid_transaction_leaves_nothing() {
    let (store, path, _dir) = temp_store();
    let mut child = start("hold", &path, "");
    assert_eq!(read_line(&mut child), "READY");
    sigkill(&mut child);
    drop(store);
    let reopened = SqliteStore::open(&path).unwrap();
    let source = SourceName::new("test:held").unwrap();
    assert_eq!(reopened.source_head(&source).unwrap(), 0);
    assert_eq!(reopened.progress("held@1").unwrap(), None);
    assert_eq!(
        reopened
            .append(&event("test:held", "after", json!(0)))
            .unwrap(),
        AppendOutcome::Inserted { seq: 1 }
    );
}

#[test]
fn sigkill_during_commits_is_all_or_nothing() {
    for (round, wait_commits) in [2, 7, 13].into_iter().enumerate() {
        let (store, path, _dir) = temp_store();
        let mut child = start("churn", &path, "");
        for _ in 0..wait_commits {
            read_line(&mut child);
        }
        // Land the kill at a varying point inside the next transactions.
        std::thread::sleep(Duration::from_micros(300 * round as u64));
        sigkill(&mut child);
        drop(store);
        let reopened = SqliteStore::open(&path).unwrap();
        let source = SourceName::new("test:churn").unwrap();
        let events = reopened
            .events(&EventQuery::source_after(&source, 0))
            .unwrap();
        let head = reopened.source_head(&source).unwrap();
        assert!(head >= 5 * wait_commits as u64);
        assert_eq!(head % 5, 0, "a transaction was torn");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=head).collect::<Vec<_>>(), "seq has a gap");
        let progress = reopened.progress("churn@1").unwrap().unwrap();
        assert_eq!(progress.seq, head, "progress and events disagree");
    }
}

/// `serve` notices another process's commits (a CLI decision, `activate`)
/// by this counter on a slow timer; it must move with every commit of
/// another connection and with our own, and stay put otherwise.
#[test]
fn data_version_moves_with_commits_of_any_connection_and_only_then() {
    let (store, path, _dir) = temp_store();
    let other = SqliteStore::open(&path).unwrap();
    let v0 = store.data_version().unwrap();
    assert_eq!(store.data_version().unwrap(), v0, "no commit, no change");
    other
        .append(&event("test:a", "k1", json!({"n": 1})))
        .unwrap();
    let v1 = store.data_version().unwrap();
    assert_ne!(v1, v0, "another connection's commit");
    store
        .append(&event("test:a", "k2", json!({"n": 2})))
        .unwrap();
    let v2 = store.data_version().unwrap();
    assert_ne!(v2, v1, "our own writer's commit");
    let _ = store.events(&EventQuery::default()).unwrap();
    assert_eq!(store.data_version().unwrap(), v2, "reads change nothing");
}
