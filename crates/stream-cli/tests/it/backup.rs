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
