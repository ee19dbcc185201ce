//! Context build time as history grows: 10^3, 10^4, 10^5 and 10^6 stored
//! events (each turn is 4 events: message, output, completed-run receipt,
//! delivery receipt). Prints the median build time per size and its ratio to
//! the smallest size. `cargo bench -p stream-context [-- max_exponent]`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use stream_context::{ContextSpec, build};
use stream_core::ids::derive_run_id;
use stream_core::payload::*;
use stream_core::text::{BoundedText, Label};
use stream_core::*;
use stream_store::{Read, RunRow, RunStatus, SqliteStore, Store};

const AGENT: &str = "telegram-conversation";

fn turn_events(update: i64) -> (NewEvent, Vec<NewEvent>, RunRow) {
    let telegram = SourceName::telegram(99);
    let agent = SourceName::agent(AGENT).unwrap();
    let msg = MessageReceived {
        update_id: update,
        message_id: update,
        chat_id: 42,
        chat_type: PrivateChat,
        sender_id: 42,
        date: 1_790_000_000 + update,
        text: Some(
            BoundedText::new(format!(
                "message number {update} with some ordinary length text"
            ))
            .unwrap(),
        ),
        photo: None,
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
        text: BoundedText::new("a reply of ordinary length for the benchmark").unwrap(),
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

fn main() {
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
