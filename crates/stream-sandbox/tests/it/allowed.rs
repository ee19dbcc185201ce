//! What the worker needs still works inside the sandbox.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use stream_sandbox::{Ending, LandlockStatus, SeccompStatus};
use stream_testkit::canary::{self, Canary};

use crate::common::*;

#[test]
fn reading_stdin_and_writing_stdout_work() {
    let text = Canary::new("echo");
    let mut child = start(&["echo"], &limits());
    child.write_line(text.as_str().as_bytes()).unwrap();
    // Had `enter` failed, the probe would have printed its refusal instead.
    let line = child.read_line(Duration::from_secs(20)).unwrap().unwrap();
    assert_eq!(line, text.as_str().as_bytes());
    // A second frame on the same pipes, then end-of-file.
    child.write_line(b"second").unwrap();
    assert_eq!(
        child.read_line(Duration::from_secs(20)).unwrap().unwrap(),
        b"second"
    );
    child.close_stdin();
    assert_eq!(child.read_line(Duration::from_secs(20)).unwrap(), None);
    let ended = child.wait(Duration::from_secs(20)).unwrap();
    assert_eq!(ended.ending, Ending::Exited { code: 0 });
    canary::assert_no_leak(
        &[text],
        &format!("{child:?} {ended:?}"),
        "WorkerChild Debug",
    );
}

#[test]
fn allocating_50_mib_works() {
    let (value, run) = assert_works(&["alloc", "50"]);
    // Every 4 KiB page of the 50 MiB block was touched.
    assert_eq!(value, Value::from(50 * 256));
    assert!(
        run.ended.peak_rss_kib >= 50 * 1024,
        "peak RSS {} KiB, expected the 50 MiB block to be resident",
        run.ended.peak_rss_kib
    );
    assert_eq!(run.ended.ending, Ending::Exited { code: 0 });
}

#[test]
fn reading_the_clock_works() {
    let (value, _) = assert_works(&["clock"]);
    let probe_nanos: u128 = value["unixNanos"].as_str().unwrap().parse().unwrap();
    let ours = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let skew = ours.abs_diff(probe_nanos);
    assert!(skew < 60_000_000_000, "probe clock off by {skew} ns");
}

#[test]
fn getting_random_bytes_works() {
    let (value, _) = assert_works(&["random"]);
    assert_eq!(value, Value::from(16));
}

/// Says, on every run, which optional stage this kernel granted; the
/// namespaces are not required (a machine may forbid unprivileged user
/// namespaces), so their absence is printed, not failed.
#[test]
fn the_enforcement_report_covers_every_stage() {
    let line = run(&["enforcement"]).line.unwrap();
    let e = enforcement_of(&line);
    assert!(e.no_new_privs);
    assert!(!e.dumpable);
    assert_eq!(e.rlimits.processes, 0);
    assert_eq!(e.rlimits.file_size_bytes, 0);
    assert_eq!(e.rlimits.core_bytes, 0);
    assert_eq!(e.rlimits.address_space_bytes, 1 << 30);
    assert_eq!(e.rlimits.cpu_seconds, 30);
    assert_eq!(e.rlimits.open_files, 8);
    assert_eq!(e.landlock.status, LandlockStatus::FullyEnforced);
    assert!(e.landlock.ruleset_abi >= 1);
    assert_eq!(e.seccomp.status, SeccompStatus::Installed);
    eprintln!(
        "sandbox on this kernel: Landlock ABI {:?} (ruleset ABI {}), namespaces entered: \
         user={} network={} mount={} ipc={}",
        e.landlock.kernel_abi,
        e.landlock.ruleset_abi,
        e.namespaces.user,
        e.namespaces.network,
        e.namespaces.mount,
        e.namespaces.ipc
    );
    let ns = &e.namespaces;
    if !(ns.user && ns.network && ns.mount && ns.ipc) {
        eprintln!(
            "NOTE: this kernel refused some namespaces; isolation rests on Landlock and seccomp"
        );
    }
}
