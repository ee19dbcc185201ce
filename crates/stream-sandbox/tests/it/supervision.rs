//! The parent side: empty environment, deadlines, output caps, kills.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use stream_sandbox::{
    ChildIoError, Ending, SpawnError, SpawnLimits, StderrMode, WorkerChild, spawn,
};

use crate::common::*;

#[test]
fn the_environment_is_empty() {
    assert!(
        std::env::vars_os().count() > 0,
        "the test process itself has an environment to leak"
    );
    let (value, _) = assert_works(&["env-count"]);
    assert_eq!(value, Value::from(0));
    // And it is spawn's doing, not the sandbox's.
    let control = assert_allowed_unsandboxed(&["env-count"]);
    assert_eq!(control.line.unwrap()["value"], Value::from(0));
}

#[test]
fn the_watchdog_kills_at_the_wall_clock_deadline_while_the_parent_is_busy() {
    let limits = SpawnLimits {
        wall_clock: Duration::from_secs(1),
        ..limits()
    };
    let started = Instant::now();
    let mut child = start(&["hang"], &limits);
    // The parent does something else past the deadline...
    std::thread::sleep(Duration::from_millis(1500));
    // ...and finds the child already dead (a zombie awaiting its reaping),
    // killed by the watchdog before any call of ours could.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.pid())).unwrap();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert_eq!(state, "Z", "the child is still running past its deadline");
    let ended = child.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForTime);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

/// A child that never answers, with half a second of wall clock.
fn hanging_for_half_a_second() -> WorkerChild {
    let limits = SpawnLimits {
        wall_clock: Duration::from_millis(500),
        ..limits()
    };
    start(&["hang"], &limits)
}

/// A read that asks for a minute ends at the half-second deadline, which
/// kills the child.
fn assert_a_read_kills_at_the_deadline(mut child: WorkerChild) {
    assert_eq!(
        child.read_line(Duration::from_secs(60)),
        Err(ChildIoError::TimedOut)
    );
    let ended = child.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForTime);
}

#[test]
fn a_read_past_the_deadline_kills_the_child() {
    assert_a_read_kills_at_the_deadline(hanging_for_half_a_second());
}

/// With the watchdog stopped, the parent's own read still kills at the
/// deadline.
#[test]
fn a_read_past_the_deadline_kills_the_child_after_the_watchdog_stopped() {
    let mut child = hanging_for_half_a_second();
    child.stop_watchdog();
    assert_a_read_kills_at_the_deadline(child);
}

/// And so does its wait.
#[test]
fn a_wait_past_the_deadline_kills_the_child_after_the_watchdog_stopped() {
    let started = Instant::now();
    let mut child = hanging_for_half_a_second();
    child.stop_watchdog();
    let ended = child.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForTime);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_child_writing_more_than_the_output_cap_is_killed() {
    let limits = SpawnLimits {
        output_cap: 256 << 10,
        line_cap: 1 << 20,
        ..limits()
    };
    let mut child = start(&["flood"], &limits);
    assert_eq!(
        child.read_line(Duration::from_secs(20)),
        Err(ChildIoError::OutputCapExceeded { cap: 256 << 10 })
    );
    // The reader stopped as soon as the cap was passed.
    assert!(child.bytes_received() <= (256 << 10) + (64 << 10));
    let ended = child.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForOutput);
}

#[test]
fn a_line_longer_than_the_line_cap_kills_the_child() {
    let limits = SpawnLimits {
        output_cap: 8 << 20,
        line_cap: 100 << 10,
        ..limits()
    };
    let mut child = start(&["flood"], &limits);
    assert_eq!(
        child.read_line(Duration::from_secs(20)),
        Err(ChildIoError::LineTooLong { cap: 100 << 10 })
    );
    let ended = child.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForOutput);
}

#[test]
fn stderr_past_its_cap_kills_the_child_and_keeps_only_the_cap() {
    let limits = SpawnLimits {
        stderr: StderrMode::Capture { cap: 4096 },
        ..limits()
    };
    let mut child = start(&["stderr-flood"], &limits);
    let ended = child.wait(Duration::from_secs(20)).unwrap();
    assert_eq!(ended.ending, Ending::KilledForOutput);
    assert_eq!(child.captured_stderr().len(), 4096);
}

#[test]
fn kill_is_reported_as_killed_by_parent() {
    let mut child = start(&["hang"], &limits());
    child.kill();
    let ended = child.wait(Duration::from_secs(5)).unwrap();
    assert_eq!(ended.ending, Ending::KilledByParent);
    // Waiting again gives the same answer.
    assert_eq!(child.wait(Duration::ZERO).unwrap(), ended);
}

#[test]
fn a_dropped_worker_is_killed_and_reaped() {
    let child = start(&["hang"], &limits());
    let pid = child.pid();
    drop(child);
    // Reaped: not even a zombie remains under our pid.
    let mut status = 0;
    // SAFETY: a live status pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    assert_eq!(rc, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ECHILD)
    );
}

#[test]
fn closing_stdin_lets_the_child_finish() {
    let mut child = start(&["hang"], &limits());
    child.write_line(b"some input").unwrap();
    child.close_stdin();
    let line: Value =
        serde_json::from_slice(&child.read_line(Duration::from_secs(20)).unwrap().unwrap())
            .unwrap();
    assert_eq!(line["value"], Value::from("some input\n".len()));
    assert_eq!(
        child.write_line(b"too late"),
        Err(ChildIoError::StdinClosed)
    );
    assert_eq!(
        child.wait(Duration::from_secs(20)).unwrap().ending,
        Ending::Exited { code: 0 }
    );
}

#[test]
fn frames_with_a_newline_are_refused() {
    let mut child = start(&["hang"], &limits());
    assert_eq!(
        child.write_line(b"two\nlines"),
        Err(ChildIoError::LineContainsNewline)
    );
}

#[test]
fn spawning_a_missing_binary_fails() {
    let err = spawn(
        Path::new("/nonexistent/thestream-worker"),
        &[OsStr::new("x")],
        &limits(),
    )
    .unwrap_err();
    assert!(
        matches!(err, SpawnError::Start { errno } if errno == libc::ENOENT),
        "{err:?}"
    );
}
