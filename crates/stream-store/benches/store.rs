//! Store throughput against the raw fsync rate of the same SQLite file.
//!
//! `cargo bench -p stream-store` prints, for each shape, the median time per
//! transaction, transactions per second, and the ratio to one raw fsync'd
//! `INSERT` transaction measured on the same file in the same run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;
use stream_store::conformance::event;
use stream_store::{SqliteStore, Store};

const ROUNDS: usize = 400;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(mut op: impl FnMut(usize)) -> Duration {
    for i in 0..20 {
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
    let path = dir.path().join("bench.db");
    let store = SqliteStore::open(&path).unwrap();

    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         CREATE TABLE bench_raw (k INTEGER PRIMARY KEY, v BLOB NOT NULL);",
    )
    .unwrap();
    let payload = vec![7u8; 256];
    let raw_median = measure(|i| {
        raw.execute_batch("BEGIN IMMEDIATE").unwrap();
        raw.execute(
            "INSERT OR REPLACE INTO bench_raw (k, v) VALUES (?1, ?2)",
            rusqlite::params![i as i64, payload],
        )
        .unwrap();
        raw.execute_batch("COMMIT").unwrap();
    });

    let single = measure(|i| {
        store
            .append(&event(
                "bench:single",
                &i.to_string(),
                json!({"n": i, "pad": "x".repeat(200)}),
            ))
            .unwrap();
    });

    let settlement = measure(|i| {
        let mut tx = store.begin().unwrap();
        for part in 0..5 {
            let e = event(
                "bench:settle",
                &format!("{i}-{part}"),
                json!({"n": i, "pad": "x".repeat(200)}),
            );
            tx.append(&e).unwrap();
        }
        tx.commit().unwrap();
    });

    let report = |name: &str, d: Duration| {
        println!(
            "{name:<34} median {:>9.1} µs  {:>8.0} tx/s  ratio to raw {:.2}",
            d.as_secs_f64() * 1e6,
            1.0 / d.as_secs_f64(),
            raw_median.as_secs_f64() / d.as_secs_f64()
        );
    };
    println!(
        "store bench: {ROUNDS} rounds each, WAL + synchronous=FULL, file {}",
        path.display()
    );
    report("raw fsync'd INSERT transaction", raw_median);
    report("single-event append transaction", single);
    report("5-event settlement transaction", settlement);
}
