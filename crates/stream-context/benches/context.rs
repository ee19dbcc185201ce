//! Two measurements. First, 60 turns with a 64 KiB `memory.md`: the median
//! snapshot build, store (and, timed apart, its cut into parts) and
//! retry-load times, and the stored bytes per turn
//! (WAL checkpointed) against the turn's own new text. Beside retry-load, in
//! the same turns, the pre-parts path (the whole snapshot as one blob, and
//! the decode of that time, copied here so that it stays fixed) and the
//! load's two halves (reading the parts, verifying the bytes). Then context build
//! time as history grows: 10^3, 10^4, 10^5 and 10^6 stored events (each turn
//! is 4 events: message, output, completed-run receipt, delivery receipt),
//! the median build time per size and its ratio to the smallest size.
//! `cargo bench -p stream-context [-- max_exponent]`; with
//! `THESTREAM_BENCH_KEEP=<file>` the 60-turn store is copied there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use stream_context::{ContextSpec, Manifest, Snapshot, build};
use stream_core::canon::sha256;
use stream_core::ids::{derive_document_id, derive_run_id, derive_version_id};
use stream_core::payload::*;
use stream_core::text::{BoundedText, Label};
use stream_core::*;
use stream_store::{Read, RunRow, RunStatus, SqliteStore, Store, Tx, VersionRow};

/// Stores a built snapshot the way the engine does.
fn store_snapshot(tx: &mut dyn Tx, id: &SnapshotId, bytes: &[u8]) {
    tx.put_snapshot(id, bytes).unwrap();
}

const AGENT: &str = "telegram-conversation";

/// The retry-load before snapshot parts (schema 1): the whole blob read by
/// its hash, then parsed and verified as `Snapshot::decode` did then (hash,
/// parse, canonical re-encode, manifest re-encoded part by part, prompt),
/// with the canonical encoder of then (serde_jcs).
fn load_pre_parts(store: &dyn Read, id: &SnapshotId) -> Snapshot {
    let blob = Sha256Hex::parse(id.as_str()).unwrap();
    let bytes = store.blob(&blob).unwrap().unwrap();
    assert_eq!(sha256(&bytes).as_str(), id.as_str());
    let snapshot: Snapshot = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_jcs::to_vec(&snapshot).unwrap(), bytes);
    fn then<T: serde::Serialize>(part: &T) -> Sha256Hex {
        sha256(&serde_jcs::to_vec(part).unwrap())
    }
    let manifest = Manifest {
        agent: then(&snapshot.agent),
        prompt: then(&snapshot.prompt),
        transcript: then(&snapshot.transcript),
        trigger: then(&snapshot.trigger),
        memory: then(&snapshot.memory),
        capabilities: then(&snapshot.capabilities),
    };
    assert_eq!(manifest, snapshot.manifest);
    assert_eq!(
        sha256(snapshot.prompt.text.as_bytes()),
        snapshot.prompt.sha256
    );
    snapshot
}

fn turn_events(update: i64) -> (NewEvent, Vec<NewEvent>, RunRow) {
    turn_events_with(
        update,
        format!("message number {update} with some ordinary length text"),
        "a reply of ordinary length for the benchmark".into(),
    )
}

fn turn_events_with(
    update: i64,
    message: String,
    reply: String,
) -> (NewEvent, Vec<NewEvent>, RunRow) {
    let telegram = SourceName::telegram(99);
    let agent = SourceName::agent(AGENT).unwrap();
    let msg = MessageReceived {
        update_id: update,
        message_id: update,
        chat_id: 42,
        chat_type: PrivateChat,
        sender_id: 42,
        date: 1_790_000_000 + update,
        text: Some(BoundedText::new(message).unwrap()),
        photo: None,
        photo_too_large: false,
        reply_to_message_id: None,
        command: None,
    };
    let msg = NewEvent::build(&telegram, None, None, &msg).unwrap();
    let run_id = derive_run_id(AGENT, 18, &msg.id).unwrap();
    let out = MessageObservation {
        run_id: run_id.clone(),
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        trigger_event_id: msg.id.clone(),
        chat_id: 42,
        output_contract: OutputContract::ConversationText1,
        text: BoundedText::new(reply).unwrap(),
        origin: TextOrigin::Model,
        thinking: ThinkingMarker::None,
    };
    let out = NewEvent::build(&agent, Some(&msg.id), Some(&msg.id), &out).unwrap();
    let done = RunCompleted {
        run_id: run_id.clone(),
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        worker_bundle_sha256: None,
        provider: None,
        trigger_event_id: msg.id.clone(),
        context_snapshot_id: None,
        output_event_id: out.id.clone(),
        proposal_event_ids: vec![],
    };
    let done = NewEvent::build(&agent, Some(&msg.id), Some(&out.id), &done).unwrap();
    let receipt = DeliveryReceipt {
        output_event_id: out.id.clone(),
        run_id: run_id.clone(),
        chat_id: 42,
        message_id: update + 1,
        date: 1_790_000_001 + update,
        root_sender_id: 42,
        source_root_event_id: msg.id.clone(),
        continuation_message_ids: Vec::new(),
    };
    let receipt = NewEvent::build(&telegram, Some(&msg.id), Some(&out.id), &receipt).unwrap();
    let row = RunRow {
        run_id,
        agent_id: AGENT.into(),
        agent_version: 18,
        trigger_event_id: msg.id.clone(),
        status: RunStatus::Completed,
        attempts: 1,
        snapshot_id: None,
    };
    (msg.clone(), vec![msg, out, done, receipt], row)
}

fn spec() -> ContextSpec {
    ContextSpec {
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        proposals: ProposalKind::ALL.into_iter().collect(),
        prompt: "You are the owner's assistant.".into(),
        transcript_messages: 20,
        history_agents: BTreeSet::from([AGENT.to_owned()]),
        memory_subscribed: true,
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The store file's size after a WAL checkpoint.
fn checkpointed_size(path: &Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// 60 turns (400-character message, 500-character reply) with a 64 KiB
/// `memory.md`: build, store and retry-load each turn's snapshot.
fn snapshots_per_turn() {
    const TURNS: i64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("turns.db");
    let store = SqliteStore::open(&path).unwrap();
    // The pre-parts baseline keeps whole blobs in a file of its own, so
    // that the stored bytes above count only what the store writes.
    let whole = SqliteStore::open(&dir.path().join("whole.db")).unwrap();
    let source = SourceName::fixed(SourceName::CONTEXT);
    let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
    let memory: String = (0..)
        .map(|i| format!("- remembered fact number {i} about the owner\n"))
        .take_while({
            let mut len = 0;
            move |line: &String| {
                len += line.len();
                len <= 64 * 1024
            }
        })
        .collect();
    let mut tx = store.begin().unwrap();
    tx.ensure_document(&doc, &source, "memory.md").unwrap();
    let sha = tx.put_blob(memory.as_bytes()).unwrap();
    let version = derive_version_id(&doc, &sha, None).unwrap();
    tx.insert_version(&VersionRow {
        id: version.clone(),
        document_id: doc.clone(),
        sha256: sha,
        size: memory.len() as u64,
        content_type: "text/markdown".into(),
        previous_version: None,
    })
    .unwrap();
    tx.set_current_version(&doc, &version).unwrap();
    tx.commit().unwrap();
    let before = checkpointed_size(&path);
    let spec = spec();
    let (mut builds, mut stores, mut loads) = (vec![], vec![], vec![]);
    let (mut pre_parts, mut reads, mut decodes) = (vec![], vec![], vec![]);
    let mut cuts = vec![];
    let mut own_text = 0usize;
    for update in 1..=TURNS {
        let message = format!("{update:03} {}", "m".repeat(396));
        let reply = format!("{update:03} {}", "r".repeat(496));
        own_text += message.len() + reply.len();
        let (trigger, events, row) = turn_events_with(update, message, reply);
        store.append(&trigger).unwrap();
        let trigger = store.event(&trigger.id).unwrap().unwrap();
        let start = Instant::now();
        let snapshot = build(&store, &spec, &row.run_id, &trigger).unwrap();
        builds.push(start.elapsed());
        let start = Instant::now();
        let (bytes, id) = snapshot.encode().unwrap();
        let mut tx = store.begin().unwrap();
        store_snapshot(tx.as_mut(), &id, &bytes);
        tx.put_run(&RunRow {
            snapshot_id: Some(id.clone()),
            status: RunStatus::Pending,
            ..row.clone()
        })
        .unwrap();
        tx.commit().unwrap();
        stores.push(start.elapsed());
        // The store's CPU half, alone: the same bytes cut into parts.
        let start = Instant::now();
        std::hint::black_box(stream_core::parts::split(&bytes));
        cuts.push(start.elapsed());
        let mut tx = whole.begin().unwrap();
        tx.put_blob(&bytes).unwrap();
        tx.commit().unwrap();
        // Each first on every other turn: both read just after a commit.
        for first in [update % 2 == 0, update % 2 != 0] {
            let start = Instant::now();
            let loaded = if first {
                Snapshot::load(&store, &id).unwrap()
            } else {
                load_pre_parts(&whole, &id)
            };
            let elapsed = start.elapsed();
            assert_eq!(loaded, snapshot);
            if first {
                loads.push(elapsed)
            } else {
                pre_parts.push(elapsed)
            }
        }
        let start = Instant::now();
        let read = store.snapshot(&id).unwrap().unwrap();
        reads.push(start.elapsed());
        let start = Instant::now();
        let decoded = Snapshot::decode_stored(&read).unwrap();
        decodes.push(start.elapsed());
        assert_eq!(decoded, snapshot);
        let mut tx = store.begin().unwrap();
        for e in &events[1..] {
            tx.append(e).unwrap();
        }
        tx.put_run(&RunRow {
            snapshot_id: Some(id),
            ..row
        })
        .unwrap();
        tx.commit().unwrap();
    }
    let after = checkpointed_size(&path);
    if let Some(keep) = std::env::var_os("THESTREAM_BENCH_KEEP") {
        // For `sqlite3_analyzer` or dbstat: where the bytes are.
        std::fs::copy(&path, keep).unwrap();
    }
    let per_turn = (after - before) as f64 / TURNS as f64;
    let text_per_turn = own_text as f64 / TURNS as f64;
    println!("{TURNS} turns, 64 KiB memory.md, 400 + 500 characters of new text a turn");
    println!(
        "  stored {:.3} KiB/turn against {:.1} KiB of new text ({:.0}x)",
        per_turn / 1024.0,
        text_per_turn / 1024.0,
        per_turn / text_per_turn
    );
    let u = store.usage().unwrap();
    println!(
        "  of which snapshot parts {:.1} KiB/turn ({} parts), events {:.1} KiB/turn (row bytes, before indexes)",
        u.snapshot_part_bytes as f64 / 1024.0 / TURNS as f64,
        u.snapshot_parts,
        u.event_bytes as f64 / 1024.0 / TURNS as f64,
    );
    let build_median = median(builds.clone());
    let pre_parts_median = median(pre_parts.clone());
    for (what, samples) in [
        ("build", builds),
        ("store", stores),
        ("  of which the cut", cuts),
        ("retry-load", loads),
        ("  of which read", reads),
        ("  of which verify", decodes),
        ("retry-load pre-parts", pre_parts),
    ] {
        let m = median(samples);
        println!(
            "  snapshot {what:<20} median {:>7.3} ms  ratio to build {:.2}  to pre-parts load {:.2}",
            m.as_secs_f64() * 1e3,
            m.as_secs_f64() / build_median.as_secs_f64(),
            m.as_secs_f64() / pre_parts_median.as_secs_f64(),
        );
    }
}

fn main() {
    snapshots_per_turn();
    let max_exp: u32 = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("bench.db")).unwrap();
    let mut update = 0i64;
    let mut stored = 0usize;
    let mut baseline: Option<Duration> = None;
    println!("context build, transcript of 20 messages; median of 30 builds per size");
    for exp in 3..=max_exp {
        let target = 10usize.pow(exp);
        let fill = Instant::now();
        while stored + 4 < target {
            let mut tx = store.begin().unwrap();
            for _ in 0..2500 {
                if stored + 4 >= target {
                    break;
                }
                update += 1;
                let (_, events, row) = turn_events(update);
                for e in &events {
                    tx.append(e).unwrap();
                }
                tx.put_run(&row).unwrap();
                stored += 4;
            }
            tx.commit().unwrap();
        }
        // The trigger: one more owner message.
        update += 1;
        let (trigger, _, _) = turn_events(update);
        store.append(&trigger).unwrap();
        stored += 1;
        let trigger = store.event(&trigger.id).unwrap().unwrap();
        let run_id = derive_run_id(AGENT, 18, trigger.id()).unwrap();
        let spec = spec();
        let mut samples: Vec<Duration> = (0..30)
            .map(|_| {
                let start = Instant::now();
                let snapshot = build(&store, &spec, &run_id, &trigger).unwrap();
                assert_eq!(snapshot.capabilities.correction_targets.len(), 20);
                start.elapsed()
            })
            .collect();
        samples.sort();
        let median = samples[samples.len() / 2];
        let base = *baseline.get_or_insert(median);
        println!(
            "{:>9} events  median {:>8.2} ms  ratio to 10^3 {:.2}  (filled in {:.1} s)",
            stored,
            median.as_secs_f64() * 1e3,
            median.as_secs_f64() / base.as_secs_f64(),
            fill.elapsed().as_secs_f64()
        );
    }
}
