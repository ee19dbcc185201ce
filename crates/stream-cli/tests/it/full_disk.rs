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
        let pid = self.holder.id().to_string();
        Command::new("nsenter")
            .args(["-t", &pid, "-U", "-m", "--preserve-credentials"])
            .arg(format!("--wd={}", s.path().display()))
            .arg(env!("CARGO_BIN_EXE_thestream"))
            .args(args)
            .current_dir(s.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
            .env("OPENAI_API_KEY", API_KEY)
            .env("THESTREAM_LOG", "info")
            .output()
            .unwrap()
            .into()
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
    let point = s.path().join("mnt");
    std::fs::create_dir(&point).unwrap();
    let Some(tmpfs) = Tmpfs::mount(&point, "8m") else {
        return;
    };
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
