//! Store throughput against the raw commit rate of the same storage.
//!
//! `cargo bench -p stream-store` prints, for each shape, the median time per
//! transaction, transactions per second, and the ratio to one raw durable
//! `INSERT` transaction measured in the same run: on the same SQLite file,
//! and, when a PostgreSQL server is at hand (`THESTREAM_BENCH_DATABASE_URL`,
//! else `stream_store::pgtest`; run it with `synchronous_commit = on` and
//! fsync on), on the same server. On PostgreSQL it also compares the two
//! ways to a gap-free per-source `seq` under two concurrent writers: a
//! counter row locked `FOR UPDATE` (what the backend does) and serializable
//! isolation with retry.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::json;
use stream_store::conformance::event;
use stream_store::{SqliteStore, Store};
use stream_testkit::raw::RawCommits;

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

/// A single-event append and a 5-event settlement-shaped transaction.
fn shapes(store: &dyn Store) -> (Duration, Duration) {
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
    (single, settlement)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let store = SqliteStore::open(&path).unwrap();

    let mut raw = RawCommits::open(&path).unwrap();
    let raw_median = measure(|_| raw.commit().unwrap());

    let (single, settlement) = shapes(&store);

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
    postgres::bench();
}

mod postgres {
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    use stream_store::PostgresStore;

    use super::measure;

    fn url() -> Option<String> {
        if let Ok(url) = std::env::var("THESTREAM_BENCH_DATABASE_URL") {
            return Some(url);
        }
        stream_store::pgtest::fresh_url()
    }

    pub fn bench() {
        let Some(url) = url() else {
            println!("postgres: skipped (no server)");
            return;
        };
        // The store first: it refuses a database holding tables not its own.
        let store = PostgresStore::open(&url).unwrap();
        let config: postgres::Config = url.parse().unwrap();
        let mut raw = config.connect(postgres::NoTls).unwrap();
        let sync: String = raw
            .query_one("SHOW synchronous_commit", &[])
            .unwrap()
            .get(0);
        let fsync: String = raw.query_one("SHOW fsync", &[]).unwrap().get(0);
        raw.batch_execute(
            "DROP TABLE IF EXISTS bench_raw, bench_seq_events, bench_seq_heads; \
             CREATE TABLE bench_raw (k BIGINT PRIMARY KEY, v BYTEA NOT NULL); \
             CREATE TABLE bench_seq_heads (source TEXT PRIMARY KEY, head BIGINT NOT NULL); \
             CREATE TABLE bench_seq_events (source TEXT NOT NULL, seq BIGINT NOT NULL, \
                 v BYTEA NOT NULL, UNIQUE (source, seq));",
        )
        .unwrap();
        let payload = vec![7u8; 256];
        let insert = raw
            .prepare(
                "INSERT INTO bench_raw (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $2",
            )
            .unwrap();
        let raw_median = measure(|i| {
            let mut tx = raw.transaction().unwrap();
            tx.execute(&insert, &[&(i as i64), &payload]).unwrap();
            tx.commit().unwrap();
        });
        let (single, settlement) = super::shapes(&store);
        let report = |name: &str, d: Duration| {
            println!(
                "{name:<34} median {:>9.1} µs  {:>8.0} tx/s  ratio to raw {:.2}",
                d.as_secs_f64() * 1e6,
                1.0 / d.as_secs_f64(),
                raw_median.as_secs_f64() / d.as_secs_f64()
            );
        };
        println!(
            "postgres: {} rounds each, synchronous_commit={sync}, fsync={fsync}, {}",
            super::ROUNDS,
            store.label()
        );
        report("raw INSERT transaction", raw_median);
        report("single-event append transaction", single);
        report("5-event settlement transaction", settlement);
        for (name, strategy) in [
            ("seq: head row FOR UPDATE, 2 writers", Strategy::HeadRow),
            (
                "seq: serializable + retry, 2 writers",
                Strategy::Serializable,
            ),
        ] {
            let started = Instant::now();
            let (median, retries) = contended(&config, strategy);
            let per_tx = started.elapsed() / 400;
            println!(
                "{name:<34} median {:>9.1} µs  wall per tx {:>7.1} µs  retries {retries}/400  ratio to raw {:.2}",
                median.as_secs_f64() * 1e6,
                per_tx.as_secs_f64() * 1e6,
                raw_median.as_secs_f64() / median.as_secs_f64()
            );
        }
    }

    #[derive(Clone, Copy)]
    enum Strategy {
        HeadRow,
        Serializable,
    }

    /// Two threads appending to one source; the median per transaction and
    /// how many serialization failures were retried.
    fn contended(config: &postgres::Config, strategy: Strategy) -> (Duration, u64) {
        const PER_WRITER: usize = 200;
        let source = match strategy {
            Strategy::HeadRow => "head-row",
            Strategy::Serializable => "serializable",
        };
        let barrier = Arc::new(Barrier::new(2));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (config, barrier) = (config.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let mut c = config.connect(postgres::NoTls).unwrap();
                    let mut samples = Vec::with_capacity(PER_WRITER);
                    let mut retries = 0u64;
                    barrier.wait();
                    for _ in 0..PER_WRITER {
                        let start = Instant::now();
                        loop {
                            match append_once(&mut c, source, strategy) {
                                Ok(()) => break,
                                Err(e)
                                    if e.code()
                                        == Some(
                                            &postgres::error::SqlState::T_R_SERIALIZATION_FAILURE,
                                        ) =>
                                {
                                    retries += 1
                                }
                                Err(e) => panic!("{e}"),
                            }
                        }
                        samples.push(start.elapsed());
                    }
                    (samples, retries)
                })
            })
            .collect();
        let mut samples = Vec::new();
        let mut retries = 0;
        for w in writers {
            let (s, r) = w.join().unwrap();
            samples.extend(s);
            retries += r;
        }
        (super::median(samples), retries)
    }

    fn append_once(
        c: &mut postgres::Client,
        source: &str,
        strategy: Strategy,
    ) -> Result<(), postgres::Error> {
        let v = vec![7u8; 256];
        match strategy {
            Strategy::HeadRow => {
                let mut tx = c.transaction()?;
                tx.execute(
                    "INSERT INTO bench_seq_heads VALUES ($1, 0) ON CONFLICT DO NOTHING",
                    &[&source],
                )?;
                let head: i64 = tx
                    .query_one(
                        "SELECT head FROM bench_seq_heads WHERE source = $1 FOR UPDATE",
                        &[&source],
                    )?
                    .get(0);
                tx.execute(
                    "INSERT INTO bench_seq_events VALUES ($1, $2, $3)",
                    &[&source, &(head + 1), &v],
                )?;
                tx.execute(
                    "UPDATE bench_seq_heads SET head = $2 WHERE source = $1",
                    &[&source, &(head + 1)],
                )?;
                tx.commit()
            }
            Strategy::Serializable => {
                let mut tx = c
                    .build_transaction()
                    .isolation_level(postgres::IsolationLevel::Serializable)
                    .start()?;
                let head: i64 = tx
                    .query_one(
                        "SELECT coalesce(max(seq), 0) FROM bench_seq_events WHERE source = $1",
                        &[&source],
                    )?
                    .get(0);
                tx.execute(
                    "INSERT INTO bench_seq_events VALUES ($1, $2, $3)",
                    &[&source, &(head + 1), &v],
                )?;
                tx.commit()
            }
        }
    }
}
