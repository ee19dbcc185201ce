//! `proposal-list` wall time: 1,000 pending memory proposals over a 64 KiB
//! `memory.md`, the whole command (process start to exit, stdout to a pipe),
//! against `thestream events --json` over the same store in the same run.
//!
//! `cargo bench -p stream-cli --bench review` prints both medians and their
//! ratio (samples alternate, so machine load hits both alike).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_core::payload::{EvidenceIds, MemoryOperation};
use stream_core::text::BoundedText;
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;

const PROPOSALS: usize = 1_000;
const SAMPLES: usize = 7;

fn thestream(home: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(args)
        .current_dir(home)
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .unwrap()
        .status;
    let elapsed = start.elapsed();
    assert!(status.success(), "{args:?}");
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(["init", "."])
        .current_dir(home.path())
        .env_clear()
        .output()
        .unwrap();
    assert!(init.status.success());
    std::fs::create_dir_all(home.path().join(".thestream")).unwrap();
    let mut w = World::at(&home.path().join(".thestream/store.db"));
    // A 64 KiB memory.md, scanned, so every new snapshot holds it.
    let mut memory = String::from("---\nid: memory-1\n---\n# Memory\n");
    while memory.len() < 64 * 1024 {
        memory.push_str("- a remembered line of ordinary length, about sixty bytes\n");
    }
    std::fs::write(home.path().join("context/memory.md"), &memory).unwrap();
    thestream(home.path(), &["scan"]);
    let start = Instant::now();
    for i in 0..PROPOSALS {
        let trigger = w.base.message("Please remember this.");
        w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation: MemoryOperation::Append,
                text: BoundedText::new(format!("- remembered fact {i}")).unwrap(),
                reason: BoundedText::new("asked").unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
    }
    eprintln!("setup: {PROPOSALS} proposals in {:?}", start.elapsed());

    let json = ["proposal-list", "--json", "--show-sensitive"];
    let (mut list, mut listed_json, mut events) = (Vec::new(), Vec::new(), Vec::new());
    thestream(home.path(), &["proposal-list"]); // warm-up
    thestream(home.path(), &["events", "--json"]);
    for _ in 0..SAMPLES {
        list.push(thestream(home.path(), &["proposal-list"]));
        listed_json.push(thestream(home.path(), &json));
        events.push(thestream(home.path(), &["events", "--json"]));
    }
    let (list, listed_json, events) = (median(list), median(listed_json), median(events));
    println!(
        "{PROPOSALS} pending proposals, 64 KiB memory.md, medians of {SAMPLES}: events --json {events:?}; \
         proposal-list {list:?} (ratio {:.2}); proposal-list --json --show-sensitive {listed_json:?} (ratio {:.2})",
        list.as_secs_f64() / events.as_secs_f64(),
        listed_json.as_secs_f64() / events.as_secs_f64()
    );
}
