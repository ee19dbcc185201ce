//! Running the probe through the crate's own `spawn`, and reading its answer.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use stream_sandbox::{
    Ended, Enforcement, LandlockStatus, SeccompStatus, SpawnLimits, StderrMode, WorkerChild, spawn,
};

pub fn probe_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_stream-sandbox-probe"))
}

pub fn limits() -> SpawnLimits {
    SpawnLimits {
        wall_clock: Duration::from_secs(30),
        output_cap: 1 << 20,
        line_cap: 256 << 10,
        stderr: StderrMode::Capture { cap: 64 << 10 },
    }
}

pub fn start(args: &[&str], limits: &SpawnLimits) -> WorkerChild {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    spawn(&probe_path(), &args, limits).expect("spawn probe")
}

/// One probe run: its JSON line (if it printed one) and how it ended.
pub struct ProbeRun {
    pub line: Option<Value>,
    pub ended: Ended,
}

pub fn run(args: &[&str]) -> ProbeRun {
    answer(start(args, &limits()))
}

/// A started probe's answer: its line, then how it ended.
pub fn answer(mut child: WorkerChild) -> ProbeRun {
    let line = child
        .read_line(Duration::from_secs(20))
        .expect("read probe line")
        .map(|bytes| serde_json::from_slice(&bytes).expect("probe line is JSON"));
    let ended = child.wait(Duration::from_secs(20)).expect("wait probe");
    ProbeRun { line, ended }
}

/// The enforcement a sandboxed probe reported. Fails the test, saying which
/// kernel feature is missing, instead of letting it pass without isolation.
pub fn enforcement_of(line: &Value) -> Enforcement {
    if let Some(err) = line.get("sandboxError") {
        panic!(
            "the probe could not enter the sandbox on this machine: {err}. \
             This kernel lacks a feature the sandbox requires (Landlock or seccomp); \
             the isolation tests cannot pass here."
        );
    }
    let enforcement: Enforcement =
        serde_json::from_value(line["enforcement"].clone()).expect("enforcement report");
    assert_eq!(
        enforcement.landlock.status,
        LandlockStatus::FullyEnforced,
        "this kernel does not fully enforce Landlock (kernel ABI {:?})",
        enforcement.landlock.kernel_abi
    );
    assert_eq!(
        enforcement.seccomp.status,
        SeccompStatus::Installed,
        "this kernel did not take the seccomp filter"
    );
    enforcement
}

/// Runs a sandboxed probe of `op` and asserts it failed with `EPERM` (the
/// seccomp refusal, which comes before Landlock or a namespace could answer).
pub fn assert_denied(args: &[&str]) -> ProbeRun {
    let run = run(args);
    let line = run
        .line
        .clone()
        .unwrap_or_else(|| panic!("probe {args:?} printed nothing; it ended {:?}", run.ended));
    enforcement_of(&line);
    assert_eq!(line["ok"], Value::Bool(false), "{args:?} must fail: {line}");
    assert_eq!(line["errno"], Value::from(libc::EPERM), "{args:?}: {line}");
    run
}

/// Runs the probe of `op` without the sandbox and asserts it succeeded: the
/// control showing that the denial above is the sandbox's doing.
pub fn assert_allowed_unsandboxed(args: &[&str]) -> ProbeRun {
    let mut full = vec!["--no-sandbox"];
    full.extend_from_slice(args);
    let run = run(&full);
    let line = run.line.clone().expect("control probe printed a line");
    assert_eq!(line["ok"], Value::Bool(true), "control {args:?}: {line}");
    run
}

/// Runs a sandboxed probe and asserts it succeeded; returns its value.
pub fn assert_works(args: &[&str]) -> (Value, ProbeRun) {
    let run = run(args);
    let line = run.line.clone().expect("probe printed a line");
    enforcement_of(&line);
    assert_eq!(line["ok"], Value::Bool(true), "{args:?} must work: {line}");
    (line["value"].clone(), run)
}
