//! A decision and its materialization in one call: the new bytes are
//! staged while the decision commits, and never renamed into place before
//! the decision is durable; a decision that fails to commit leaves nothing
//! of its preparation.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stream_core::EventId;
use stream_core::payload::{Disposition, MemoryOperation, ProposalDecision};
use stream_core::text::Label;
use stream_memory::materialize::{MaterializeOutcome, compose, decide_and_materialize, lock_name};
use stream_proposals::decision::{Decided, DecisionError, DecisionRequest};
use stream_proposals::project::CorrectionProjection;
use stream_store::faulty::FaultyStore;
use stream_store::{EventQuery, Read, SqliteStore};

use crate::common::{Mem, WORLD_MEMORY};

fn request(proposal: &EventId, disposition: Disposition) -> DecisionRequest {
    DecisionRequest {
        proposal: proposal.clone(),
        disposition,
        replacement: None,
        submission_id: None,
        actor: Label::new("owner").unwrap(),
        signer: stream_proposals::testing::signer(),
    }
}

/// What accepting the World's memory proposal writes.
fn golden() -> Vec<u8> {
    compose(
        MemoryOperation::Append,
        WORLD_MEMORY.as_bytes(),
        "canary-world-memory: likes tea",
    )
}

/// The materializer's hidden temporary files in `root`.
fn temporaries(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".memory.md.") && n.ends_with(".tmp"))
        })
        .collect()
}

/// Waits (at most 5 s) for a temporary file in `root` holding `bytes`:
/// what the preparation beside a pending commit stages.
fn staged_file(root: &Path, bytes: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let staged = temporaries(root)
            .iter()
            .any(|path| std::fs::read(path).is_ok_and(|b| b == bytes));
        if staged {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn decisions(mem: &Mem) -> usize {
    mem.w
        .store
        .events(&EventQuery::of_type(
            <ProposalDecision as stream_core::Payload>::TYPE,
        ))
        .unwrap()
        .len()
}

/// While the decision's commit is pending, `memory.md` still holds the
/// base and the new bytes already sit in a durable temporary file (the
/// preparation runs beside the commit); once it committed, they are
/// renamed into place and receipted.
#[test]
fn the_write_is_staged_while_the_decision_commits_and_renamed_after() {
    let mem = Mem::new();
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    let seen = Arc::new(Mutex::new(None));
    let (root, path, saw) = (mem.config.root.clone(), mem.memory_path(), seen.clone());
    faulty.before_next_commit(move || {
        let staged = staged_file(&root, &golden());
        *saw.lock().unwrap() = Some((staged, std::fs::read(&path).unwrap()));
    });
    let done = decide_and_materialize(
        &faulty,
        &mem.config,
        &request(&mem.w.memory, Disposition::Accept),
    )
    .unwrap();

    let (staged, during) = seen.lock().unwrap().take().unwrap();
    assert!(
        staged,
        "the new bytes were staged beside the pending commit"
    );
    assert_eq!(during, WORLD_MEMORY.as_bytes(), "not renamed before it");
    assert!(matches!(done.record.decided, Decided::Recorded(_)));
    assert!(matches!(
        done.materialized,
        Some(Ok(MaterializeOutcome::Materialized { .. }))
    ));
    assert_eq!(mem.memory(), golden());
    assert!(temporaries(&mem.config.root).is_empty());
    assert_eq!(mem.outcomes().len(), 1);
}

/// A decision whose commit fails after its preparation staged the new
/// bytes: the error is the decision's, the temporary file is gone, the
/// lock released, `memory.md` and the store untouched; a rerun decides and
/// materializes once.
#[test]
fn a_decision_that_fails_to_commit_leaves_nothing_of_its_preparation() {
    let mem = Mem::new();
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    // The decision's transaction writes the decision, then commits.
    faulty.fail_at(1);
    let root = mem.config.root.clone();
    let staged = Arc::new(Mutex::new(false));
    let saw = staged.clone();
    faulty.before_next_commit(move || *saw.lock().unwrap() = staged_file(&root, &golden()));
    let req = request(&mem.w.memory, Disposition::Accept);
    let err = decide_and_materialize(&faulty, &mem.config, &req).unwrap_err();

    assert!(matches!(err, DecisionError::Store(_)), "{err}");
    assert!(*staged.lock().unwrap(), "it failed after the staging");
    assert!(temporaries(&mem.config.root).is_empty(), "no file left");
    let lock = mem.config.lock_dir.join(lock_name(&mem.config.root));
    assert!(!lock.exists(), "the lock is released");
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    assert_eq!(decisions(&mem), 0);
    assert!(mem.outcomes().is_empty());

    faulty.heal();
    let done = decide_and_materialize(&faulty, &mem.config, &req).unwrap();
    assert!(matches!(
        done.materialized,
        Some(Ok(MaterializeOutcome::Materialized { .. }))
    ));
    assert_eq!(mem.memory(), golden());
    assert_eq!((decisions(&mem), mem.outcomes().len()), (1, 1));
}

/// A rejection materializes nothing; a correction is projected with its
/// decision and has no materialization; a decision made again converges
/// on the outcome it already has.
#[test]
fn rejections_corrections_and_reruns() {
    let mem = Mem::new();
    let rejected = decide_and_materialize(
        &mem.w.store,
        &mem.config,
        &request(&mem.w.memory, Disposition::Reject),
    )
    .unwrap();
    assert!(matches!(
        rejected.materialized,
        Some(Ok(MaterializeOutcome::Rejected))
    ));
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    assert!(temporaries(&mem.config.root).is_empty());

    let corrected = decide_and_materialize(
        &mem.w.store,
        &mem.config,
        &request(&mem.w.correction, Disposition::Accept),
    )
    .unwrap();
    assert!(corrected.materialized.is_none());
    assert!(matches!(
        corrected.record.correction,
        Some(Ok(CorrectionProjection::Judgment(_)))
    ));

    let mem = Mem::new();
    let req = request(&mem.w.memory, Disposition::Accept);
    let first = decide_and_materialize(&mem.w.store, &mem.config, &req).unwrap();
    let again = decide_and_materialize(&mem.w.store, &mem.config, &req).unwrap();
    assert!(matches!(again.record.decided, Decided::Converged(_)));
    assert_eq!(again.materialized.unwrap().unwrap(), {
        let Some(Ok(MaterializeOutcome::Materialized {
            receipt, payload, ..
        })) = first.materialized
        else {
            panic!("materialized");
        };
        MaterializeOutcome::Materialized {
            receipt,
            payload,
            recorded: stream_memory::materialize::Recorded::Already,
        }
    });
    assert_eq!(mem.memory(), golden());
}
