//! `thestream telegram-menu-register` against the loopback fake Bot API.

use std::process::Command;

use serde_json::json;
use stream_store::Store;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

use crate::common::{Home, Run};

const OWNER: i64 = 515_151;

struct Setup {
    home: Home,
    fake: FakeTelegram,
    token: String,
    canary: Canary,
    _rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let canary = Canary::new("cli-token");
    let token = format!("4242:{canary}");
    let fake = rt
        .block_on(FakeTelegram::start(FakeTelegramConfig {
            token: token.clone(),
            ..FakeTelegramConfig::default()
        }))
        .unwrap();
    let home = Home::init();
    let config = std::fs::read_to_string(home.config()).unwrap();
    let config = config
        .replace(
            "api_base_url = \"https://api.telegram.org\"",
            &format!("api_base_url = \"{}\"", fake.base_url()),
        )
        .replacen("owner_user_id = 0", &format!("owner_user_id = {OWNER}"), 1);
    std::fs::write(home.config(), config).unwrap();
    Setup {
        home,
        fake,
        token,
        canary,
        _rt: rt,
    }
}

fn activate(home: &Home) {
    let store = home.store();
    let mut tx = store.begin().unwrap();
    tx.set_control(
        "active-declaration",
        &json!({
            "id": "telegram-conversation",
            "version": 18,
            "fingerprint": "ab".repeat(32),
            "commands": [
                {"command": "focus", "description": "Propose a focus"},
                {"command": "correct", "description": "Correct my last reply"},
            ],
        }),
    )
    .unwrap();
    tx.commit().unwrap();
}

fn run(s: &Setup, args: &[&str], token: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_thestream"));
    cmd.args(args)
        .current_dir(s.home.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    if let Some(token) = token {
        cmd.env("TELEGRAM_BOT_TOKEN", token);
    }
    cmd.output().unwrap().into()
}

#[test]
fn without_an_active_declaration_it_fails_clearly() {
    let s = setup();
    let out = run(&s, &["telegram-menu-register"], Some(&s.token));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("no declaration is active"),
        "{}",
        out.stderr
    );
    assert!(s.fake.calls().is_empty());
}

#[test]
fn registers_the_active_commands_and_sends_the_notice() {
    let s = setup();
    activate(&s.home);
    let out = run(&s, &["telegram-menu-register"], Some(&s.token));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("registered 2 commands of telegram-conversation@18"),
        "{}",
        out.stdout
    );
    assert_eq!(
        s.fake.commands(),
        json!([
            {"command": "focus", "description": "Propose a focus"},
            {"command": "correct", "description": "Correct my last reply"},
        ])
    );
    let sent = s.fake.calls_of("sendMessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].params["chat_id"], json!(OWNER));
    let methods: Vec<String> = s.fake.calls().iter().map(|c| c.method.clone()).collect();
    assert_eq!(
        methods,
        ["setMyCommands", "sendMessage"],
        "menu first, then the notice"
    );
}

#[test]
fn skip_help_notice_registers_without_a_message() {
    let s = setup();
    activate(&s.home);
    let out = run(
        &s,
        &["telegram-menu-register", "--skip-help-notice"],
        Some(&s.token),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(s.fake.calls_of("setMyCommands").len(), 1);
    assert!(s.fake.calls_of("sendMessage").is_empty());
}

#[test]
fn token_problems_never_print_the_token() {
    let s = setup();
    activate(&s.home);
    let out = run(&s, &["telegram-menu-register"], None);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("TELEGRAM_BOT_TOKEN"), "{}", out.stderr);
    // A token the fake does not know: 401, exit 1, the token nowhere.
    let wrong = format!("{}x", s.token);
    let out = run(&s, &["telegram-menu-register"], Some(&wrong));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("Unauthorized"), "{}", out.stderr);
    let secret = s.token.split_once(':').unwrap().1;
    assert!(
        !out.stderr.contains(secret) && !out.stdout.contains(secret),
        "{}",
        out.stderr
    );
    assert_no_leak(
        std::slice::from_ref(&s.canary),
        &format!("{}{}", out.stdout, out.stderr),
        "cli output",
    );
}
