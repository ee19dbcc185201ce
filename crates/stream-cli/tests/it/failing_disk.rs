//! A failing disk under a live `serve` (docs/operating.md, "A failing
//! disk"), injected by an `LD_PRELOAD` shim (`fault_shim.c`, compiled here
//! with the system's C compiler; without one the tests say so and skip):
//! a failed sync of the store stops `serve` with exit 1 naming the store,
//! and a restart answers every message exactly once; a disk error at start
//! exits 1, not 2.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::sqlite_stack;

/// The shim, built into `dir`. `cc` links every Rust binary here, so a shim
/// that does not build fails the test instead of skipping it (a skipped
/// fault test would pass whatever the store does on a failing disk).
fn shim(dir: &Path) -> PathBuf {
    let source = dir.join("fault_shim.c");
    std::fs::write(&source, include_str!("fault_shim.c")).unwrap();
    let out = dir.join("fault_shim.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .output()
        .expect("cc runs");
    assert!(
        built.status.success(),
        "cannot build the fault shim: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// A folder holding the built shim and the path of its arming file.
fn armed() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let shim = shim(dir.path());
    let arm = dir.path().join("arm");
    (dir, shim, arm)
}

/// What the shim fails.
#[derive(Clone, Copy)]
enum Fault {
    /// Every sync of the store's files (EIO).
    Sync,
    /// Every write to the store's WAL (ENOSPC).
    WalWrite,
}

/// `thestream ARGS` in the stack's home with the shim injecting `fault`
/// while `arm` exists (only once with `once`).
fn faulty(s: &Stack, shim: &Path, fault: Fault, arm: &Path, once: bool, args: &[&str]) -> Command {
    let (op, path) = match fault {
        Fault::Sync => ("sync", "store.db"),
        Fault::WalWrite => ("write", "store.db-wal"),
    };
    let mut cmd = s.command(args);
    cmd.env("LD_PRELOAD", shim)
        .env("FAULT_SHIM_OP", op)
        .env("FAULT_SHIM_PATH", path)
        .env("FAULT_SHIM_ARM", arm);
    if once {
        cmd.env("FAULT_SHIM_ONCE", "1");
    }
    cmd
}

/// Owner message id → how many replies answered it.
fn answers(s: &Stack) -> BTreeMap<i64, usize> {
    let mut answered = BTreeMap::new();
    for call in s.sent() {
        if let Some(id) = call.params["reply_parameters"]["message_id"].as_i64() {
            *answered.entry(id).or_default() += 1;
        }
    }
    answered
}

fn receipts(s: &Stack) -> usize {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "stream.telegram.delivery.receipt")
        .count()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_failed_store_sync_stops_serve_with_exit_1_and_a_restart_answers_every_message_once() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let (dir, shim, arm) = armed();
    for _ in 0..4 {
        s.script(Reply::completion(ScriptedCompletion::text("Noted.")));
    }
    let log = dir.path().join("serve.log");
    let mut serve = faulty(&s, &shim, Fault::Sync, &arm, true, &["serve"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let first = s.say("canary-disk-7f1 before the fault.");
    wait_until("the first reply's receipt", || receipts(&s) == 1);

    std::fs::write(&arm, b"").unwrap();
    let second = s.say("canary-disk-7f1 after the fault.");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = serve.kill();
            panic!(
                "serve went on after a failed sync: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!arm.exists(), "the shim failed one sync");
    assert_eq!(status.code(), Some(1), "{logged}");
    assert!(
        logged.contains("serve stopped: the store ./.thestream/store.db"),
        "names the store: {logged}"
    );
    assert!(logged.contains("a sync to disk failed"), "{logged}");
    assert!(!logged.contains("canary-disk"), "content-dark: {logged}");

    // The restart (systemd's) re-reads the store: every message is
    // answered, none twice.
    let drained = s.drain().unwrap();
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    assert_eq!(answers(&s), BTreeMap::from([(first, 1), (second, 1)]));
}

/// At start `serve` installs the declaration in the store; a full disk
/// there used to exit 2 (as if the config were wrong), and a failed sync
/// while opening the store exits 1 too.
#[test]
fn a_disk_error_at_start_exits_1_not_2() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let (_dir, shim, arm) = armed();
    // The store exists (migrated, nothing installed yet).
    let listed = s.run(&["events"]).unwrap();
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    s.say("canary-disk-20c at start.");
    std::fs::write(&arm, b"").unwrap();
    for (fault, said) in [
        (Fault::WalWrite, "no space left on the device"),
        (Fault::Sync, "a sync to disk failed"),
    ] {
        let ran = faulty(&s, &shim, fault, &arm, false, &["serve", "--drain"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert_eq!(ran.status.code(), Some(1), "{said}: {stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert!(
            stderr.contains("the store ./.thestream/store.db"),
            "{stderr}"
        );
        assert!(!stderr.contains("canary-disk"), "{stderr}");
    }
}

/// `doctor`'s store check makes a real synced write in the data dir: one
/// whose sync fails is a FAIL (exit 1) naming the data dir, although the
/// store itself opens.
#[test]
fn doctor_fails_the_store_check_where_a_synced_write_fails() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let (dir, shim, arm) = armed();
    let listed = s.run(&["events"]).unwrap();
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    std::fs::write(&arm, b"").unwrap();
    let doctor = |arm_path: &Path| {
        let ran = s
            .command(&["doctor", "--json"])
            .env("LD_PRELOAD", &shim)
            .env("FAULT_SHIM_OP", "sync")
            .env("FAULT_SHIM_PATH", ".doctor-sync-probe-")
            .env("FAULT_SHIM_ARM", arm_path)
            .output()
            .unwrap();
        let checks: Vec<serde_json::Value> = serde_json::from_slice(&ran.stdout).unwrap();
        let store = checks.into_iter().find(|c| c["check"] == "store").unwrap();
        (ran.status.code(), store)
    };
    let (code, store) = doctor(&arm);
    assert_eq!(code, Some(1), "{store}");
    assert_eq!(store["ok"], false, "{store}");
    let detail = store["detail"].as_str().unwrap();
    assert!(
        detail.contains("a synced write in the data dir ./.thestream failed: fsync: "),
        "{detail}"
    );
    let left: Vec<_> = std::fs::read_dir(s.path().join(".thestream"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".doctor"))
        .collect();
    assert!(left.is_empty(), "the probe is removed: {left:?}");

    let (_, store) = doctor(&dir.path().join("never"));
    assert_eq!(store["ok"], true, "{store}");
}
