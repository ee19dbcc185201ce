//! `thestream activate`: the recovery procedure (docs/design.md §17) end to end — the real
//! `thestream` (activate and a spawned `serve`) and `thestream-worker`
//! against the loopback Bot API and scripted provider, read back through the
//! CLI and the servers' records. Polling loops read the store file directly
//! (read-only) to know when a step has happened.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stream_core::SourceName;
use stream_core::payload::ProviderApi;
use stream_store::{EventQuery, Read, SqliteStore};
use stream_telegram::{BotApi, BotToken, ClientOptions, WebhookSecret};
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::{BOT_TOKEN, OWNER, Stack};

use crate::common::{configure_worker, sqlite_stack as stack};

mod refusals;
mod remote;

const V17: &str = "declarations/telegram-conversation.v17.yaml";
const V18: &str = "declarations/telegram-conversation.v18.yaml";
const WEBHOOK_SECRET: &str = "activation-webhook-secret";
const STEPS: [&str; 8] = [
    "verify-bundle",
    "freeze-ingress",
    "stop-consumer",
    "install-declaration",
    "set-progress",
    "await-ready",
    "register-menu",
    "resume-ingress",
];

/// Points the config's `agent.declaration` at `file`.
fn configure(s: &Stack, file: &str) {
    let path = s.path().join("thestream.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let config = config.replace(V17, file).replace(V18, file);
    std::fs::write(path, config).unwrap();
}

/// Webhook mode on a free loopback port; returns the URL Telegram posts to.
fn configure_webhook(s: &Stack) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = s.path().join("thestream.toml");
    let config = std::fs::read_to_string(&path).unwrap();
    let config = config
        .replace("mode = \"polling\"", "mode = \"webhook\"")
        .replace(
            "webhook_listen = \"127.0.0.1:8443\"",
            &format!("webhook_listen = \"127.0.0.1:{port}\""),
        );
    std::fs::write(path, config).unwrap();
    format!("http://127.0.0.1:{port}/telegram/webhook")
}

fn command(s: &Stack, args: &[&str]) -> Command {
    let mut cmd = s.command(args);
    cmd.env("TELEGRAM_WEBHOOK_SECRET", WEBHOOK_SECRET);
    cmd
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(s: &Stack, args: &[&str]) -> Ran {
    let out = command(s, args).output().unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn drain(s: &Stack) {
    let ran = run(s, &["serve", "--drain"]);
    assert_eq!(ran.code, 0, "drain failed:\n{}\n{}", ran.stdout, ran.stderr);
}

/// A `thestream` child (serve or activate), its logs in a file of the home;
/// killed when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
    out: PathBuf,
}

impl Proc {
    fn spawn(s: &Stack, name: &str, args: &[&str]) -> Self {
        let log = s.path().join(format!("{name}.stderr"));
        let out = s.path().join(format!("{name}.stdout"));
        let child = command(s, args)
            .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        Self { child, log, out }
    }

    fn kill(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// Waits for the exit; its code, stdout and stderr.
    fn finish(mut self, timeout: Duration) -> Ran {
        let deadline = Instant::now() + timeout;
        let code = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "{} did not finish:\n{}",
                self.out.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Ran {
            code,
            stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.log).unwrap_or_default(),
        }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.kill();
        }
    }
}

fn wait_until(what: &str, timeout: Duration, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn store(s: &Stack) -> SqliteStore {
    SqliteStore::open(&s.store_path()).unwrap()
}

/// The steps recorded so far, in order.
fn recorded_steps(store: &SqliteStore) -> Vec<String> {
    store
        .events(&EventQuery::source_after(
            &SourceName::fixed(SourceName::ACTIVATION),
            0,
        ))
        .unwrap()
        .iter()
        .map(|e| {
            let payload: Value = serde_json::from_slice(&e.event.payload).unwrap();
            payload["step"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// Message text → the agent versions of the completed runs answering it.
fn answered_by(events: &[Value]) -> Vec<(String, Vec<(String, u64)>)> {
    of_type(events, "stream.telegram.message.received")
        .iter()
        .map(|m| {
            let runs = of_type(events, "stream.thought.agent.run.completed")
                .into_iter()
                .filter(|r| r["payload"]["triggerEventId"] == m["id"])
                .map(|r| {
                    (
                        r["payload"]["agentId"].as_str().unwrap().to_owned(),
                        r["payload"]["agentVersion"].as_u64().unwrap(),
                    )
                })
                .collect();
            (
                m["payload"]["text"].as_str().unwrap_or_default().to_owned(),
                runs,
            )
        })
        .collect()
}

/// Each step once, in order, each parented to the one before; returns the
/// step events.
fn assert_steps_once_in_order(events: &[Value]) -> Vec<Value> {
    let steps: Vec<Value> = of_type(events, "stream.system.activation.step")
        .into_iter()
        .cloned()
        .collect();
    let names: Vec<&str> = steps
        .iter()
        .map(|e| e["payload"]["step"].as_str().unwrap())
        .collect();
    assert_eq!(names, STEPS, "each step recorded once, in order");
    assert_eq!(steps[0]["parent"], Value::Null);
    for pair in steps.windows(2) {
        assert_eq!(
            pair[1]["parent"], pair[0]["id"],
            "parented to the step before"
        );
    }
    let ids: Vec<&Value> = steps
        .iter()
        .map(|e| &e["payload"]["activationId"])
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one activation id");
    for step in &steps {
        assert_eq!(step["sensitive"], false);
        assert_eq!(step["authorship"], "system");
    }
    steps
}

fn no_proposals(events: &[Value]) {
    for e in events {
        let ty = e["type"].as_str().unwrap();
        assert!(!ty.ends_with(".proposed"), "a proposal was written: {ty}");
    }
}

fn memory(s: &Stack) -> Vec<u8> {
    std::fs::read(s.path().join("context/memory.md")).unwrap()
}

/// A v17 serve running (spawned), one reply already delivered by it.
fn running_v17(s: &Stack) -> Proc {
    configure(s, V17);
    let serve = Proc::spawn(s, "serve-v17", &["serve"]);
    s.say("Before the freeze: one.");
    s.script(Reply::completion(ScriptedCompletion::text(
        "v17 answers one.",
    )));
    wait_until("v17's first reply", Duration::from_secs(30), || {
        s.sent_texts().iter().any(|t| t == "v17 answers one.")
    });
    serve
}

/// The owner writes while v17 is still answering slowly: the activation's
/// stop-consumer must wait for that run.
fn v17_in_flight(s: &Stack, delay: Duration) {
    s.say("Before the freeze: two.");
    s.script(Reply::completion(ScriptedCompletion::text("v17 answers two.")).delayed(delay));
    wait_until("v17's second request", Duration::from_secs(30), || {
        s.provider.requests().len() == 2
    });
}

const FOCUS_USAGE_START: &str = "Usage: /focus <description>";

/// The whole recovery over a running v17 serve: what arrived before the
/// freeze is answered by v17, what arrives during the activation is kept
/// and answered by v18 after the resume, nothing twice; the menu gets
/// `focus`; `--skip-help-notice` sends no notice; bare `/focus` gets the
/// usage reply; no proposal, `memory.md` untouched.
#[test]
fn activating_v18_over_a_running_v17_serve_loses_and_duplicates_nothing() {
    let s = stack(ProviderApi::OpenaiChat);
    let memory_before = memory(&s);
    let serve = running_v17(&s);
    v17_in_flight(&s, Duration::from_millis(2500));

    let activate = Proc::spawn(
        &s,
        "activate",
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    let db = store(&s);
    wait_until("the freeze", Duration::from_secs(30), || {
        recorded_steps(&db).len() >= 2
    });
    // Sent while ingress is frozen and v17 is still busy.
    s.say("During the activation.");
    s.script(Reply::completion(ScriptedCompletion::text("v18 answers.")));
    s.say("/focus");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        recorded_steps(&db).len() < 4,
        "stop-consumer waits for v17's run in flight"
    );

    let ran = activate.finish(Duration::from_secs(60));
    assert_eq!(
        ran.code, 0,
        "activate failed:\n{}\n{}",
        ran.stdout, ran.stderr
    );
    for step in STEPS {
        assert!(
            ran.stdout.contains(&format!("{step}: done")),
            "{step} in:\n{}",
            ran.stdout
        );
    }
    assert!(ran.stdout.contains("no help notice"), "{}", ran.stdout);
    wait_until("v18's replies", Duration::from_secs(30), || {
        let sent = s.sent_texts();
        sent.iter().any(|t| t == "v18 answers.")
            && sent.iter().any(|t| t.starts_with(FOCUS_USAGE_START))
    });
    drop(serve);

    let events = s.events().unwrap();
    let answered = answered_by(&events);
    let conversation = |v: u64| vec![("telegram-conversation".to_owned(), v)];
    assert_eq!(
        answered,
        vec![
            ("Before the freeze: one.".into(), conversation(17)),
            ("Before the freeze: two.".into(), conversation(17)),
            ("During the activation.".into(), conversation(18)),
            ("/focus".into(), vec![("telegram-replies".into(), 2)]),
        ],
        "each message answered once, by the version active when it arrived"
    );
    // The bare /focus was taken by the v18 consumer (its progress moved past it).
    let sent = s.sent_texts();
    assert_eq!(sent.len(), 4, "one reply per message, none twice: {sent:?}");
    assert_eq!(
        &sent[..3],
        ["v17 answers one.", "v17 answers two.", "v18 answers."]
    );
    assert!(sent[3].starts_with(FOCUS_USAGE_START));
    assert!(
        !sent.iter().any(|t| t.contains("command menu")),
        "--skip-help-notice sends no notice"
    );
    assert_eq!(
        s.provider.requests().len(),
        3,
        "bare /focus needs no provider"
    );

    // The messages sent while frozen were stored only after the freeze's head.
    let steps = assert_steps_once_in_order(&events);
    let head = steps[1]["payload"]["frozenHeadSeq"].as_u64().unwrap();
    let received = of_type(&events, "stream.telegram.message.received");
    assert!(received[1]["seq"].as_u64().unwrap() <= head);
    assert!(received[2]["seq"].as_u64().unwrap() > head);
    assert!(received[3]["seq"].as_u64().unwrap() > head);

    // The menu: v18's commands, registered once.
    let menu = s.telegram.calls_of("setMyCommands");
    assert_eq!(menu.len(), 1);
    let commands = s.telegram.commands();
    let names: Vec<&str> = commands
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["focus", "correct", "help"]);

    // Activation writes no proposal and changes no memory.
    no_proposals(&events);
    assert_eq!(memory(&s), memory_before, "memory.md byte-identical");
}

/// SIGKILL of `activate` after some steps; a rerun continues from the first
/// step not recorded and completes with each step recorded once. Without
/// `--skip-help-notice` the notice reaches the owner once.
#[test]
fn a_killed_activation_resumes_and_records_each_step_once() {
    for kill_after in [2usize, 5] {
        let s = stack(ProviderApi::OpenaiChat);
        let memory_before = memory(&s);
        let serve = running_v17(&s);
        v17_in_flight(&s, Duration::from_millis(1500));
        let mut first = Proc::spawn(&s, "activate-1", &["activate", "--declaration", V18]);
        let db = store(&s);
        wait_until("the steps before the kill", Duration::from_secs(30), || {
            recorded_steps(&db).len() >= kill_after
        });
        first.kill();
        let before = recorded_steps(&db);
        assert!(before.len() >= kill_after && before.len() <= STEPS.len());

        let ran = run(&s, &["activate", "--declaration", V18]);
        assert_eq!(ran.code, 0, "rerun failed:\n{}\n{}", ran.stdout, ran.stderr);
        // (Had the kill landed after the last step, the rerun would only
        // find v18 active.)
        let finished_before_kill = before.len() == STEPS.len();
        assert_eq!(ran.stdout.contains("already active"), finished_before_kill);
        for step in before.iter().filter(|_| !finished_before_kill) {
            assert!(
                ran.stdout.contains(&format!("{step}: skipped")),
                "{step} resumed, not redone:\n{}",
                ran.stdout
            );
        }
        let events = s.events().unwrap();
        assert_steps_once_in_order(&events);
        let notices: Vec<String> = s
            .sent_texts()
            .into_iter()
            .filter(|t| t.starts_with("The command menu was updated"))
            .collect();
        assert_eq!(
            notices,
            ["The command menu was updated: /focus, /correct, /help."]
        );
        let notice = s
            .sent()
            .into_iter()
            .find(|c| {
                c.params["text"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("The command menu")
            })
            .unwrap();
        assert_eq!(notice.params["chat_id"], json!(OWNER));

        // v18 serves after the resume.
        s.say("After the activation.");
        s.script(Reply::completion(ScriptedCompletion::text("v18 is here.")));
        wait_until("v18's reply", Duration::from_secs(30), || {
            s.sent_texts().iter().any(|t| t == "v18 is here.")
        });
        drop(serve);
        let events = s.events().unwrap();
        let answered = answered_by(&events);
        assert_eq!(
            answered.last().unwrap().1,
            [("telegram-conversation".into(), 18)]
        );
        assert!(answered.iter().all(|(_, runs)| runs.len() == 1));
        no_proposals(&events);
        assert_eq!(memory(&s), memory_before);

        // Activating again what is active converges.
        let again = run(&s, &["activate", "--declaration", V18]);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert!(again.stdout.contains("already active"), "{}", again.stdout);
    }
}

/// A serve that died is detected, not waited for: stop-consumer refuses
/// while the old consumer left a message from before the freeze unanswered
/// (exit 1), and continues once `serve --drain` answered it. With no serve
/// running, activation stops at await-ready (exit 1, nothing advertised,
/// ingress still frozen); `serve` keeps refusing the old configured
/// version; a serve started with v18 configured reports ready and a rerun
/// finishes.
#[test]
fn a_dead_or_missing_serve_is_detected_and_reruns_finish_the_activation() {
    let s = stack(ProviderApi::OpenaiChat);
    configure(&s, V17);
    let mut serve = Proc::spawn(&s, "serve-v17", &["serve"]);
    s.say("Hello, v17.");
    s.script(
        Reply::completion(ScriptedCompletion::text("too late")).delayed(Duration::from_secs(3)),
    );
    wait_until("v17's request", Duration::from_secs(30), || {
        s.provider.requests().len() == 1
    });
    serve.kill();

    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains(
            "no serve is running telegram-conversation@17 and it has 1 unanswered messages"
        ),
        "{}",
        ran.stderr
    );
    let db = store(&s);
    assert_eq!(recorded_steps(&db), STEPS[..2]);
    // The operator answers it with the old version, ingress still frozen.
    s.script(Reply::completion(ScriptedCompletion::text("v17 here.")));
    drain(&s);
    assert_eq!(s.sent_texts(), ["v17 here."]);

    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains("await-ready: no serve is running"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stdout
            .contains("stop-consumer: done: telegram-conversation@17 was not running"),
        "{}",
        ran.stdout
    );
    assert_eq!(recorded_steps(&db), STEPS[..5]);
    assert!(
        s.telegram.calls_of("setMyCommands").is_empty(),
        "nothing advertised"
    );
    assert_eq!(
        db.control("ingress").unwrap(),
        Some(json!({"state": "frozen"}))
    );

    // The owner writes meanwhile: Telegram keeps it.
    s.say("While nobody serves.");
    s.script(Reply::completion(ScriptedCompletion::text(
        "v18 caught up.",
    )));

    let refused = run(&s, &["serve", "--drain"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("thestream activate"),
        "{}",
        refused.stderr
    );

    // Another activation cannot start while this one is incomplete.
    let other = run(
        &s,
        &["activate", "--declaration", V17, "--skip-help-notice"],
    );
    assert_eq!(other.code, 3, "{}", other.stderr);
    assert!(other.stderr.contains("is incomplete"), "{}", other.stderr);
    assert_eq!(recorded_steps(&db), STEPS[..5]);

    configure(&s, V18);
    // A serve running another worker bundle than the one verified is not ready.
    let worker = stream_testkit::bin::binary("thestream-worker").unwrap();
    let other_bundle = s.path().join("thestream-worker-rebuilt");
    std::fs::copy(&worker, &other_bundle).unwrap();
    let mut bytes = std::fs::read(&other_bundle).unwrap();
    bytes.push(0);
    std::fs::write(&other_bundle, bytes).unwrap();
    configure_worker(&s, &other_bundle);
    let wait_status = |serve: &Proc| {
        wait_until("the v18 serve's status", Duration::from_secs(30), || {
            let status = db
                .control("consumer-status:telegram-conversation@18")
                .unwrap();
            status.is_some_and(|st| st["process"]["pid"] == json!(serve.child.id()))
        });
    };
    let serve = Proc::spawn(&s, "serve-v18-other-bundle", &["serve"]);
    wait_status(&serve);
    let mismatch = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(mismatch.code, 3, "{}\n{}", mismatch.stdout, mismatch.stderr);
    assert!(
        mismatch.stderr.contains("another worker bundle"),
        "{}",
        mismatch.stderr
    );
    assert!(
        s.telegram.calls_of("setMyCommands").is_empty(),
        "nothing advertised"
    );
    drop(serve);

    configure_worker(&s, &worker);
    let serve = Proc::spawn(&s, "serve-v18", &["serve"]);
    wait_status(&serve);
    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(
        ran.code,
        0,
        "{}\n{}\n{}",
        ran.stdout,
        ran.stderr,
        serve.logs()
    );
    for step in &STEPS[..5] {
        assert!(
            ran.stdout.contains(&format!("{step}: skipped")),
            "{}",
            ran.stdout
        );
    }
    for step in &STEPS[5..] {
        assert!(
            ran.stdout.contains(&format!("{step}: done")),
            "{}",
            ran.stdout
        );
    }
    wait_until("v18's reply", Duration::from_secs(30), || {
        s.sent_texts().iter().any(|t| t == "v18 caught up.")
    });
    drop(serve);
    let events = s.events().unwrap();
    assert_steps_once_in_order(&events);
    let answered = answered_by(&events);
    assert_eq!(
        answered,
        vec![
            (
                "Hello, v17.".into(),
                vec![("telegram-conversation".into(), 17)]
            ),
            (
                "While nobody serves.".into(),
                vec![("telegram-conversation".into(), 18)]
            ),
        ]
    );
    assert_eq!(s.sent_texts(), ["v17 here.", "v18 caught up."]);
}
