//! Cost of human decisions and their projection, against the raw fsync rate
//! of the same SQLite file.
//!
//! `cargo bench -p stream-memory --bench materialize` prints the medians of:
//!
//! - one raw fsync'd `INSERT` transaction on the store file (the unit);
//! - the authority chain's verification alone, and a decision's (what a
//!   command replays once);
//! - a correction decision + its projection into a judgment
//!   (`record_verified_decision`: one chain verification, decision and
//!   judgment in one fsync'd transaction), and the same made the way it was
//!   before (`record_decision` + `project_correction`: two verifications,
//!   two fsync'd transactions);
//! - the materialization of an accepted `append` on a 64 KiB `memory.md`
//!   (`materialize`: chain verification, lock, revalidation, scan, owner-only
//!   write with fsyncs and rename, scan, verification, receipt), alone and
//!   with its decision (`decide::decide`: verified once, the decision
//!   committed, then the write prepared and renamed; and, alternated with
//!   it, the same two steps called by hand, `record_verified_decision`
//!   then `materialize_verified`);
//!
//! - a correction decision + projection again, in a store that also holds
//!   300 photos of 200 KiB;
//!
//! - the durability floor of a memory decision: its four flushes done by
//!   hand on the same disk, in the order `decide` makes them (the
//!   decision's commit; then a 64 KiB file written and fsynced, its rename
//!   and the root's fsync; then a commit holding a 64 KiB row, for the new
//!   version and its receipt);
//!
//! each also as a ratio to the raw transaction (and the memory decision to
//! its floor); before and after, and the memory decision and its floor,
//! alternate round by round. Every round gets a fresh proposal, made
//! untimed under a real stored snapshot.
//!
//! For comparison, `benches/langgraph_cycle.py` times LangGraph's
//! propose -> `interrupt()` -> resume -> record cycle on its SQLite
//! checkpointer with the same durability; run it in the same session (its
//! header says how).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::time::{Duration, Instant};

use stream_core::payload::{Disposition, EvidenceIds, MemoryOperation};
use stream_core::text::{BoundedText, Label};
use stream_core::{EventId, SourceName};
use stream_memory::decide::{Applied, Place, decide};
use stream_memory::materialize::{
    MaterializeConfig, MaterializeOutcome, materialize, materialize_verified,
};
use stream_proposals::chain::verify_chain;
use stream_proposals::decision::{DecisionRequest, record_decision, record_verified_decision};
use stream_proposals::project::{CorrectionProjection, project_correction, verify_decision};
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;
use stream_store::Store as _;
use stream_testkit::raw::RawCommits;

const ROUNDS: usize = 40;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `setup` (untimed) prepares round `i`; `op` (timed) consumes it.
fn measure<T>(mut setup: impl FnMut(usize) -> T, mut op: impl FnMut(T)) -> Duration {
    for i in 0..3 {
        let t = setup(usize::MAX - i); // warm-up
        op(t);
    }
    median(
        (0..ROUNDS)
            .map(|i| {
                let t = setup(i);
                let start = Instant::now();
                op(t);
                start.elapsed()
            })
            .collect(),
    )
}

/// Two ways of doing the same thing, alternating round by round so that
/// machine load hits both alike: `setup` (untimed) prepares one round.
fn measure_pair<T>(
    mut setup: impl FnMut(usize) -> T,
    mut a: impl FnMut(T),
    mut b: impl FnMut(T),
) -> (Duration, Duration) {
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    for i in 0..ROUNDS + 2 {
        let t = setup(2 * i);
        let start = Instant::now();
        a(t);
        let da = start.elapsed();
        let t = setup(2 * i + 1);
        let start = Instant::now();
        b(t);
        let db = start.elapsed();
        if i >= 2 {
            // Two warm-up rounds.
            sa.push(da);
            sb.push(db);
        }
    }
    (median(sa), median(sb))
}

fn request(proposal: &EventId) -> DecisionRequest {
    DecisionRequest {
        proposal: proposal.clone(),
        disposition: Disposition::Accept,
        replacement: None,
        submission_id: None,
        actor: Label::new("owner").unwrap(),
        signer: stream_proposals::testing::signer(),
    }
}

/// A delivered reply and a proposal correcting it, made untimed.
fn correction_proposal(w: &mut World) -> EventId {
    let trigger = w.base.message("And what about that?");
    let (settlement, _) = w.base.settle_run(&trigger, Some("A reply."), |s| {
        let latest = s.latest_correction_target().unwrap().clone();
        vec![ValidatedProposal::Correction {
            evidence: EvidenceIds::new(vec![latest.output_event_id.clone()]).unwrap(),
            target: latest,
            replacement: BoundedText::new("A better reply.").unwrap(),
            reason: BoundedText::new("wrong").unwrap(),
        }]
    });
    w.base.deliver(settlement.output(), &trigger);
    settlement.proposals()[0].id.clone()
}

/// The four flushes of a memory decision on a `len`-byte `memory.md` in
/// `root`, by hand and in turn: the decision's commit, the new file's
/// fsync (nothing is written into the root before the decision is
/// durable), the rename made durable, the receipt's commit.
fn durability_floor(raw: &mut RawCommits, root: &std::path::Path, len: usize) {
    let tmp = root.join(".memory.md.tmp");
    raw.commit().unwrap();
    let mut file = std::fs::File::create(&tmp).unwrap();
    file.write_all(&vec![b'a'; len]).unwrap();
    file.sync_all().unwrap();
    std::fs::rename(&tmp, root.join("memory.md")).unwrap();
    std::fs::File::open(root).unwrap().sync_all().unwrap();
    raw.commit_sized(len).unwrap();
}

fn main() {
    let mut w = World::new();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("context");
    std::fs::create_dir(&root).unwrap();
    let config = MaterializeConfig {
        root: root.clone(),
        source: SourceName::fixed(SourceName::CONTEXT),
        max_bytes: 262_144,
        lock_dir: dir.path().join("locks"),
        trusted: stream_proposals::testing::trusted(),
    };

    // The timed operations use their own handle on the same file; the
    // World's handle writes the untimed setup.
    let path = w.path.clone();
    let store = stream_store::SqliteStore::open(&path).unwrap();
    // Opening it commits past the WAL's first checkpoint, so that the unit
    // and the decisions are timed as on a store in use.
    let mut raw = RawCommits::open(&path).unwrap();
    let raw_median = measure(|_| (), |()| raw.commit().unwrap());

    // Correction: each round a new delivered reply corrects the latest one.
    let (correction, correction_two_pass) = measure_pair(
        |_| correction_proposal(&mut w),
        |proposal| {
            let record =
                record_verified_decision(&store, &request(&proposal), &config.trusted).unwrap();
            assert!(matches!(
                record.correction,
                Some(Ok(CorrectionProjection::Judgment(_)))
            ));
        },
        // The way it was made before the chain was verified once per
        // command: the decision (one replay, one commit), then its
        // projection (another replay, another commit).
        |proposal| {
            let decided = record_decision(&store, &request(&proposal)).unwrap();
            let projected = project_correction(&store, decided.id(), &config.trusted).unwrap();
            assert!(matches!(projected, CorrectionProjection::Judgment(_)));
        },
    );

    // The authority chain alone, on a delivered correction proposal and on
    // a recorded decision (what every command replays).
    let proposal = correction_proposal(&mut w);
    let chain_only = measure(
        |_| (),
        |()| {
            verify_chain(&store, &proposal).unwrap();
        },
    );
    let decided = record_decision(&w.store, &request(&proposal)).unwrap();
    let decision_only = measure(
        |_| (),
        |()| {
            verify_decision(&store, decided.id(), &config.trusted).unwrap();
        },
    );

    // Memory: each round starts from a fresh 64 KiB memory.md, scanned, and
    // a new run proposes an append under a snapshot of that version.
    let body = "A remembered line of about forty bytes.\n".repeat(64 * 1024 / 40);
    let mut propose = |i: usize, decide: bool| {
        let text = format!("---\nid: bench\n---\n# Memory {i}\n{body}");
        let text = &text[..64 * 1024];
        // Written and made durable untimed, as a file edited some time ago
        // is: its pages are not still waiting for the timed fsyncs.
        let mut file = std::fs::File::create(root.join("memory.md")).unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file.sync_all().unwrap();
        stream_memory::scan(&w.store, &config.source, &root).unwrap();
        let trigger = w.base.message("Remember this.");
        let (settlement, _) = w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation: MemoryOperation::Append,
                text: BoundedText::new(format!("Fact number {i}.")).unwrap(),
                reason: BoundedText::new("asked").unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
        let proposal = settlement.proposals()[0].id.clone();
        if decide {
            let decided = record_decision(&w.store, &request(&proposal)).unwrap();
            decided.id().clone()
        } else {
            proposal
        }
    };
    let materialize_only = measure(
        |i| propose(i, true),
        |decision| {
            let outcome = materialize(&store, &config, &decision).unwrap();
            assert!(matches!(outcome, MaterializeOutcome::Materialized { .. }));
        },
    );
    let place = Place::Root(config.clone());
    let decide = |proposal: EventId| {
        let done = decide(&store, &place, &request(&proposal)).unwrap();
        assert!(matches!(
            done.applied,
            Ok(Applied::Memory(MaterializeOutcome::Materialized { .. }))
        ));
    };
    let (decision_and_materialize, memory_by_hand) = measure_pair(
        |i| propose(i, false),
        decide,
        // The same two steps, called by hand.
        |proposal| {
            let record =
                record_verified_decision(&store, &request(&proposal), &config.trusted).unwrap();
            let outcome =
                materialize_verified(&store, &config, record.verified.as_ref().unwrap()).unwrap();
            assert!(matches!(outcome, MaterializeOutcome::Materialized { .. }));
        },
    );

    // The same against its floor, alternated with the same setup before each
    // (the floor leaves its proposal undecided).
    let floor_dir = tempfile::tempdir_in(dir.path()).unwrap();
    let (memory_beside_floor, memory_floor) = measure_pair(
        |i| propose(10_000 + i, false),
        decide,
        |_| durability_floor(&mut raw, floor_dir.path(), 64 * 1024),
    );

    // A correction again, in a store that also holds 300 photos of 200 KiB
    // (60 MB): a blob lookup must not read the large rows it passes.
    let mut tx = w.store.begin().unwrap();
    for i in 0..300u32 {
        let mut photo = vec![0u8; 200 * 1024];
        photo[..4].copy_from_slice(&i.to_le_bytes());
        tx.put_blob(&photo).unwrap();
    }
    tx.commit().unwrap();
    // The memory rounds left no delivered reply to correct.
    let trigger = w.base.message("One more thing.");
    let (settlement, _) = w.base.settle_run(&trigger, Some("A reply."), |_| vec![]);
    w.base.deliver(settlement.output(), &trigger);
    let correction_with_photos = measure(
        |_| correction_proposal(&mut w),
        |proposal| {
            let record =
                record_verified_decision(&store, &request(&proposal), &config.trusted).unwrap();
            assert!(record.correction.is_some());
        },
    );

    let report = |name: &str, d: Duration| {
        println!(
            "{name:<46} median {:>9.2} ms  ratio to raw {:>6.1}",
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() / raw_median.as_secs_f64()
        );
    };
    println!(
        "decision/projection bench: {ROUNDS} rounds each, WAL + synchronous=FULL, store {}",
        path.display()
    );
    report("raw fsync'd INSERT transaction", raw_median);
    report("authority chain verification alone", chain_only);
    report("decision verification alone (+ chain)", decision_only);
    report("correction decision + projection", correction);
    report(
        "  the same, chain replayed twice (before)",
        correction_two_pass,
    );
    report("materialize append on 64 KiB memory.md", materialize_only);
    report(
        "memory decision + materialize (64 KiB)",
        decision_and_materialize,
    );
    report("  the same, its two steps called by hand", memory_by_hand);
    report("  the same, alternated with its floor", memory_beside_floor);
    report("  its durability floor (its flushes by hand)", memory_floor);
    println!(
        "{:<46} {:>16.1}",
        "  memory decision + materialize / its floor",
        memory_beside_floor.as_secs_f64() / memory_floor.as_secs_f64()
    );
    report(
        "correction decision + projection, 300 photos",
        correction_with_photos,
    );
}
