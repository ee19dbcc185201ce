//! One serve per bot: a second `serve` of one store exits 2 naming the
//! first (host, pid, start); `serve --standby` waits, saying for whom, and
//! takes over after a SIGKILL of the active one while messages arrive,
//! every message answered once; a serve whose PostgreSQL lease session
//! ends exits 1. The PostgreSQL tests skip, saying why, without a server
//! (`stream_store::pgtest`).

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::sqlite_stack;

fn postgres_stack() -> Option<Stack> {
    let url = stream_store::pgtest::fresh_url()?;
    let mut s = sqlite_stack(ProviderApi::OpenaiChat);
    s.use_postgres(&url).unwrap();
    Some(s)
}

/// A `serve` (with `extra` arguments) whose stderr goes to a file.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(s: &Stack, name: &str, extra: &[&str]) -> Self {
        let log = s.path().join(format!("{name}.stderr"));
        let mut args = vec!["serve"];
        args.extend_from_slice(extra);
        let child = s
            .command(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self { child, log }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn sigkill(&mut self) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        self.child.wait().unwrap();
    }

    /// Waits for it to exit on its own, within `limit`.
    fn exit_code_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: a plain kill(2) of our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// Starts a serve and waits until it has answered one message.
fn serving(s: &Stack, name: &str) -> Proc {
    let first = Proc::spawn(s, name, &[]);
    s.script(Reply::completion(ScriptedCompletion::text("Serving.")));
    s.say("Are you there?");
    wait_until("the first reply", Duration::from_secs(60), || {
        !s.sent_texts().is_empty()
    });
    first
}

fn a_second_serve_exits_2_naming_the_first(s: &Stack) {
    let first = serving(s, "first");
    let named = format!("host {} pid {} since ", host(), first.pid());
    for args in [&["serve"][..], &["serve", "--drain"]] {
        let second = s.run(args).unwrap();
        assert_eq!(second.code, 2, "{args:?}: {}", second.stderr);
        assert!(
            second.stderr.contains(&named),
            "{args:?}: {}",
            second.stderr
        );
        assert!(
            second.stderr.contains("serve --standby"),
            "{}",
            second.stderr
        );
        assert!(!second.stderr.contains("canary-"), "{}", second.stderr);
    }
    drop(first);
    // Once it ended, a serve may run again.
    let after = s.run(&["serve", "--drain"]).unwrap();
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert_eq!(s.sent_texts(), ["Serving."], "nothing answered twice");
}

#[test]
fn a_second_serve_on_sqlite_exits_2_naming_the_first() {
    a_second_serve_exits_2_naming_the_first(&sqlite_stack(ProviderApi::OpenaiChat));
}

#[test]
fn a_second_serve_on_postgres_exits_2_naming_the_first() {
    let Some(s) = postgres_stack() else { return };
    a_second_serve_exits_2_naming_the_first(&s);
}

/// The active serve is killed while a run is in flight and the owner goes
/// on writing; the standby, waiting and saying for whom, takes over within
/// the bound (5 s, checked with a margin: 15 s to the first reply it
/// sends) and every message is answered once. Returns the time from the
/// kill to the standby's first reply.
fn a_standby_takes_over_after_a_sigkill(s: &Stack) -> Duration {
    let mut active = serving(s, "active");
    let standby = Proc::spawn(s, "standby", &["--standby"]);
    let waiting = format!("pid {}", active.pid());
    wait_until(
        "the standby to say it waits",
        Duration::from_secs(30),
        || standby.stderr().contains("waiting for the serve lease"),
    );
    assert!(standby.stderr().contains(&waiting), "{}", standby.stderr());

    // A run in flight (the provider answers slowly) when the kill lands.
    s.script(
        Reply::completion(ScriptedCompletion::text("Lost with its serve."))
            .delayed(Duration::from_secs(5)),
    );
    s.say("canary-message-2");
    wait_until("the second request", Duration::from_secs(30), || {
        s.provider.requests().len() == 2
    });
    active.sigkill();
    let killed = Instant::now();
    for reply in ["Second.", "Third.", "Fourth."] {
        s.script(Reply::completion(ScriptedCompletion::text(reply)));
    }
    s.say("canary-message-3");
    std::thread::sleep(Duration::from_millis(300));
    s.say("canary-message-4");
    wait_until("the standby's first reply", Duration::from_secs(15), || {
        s.sent_texts().len() >= 2
    });
    let takeover = killed.elapsed();
    wait_until("every reply", Duration::from_secs(60), || {
        s.sent_texts().len() >= 4
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.sent_texts(),
        ["Serving.", "Second.", "Third.", "Fourth."],
        "every message answered once: {}",
        standby.stderr()
    );
    let events = s.events().unwrap();
    let count = |ty: &str| {
        events
            .iter()
            .filter(|e| e["type"].as_str() == Some(ty))
            .count()
    };
    assert_eq!(count("stream.thought.derived.message.observation"), 4);
    assert_eq!(count("stream.thought.agent.run.completed"), 4);
    assert_eq!(count("stream.telegram.delivery.receipt"), 4);
    assert!(
        !standby.stderr().contains("canary-"),
        "{}",
        standby.stderr()
    );
    takeover
}

#[test]
fn a_standby_on_postgres_takes_over_after_a_sigkill_and_answers_every_message_once() {
    let Some(s) = postgres_stack() else { return };
    let takeover = a_standby_takes_over_after_a_sigkill(&s);
    eprintln!("takeover (kill to the standby's first reply): {takeover:?}");
}

#[test]
fn a_standby_on_sqlite_takes_over_after_a_sigkill_and_answers_every_message_once() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let takeover = a_standby_takes_over_after_a_sigkill(&s);
    eprintln!("takeover (kill to the standby's first reply): {takeover:?}");
}

/// A standby waiting for the lease stops on SIGTERM with exit 0, having
/// served nothing; `--standby` with `--drain` is a usage error.
#[test]
fn a_waiting_standby_stops_on_sigterm_with_exit_0() {
    let s = sqlite_stack(ProviderApi::OpenaiChat);
    let active = serving(&s, "active");
    let mut standby = Proc::spawn(&s, "standby", &["--standby"]);
    wait_until(
        "the standby to say it waits",
        Duration::from_secs(30),
        || standby.stderr().contains("waiting for the serve lease"),
    );
    // SAFETY: a plain kill(2) of our own child.
    unsafe { libc::kill(standby.pid() as i32, libc::SIGTERM) };
    let code = standby.exit_code_within(Duration::from_secs(15));
    assert_eq!(code, Some(0), "{}", standby.stderr());
    assert!(!standby.stderr().contains("took the serve lease"));
    let both = s.run(&["serve", "--standby", "--drain"]).unwrap();
    assert_eq!(both.code, 2, "{}", both.stderr);
    drop(active);
    assert_eq!(s.sent_texts(), ["Serving."]);
}

/// The server ends the lease's session (a lost connection): the serve
/// stops at once with exit 1, saying why, since another may take over.
#[test]
fn a_serve_whose_postgres_lease_session_ends_exits_1() {
    let Some(s) = postgres_stack() else { return };
    let mut active = serving(&s, "active");
    let url = s.database_url().unwrap().to_owned();
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let ended: i64 = stream_store::pgtest::server()
        .unwrap()
        .admin()
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = 'thestream-lease') t",
            &[&db],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "the lease's session was ended");
    let code = active.exit_code_within(Duration::from_secs(15));
    assert_eq!(code, Some(1), "{}", active.stderr());
    assert!(
        active.stderr().contains("the serve lease was lost"),
        "{}",
        active.stderr()
    );
}

/// The benchmark: a standby's takeover, median of 10 SIGKILLs of the
/// active serve (kill to the standby's first reply to a message sent at
/// the kill). Run it with `scripts/with-postgres cargo test -p stream-cli
/// --test it -- --ignored lease::standby_takeover_median_of_ten_kills
/// --nocapture`; it reports, asserting no figure.
#[test]
#[ignore = "a measurement: run on demand"]
fn standby_takeover_median_of_ten_kills() {
    let Some(s) = postgres_stack() else { return };
    let mut active = serving(&s, "serve-0");
    let mut times = Vec::new();
    for round in 1..=10 {
        let standby = Proc::spawn(&s, &format!("serve-{round}"), &["--standby"]);
        wait_until("the standby to wait", Duration::from_secs(30), || {
            standby.stderr().contains("waiting for the serve lease")
        });
        let before = s.sent_texts().len();
        s.script(Reply::completion(ScriptedCompletion::text("Here.")));
        active.sigkill();
        let killed = Instant::now();
        s.say("Still there?");
        wait_until("the standby's reply", Duration::from_secs(30), || {
            s.sent_texts().len() > before
        });
        times.push(killed.elapsed());
        active = standby;
    }
    times.sort();
    let ms: Vec<u128> = times.iter().map(Duration::as_millis).collect();
    eprintln!(
        "standby takeover, kill to first reply (ms, sorted): {ms:?}; median {} ms",
        (ms[4] + ms[5]) / 2
    );
}
