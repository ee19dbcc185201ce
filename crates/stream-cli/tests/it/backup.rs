//! `backup` and `events --stats` end to end: a backup taken while a real
//! `serve` answers messages is a sound, complete and working store.

use std::collections::BTreeSet;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::{Serve, sqlite_stack as stack};

fn event_ids(db: &Path) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT lower(hex(id)) FROM events").unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn schema_version(db: &Path) -> Option<u32> {
    if !db.exists() {
        return None;
    }
    rusqlite::Connection::open(db)
        .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .ok()
}

fn integrity(db: &Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

fn private_dir(s: &Stack, name: &str) -> std::path::PathBuf {
    let dir = s.path().join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    dir
}

#[test]
fn a_backup_taken_while_serve_answers_holds_every_committed_event_and_works() {
    let s = stack(ProviderApi::OpenaiChat);
    const TURNS: usize = 6;
    for i in 0..TURNS {
        s.script(Reply::completion(ScriptedCompletion::text(&format!(
            "answer {i}"
        ))));
    }
    let serve = Serve::start(&s);
    let backups = private_dir(&s, "backups");
    let deadline = Instant::now() + Duration::from_secs(120);
    // The file exists before its schema does: wait for the last migration.
    while schema_version(&s.store_path()) != Some(stream_store::SCHEMA_VERSION) {
        assert!(Instant::now() < deadline, "serve did not open the store");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut taken = 0;
    for i in 0..TURNS {
        s.say(&format!("question {i}"));
        // Back up while this turn is being answered.
        let committed = event_ids(&s.store_path());
        let out = backups.join(format!("b{i}.db"));
        let ran = s
            .run(&["backup", "--output", out.to_str().unwrap()])
            .unwrap();
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        assert_eq!(integrity(&out), "ok");
        let copied = event_ids(&out);
        assert!(
            committed.is_subset(&copied),
            "every event committed before the backup is in it"
        );
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
        taken += 1;
        while s.sent_texts().len() <= i {
            assert!(Instant::now() < deadline, "serve did not answer");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(taken, TURNS);
    serve.stop();
    let last = backups.join("last.db");
    let ran = s
        .run(&["backup", "--output", last.to_str().unwrap()])
        .unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let before = s.events().unwrap();
    assert_eq!(
        std::fs::read_dir(&backups).unwrap().count(),
        TURNS + 1,
        "no temporary file left"
    );

    // Restore: the copy as `store.db` in an emptied data dir is a working store.
    let data = s.store_path().parent().unwrap().to_owned();
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&data)
        .unwrap();
    std::fs::copy(&last, s.store_path()).unwrap();
    assert_eq!(s.events().unwrap(), before);
    s.script(Reply::completion(ScriptedCompletion::text("after restore")));
    s.say("one more");
    assert_eq!(s.drain().unwrap().code, 0);
    let sent = s.sent_texts();
    assert_eq!(sent.len(), TURNS + 1);
    assert_eq!(sent.last().unwrap(), "after restore");
}

#[test]
fn backup_refuses_an_existing_file_a_directory_and_a_group_writable_folder() {
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text("hi")));
    s.say("hello");
    assert_eq!(s.drain().unwrap().code, 0);
    let dir = private_dir(&s, "out");
    let existing = dir.join("existing.db");
    std::fs::write(&existing, b"keep me").unwrap();
    let open = private_dir(&s, "open");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o770)).unwrap();
    for (target, why) in [
        (existing.clone(), "exists"),
        (dir.clone(), "is a directory"),
        (open.join("b.db"), "writable by group"),
    ] {
        let ran = s
            .run(&["backup", "--output", target.to_str().unwrap()])
            .unwrap();
        assert_eq!(ran.code, 2, "{}: {}", target.display(), ran.stderr);
        assert!(ran.stderr.contains(why), "{}", ran.stderr);
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
    // --force replaces the file with a sound store.
    let ran = s
        .run(&["backup", "--output", existing.to_str().unwrap(), "--force"])
        .unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(integrity(&existing), "ok");
}

#[test]
fn events_stats_reports_the_store_size_and_bytes_by_kind() {
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text(
        "canary-reply-stats",
    )));
    s.say("canary-message-stats");
    assert_eq!(s.drain().unwrap().code, 0);
    let ran = s.run(&["events", "--stats", "--json"]).unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let stats: Value = serde_json::from_str(&ran.stdout).unwrap();
    let events = s.events().unwrap().len() as u64;
    assert_eq!(stats["events"], events);
    assert_eq!(stats["snapshots"], 1);
    for kind in ["events", "snapshotParts", "documents"] {
        assert!(
            stats["bytes"][kind].as_u64().unwrap() > 0,
            "{kind}: {stats}"
        );
    }
    assert_eq!(stats["bytes"]["photos"], 0);
    assert!(stats["storeBytes"].as_u64().unwrap() > 0);
    let text = s.run(&["events", "--stats"]).unwrap();
    assert_eq!(text.code, 0);
    for line in ["snapshot parts", "photos", "documents", "events"] {
        assert!(text.stdout.contains(line), "{}", text.stdout);
    }
    assert!(!text.stdout.contains("canary") && !ran.stdout.contains("canary"));
}

/// Issue 41's race: a thread swaps the target folder for a symlink to
/// another folder and back, in a loop, while `backup` runs 25 times. Each
/// run either writes into the real folder (through the descriptor it
/// checked) or refuses the symlink; not one byte lands in the other folder,
/// and no temporary file is left anywhere.
#[test]
fn a_folder_swapped_for_a_symlink_during_backups_never_receives_a_byte() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text("hi")));
    s.say("hello");
    assert_eq!(s.drain().unwrap().code, 0);
    let base = private_dir(&s, "race");
    let target = base.join("target");
    let parked = base.join("parked");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&target)
        .unwrap();
    let elsewhere = private_dir(&s, "elsewhere");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, target, parked, elsewhere) = (
            stop.clone(),
            target.clone(),
            parked.clone(),
            elsewhere.clone(),
        );
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&target, &parked).unwrap();
                std::os::unix::fs::symlink(&elsewhere, &target).unwrap();
                std::thread::sleep(Duration::from_millis(3));
                std::fs::remove_file(&target).unwrap();
                std::fs::rename(&parked, &target).unwrap();
                std::thread::sleep(Duration::from_millis(3));
                swaps += 1;
            }
            swaps
        })
    };
    let runs: Vec<_> = (0..25)
        .map(|i| {
            let out = target.join(format!("b{i}.db"));
            s.run(&["backup", "--output", out.to_str().unwrap(), "--force"])
                .unwrap()
        })
        .collect();
    // Stopped before any assertion, so a failure leaves the folders as they are.
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let (mut written, mut refused) = (0, 0);
    for ran in &runs {
        match ran.code {
            0 => written += 1,
            2 => refused += 1,
            other => panic!("exit {other}: {}", ran.stderr),
        }
    }
    eprintln!("{swaps} swaps: {written} written, {refused} refused");
    assert!(swaps > 0);
    let landed: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(
        landed.is_empty(),
        "{} entries landed in the other folder ({written} written, {refused} refused)",
        landed.len()
    );
    let names: Vec<String> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), written, "{names:?}");
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    for name in &names {
        assert_eq!(integrity(&target.join(name)), "ok");
    }
    assert!(
        std::fs::read_dir(s.store_path().parent().unwrap())
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().contains("backup")),
        "no staged copy left in the data dir"
    );
}

#[test]
fn backup_refuses_a_symlinked_folder_and_a_folder_it_does_not_own() {
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text("hi")));
    s.say("hello");
    assert_eq!(s.drain().unwrap().code, 0);
    let real = private_dir(&s, "real");
    let link = s.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let ran = s
        .run(&["backup", "--output", link.join("b.db").to_str().unwrap()])
        .unwrap();
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("not a real directory"),
        "{}",
        ran.stderr
    );
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    // Another user's folder: only root can make one to test with.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = private_dir(&s, "theirs");
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let ran = s
            .run(&["backup", "--output", theirs.join("b.db").to_str().unwrap()])
            .unwrap();
        assert_eq!(ran.code, 2, "{}", ran.stderr);
        assert!(ran.stderr.contains("not owned by you"), "{}", ran.stderr);
        assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
    }
}
