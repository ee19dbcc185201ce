//! Worker spawn + sandbox setup + packet round trip through the broker, with
//! an instant scripted provider on loopback, against a bare spawn of a static
//! trivial binary measured in the same run; the same attempt taking a warm
//! spare worker (`keep_spare`, as `serve` runs: the spare is ready after the
//! idle gap between attempts); the same attempt with a worker forked by the
//! fork server (`fork_server`, no spare); and the worker's peak RSS. Also
//! the worker's spawn to its hello, executed by path and from the sealed
//! in-memory image the broker uses, interleaved in the same run.
//!
//! `cargo bench -p stream-broker --bench attempt` (`-- --runs N`, default 100).
//! Prints medians and the ratio; asserts nothing about speed. The packet
//! carries the proposal tools as the engine sends them, whose schemas a
//! parked worker compiled during its warm-up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_broker::{Broker, BrokerConfig};
use stream_core::payload::{ProposalKind, ProviderApi};
use stream_protocol::WorkerResult;
use stream_testkit::packets::{memory_args, packet};
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion, ScriptedProvider};

const KEY_ENV: &str = "THESTREAM_BENCH_API_KEY";

/// A static `fn main() {}` built with the same rustc, or `/bin/true` when
/// static linking is unavailable. Returns the path and what it is.
fn trivial_binary(dir: &Path) -> (PathBuf, &'static str) {
    let src = dir.join("trivial.rs");
    let bin = dir.join("trivial");
    std::fs::write(&src, "fn main() {}\n").unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let ok = Command::new(rustc)
        .args([
            "-O",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "panic=abort",
            "-C",
            "strip=symbols",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        (bin, "static fn main() {} (rustc +crt-static)")
    } else {
        (
            PathBuf::from("/bin/true"),
            "/bin/true (dynamic; static linking unavailable)",
        )
    }
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    // SAFETY: single-threaded here; nothing else reads the environment yet.
    unsafe { std::env::set_var(KEY_ENV, "bench-key") };
    let tmp = tempfile::tempdir().unwrap();
    let (trivial, trivial_kind) = trivial_binary(tmp.path());
    let worker = stream_testkit::bin::binary("thestream-worker").unwrap();

    let api = ProviderApi::OpenaiChat;
    let mut p = packet(api);
    // The proposal tools exactly as the engine sends them.
    p.tools = ProposalKind::ALL
        .into_iter()
        .map(stream_declarations::tool_def)
        .collect();
    let reply = Reply::completion(ScriptedCompletion {
        texts: vec!["Noted.".into()],
        thinking: None,
        calls: vec![ScriptedCall::json(
            "call_1",
            "request_memory_change",
            memory_args("bench"),
        )],
        cut: false,
    });
    let provider = ScriptedProvider::start(vec![reply.clone(); 3 * runs + 10]).unwrap();
    let config = BrokerConfig::new(worker.clone(), provider.base_url(api), KEY_ENV.into());
    let broker = Broker::new(config.clone()).unwrap();
    let spared = Broker::new(BrokerConfig {
        keep_spare: true,
        ..config.clone()
    })
    .unwrap();
    let forked = Broker::new(BrokerConfig {
        fork_server: true,
        ..config
    })
    .unwrap();
    let idle = Duration::from_secs(20);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Warm up both paths (page cache, connection pool).
    for _ in 0..3 {
        Command::new(&trivial)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        runtime.block_on(broker.run_attempt(&p)).unwrap();
        spared.spare_pid(idle).unwrap();
        runtime.block_on(spared.run_attempt(&p)).unwrap();
        runtime.block_on(forked.run_attempt(&p)).unwrap();
    }

    let mut bare = Vec::with_capacity(runs);
    let mut bin_true = Vec::with_capacity(runs);
    let mut attempts = Vec::with_capacity(runs);
    let mut warm = Vec::with_capacity(runs);
    let mut fork = Vec::with_capacity(runs);
    let mut rss = Vec::with_capacity(runs);
    for _ in 0..runs {
        // Interleaved, so both see the same machine conditions.
        let t = Instant::now();
        let status = Command::new(&trivial)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        bare.push(t.elapsed());
        assert!(status.success());

        let t = Instant::now();
        let status = Command::new("/bin/true")
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        bin_true.push(t.elapsed());
        assert!(status.success());

        let t = Instant::now();
        let report = runtime.block_on(broker.run_attempt(&p)).unwrap();
        attempts.push(t.elapsed());
        assert!(matches!(report.result, WorkerResult::Completed(_)));
        rss.push(report.worker.peak_rss_kib);

        // The idle gap: the next spare is parked before the message arrives.
        spared.spare_pid(idle).unwrap();
        let t = Instant::now();
        let report = runtime.block_on(spared.run_attempt(&p)).unwrap();
        warm.push(t.elapsed());
        assert!(matches!(report.result, WorkerResult::Completed(_)));

        let t = Instant::now();
        let report = runtime.block_on(forked.run_attempt(&p)).unwrap();
        fork.push(t.elapsed());
        assert!(matches!(report.result, WorkerResult::Completed(_)));
    }
    rss.sort_unstable();
    let bare_median = median(bare);
    let attempt_median = median(attempts);
    println!("runs: {runs}");
    println!(
        "bare spawn ({trivial_kind}): median {:.3} ms",
        bare_median.as_secs_f64() * 1e3
    );
    let true_median = median(bin_true);
    println!(
        "/bin/true spawn: median {:.3} ms",
        true_median.as_secs_f64() * 1e3
    );
    println!(
        "attempt (spawn + sandbox + hello + packet + request check + loopback HTTP + result + exit): median {:.3} ms",
        attempt_median.as_secs_f64() * 1e3
    );
    println!(
        "ratio attempt / bare spawn: {:.1}x",
        attempt_median.as_secs_f64() / bare_median.as_secs_f64()
    );
    let warm_median = median(warm);
    println!(
        "attempt with a warm spare (packet + request check + loopback HTTP + result + exit): median {:.3} ms",
        warm_median.as_secs_f64() * 1e3
    );
    println!(
        "ratio warm-spare attempt / bare spawn: {:.1}x",
        warm_median.as_secs_f64() / bare_median.as_secs_f64()
    );
    let fork_median = median(fork);
    println!(
        "attempt with a forked worker (fork + narrowing + hello + warm-up + packet + request check + loopback HTTP + result + exit): median {:.3} ms",
        fork_median.as_secs_f64() * 1e3
    );
    println!(
        "ratio forked attempt / bare spawn: {:.1}x",
        fork_median.as_secs_f64() / bare_median.as_secs_f64()
    );
    println!(
        "workers forked by the forking broker: {} for {} attempts",
        forked.workers_forked(),
        runs + 3
    );
    println!(
        "workers spawned by the spare broker: {} for {} attempts (+1 parked)",
        spared.workers_spawned(),
        runs + 3
    );
    println!(
        "worker peak RSS (wait4 ru_maxrss): median {} KiB, max {} KiB",
        rss[rss.len() / 2],
        rss[rss.len() - 1]
    );
    assert_eq!(
        provider.requests().len(),
        3 * (runs + 3),
        "one provider request per attempt"
    );

    // In process, the CPU work on an attempt's critical path: the worker's
    // (packet frame parsed, schemas compiled, request built and framed) and
    // the parent's (request rebuilt, serialized, canonically compared).
    let frame =
        serde_json::to_vec(&stream_protocol::ParentFrame::Packet(Box::new(p.clone()))).unwrap();
    let (mut parse, mut prepare, mut build, mut parent) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let t = Instant::now();
        let stream_protocol::ParentFrame::Packet(got) =
            serde_json::from_slice::<stream_protocol::ParentFrame>(&frame).unwrap()
        else {
            panic!("not a packet")
        };
        parse.push(t.elapsed());
        let t = Instant::now();
        let prepared = stream_worker::capture::PreparedPacket::new(&got).unwrap();
        prepare.push(t.elapsed());
        let t = Instant::now();
        let body = stream_provider::build_request(prepared.packet()).unwrap();
        let line = serde_json::to_vec(&body).unwrap();
        build.push(t.elapsed());
        let t = Instant::now();
        let expected = stream_provider::build_request(&p).unwrap();
        let _wire = serde_json::to_vec(&expected).unwrap();
        let received: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            stream_core::canon::to_canonical_bytes(&received).unwrap(),
            stream_core::canon::to_canonical_bytes(&expected).unwrap()
        );
        parent.push(t.elapsed());
    }
    println!(
        "in process, first run: parse {:.0} us, schemas {:.0} us, build {:.0} us, parent {:.0} us",
        parse[0].as_secs_f64() * 1e6,
        prepare[0].as_secs_f64() * 1e6,
        build[0].as_secs_f64() * 1e6,
        parent[0].as_secs_f64() * 1e6
    );
    let us = |xs: Vec<Duration>| median(xs).as_secs_f64() * 1e6;
    println!(
        "in process, medians: worker parses the packet {:.0} us, compiles its schemas {:.0} us, builds the request {:.0} us; parent rebuilds + compares {:.0} us",
        us(parse),
        us(prepare),
        us(build),
        us(parent)
    );

    let image = stream_sandbox::WorkerImage::load(&worker).unwrap();
    let limits = stream_sandbox::SpawnLimits::default();
    let to_hello = |child: stream_sandbox::WorkerChild| {
        let mut child = child;
        assert!(child.read_line(Duration::from_secs(20)).unwrap().is_some());
        child.kill();
        child.wait(Duration::from_secs(20)).unwrap();
    };
    let (mut by_path, mut by_image) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        to_hello(stream_sandbox::spawn(&worker, &[], &limits).unwrap());
        by_path.push(t.elapsed());
        let t = Instant::now();
        to_hello(stream_sandbox::spawn_image(&image, &[], &limits).unwrap());
        by_image.push(t.elapsed());
    }
    let (path_median, image_median) = (median(by_path), median(by_image));
    println!(
        "worker spawn to hello: by path median {:.3} ms, from the sealed image median {:.3} ms (image / path {:.3}); worker {} bytes",
        path_median.as_secs_f64() * 1e3,
        image_median.as_secs_f64() * 1e3,
        image_median.as_secs_f64() / path_median.as_secs_f64(),
        image.len()
    );
}
