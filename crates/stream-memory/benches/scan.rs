//! Scan cost: a context root of one 256 KiB `memory.md` and 100 files of
//! 4 KiB.
//!
//! `cargo bench -p stream-memory` prints the median of a rescan that finds
//! nothing new (reads and hashes every file, writes nothing), of a scan after
//! one edit of `memory.md` (one new version in one fsync'd transaction), and
//! their ratio.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use stream_core::SourceName;
use stream_memory::scan::scan;
use stream_store::SqliteStore;

const ROUNDS: usize = 60;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(mut op: impl FnMut(usize)) -> Duration {
    for i in 0..5 {
        op(usize::MAX - i); // warm-up
    }
    median(
        (0..ROUNDS)
            .map(|i| {
                let start = Instant::now();
                op(i);
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("context");
    std::fs::create_dir(&root).unwrap();
    let memory = root.join("memory.md");
    let body = "Remembered line.\n".repeat(256 * 1024 / 17);
    std::fs::write(&memory, format!("---\nid: bench\n---\n{body}")).unwrap();
    for i in 0..100 {
        std::fs::write(root.join(format!("note-{i:03}.md")), "n".repeat(4096)).unwrap();
    }
    let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
    let source = SourceName::new(SourceName::CONTEXT).unwrap();

    let start = Instant::now();
    let first = scan(&store, &source, &root).unwrap();
    let first_time = start.elapsed();
    assert_eq!(first.new_versions.len(), 101);

    let unchanged = measure(|_| {
        let report = scan(&store, &source, &root).unwrap();
        assert!(report.new_versions.is_empty());
    });
    let edited = measure(|i| {
        std::fs::write(&memory, format!("---\nid: bench\n---\n{body}edit {i}\n")).unwrap();
        let report = scan(&store, &source, &root).unwrap();
        assert_eq!(report.new_versions.len(), 1);
    });

    println!("scan of 101 files (one 256 KiB, 100 of 4 KiB), median of {ROUNDS}:");
    println!("  first scan (101 new versions, once)   {first_time:>10.2?}");
    println!("  rescan, nothing new (writes nothing)  {unchanged:>10.2?}");
    println!("  scan after one edit (1 new version)   {edited:>10.2?}");
    println!(
        "  ratio edit / nothing new              {:>10.2}",
        edited.as_secs_f64() / unchanged.as_secs_f64()
    );
}
