//! `proposal-decision` wall time, one process per decision as an operator
//! runs it (process start to exit, stdout to a pipe), against
//! `thestream --version` in the same run:
//!
//! - accepting a self-correction (chain replay, decision and judgment in one
//!   transaction);
//! - accepting a memory append on a 64 KiB `memory.md` (chain replay and
//!   decision committed; then the materializer's lock, revalidation, scan
//!   and owner-only temporary file, the rename, scan, verification and
//!   receipt).
//!
//! `cargo bench -p stream-cli --bench decision` prints the medians and
//! their ratios to `--version` (samples alternate, so machine load hits all
//! alike). Every proposal is made untimed, under a real stored snapshot.
//! With `THESTREAM_BASELINE=<path to another thestream build>`, each round
//! also decides one more proposal of each kind with that build, for a
//! before/after in the same run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_core::EventId;
use stream_core::payload::{EvidenceIds, MemoryOperation};
use stream_core::text::BoundedText;
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;

const SAMPLES: usize = 15;

fn thestream(home: &Path, args: &[&str]) -> Duration {
    run(Path::new(env!("CARGO_BIN_EXE_thestream")), home, args)
}

fn run(bin: &Path, home: &Path, args: &[&str]) -> Duration {
    let start = Instant::now();
    let output = Command::new(bin)
        .args(args)
        .current_dir(home)
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn correction(w: &mut World) -> EventId {
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

fn memory(w: &mut World, home: &Path, i: usize) -> EventId {
    let mut text = format!("---\nid: memory-1\n---\n# Memory {i}\n");
    while text.len() < 64 * 1024 {
        text.push_str("- a remembered line of ordinary length, about sixty bytes\n");
    }
    std::fs::write(home.join("context/memory.md"), &text).unwrap();
    thestream(home, &["scan"]);
    let trigger = w.base.message("Please remember this.");
    let (settlement, _) = w.base.settle_run(&trigger, Some("Noted."), |s| {
        vec![ValidatedProposal::Memory {
            target: s.capabilities.memory_target.clone().unwrap(),
            operation: MemoryOperation::Append,
            text: BoundedText::new(format!("- remembered fact {i}")).unwrap(),
            reason: BoundedText::new("asked").unwrap(),
            evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
        }]
    });
    settlement.proposals()[0].id.clone()
}

fn decide(bin: &Path, home: &Path, proposal: &EventId) -> Duration {
    run(
        bin,
        home,
        &[
            "proposal-decision",
            "--proposal",
            proposal.as_str(),
            "--accept",
            "--actor",
            "owner",
        ],
    )
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let init = Command::new(env!("CARGO_BIN_EXE_thestream"))
        .args(["init", "."])
        .current_dir(home)
        .env_clear()
        .output()
        .unwrap();
    assert!(init.status.success());
    std::fs::create_dir_all(home.join(".thestream")).unwrap();
    let mut w = World::at(&home.join(".thestream/store.db"));
    thestream(home, &["scan"]);

    let this = Path::new(env!("CARGO_BIN_EXE_thestream"));
    let baseline = std::env::var_os("THESTREAM_BASELINE").map(std::path::PathBuf::from);
    let mut samples: [Vec<Duration>; 5] = Default::default();
    for i in 0..=SAMPLES {
        let fix = correction(&mut w);
        let remember = memory(&mut w, home, 2 * i);
        let v = thestream(home, &["--version"]);
        let c = decide(this, home, &fix);
        let m = decide(this, home, &remember);
        let before = baseline.as_deref().map(|bin| {
            let fix = correction(&mut w);
            let remember = memory(&mut w, home, 2 * i + 1);
            (decide(bin, home, &fix), decide(bin, home, &remember))
        });
        if i > 0 {
            // The first round warms the page cache.
            samples[0].push(v);
            samples[1].push(c);
            samples[2].push(m);
            if let Some((c, m)) = before {
                samples[3].push(c);
                samples[4].push(m);
            }
        }
    }
    let [
        version,
        corrections,
        memories,
        corrections_before,
        memories_before,
    ] = samples.map(|s| {
        if s.is_empty() {
            Duration::ZERO
        } else {
            median(s)
        }
    });
    let line = |name: &str, d: Duration| {
        println!(
            "  {name:<44} {:>8.2} ms  ratio {:.2}",
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() / version.as_secs_f64()
        );
    };
    println!("proposal-decision wall time, medians of {SAMPLES}, one process each:");
    line("thestream --version", version);
    line("accept a self-correction", corrections);
    line("accept a memory append (64 KiB memory.md)", memories);
    if baseline.is_some() {
        line(
            "  baseline build: accept a self-correction",
            corrections_before,
        );
        line("  baseline build: accept a memory append", memories_before);
    }
}
