//! Worker spawn + sandbox setup + a one-line stdin→stdout echo.
//!
//! `cargo bench -p stream-sandbox` runs, interleaved round by round so that
//! drift hits every variant alike, ~200 times each:
//!
//! - `sandboxed`: `spawn()` of the probe, which enters the sandbox, then
//!   echoes one line; the parent writes it, reads it back and waits.
//! - `supervised, no sandbox`: the same through `spawn()`, probe run with
//!   `--no-sandbox`, isolating the cost of `enter`.
//! - `bare probe`: plain `std::process::Command` of the probe with
//!   `--no-sandbox` (no watchdog, no pidfd, no close_range).
//! - `bare static`: plain `Command` of a tiny statically linked C echo, built
//!   here with `cc -static` when a C compiler and static libc are present.
//! - `forked`: `ForkServer::fork` of the probe's fork server; the child
//!   narrows itself to a worker's sandbox, reads its operation (`echo`),
//!   then echoes one line.
//!
//! It prints each variant's median and p90, the ratios of `sandboxed` to each
//! baseline, the median time `enter` itself took inside the probe, and peak
//! RSS: `ru_maxrss` from `wait4` (which the kernel takes as the larger of the
//! child's own peak and what it inherited at fork), and the sandboxed probe's
//! own `VmHWM`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_sandbox::{Ending, ForkServer, SpawnLimits, StderrMode, WorkerChild, spawn};

const ROUNDS: usize = 200;
const WARM_UP: usize = 10;

fn probe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_stream-sandbox-probe"))
}

fn limits() -> SpawnLimits {
    SpawnLimits {
        wall_clock: Duration::from_secs(30),
        output_cap: 1 << 20,
        line_cap: 64 << 10,
        stderr: StderrMode::Null,
    }
}

/// One supervised echo; (elapsed, peak RSS KiB).
fn supervised(args: &[&str]) -> (Duration, u64) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let start = Instant::now();
    let child = spawn(&probe(), &args, &limits()).unwrap();
    echo(child, start)
}

/// One line through an echoing child, then its end; (elapsed since
/// `start`, peak RSS KiB).
fn echo(mut child: WorkerChild, start: Instant) -> (Duration, u64) {
    child.write_line(b"ping").unwrap();
    let line = child.read_line(Duration::from_secs(10)).unwrap().unwrap();
    child.close_stdin();
    let ended = child.wait(Duration::from_secs(10)).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(line, b"ping", "echo came back different");
    assert_eq!(ended.ending, Ending::Exited { code: 0 });
    (elapsed, ended.peak_rss_kib)
}

/// One echo by a child of the fork server; (elapsed, peak RSS KiB).
fn forked(server: &mut ForkServer) -> (Duration, u64) {
    let start = Instant::now();
    let mut child = server.fork(&limits()).unwrap();
    child.write_line(b"echo").unwrap();
    echo(child, start)
}

/// One bare echo through `std::process::Command`; (elapsed, peak RSS KiB).
/// The child is reaped with `wait4` directly, for its rusage.
#[allow(clippy::zombie_processes)]
fn bare(binary: &Path, args: &[&str]) -> (Duration, u64) {
    let start = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"ping\n").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain old data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: live pointers; `child` is ours and not yet reaped.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    assert_eq!(rc, pid);
    assert_eq!(line, "ping\n");
    (elapsed, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

const STATIC_ECHO_C: &str = r#"
#include <unistd.h>
int main(void) {
    char b[4096];
    ssize_t n = 0;
    while (n < (ssize_t)sizeof b) {
        ssize_t r = read(0, b + n, sizeof b - n);
        if (r <= 0) break;
        n += r;
        if (b[n - 1] == '\n') break;
    }
    return write(1, b, n) == n ? 0 : 1;
}
"#;

/// Builds the static C echo; `Err` says why there is none.
fn build_static_echo(dir: &Path) -> Result<PathBuf, String> {
    let source = dir.join("echo.c");
    let binary = dir.join("echo-static");
    std::fs::write(&source, STATIC_ECHO_C).map_err(|e| e.to_string())?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let output = Command::new(&cc)
        .args(["-static", "-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    if output.status.success() {
        Ok(binary)
    } else {
        Err(format!(
            "{cc} -static failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The sandboxed probe's own peak RSS (`VmHWM` of its post-exec image, read
/// from `/proc` while it waits for more input), free of the parent's memory
/// that `ru_maxrss` folds in. Median over a few runs, KiB.
fn own_peak_rss_kib() -> u64 {
    let mut samples: Vec<u64> = (0..20)
        .map(|_| {
            let mut child = spawn(&probe(), &[OsStr::new("echo")], &limits()).unwrap();
            child.write_line(b"ping").unwrap();
            child.read_line(Duration::from_secs(10)).unwrap().unwrap();
            let status = std::fs::read_to_string(format!("/proc/{}/status", child.pid())).unwrap();
            child.close_stdin();
            child.wait(Duration::from_secs(10)).unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap()
        })
        .collect();
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// The bench process's own resident set now, KiB.
fn own_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Median time `enter` takes inside the probe, from its own report.
fn enter_micros() -> u64 {
    let mut samples: Vec<u64> = (0..ROUNDS / 2)
        .map(|_| {
            let mut child = spawn(&probe(), &[OsStr::new("enforcement")], &limits()).unwrap();
            let line = child.read_line(Duration::from_secs(10)).unwrap().unwrap();
            child.wait(Duration::from_secs(10)).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
            assert!(
                value.get("sandboxError").is_none(),
                "sandbox unavailable: {value}"
            );
            value["enterMicros"].as_str().unwrap().parse().unwrap()
        })
        .collect();
    samples.sort_unstable();
    samples[samples.len() / 2]
}

struct Series {
    name: &'static str,
    times: Vec<Duration>,
    rss: Vec<u64>,
}

impl Series {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            times: Vec::with_capacity(ROUNDS),
            rss: Vec::with_capacity(ROUNDS),
        }
    }
    fn push(&mut self, (time, rss): (Duration, u64)) {
        self.times.push(time);
        self.rss.push(rss);
    }
    fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.times.clone();
        sorted.sort();
        let i = ((sorted.len() - 1) as f64 * q).round() as usize;
        sorted[i]
    }
    fn median(&self) -> Duration {
        self.quantile(0.5)
    }
    fn rss_median(&self) -> u64 {
        let mut sorted = self.rss.clone();
        sorted.sort_unstable();
        sorted[sorted.len() / 2]
    }
    fn rss_max(&self) -> u64 {
        self.rss.iter().copied().max().unwrap_or(0)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let static_echo = build_static_echo(dir.path());
    let probe = probe();

    let mut sandboxed = Series::new("sandboxed (spawn + enter + echo)");
    let mut unsandboxed = Series::new("supervised, no sandbox");
    let mut bare_probe = Series::new("bare probe (Command, no sandbox)");
    let mut bare_static = Series::new("bare static C echo (Command)");
    let mut fork = Series::new("forked (fork + narrowing + echo)");
    let mut server = ForkServer::start(
        &probe,
        &[OsStr::new("--fork-server")],
        Duration::from_secs(10),
    )
    .unwrap();

    for _ in 0..WARM_UP {
        supervised(&["echo"]);
        supervised(&["--no-sandbox", "echo"]);
        bare(&probe, &["--no-sandbox", "echo"]);
        if let Ok(path) = &static_echo {
            bare(path, &[]);
        }
        forked(&mut server);
    }
    for _ in 0..ROUNDS {
        sandboxed.push(supervised(&["echo"]));
        unsandboxed.push(supervised(&["--no-sandbox", "echo"]));
        bare_probe.push(bare(&probe, &["--no-sandbox", "echo"]));
        if let Ok(path) = &static_echo {
            bare_static.push(bare(path, &[]));
        }
        fork.push(forked(&mut server));
    }
    let enter = enter_micros();
    let own_peak = own_peak_rss_kib();

    println!("stream-sandbox: worker spawn + sandbox setup + one-line echo, {ROUNDS} rounds");
    let mut all = vec![&sandboxed, &unsandboxed, &bare_probe];
    if static_echo.is_ok() {
        all.push(&bare_static);
    }
    println!(
        "  {:<36} median {:>7.3} ms   p90 {:>7.3} ms   (ratio to sandboxed {:.2}x)",
        fork.name,
        ms(fork.median()),
        ms(fork.quantile(0.9)),
        fork.median().as_secs_f64() / sandboxed.median().as_secs_f64()
    );
    for s in &all {
        println!(
            "  {:<36} median {:>7.3} ms   p90 {:>7.3} ms   peak RSS median {:>6} KiB (max {})",
            s.name,
            ms(s.median()),
            ms(s.quantile(0.9)),
            s.rss_median(),
            s.rss_max()
        );
    }
    let base = sandboxed.median().as_secs_f64();
    for s in all.iter().skip(1) {
        println!(
            "  ratio sandboxed / {:<26} {:>6.2}x",
            s.name,
            base / s.median().as_secs_f64()
        );
    }
    if let Err(why) = &static_echo {
        println!("  static baseline unavailable: {why}");
    }
    println!("  enter() inside the probe: median {enter} µs");
    println!(
        "  sandboxed probe's own peak RSS (VmHWM after the echo): median {own_peak} KiB \
         (ru_maxrss above also counts the {} KiB parent copied at fork)",
        own_rss_kib()
    );
}
