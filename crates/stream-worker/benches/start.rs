//! What a cold worker costs before and after its attempt, and the bound a
//! worker forked from an already warmed process would have.
//!
//! A burst of owner messages makes one worker per message, so the fixed
//! cost of a worker's start and exit is paid once per message. This bench
//! splits that cost and measures the one design that would remove most of
//! it (a warmed parent that forks one child per attempt), without building
//! that design. `cargo bench -p stream-worker --bench start [-- ROUNDS]`
//! prints medians of, rounds interleaved so that drift hits each alike:
//!
//! - `/bin/true` spawned and reaped: the floor; CPU from `wait4`'s rusage;
//! - the worker binary spawned with stdin at EOF: dynamic loading, the
//!   sandbox, `hello`, the warm-up, the failed read and exit (everything
//!   but the attempt itself);
//! - in a fresh process, the worker's canned exchange
//!   ([`stream_worker::canned_exchange`]) compiling its three tool schemas,
//!   the first time and the second: the difference is what every worker
//!   pays once (the JSON Schema 2020-12 meta-schema's validator is built on
//!   first use);
//! - one attempt's work in a warm process: the same exchange with the
//!   schemas compiled ahead (the packet parsed and checked, the request
//!   built and encoded, the response judged and the result encoded);
//! - a child forked from this warmed process doing that work and exiting:
//!   its CPU (`wait4`), the parent's CPU for the fork and the reap, and the
//!   wall time from the fork to the reap. The child runs without the
//!   sandbox (the bound of the design, not the design: a real one enters the
//!   sandbox once in the parent and narrows each child further).
//!
//! Figures only; nothing here asserts a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_worker::canned_exchange;
use stream_worker::capture::Compiled;

/// Run in a fresh copy of this binary: time the canned exchange twice,
/// compiling its schemas each time, and print both.
const COMPILE_TWICE: &str = "--compile-twice";

/// The worker's canned exchange with `compiled` (see
/// [`canned_exchange`]); panics unless it completed, so that a broken
/// exchange is never timed as a fast one.
fn exchange(compiled: Compiled) -> Compiled {
    let compiled = canned_exchange(compiled);
    assert!(!compiled.is_empty(), "the canned exchange did not complete");
    compiled
}

fn cpu(usage: &libc::rusage) -> Duration {
    let time = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn own_cpu() -> Duration {
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a pointer to a live rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    cpu(&usage)
}

/// Waits for `pid`, our child; returns its CPU time. Panics unless it
/// exited with `expected_code` (`None`: any way).
fn reap(pid: libc::pid_t, expected_code: Option<i32>) -> Duration {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to live locals; `pid` is our child.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid, "wait4");
    if let Some(code) = expected_code {
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == code,
            "child status {status:#x}"
        );
    }
    cpu(&usage)
}

/// Spawns `program` with an empty environment and every stream closed or
/// null, and reaps it itself (for its rusage): CPU, wall.
fn spawn_and_reap(program: &str, args: &[&str]) -> (Duration, Duration) {
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cpu = reap(child.id() as libc::pid_t, None);
    // Reaped above: dropping a `Child` neither waits nor kills.
    drop(child);
    (cpu, start.elapsed())
}

/// The canned exchange, compiling its schemas, the first and the second
/// time in this (fresh) process, in microseconds, printed for the parent.
fn compile_twice() {
    let mut times = Vec::new();
    for _ in 0..2 {
        let start = Instant::now();
        exchange(Compiled::none());
        times.push(start.elapsed().as_micros());
    }
    println!("{} {}", times[0], times[1]);
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Forking is sound only while this process has one thread.
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|line| line.split_whitespace().eq(["Threads:", "1"]))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == COMPILE_TWICE) {
        compile_twice();
        return;
    }
    let rounds: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(200)
        .max(3);
    let worker = env!("CARGO_BIN_EXE_thestream-worker");
    let this = std::env::current_exe().unwrap();
    let this = this.to_str().unwrap();

    // Warm this process as a spare worker is warmed: schemas compiled, the
    // exchange's paths run once.
    let mut compiled = exchange(Compiled::none());
    assert!(single_threaded(), "fork needs a single-threaded process");

    let (mut true_cpu, mut true_wall) = (Vec::new(), Vec::new());
    let (mut worker_cpu, mut worker_wall) = (Vec::new(), Vec::new());
    let (mut first, mut second) = (Vec::new(), Vec::new());
    let mut warm = Vec::new();
    let (mut child_cpu, mut parent_cpu, mut fork_wall) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds + 2 {
        let floor = spawn_and_reap("/bin/true", &[]);
        let cold = spawn_and_reap(worker, &[]);

        let out = Command::new(this)
            .arg(COMPILE_TWICE)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let micros: Vec<u64> = text
            .split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect();

        let start = Instant::now();
        compiled = exchange(compiled);
        let in_process = start.elapsed();

        let before = own_cpu();
        let start = Instant::now();
        // SAFETY: this process is single-threaded (checked above); the
        // child only computes and leaves through `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let done = canned_exchange(std::mem::take(&mut compiled));
            // SAFETY: ends the child without running the parent's exit
            // handlers or destructors; its status says whether it completed.
            unsafe { libc::_exit(i32::from(done.is_empty())) };
        }
        let child = reap(pid, Some(0));
        let forked_wall = start.elapsed();
        let parent = own_cpu().saturating_sub(before);

        if round < 2 {
            continue; // warm-up rounds
        }
        true_cpu.push(floor.0);
        true_wall.push(floor.1);
        worker_cpu.push(cold.0);
        worker_wall.push(cold.1);
        first.push(Duration::from_micros(micros[0]));
        second.push(Duration::from_micros(micros[1]));
        warm.push(in_process);
        child_cpu.push(child);
        parent_cpu.push(parent);
        fork_wall.push(forked_wall);
    }

    let floor_cpu = median(true_cpu);
    let floor_wall = median(true_wall);
    let line = |name: &str, c: Duration, w: Duration| {
        println!(
            "{name:<52} cpu {:>6.3} ms ({:>4.1}x)  wall {:>6.3} ms ({:>4.1}x)",
            ms(c),
            c.as_secs_f64() / floor_cpu.as_secs_f64(),
            ms(w),
            w.as_secs_f64() / floor_wall.as_secs_f64()
        );
    };
    println!("a cold worker and the bound of a forked one, {rounds} rounds, medians");
    line(
        "/bin/true spawned and reaped (the floor)",
        floor_cpu,
        floor_wall,
    );
    line(
        "worker to EOF: start, sandbox, hello, warm-up, exit",
        median(worker_cpu),
        median(worker_wall),
    );
    println!(
        "{:<52} first {:>6.3} ms, second {:>6.3} ms",
        "exchange compiling its schemas, fresh process",
        ms(median(first)),
        ms(median(second))
    );
    println!(
        "{:<52} wall {:>6.3} ms",
        "one attempt's work in a warm process",
        ms(median(warm))
    );
    let (child, parent) = (median(child_cpu), median(parent_cpu));
    line(
        "forked from a warm process: that work, exit",
        child + parent,
        median(fork_wall),
    );
    println!(
        "{:<52} child {:>6.3} ms, parent (fork, reap) {:>6.3} ms",
        "  of which",
        ms(child),
        ms(parent)
    );
}
