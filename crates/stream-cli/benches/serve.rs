//! A running `thestream serve` end to end, the real binaries against the
//! loopback Bot API (long polling) and an instant scripted provider: the
//! time from an update becoming available to its `sendMessage`, median and
//! p90, against a floor measured in the same run (2 fsync'd SQLite commits,
//! 1 spawn of /bin/true and 3 loopback HTTP round trips), back to back and,
//! for the paced series, also after the same idle pause; a burst of 30
//! messages per message; a reply the engine makes itself (`/help`), paced;
//! the CPU time per message of `serve` and of its sandboxed workers; and an
//! idle serve's CPU time and context switches
//! over 10 s, read from /proc. `cargo bench -p stream-cli --bench serve
//! [-- TURNS]`
//! (`SERVE_BENCH_THESTREAM=PATH` and `SERVE_BENCH_WORKER=PATH` measure
//! another build of `thestream` or of the worker). Figures only; nothing
//! here asserts a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::raw::RawCommits;
use stream_testkit::stack::{BOT_TOKEN, Stack};

/// The idle time before each paced message (a person reads a reply before
/// writing again), and before each run of the paced floor.
const PACE: Duration = Duration::from_millis(50);

fn sends(stack: &Stack) -> usize {
    stack.telegram.count_of("sendMessage")
}

/// When the `n`th `sendMessage` (from 1) reached the fake Bot API. The
/// bench sleeps until the fake records it: a polling loop here woke every
/// 100 us on the cores `serve` runs on, held the fake's lock to copy every
/// call so far, and added its own step to each figure.
fn wait_sends(stack: &Stack, n: usize) -> Instant {
    stack
        .telegram
        .wait_for_call("sendMessage", n - 1, Duration::from_secs(60))
        .expect("no sendMessage")
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// CPU ticks (utime + stime) of `pid` and the context switches of each of
/// its tasks, by task id (a thread that exits takes its count with it, so
/// sums are compared task by task).
/// Nanoseconds on CPU of the tasks alive now (`schedstat`): the tick count
/// of `stat` moves in 10 ms steps, too coarse for an idle process.
fn on_cpu_ns(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap();
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = stat.split_whitespace().next().and_then(|n| n.parse().ok()) {
            out.insert(task.file_name().to_string_lossy().into_owned(), ns);
        }
    }
    out
}

/// CPU ticks of `pid` itself (utime + stime, exited threads included) and
/// of its reaped children (cutime + cstime: the sandboxed workers).
fn ticks(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|n| n.parse().unwrap())
        .collect();
    (f[0] + f[1], f[2] + f[3])
}

fn usage(pid: u32) -> (u64, std::collections::BTreeMap<String, u64>) {
    let ticks = ticks(pid).0;
    let mut switches = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap();
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let mut n = 0;
        for line in status.lines() {
            if line.starts_with("voluntary_ctxt_switches")
                || line.starts_with("nonvoluntary_ctxt_switches")
            {
                n += line
                    .split_whitespace()
                    .last()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        switches.insert(task.file_name().to_string_lossy().into_owned(), n);
    }
    (ticks, switches)
}

/// Switches between two `usage` readings: deltas of tasks alive at both,
/// plus whole counts of tasks started in between.
fn switches_between(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    after
        .iter()
        .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// The floor's work: 2 fsync'd commits, a spawn of /bin/true and 3 loopback
/// HTTP round trips to the fake Bot API.
struct Floor {
    _dir: tempfile::TempDir,
    raw: RawCommits,
    addr: std::net::SocketAddr,
}

impl Floor {
    fn new(stack: &Stack) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let raw = RawCommits::open(&dir.path().join("floor.db")).unwrap();
        Self {
            _dir: dir,
            raw,
            addr: stack.telegram.addr(),
        }
    }

    fn once(&mut self) -> Duration {
        let round_trip = |addr| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            write!(
                s,
                "GET /bot{BOT_TOKEN}/getMe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).unwrap();
        };
        let t = Instant::now();
        self.raw.commit().unwrap();
        self.raw.commit().unwrap();
        std::process::Command::new("/bin/true").status().unwrap();
        for _ in 0..3 {
            round_trip(self.addr);
        }
        t.elapsed()
    }

    /// Back to back (hot caches, busy cores), as the burst runs.
    fn back_to_back(&mut self) -> Duration {
        let mut v: Vec<Duration> = (0..60).map(|_| self.once()).collect();
        pct(&mut v, 50)
    }
}

fn main() {
    let turns: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(30);
    // `var` names another build to compare (e.g. a copy of the binary
    // before a change); else the workspace's own.
    let build = |var: &str, name: &str| -> std::path::PathBuf {
        std::env::var_os(var).map_or_else(|| stream_testkit::bin::binary(name).unwrap(), Into::into)
    };
    let thestream = build("SERVE_BENCH_THESTREAM", "thestream");
    let worker = build("SERVE_BENCH_WORKER", "thestream-worker");
    let stack = Stack::start(&thestream, &worker, ProviderApi::OpenaiChat).unwrap();
    let mut serve = stack
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = serve.id();
    // Warm-up turn (also waits for readiness).
    stack
        .provider
        .push(Reply::completion(ScriptedCompletion::text("warm")));
    stack.say("warm up");
    wait_sends(&stack, 1);

    // Back to back: each message as soon as the previous reply was sent,
    // so it meets that turn's tail (receipt, next spare worker). Paced: a
    // person reads a reply before writing again; `PACE` untimed before each.
    let mut latency = Vec::new();
    let mut paced = Vec::new();
    // The paced floor: the floor's work after the same idle pause, run
    // between the paced messages so that both meet the same machine. On a
    // VM, waking an idle vCPU for an fsync's completion or a peer's reply
    // costs several times the hot figure, and a paced message pays it at
    // every step.
    let mut floor = Floor::new(&stack);
    let mut floor_paced = Vec::new();
    let cpu_before = ticks(pid);
    for (series, pause) in [(&mut latency, None), (&mut paced, Some(PACE))] {
        for i in 0..turns {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
                floor_paced.push(floor.once());
                std::thread::sleep(pause);
            }
            stack
                .provider
                .push(Reply::completion(ScriptedCompletion::text("instant")));
            let before = sends(&stack);
            let t = Instant::now();
            stack.say(&format!("turn {i}"));
            series.push(wait_sends(&stack, before + 1) - t);
        }
    }

    let before = sends(&stack);
    for _ in 0..30 {
        stack
            .provider
            .push(Reply::completion(ScriptedCompletion::text("burst")));
    }
    let t = Instant::now();
    for i in 0..30 {
        stack.say(&format!("burst {i}"));
    }
    let burst = (wait_sends(&stack, before + 30) - t) / 30;
    // The spare parked now is not reaped yet: one worker short of the series.
    let cpu_after = ticks(pid);
    let messages = (2 * turns + 30) as f64;

    // A reply the engine makes itself (`/help`: no model, no worker), paced
    // like the paced series; it must not reach the provider.
    let requests = stack.provider.requests().len();
    let mut fixed = Vec::new();
    for _ in 0..turns {
        std::thread::sleep(PACE);
        let before = sends(&stack);
        let t = Instant::now();
        stack.say("/help");
        fixed.push(wait_sends(&stack, before + 1) - t);
    }
    assert_eq!(
        stack.provider.requests().len(),
        requests,
        "/help reached the provider"
    );

    std::thread::sleep(Duration::from_secs(1));
    let (ticks0, switches0) = usage(pid);
    let cpu0 = on_cpu_ns(pid);
    std::thread::sleep(Duration::from_secs(10));
    let (ticks1, switches1) = usage(pid);
    let cpu1 = on_cpu_ns(pid);
    let idle_ns: u64 = cpu1
        .iter()
        .map(|(task, ns)| ns - cpu0.get(task).copied().unwrap_or(0).min(*ns))
        .sum();
    let floor_paced = pct(&mut floor_paced, 50);
    let floor = floor.back_to_back();
    let _ = serve.kill();
    let _ = serve.wait();

    let hz = 100.0; // USER_HZ on Linux
    let (median, p90) = (pct(&mut latency, 50), pct(&mut latency, 90));
    println!("serve end to end, {turns} turns, loopback long polling, instant provider");
    println!(
        "floor (2 fsync'd commits + 1 spawn + 3 loopback HTTP round trips): {:.2} ms",
        ms(floor)
    );
    let ratio = |d: Duration| d.as_secs_f64() / floor.as_secs_f64();
    println!(
        "update -> sendMessage, back to back: median {:.2} ms ({:.1}x floor), p90 {:.2} ms ({:.1}x floor)",
        ms(median),
        ratio(median),
        ms(p90),
        ratio(p90)
    );
    println!(
        "floor, paced (the same work after {} ms idle, between the paced messages): {:.2} ms",
        PACE.as_millis(),
        ms(floor_paced)
    );
    let (median, p90) = (pct(&mut paced, 50), pct(&mut paced, 90));
    let paced_ratio = |d: Duration| d.as_secs_f64() / floor_paced.as_secs_f64();
    println!(
        "update -> sendMessage, paced ({} ms idle before each message): median {:.2} ms ({:.1}x floor, {:.1}x paced floor), p90 {:.2} ms ({:.1}x floor, {:.1}x paced floor)",
        PACE.as_millis(),
        ms(median),
        ratio(median),
        paced_ratio(median),
        ms(p90),
        ratio(p90),
        paced_ratio(p90)
    );
    let (median, p90) = (pct(&mut fixed, 50), pct(&mut fixed, 90));
    println!(
        "/help (answered by the engine, no model), paced: median {:.2} ms ({:.1}x paced floor), p90 {:.2} ms ({:.1}x paced floor)",
        ms(median),
        paced_ratio(median),
        ms(p90),
        paced_ratio(p90)
    );
    println!(
        "burst of 30: {:.2} ms per message ({:.1}x floor)",
        ms(burst),
        burst.as_secs_f64() / floor.as_secs_f64()
    );
    println!(
        "CPU per message over the three series ({messages} messages): serve {:.2} ms, its sandboxed workers {:.2} ms (reaped children; ticks of 10 ms)",
        (cpu_after.0 - cpu_before.0) as f64 / hz * 1e3 / messages,
        (cpu_after.1 - cpu_before.1) as f64 / hz * 1e3 / messages,
    );
    println!(
        "idle 10 s: CPU {:.0} ms by ticks, {:.2} ms on CPU by schedstat, {:.1} context switches/s",
        (ticks1 - ticks0) as f64 / hz * 1e3,
        idle_ns as f64 / 1e6,
        switches_between(&switches0, &switches1) as f64 / 10.0
    );
}
