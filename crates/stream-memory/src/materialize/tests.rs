//! The receipt and the root's fsync, which runs beside the scan.

use std::time::Duration;

use stream_core::payload::{Disposition, MaterializationFailure};
use stream_core::text::Label;
use stream_proposals::decision::{DecisionRequest, record_verified_decision};
use stream_proposals::testing::World;
use stream_store::{Read, SqliteStore};

use super::*;

/// [`materialize_verified`] with the step that makes the rename durable
/// passed in.
fn materialize_with(
    store: &dyn Store,
    config: &MaterializeConfig,
    verified: &VerifiedDecision,
    make_durable: impl FnOnce(Renamed) -> Result<(), Stop> + Send,
) -> Result<MaterializeOutcome, MaterializeError> {
    finish_with(
        store,
        config,
        prepare(store, config, verified)?,
        make_durable,
    )
}

/// `memory.md` as `World` recorded it.
const WORLD_MEMORY: &str = "---\nid: memory-1\n---\n# Memory\n";

struct Scene {
    w: World,
    _dir: tempfile::TempDir,
    config: MaterializeConfig,
    verified: VerifiedDecision,
}

/// The World's memory proposal accepted, its root holding the base.
fn scene() -> Scene {
    let (w, dir, config, request) = undecided();
    let verified = record_verified_decision(&w.store, &request, &config.trusted)
        .unwrap()
        .verified
        .unwrap();
    Scene {
        w,
        _dir: dir,
        config,
        verified,
    }
}

/// The World, its root holding the base, and a request accepting its
/// memory proposal, not yet decided.
fn undecided() -> (World, tempfile::TempDir, MaterializeConfig, DecisionRequest) {
    let w = World::new();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("context");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("memory.md"), WORLD_MEMORY).unwrap();
    let config = MaterializeConfig {
        root,
        source: SourceName::fixed(SourceName::CONTEXT),
        max_bytes: 262_144,
        lock_dir: dir.path().join("locks"),
        trusted: stream_proposals::testing::trusted(),
    };
    let request = DecisionRequest {
        proposal: w.memory.clone(),
        disposition: Disposition::Accept,
        replacement: None,
        submission_id: None,
        actor: Label::new("owner").unwrap(),
        signer: stream_proposals::testing::signer(),
    };
    (w, dir, config, request)
}

/// Where the store's pointer for `memory.md` is, read on a connection of
/// its own (so only what is committed).
fn pointer(scene: &Scene) -> Option<stream_core::VersionId> {
    let ProposalBody::Memory(proposal) = scene.verified.proposal().body() else {
        panic!("a memory proposal");
    };
    SqliteStore::open(&scene.w.path)
        .unwrap()
        .document(&proposal.target.document_id)
        .unwrap()
        .unwrap()
        .current_version
}

/// The scan, its verification and the receipt go on while the root is
/// fsynced, but nothing commits before that fsync returned; a failed fsync
/// is a `write` failure and the scan's new version rolls back.
#[test]
fn the_receipt_waits_for_the_root_s_fsync_and_a_failed_one_commits_nothing() {
    let s = scene();
    let base = pointer(&s);
    let mut seen_during = None;
    let outcome = materialize_with(&s.w.store, &s.config, &s.verified, |renamed| {
        // Long enough for the scan and the receipt to be ready to commit.
        std::thread::sleep(Duration::from_millis(200));
        seen_during = Some(pointer(&s));
        renamed.make_durable()
    })
    .unwrap();
    assert_eq!(
        seen_during,
        Some(base.clone()),
        "nothing committed before the fsync"
    );
    assert!(matches!(outcome, MaterializeOutcome::Materialized { .. }));
    assert_ne!(pointer(&s), base, "committed after it");

    let s = scene();
    let base = pointer(&s);
    let outcome = materialize_with(&s.w.store, &s.config, &s.verified, |renamed| {
        drop(renamed);
        Err(Stop::Fail(MaterializationFailure::Write))
    })
    .unwrap();
    assert!(matches!(
        outcome,
        MaterializeOutcome::Failed {
            reason: MaterializationFailure::Write,
            ..
        }
    ));
    assert_eq!(pointer(&s), base, "the scan rolled back");
}

/// Both results come back; a job that panics is `None`, never a panic here.
#[test]
fn beside_returns_both_results_and_a_panicked_job_as_none() {
    let (a, b) = beside(|| 1, || 2);
    assert_eq!((a, b), (Some(1), 2));
    let (a, b) = beside(|| -> u8 { panic!("the job fails") }, || "meanwhile");
    assert_eq!((a, b), (None, "meanwhile"));
}
