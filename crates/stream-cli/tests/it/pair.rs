//! `thestream pair` end to end against the loopback fake Bot API, and
//! `serve`'s refusal to start without an owner.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use stream_testkit::canary::Canary;
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

use crate::common::{Home, Run};

const OWNER: i64 = 626_262;
const STRANGER: i64 = 939_393;

struct Setup {
    home: Home,
    fake: FakeTelegram,
    token: String,
    _rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let token = format!("4242:{}", Canary::new("pair-token"));
    let fake = rt
        .block_on(FakeTelegram::start(FakeTelegramConfig {
            token: token.clone(),
            ..FakeTelegramConfig::default()
        }))
        .unwrap();
    let home = Home::init();
    let config = std::fs::read_to_string(home.config()).unwrap();
    let config = config.replace("https://api.telegram.org", &fake.base_url());
    std::fs::write(home.config(), config).unwrap();
    Setup {
        home,
        fake,
        token,
        _rt: rt,
    }
}

impl Setup {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_thestream"));
        cmd.args(args)
            .current_dir(self.home.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TELEGRAM_BOT_TOKEN", &self.token);
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        self.command(args).output().unwrap().into()
    }
}

fn message(from: i64, chat: i64, chat_type: &str, text: &str) -> serde_json::Value {
    json!({"message": {
        "message_id": 1,
        "from": {"id": from, "is_bot": false, "first_name": "Someone"},
        "chat": {"id": chat, "type": chat_type},
        "date": 1_790_000_000,
        "text": text,
    }})
}

#[test]
fn pair_writes_the_code_senders_id_keeping_comments_and_ignores_others() {
    let s = setup();
    let before = std::fs::read_to_string(s.home.config()).unwrap();
    let mut child = s
        .command(&["pair", "--timeout", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let code = first
        .trim_end()
        .strip_prefix("pairing code: ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    assert!((6..=12).contains(&code.len()), "{code}");
    assert!(
        code.bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'-')
    );
    // A stranger's message, the code in a group, the code from a stranger in
    // a group, then the owner's private message with the code.
    let secret = Canary::new("stranger-text");
    s.fake
        .push_update(message(STRANGER, STRANGER, "private", secret.as_str()));
    s.fake.push_update(message(OWNER, -100, "group", &code));
    s.fake
        .push_update(message(OWNER, OWNER, "private", &format!("{code} ")));
    s.fake.push_update(message(OWNER, OWNER, "private", &code));
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{rest}\n{stderr}");
    assert!(!secret.found_in(&rest) && !secret.found_in(&stderr));
    assert!(!stderr.contains(&s.token) && !rest.contains(&s.token));

    // Only the owner's id changed: every comment and the layout are kept.
    let after = std::fs::read_to_string(s.home.config()).unwrap();
    assert_eq!(
        after,
        before.replacen(
            "owner_user_id = 0                        #",
            &format!("owner_user_id = {OWNER}                        #"),
            1
        )
    );
    // Answered the owner; every update read is confirmed, so none is left
    // for a later serve; nothing was stored (no store was even opened).
    let sent = s.fake.calls_of("sendMessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].params["chat_id"], OWNER);
    assert_eq!(sent[0].params["text"], "Paired.");
    assert_eq!(s.fake.pending_updates(), 0);
    assert!(!s.home.path().join(".thestream/store.db").exists());
}

#[test]
fn pair_timeout_leaves_the_config_byte_identical() {
    let s = setup();
    let before = std::fs::read(s.home.config()).unwrap();
    s.fake
        .push_update(message(STRANGER, STRANGER, "private", "WRONG-CODE"));
    let ran = s.run(&["pair", "--timeout", "2"]);
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.starts_with("pairing code: "), "{}", ran.stdout);
    assert_eq!(std::fs::read(s.home.config()).unwrap(), before);
    assert!(s.fake.calls_of("sendMessage").is_empty());
    assert_eq!(s.fake.pending_updates(), 0);
}

#[test]
fn pair_refuses_when_an_owner_is_set_or_in_webhook_mode() {
    let s = setup();
    let original = std::fs::read_to_string(s.home.config()).unwrap();
    for (from, to) in [
        ("owner_user_id = 0", "owner_user_id = 5"),
        ("mode = \"polling\"", "mode = \"webhook\""),
    ] {
        std::fs::write(s.home.config(), original.replacen(from, to, 1)).unwrap();
        let ran = s.run(&["pair", "--timeout", "2"]);
        assert_eq!(ran.code, 2, "{to}: {}", ran.stderr);
        assert!(ran.stdout.is_empty(), "{}", ran.stdout);
    }
    assert!(s.fake.calls().is_empty());
}

#[test]
fn serve_without_an_owner_refuses_and_names_pair() {
    let s = setup();
    let ran = s.run(&["serve", "--drain"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("thestream pair"), "{}", ran.stderr);
    assert!(s.fake.calls().is_empty());
}

/// A serve holds the store's lease (here this test process holds it, as
/// a serve on another machine would): pair refuses, naming the holder.
#[test]
fn pair_refuses_while_a_serve_holds_the_store() {
    let s = setup();
    let store = s.home.store();
    let holder = stream_store::LeaseHolder {
        host: "the-other-box".into(),
        pid: 4242,
        started: "2026-01-02T03:04:05Z".into(),
    };
    let lease = match store.try_lease(holder).unwrap() {
        stream_store::LeaseAttempt::Held(lease) => lease,
        stream_store::LeaseAttempt::Taken(by) => panic!("taken by {by:?}"),
    };
    let ran = s.run(&["pair", "--timeout", "2"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("host the-other-box pid 4242 since 2026-01-02T03:04:05Z"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("stop it, pair"), "{}", ran.stderr);
    assert!(s.fake.calls().is_empty());
    drop(lease);
}
