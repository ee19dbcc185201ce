//! The foundation issue: config, init, events, exit codes, refusals.

use serde_json::{Value, json};
use stream_core::payload::{MessageReceived, PrivateChat, RunFailed, RunFailureReason};
use stream_core::text::{BoundedText, Label};
use stream_core::{EventId, NewEvent, RunId, SourceName};
use stream_store::Store;
use stream_testkit::canary::{Canary, assert_no_leak};

use crate::common::{Home, thestream};

#[test]
fn init_writes_config_memory_and_declarations() {
    let home = Home::init();
    let memory = std::fs::read_to_string(home.path().join("context/memory.md")).unwrap();
    let id_line = memory.lines().nth(1).unwrap();
    assert!(memory.starts_with("---\n"), "{memory}");
    assert!(
        id_line.starts_with("id: memory-") && id_line.len() > 12,
        "{id_line}"
    );
    assert!(home.path().join("declarations").is_dir());
    let mode = |p: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(home.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("context/memory.md"), 0o600);
    assert_eq!(mode("context"), 0o700);
}

#[test]
fn init_refuses_to_overwrite_and_changes_nothing() {
    let home = Home::init();
    let memory = home.path().join("context/memory.md");
    std::fs::write(&memory, "---\nid: mine\n---\nhand-edited\n").unwrap();
    let run = home.run(&["init", "."]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("refusing to overwrite"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "---\nid: mine\n---\nhand-edited\n"
    );
}

#[test]
fn events_on_a_fresh_store_prints_nothing() {
    let home = Home::init();
    let run = home.run(&["events", "--json"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}

#[test]
fn config_from_env_var_and_flag() {
    let home = Home::init();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = home.config();
    let run = thestream(
        elsewhere.path(),
        &["--config", config.to_str().unwrap(), "events"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Relative data_dir resolved against the config's folder, not the cwd.
    assert!(home.path().join(".thestream/store.db").is_file());
    assert!(!elsewhere.path().join(".thestream").exists());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_thestream"))
        .arg("events")
        .current_dir(elsewhere.path())
        .env("THESTREAM_CONFIG", &config)
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn config_errors_exit_2_and_name_the_key() {
    let home = Home::init();
    let cases = [
        ("[telegram]\nowner_id = 1\n", "owner_id"),
        ("[telegram]\nowner_user_id = \"me\"\n", "owner_user_id"),
        ("data_dir = 5\n", "data_dir"),
        ("[provider]\nmodle = \"x\"\n", "modle"),
        ("[provider]\ncompat = \"lm-studio\"\n", "compat"),
        ("[provider]\napi = \"gemini\"\n", "api"),
    ];
    for (text, key) in cases {
        std::fs::write(home.config(), text).unwrap();
        let run = home.run(&["events"]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        assert!(run.stderr.contains(key), "{text}: {}", run.stderr);
    }
    // A compat mode other than openai shapes only `openai-chat` requests.
    std::fs::write(
        home.config(),
        "[telegram]\nowner_user_id = 1\n[provider]\napi = \"anthropic-messages\"\ncompat = \"ollama\"\n",
    )
    .unwrap();
    let run = home.run(&["serve", "--drain"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("provider.compat"), "{}", run.stderr);
    std::fs::remove_file(home.config()).unwrap();
    let run = home.run(&["events"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("cannot read config"), "{}", run.stderr);
}

#[test]
fn usage_errors_exit_2() {
    let home = Home::init();
    assert_eq!(home.run(&["no-such-command"]).code, 2);
    assert_eq!(home.run(&["events", "--source", "not a source"]).code, 2);
    assert_eq!(home.run(&["--help"]).code, 0);
}

#[test]
fn unusable_store_files_exit_2_untouched() {
    let home = Home::init();
    std::fs::create_dir_all(home.path().join(".thestream")).unwrap();
    let db = home.path().join(".thestream/store.db");
    std::fs::write(&db, b"garbage ".repeat(1000)).unwrap();
    let run = home.run(&["events"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("corrupt"), "{}", run.stderr);
    assert_eq!(std::fs::read(&db).unwrap(), b"garbage ".repeat(1000));

    std::fs::remove_file(&db).unwrap();
    drop(home.store());
    rusqlite_set_user_version(&db, 42);
    let run = home.run(&["events"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("newer"), "{}", run.stderr);
}

fn rusqlite_set_user_version(db: &std::path::Path, v: u32) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {v}"))
        .unwrap();
}

fn message(canary: &Canary) -> MessageReceived {
    MessageReceived {
        update_id: 5,
        message_id: 1,
        chat_id: 42,
        chat_type: PrivateChat,
        sender_id: 42,
        date: 1_790_000_000,
        text: Some(BoundedText::new(canary.to_string()).unwrap()),
        photo: None,
        photo_too_large: false,
        reply_to_message_id: None,
        command: None,
    }
}

fn seed_events(home: &Home, canary: &Canary) -> (EventId, EventId) {
    let store = home.store();
    let msg = NewEvent::build(&SourceName::telegram(99), None, None, &message(canary)).unwrap();
    let failed = RunFailed {
        run_id: RunId::parse(&"1".repeat(64)).unwrap(),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        trigger_event_id: msg.id.clone(),
        attempt: 1,
        reason: RunFailureReason::ProviderTransient,
        is_final: false,
    };
    let source = SourceName::agent("telegram-conversation").unwrap();
    let failed = NewEvent::build(&source, Some(&msg.id), Some(&msg.id), &failed).unwrap();
    store.append(&msg).unwrap();
    store.append(&failed).unwrap();
    (msg.id, failed.id)
}

#[test]
fn events_json_envelope_redacts_sensitive_payloads() {
    let home = Home::init();
    let canary = Canary::new("events");
    let (msg_id, failed_id) = seed_events(&home, &canary);

    let run = home.run(&["events", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_no_leak(std::slice::from_ref(&canary), &run.stdout, "events --json");
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let mut first = lines[0].clone();
    assert!(first["recordedAt"].as_str().unwrap().ends_with('Z'));
    first["recordedAt"] = json!("<time>");
    assert_eq!(
        first,
        json!({
            "id": msg_id, "source": "telegram:99", "seq": 1,
            "type": "stream.telegram.message.received", "version": 1,
            "authorship": "external", "sensitive": true, "root": null, "parent": null,
            "payload": null, "recordedAt": "<time>",
        })
    );
    assert_eq!(lines[1]["id"], json!(failed_id));
    assert_eq!(lines[1]["payload"]["reason"], json!("provider-transient"));
    assert_eq!(lines[1]["root"], json!(msg_id));

    let shown = home.run(&["events", "--json", "--show-sensitive"]);
    assert!(canary.found_in(&shown.stdout));
    let plain = home.run(&["events"]);
    assert_no_leak(std::slice::from_ref(&canary), &plain.stdout, "events");
    assert!(plain.stdout.contains("[sensitive: redacted]"));

    let filtered = home.run(&[
        "events",
        "--json",
        "--source",
        "agent:telegram-conversation",
    ]);
    assert_eq!(filtered.stdout.lines().count(), 1);
    let by_type = home.run(&[
        "events",
        "--json",
        "--type",
        "stream.telegram.message.received",
    ]);
    assert_eq!(by_type.stdout.lines().count(), 1);
}
