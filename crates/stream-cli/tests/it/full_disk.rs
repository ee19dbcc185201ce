//! A full disk during turns: nothing is acknowledged to Telegram that was not
//! stored, and once space returns every message is answered exactly once.
//! The data dir lives on a small tmpfs mounted in a user + mount namespace;
//! `thestream` runs inside it (`nsenter`), this test reaches the mount's
//! files through `/proc/PID/root`. Where this kernel or sandbox cannot mount
//! one, the test says so and is skipped.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::{API_KEY, BOT_TOKEN, Stack};

use crate::common::{Run, sqlite_stack as stack};

/// A process holding a tmpfs mount in its own namespaces.
struct Tmpfs {
    holder: Child,
    /// The mount point inside the namespace.
    point: PathBuf,
    /// The mount point as seen from here.
    root: PathBuf,
}

impl Tmpfs {
    /// Mounts `size` of tmpfs on `point`; `None` (after saying why) when it
    /// cannot be done here.
    fn mount(point: &Path, size: &str) -> Option<Self> {
        let ready = point.join(".mounted");
        let script = format!(
            "mount -t tmpfs -o size={size},mode=0700 tmpfs '{p}' && touch '{p}/.mounted' && exec sleep 600",
            p = point.display()
        );
        let holder = Command::new("unshare")
            .args(["--user", "--map-root-user", "--mount", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut holder = match holder {
            Ok(child) => child,
            Err(e) => {
                eprintln!("skipped: cannot run unshare to mount a tmpfs: {e}");
                return None;
            }
        };
        let root = PathBuf::from(format!("/proc/{}/root{}", holder.id(), point.display()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !root.join(".mounted").exists() {
            if let Ok(Some(status)) = holder.try_wait() {
                let mut why = String::new();
                if let Some(mut err) = holder.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut err, &mut why);
                }
                eprintln!("skipped: this machine cannot mount a tmpfs here ({status}): {why}");
                return None;
            }
            if Instant::now() > deadline {
                let _ = holder.kill();
                eprintln!("skipped: the tmpfs mount did not appear");
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!ready.exists(), "the mount is private to its namespace");
        let mut tmpfs = Self {
            holder,
            point: point.to_owned(),
            root,
        };
        // `thestream` must be able to enter the namespaces (nsenter, setns).
        let pid = tmpfs.holder.id().to_string();
        let entered = Command::new("nsenter")
            .args(["-t", &pid, "-U", "-m", "--preserve-credentials", "true"])
            .status();
        match entered {
            Ok(status) if status.success() => Some(tmpfs),
            other => {
                eprintln!("skipped: cannot enter the tmpfs's namespaces here: {other:?}");
                let _ = tmpfs.holder.kill();
                let _ = tmpfs.holder.wait();
                None
            }
        }
    }

    /// Runs `thestream` in the stack's home, inside the mount's namespaces
    /// (SQLite resolves `/proc/PID/root` back to `/`, so it cannot be
    /// reached from outside), with the environment `Stack::run` gives it.
    fn thestream(&self, s: &Stack, args: &[&str]) -> Run {
        self.command(s, args).output().unwrap().into()
    }

    /// The command [`Tmpfs::thestream`] runs.
    fn command(&self, s: &Stack, args: &[&str]) -> Command {
        let pid = self.holder.id().to_string();
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &pid, "-U", "-m", "--preserve-credentials"])
            .arg(format!("--wd={}", s.path().display()))
            .arg(env!("CARGO_BIN_EXE_thestream"))
            .args(args)
            .current_dir(s.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
            .env("OPENAI_API_KEY", API_KEY)
            .env("THESTREAM_LOG", "info");
        cmd
    }

    /// Writes a filler file until the file system refuses more, then gives
    /// `room` bytes back.
    fn fill(&self, room: u64) -> PathBuf {
        let filler = self.root.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        for size in [64 * 1024, 512] {
            loop {
                match file.write(&chunk[..size]) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => panic!("filling the tmpfs: {e}"),
                }
            }
        }
        let len = file.metadata().unwrap().len();
        file.set_len(len.saturating_sub(room)).unwrap();
        file.sync_all().unwrap();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// Mounts an 8 MiB tmpfs in the stack's home and points its data dir there.
fn data_dir_on_tmpfs(s: &Stack) -> Option<Tmpfs> {
    let point = s.path().join("mnt");
    std::fs::create_dir(&point).unwrap();
    let tmpfs = Tmpfs::mount(&point, "8m")?;
    let data = tmpfs.point.join("data");
    let config = s.path().join("thestream.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("data_dir = \".thestream\""));
    std::fs::write(
        &config,
        text.replace(
            "data_dir = \".thestream\"",
            &format!("data_dir = \"{}\"", data.display()),
        ),
    )
    .unwrap();
    Some(tmpfs)
}

/// Owner message id → how many replies answered it.
fn answers(s: &Stack) -> BTreeMap<i64, usize> {
    let mut answered = BTreeMap::new();
    for call in s.sent() {
        let id = call.params["reply_parameters"]["message_id"]
            .as_i64()
            .or_else(|| call.params["reply_to_message_id"].as_i64());
        if let Some(id) = id {
            *answered.entry(id).or_default() += 1;
        }
    }
    answered
}

#[test]
fn a_full_disk_acknowledges_nothing_unstored_and_every_message_is_answered_once_after() {
    let s = stack(ProviderApi::OpenaiChat);
    let Some(tmpfs) = data_dir_on_tmpfs(&s) else {
        return;
    };
    // Every turn may be tried more than once while the disk is full: each
    // attempt that reaches the provider gets an answer.
    for _ in 0..20 {
        s.script(Reply::completion(ScriptedCompletion::text("Noted.")));
    }

    let drain = || tmpfs.thestream(&s, &["serve", "--drain"]);
    let first = s.say("Before the disk fills.");
    let ran = drain();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(answers(&s), BTreeMap::from([(first, 1)]));

    // The disk fills at different points of a turn: before ingress, or
    // with a little room left, during the run, settlement or delivery.
    let mut answered = BTreeMap::from([(first, 1)]);
    let mut refused = 0;
    for (i, room) in [0u64, 8, 24, 64, 160, 400].into_iter().enumerate() {
        let filler = tmpfs.fill(room * 1024);
        let message = s.say(&format!("While full {i}."));
        let full = drain();
        refused += usize::from(full.code != 0);
        let confirmed = s.telegram.pending_updates() == 0;
        assert!(
            answers(&s).values().all(|&n| n == 1),
            "room {room} KiB: nothing answered twice"
        );
        std::fs::remove_file(&filler).unwrap();
        // An update Telegram no longer holds is stored.
        let listed = tmpfs.thestream(
            &s,
            &[
                "events",
                "--json",
                "--type",
                "stream.telegram.message.received",
            ],
        );
        assert_eq!(listed.code, 0, "{}", listed.stderr);
        let stored = listed.stdout.lines().count();
        assert!(
            !confirmed || stored == answered.len() + 1,
            "room {room} KiB: confirmed to Telegram, {stored} messages stored (exit {}): {}",
            full.code,
            full.stderr
        );
        let ran = drain();
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        answered.insert(message, 1);
        assert_eq!(
            answers(&s),
            answered,
            "room {room} KiB: answered exactly once"
        );
    }
    assert!(refused > 0, "the full disk refused at least one drain");
    drop(tmpfs);
}

/// A live `serve` waits a full disk out (docs/operating.md, "A failing
/// disk"): it says once that it refuses new work, keeps running, and once
/// space returns says so and answers what came meanwhile, exactly once.
#[test]
fn a_live_serve_waits_out_a_full_disk_saying_so_and_answers_once_space_returns() {
    let s = stack(ProviderApi::OpenaiChat);
    let Some(tmpfs) = data_dir_on_tmpfs(&s) else {
        return;
    };
    for _ in 0..20 {
        s.script(Reply::completion(ScriptedCompletion::text("Noted.")));
    }
    let log = s.path().join("serve.log");
    let mut serve = tmpfs
        .command(&s, &["serve"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let logged = || std::fs::read_to_string(&log).unwrap();
    let wait = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !done() {
            assert!(Instant::now() < deadline, "no {what}: {}", logged());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let first = s.say("canary-full-3e0 before.");
    wait("first answer", &|| answers(&s).contains_key(&first));

    let filler = tmpfs.fill(0);
    wait("full-disk line", &|| {
        logged().contains("the disk holding the store is full: refusing new work")
    });
    let second = s.say("canary-full-3e0 while full.");
    std::thread::sleep(Duration::from_secs(3));
    assert!(serve.try_wait().unwrap().is_none(), "{}", logged());
    assert!(
        !answers(&s).contains_key(&second),
        "nothing answered unrecorded"
    );

    std::fs::remove_file(&filler).unwrap();
    wait("room line", &|| {
        logged().contains("the disk holding the store has room again: resuming")
    });
    wait("second answer", &|| answers(&s).contains_key(&second));
    // SAFETY: a plain kill(2) of our own child (nsenter execs thestream).
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let status = serve.wait().unwrap();
    assert!(status.success(), "{status:?}: {}", logged());
    assert_eq!(answers(&s), BTreeMap::from([(first, 1), (second, 1)]));
    let text = logged();
    assert_eq!(
        text.matches("the disk holding the store is full").count(),
        1,
        "{text}"
    );
    assert!(!text.contains("canary-full"), "content-dark: {text}");
    drop(tmpfs);
}
