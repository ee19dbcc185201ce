//! A decision and its materialization in one call: the decision commits,
//! then the new bytes are prepared and renamed, so nothing is written into
//! the root before the decision is durable; a decision that fails to
//! commit writes nothing there, and one that commits but is not
//! materialized is materialized later by the pass `serve` runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use stream_core::EventId;
use stream_core::payload::{Disposition, MemoryOperation, ProposalDecision};
use stream_core::text::Label;
use stream_memory::decide::{Applied, ApplyError, Decision, Place, decide};
use stream_memory::materialize::{
    MaterializeError, MaterializeOutcome, compose, lock_name, materialize_pending,
};
use stream_proposals::decision::{Decided, DecisionError, DecisionRequest};
use stream_proposals::project::CorrectionProjection;
use stream_store::faulty::FaultyStore;
use stream_store::{EventQuery, Read, SqliteStore, Store};

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

/// Decides `req` where `mem`'s root is.
fn decide_here(
    store: &dyn Store,
    mem: &Mem,
    req: &DecisionRequest,
) -> Result<Decision, DecisionError> {
    decide(store, &Place::Root(mem.config.clone()), req)
}

/// What `mem`'s root holds, by name, and whether its lock is held.
fn root_and_lock(mem: &Mem) -> (Vec<String>, bool) {
    look_at(&mem.config.root, &mem.config.lock_dir)()
}

/// A look at a root's names (sorted) and whether its lock is held, to
/// take later (from a commit hook).
fn look_at(root: &Path, lock_dir: &Path) -> impl Fn() -> (Vec<String>, bool) + Send + 'static {
    let lock = lock_dir.join(lock_name(root));
    let root = root.to_owned();
    move || {
        let mut names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        (names, lock.exists())
    }
}

fn materialized(decision: &Decision) -> bool {
    matches!(
        decision.applied,
        Ok(Applied::Memory(MaterializeOutcome::Materialized { .. }))
    )
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

/// While the decision's commit is pending, the root holds `memory.md` as
/// it was and nothing else, and its lock is free: the materializer starts
/// only once the decision is durable; then the new bytes are renamed into
/// place and receipted.
#[test]
fn nothing_is_written_into_the_root_before_the_decision_commits() {
    let mem = Mem::new();
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    let seen = Arc::new(Mutex::new(None));
    let look = look_at(&mem.config.root, &mem.config.lock_dir);
    let (path, saw) = (mem.memory_path(), seen.clone());
    faulty.before_next_commit(move || {
        *saw.lock().unwrap() = Some((look(), std::fs::read(&path).unwrap()));
    });
    let done = decide_here(&faulty, &mem, &request(&mem.w.memory, Disposition::Accept)).unwrap();

    let ((names, locked), during) = seen.lock().unwrap().take().unwrap();
    assert_eq!(names, ["memory.md"], "no temporary file before the commit");
    assert!(!locked, "the root lock is not taken before the commit");
    assert_eq!(during, WORLD_MEMORY.as_bytes());
    assert!(matches!(done.decided, Decided::Recorded(_)));
    assert!(materialized(&done));
    assert_eq!(mem.memory(), golden());
    assert!(temporaries(&mem.config.root).is_empty());
    assert_eq!(mem.outcomes().len(), 1);
}

/// A decision whose commit fails: the error is the decision's, the root and
/// the store untouched, no lock taken; a rerun decides and materializes
/// once.
#[test]
fn a_decision_that_fails_to_commit_writes_nothing_into_the_root() {
    let mem = Mem::new();
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    // The decision's transaction writes the decision, then commits.
    faulty.fail_at(1);
    let req = request(&mem.w.memory, Disposition::Accept);
    let err = decide_here(&faulty, &mem, &req).unwrap_err();

    assert!(matches!(err, DecisionError::Store(_)), "{err}");
    assert_eq!(root_and_lock(&mem), (vec!["memory.md".to_owned()], false));
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    assert_eq!(decisions(&mem), 0);
    assert!(mem.outcomes().is_empty());

    faulty.heal();
    let done = decide_here(&faulty, &mem, &req).unwrap();
    assert!(materialized(&done));
    assert_eq!(mem.memory(), golden());
    assert_eq!((decisions(&mem), mem.outcomes().len()), (1, 1));
}

/// A decision that commits and whose materialization then fails at its
/// first store write (after the rename, before the receipt, as a crash
/// there would leave it): the decision is durable with no outcome, no
/// temporary file or lock is left, and the pass `serve` runs finishes it
/// with one outcome.
#[test]
fn a_durable_decision_left_unmaterialized_is_finished_by_the_pending_pass() {
    let mem = Mem::new();
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    // Writes 0 and 1 are the decision's; 2 is the materializer's first.
    faulty.fail_at(2);
    let done = decide_here(&faulty, &mem, &request(&mem.w.memory, Disposition::Accept)).unwrap();
    assert!(matches!(done.decided, Decided::Recorded(_)));
    assert!(
        matches!(
            done.applied,
            Err(ApplyError::Materialize(MaterializeError::Store(_)))
        ),
        "{:?}",
        done.applied
    );
    assert_eq!(root_and_lock(&mem), (vec!["memory.md".to_owned()], false));
    assert_eq!((decisions(&mem), mem.outcomes().len()), (1, 0));

    let mut cursor = 0;
    let report = materialize_pending(&mem.w.store, &mem.config, &mut cursor).unwrap();
    assert_eq!((report.settled, report.unsettled), (1, 0));
    assert_eq!(mem.memory(), golden());
    assert_eq!(mem.outcomes().len(), 1);
}

/// A rejection materializes nothing; a correction is projected with its
/// decision and has no materialization; a decision made again converges
/// on the outcome it already has.
#[test]
fn rejections_corrections_and_reruns() {
    let mem = Mem::new();
    let rejected = decide_here(
        &mem.w.store,
        &mem,
        &request(&mem.w.memory, Disposition::Reject),
    )
    .unwrap();
    assert!(matches!(
        rejected.applied,
        Ok(Applied::Memory(MaterializeOutcome::Rejected))
    ));
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    assert!(temporaries(&mem.config.root).is_empty());

    let corrected = decide_here(
        &mem.w.store,
        &mem,
        &request(&mem.w.correction, Disposition::Accept),
    )
    .unwrap();
    assert!(matches!(
        corrected.applied,
        Ok(Applied::Correction(CorrectionProjection::Judgment(_)))
    ));

    let mem = Mem::new();
    let req = request(&mem.w.memory, Disposition::Accept);
    let first = decide_here(&mem.w.store, &mem, &req).unwrap();
    let again = decide_here(&mem.w.store, &mem, &req).unwrap();
    assert!(matches!(again.decided, Decided::Converged(_)));
    let Ok(Applied::Memory(again)) = again.applied else {
        panic!("materialized again");
    };
    assert_eq!(again, {
        let Ok(Applied::Memory(MaterializeOutcome::Materialized {
            receipt, payload, ..
        })) = first.applied
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

/// Decided where the root is not held, an accepted memory change is
/// recorded and left to the serve that holds it (nothing written into the
/// root), which materializes it; a rejection there is final at once.
#[test]
fn a_review_only_place_records_and_leaves_memory_to_the_root() {
    let mem = Mem::new();
    let review_only = Place::ReviewOnly(mem.config.trusted.clone());
    let req = request(&mem.w.memory, Disposition::Accept);
    let done = decide(&mem.w.store, &review_only, &req).unwrap();
    assert!(matches!(done.decided, Decided::Recorded(_)));
    assert!(matches!(done.applied, Ok(Applied::LeftToServe)));
    assert_eq!(root_and_lock(&mem), (vec!["memory.md".to_owned()], false));
    assert!(mem.outcomes().is_empty());

    let mut cursor = 0;
    let report = materialize_pending(&mem.w.store, &mem.config, &mut cursor).unwrap();
    assert_eq!((report.settled, report.unsettled), (1, 0));
    assert_eq!(mem.memory(), golden());

    let mem = Mem::new();
    let review_only = Place::ReviewOnly(mem.config.trusted.clone());
    let rejected = decide(
        &mem.w.store,
        &review_only,
        &request(&mem.w.memory, Disposition::Reject),
    )
    .unwrap();
    assert!(matches!(
        rejected.applied,
        Ok(Applied::Memory(MaterializeOutcome::Rejected))
    ));
}
