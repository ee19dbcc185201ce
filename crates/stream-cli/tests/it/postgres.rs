//! The bot on PostgreSQL, decisions from anywhere: a review-only config (no
//! `[context]`, another folder, another data dir) lists, shows and decides
//! a memory proposal while `serve` runs; the decision is recorded there and
//! materialized by the `serve` that holds `memory.md`, woken by the
//! commit's notification. The PostgreSQL tests skip, saying why, without a
//! server (`stream_store::pgtest`); the SQLite variant always runs.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::{Serve, sqlite_stack};

/// The operator's config without its `[context]` section, in another
/// folder, with the data dir `data`.
fn review_only(config: &str, data: &std::path::Path) -> String {
    let start = config.find("[context]").unwrap();
    let end = start + config[start..].find("\n[telegram]").unwrap();
    let config = format!("{}{}", &config[..start], &config[end..]);
    assert!(!config.contains("[context]"));
    config.replace(
        "data_dir = \".thestream\"",
        &format!("data_dir = \"{}\"", data.display()),
    )
}

fn laptop(dir: &std::path::Path, url: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_thestream"))
        .arg("--config")
        .arg(dir.join("thestream.toml"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("THESTREAM_DATABASE_URL", url)
        .output()
        .unwrap()
}

#[test]
fn a_review_only_decision_is_materialized_by_the_serve_that_holds_memory() {
    let Some(url) = stream_store::pgtest::fresh_url() else {
        return;
    };
    let mut s = sqlite_stack(ProviderApi::OpenaiChat);
    s.use_postgres(&url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    review_only_flow(&s, dir.path(), &data, &url);
}

/// The same with docs/postgres.md's least-privilege roles: `serve` runs as
/// `thestream_serve` (which created the schema), the laptop as
/// `thestream_review`, which lists, shows, decides, exports and reports
/// with no DDL and no write beyond appending events.
#[test]
fn a_review_role_decides_and_the_serve_role_materializes() {
    let Some(url) = stream_store::pgtest::fresh_url() else {
        return;
    };
    let server = stream_store::pgtest::server().unwrap();
    let roles = server.least_privilege_roles(&url);
    drop(stream_store::PostgresStore::open(&roles.serve).unwrap());
    server.grant_after_first_serve(&roles);
    let mut s = sqlite_stack(ProviderApi::OpenaiChat);
    s.use_postgres(&roles.serve).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    review_only_flow(&s, dir.path(), &data, &roles.review);
}

/// The same on one machine's SQLite store: a review-only config naming the
/// bot's data dir decides; the running `serve` materializes.
#[test]
fn a_review_only_decision_on_sqlite_is_materialized_by_the_running_serve() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let dir = tempfile::tempdir().unwrap();
    let data = s.path().join(".thestream");
    review_only_flow(&s, dir.path(), &data, "");
}

fn review_only_flow(s: &Stack, laptop_dir: &std::path::Path, data: &std::path::Path, url: &str) {
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        ScriptedCall::json(
            "call_mem",
            "request_memory_change",
            json!({"operation": "append", "proposed_text": "canary-remembered: the owner keeps bees.", "reason": "The owner asked.", "evidence_event_ids": []}),
        ),
    ])));
    // The laptop's config, and its key enrolled in the config that holds
    // the context root before that serve starts (docs/postgres.md). On one
    // machine the data dir, and so the key, is the bot's own.
    let config = std::fs::read_to_string(s.path().join("thestream.toml")).unwrap();
    std::fs::write(
        laptop_dir.join("thestream.toml"),
        review_only(&config, data),
    )
    .unwrap();
    if !data.join("signing.key").exists() {
        let key = laptop(laptop_dir, url, &["key", "init"]);
        assert_eq!(key.status.code(), Some(0), "{key:?}");
        let out = String::from_utf8(key.stdout).unwrap();
        let public = out.trim().strip_prefix("public key: ").unwrap().to_owned();
        let enrolled = config.replacen("keys = [", &format!("keys = [\"{public}\", "), 1);
        assert_ne!(enrolled, config);
        std::fs::write(s.path().join("thestream.toml"), enrolled).unwrap();
    }
    let _serve = Serve::start(s);
    s.say("Remember that I keep bees.");
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.sent_texts().is_empty() {
        assert!(Instant::now() < deadline, "no reply");
        std::thread::sleep(Duration::from_millis(20));
    }

    let listed = laptop(laptop_dir, url, &["proposal-list", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let shown = laptop(laptop_dir, url, &["proposal-show", &id, "--show-sensitive"]);
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    assert!(String::from_utf8_lossy(&shown.stdout).contains("+canary-remembered"));

    let memory = s.path().join("context/memory.md");
    let before = std::fs::read_to_string(&memory).unwrap();
    let decided = laptop(
        laptop_dir,
        url,
        &[
            "proposal-decision",
            "--proposal",
            &id,
            "--accept",
            "--actor",
            "laptop",
        ],
    );
    let out = String::from_utf8_lossy(&decided.stdout).into_owned();
    assert_eq!(decided.status.code(), Some(0), "{decided:?}");
    assert!(
        out.contains("recorded; will be materialized by the serve that holds memory.md"),
        "{out}"
    );
    assert!(
        !laptop_dir.join("context").exists(),
        "the laptop wrote no memory.md"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = std::fs::read_to_string(&memory).unwrap();
        if now != before {
            assert!(now.starts_with(&before), "appended: {now}");
            assert!(now.contains("canary-remembered: the owner keeps bees."));
            break;
        }
        assert!(Instant::now() < deadline, "serve did not materialize it");
        std::thread::sleep(Duration::from_millis(50));
    }
    let export = laptop_dir.join("external.jsonl");
    let exported = laptop(
        laptop_dir,
        url,
        &["training-export", "--output", export.to_str().unwrap()],
    );
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let logged = laptop(laptop_dir, url, &["memory-log", "--json"]);
    assert_eq!(logged.status.code(), Some(0), "{logged:?}");
    let stats = laptop(laptop_dir, url, &["events", "--stats", "--json"]);
    assert_eq!(stats.status.code(), Some(0), "{stats:?}");
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert!(stats["events"].as_u64().unwrap() > 0, "{stats}");
    assert!(
        stats["bytes"]["snapshotParts"].as_u64().unwrap() > 0,
        "{stats}"
    );
    let events = s.events().unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "stream.thought.agent.memory-change.materialized")
            .count(),
        1
    );
}

/// `serve --drain` materializes a memory decision a review-only config
/// recorded, as a running `serve` does (it used to leave it pending).
#[test]
fn serve_drain_materializes_a_decision_recorded_by_a_review_only_config() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        ScriptedCall::json(
            "call_mem",
            "request_memory_change",
            json!({"operation": "append", "proposed_text": "canary-drained: the owner keeps bees.", "reason": "The owner asked.", "evidence_event_ids": []}),
        ),
    ])));
    s.say("Remember that I keep bees.");
    let drained = s.drain().unwrap();
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    let laptop_dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(s.path().join("thestream.toml")).unwrap();
    let data = s.path().join(".thestream");
    std::fs::write(
        laptop_dir.path().join("thestream.toml"),
        review_only(&config, &data),
    )
    .unwrap();
    let id = s.proposals().unwrap()[0]["id"].as_str().unwrap().to_owned();
    let decided = laptop(
        laptop_dir.path(),
        "",
        &["proposal-decision", "--proposal", &id, "--accept"],
    );
    assert_eq!(decided.status.code(), Some(0), "{decided:?}");
    assert!(
        String::from_utf8_lossy(&decided.stdout).contains("will be materialized"),
        "{decided:?}"
    );
    let memory = s.path().join("context/memory.md");
    assert!(
        !std::fs::read_to_string(&memory)
            .unwrap()
            .contains("canary-drained")
    );

    let drained = s.drain().unwrap();
    assert_eq!(drained.code, 0, "{}", drained.stderr);
    let now = std::fs::read_to_string(&memory).unwrap();
    assert!(
        now.contains("canary-drained: the owner keeps bees."),
        "{now}"
    );
    assert!(!drained.stdout.contains("canary-"), "{}", drained.stdout);
    assert!(!drained.stderr.contains("canary-"), "{}", drained.stderr);
    let listed = s.proposals().unwrap();
    assert_eq!(listed[0]["outcome"], "materialized", "{listed:?}");
}

/// A review-only config refuses what needs `memory.md`, naming why.
#[test]
fn a_review_only_config_refuses_serve_and_scan() {
    let Some(url) = stream_store::pgtest::fresh_url() else {
        return;
    };
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(s.path().join("thestream.toml")).unwrap();
    let config = review_only(&config, &dir.path().join("data"))
        .replace("backend = \"sqlite\"", "backend = \"postgres\"");
    std::fs::write(dir.path().join("thestream.toml"), config).unwrap();
    for args in [&["scan"][..], &["serve", "--drain"][..]] {
        let run = laptop(dir.path(), &url, args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {run:?}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("review-only"), "{err}");
        assert!(!err.contains(&url), "the URL is never printed");
    }
}

/// A database URL whose TLS could fall back to plain text, or that asks for
/// plain text to another machine, is a usage error (exit 2) naming the
/// mode and never the password; no server is needed to refuse it.
#[test]
fn a_database_url_that_could_go_plain_text_exits_2() {
    let mut s = sqlite_stack(ProviderApi::OpenaiChat);
    s.use_postgres("set per command below").unwrap();
    let canary = "canary-pw-41c4";
    for (url, named) in [
        (
            format!("postgres://bot:{canary}@db.example/thestream?sslmode=prefer"),
            "sslmode=prefer",
        ),
        (
            format!("host=db.example user=bot password={canary} sslmode=allow"),
            "sslmode=allow",
        ),
        (
            format!("postgres://bot:{canary}@db.example/thestream?sslmode=disable"),
            "sslmode=disable is allowed only to this machine",
        ),
    ] {
        let ran: stream_testkit::stack::Ran = s
            .command(&["proposal-list"])
            .env("THESTREAM_DATABASE_URL", &url)
            .output()
            .unwrap()
            .into();
        assert_eq!(ran.code, 2, "{url}: {}", ran.stderr);
        assert!(ran.stderr.contains(named), "{}", ran.stderr);
        assert!(!ran.stderr.contains(canary), "{}", ran.stderr);
        assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    }
}
