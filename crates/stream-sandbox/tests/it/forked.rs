//! Workers made by a fork server (`stream_sandbox::fork`): each child ends
//! with a worker's whole sandbox, in namespaces of its own, and is the
//! caller's child; the server itself is denied what a worker is; a server
//! that answers a pid it did not make, or is dead, is refused.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use stream_sandbox::fork::PidRefusal;
use stream_sandbox::{Ending, ForkServer, SpawnError, SpawnLimits, verify};
use stream_testkit::procs;

use crate::common::*;

const READY_WAIT: Duration = Duration::from_secs(20);

fn server(args: &[&str]) -> Result<ForkServer, SpawnError> {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    ForkServer::start(&probe_path(), &args, READY_WAIT)
}

/// Forks a child, gives it `line` as its operation, returns its answer.
fn forked(server: &mut ForkServer, line: &str) -> ProbeRun {
    let mut child = server.fork(&limits()).expect("fork");
    child.write_line(line.as_bytes()).expect("write op");
    answer(child)
}

#[test]
fn a_forked_child_reports_a_spawned_worker_s_sandbox() {
    let spawned = enforcement_of(&run(&["enforcement"]).line.expect("spawned line"));
    let mut server = server(&["--fork-server"]).expect("fork server");
    for _ in 0..3 {
        let run = forked(&mut server, "enforcement");
        let line = run.line.expect("forked line");
        let child = enforcement_of(&line);
        assert_eq!(child.rlimits.processes, 0);
        assert_eq!(child.namespaces, spawned.namespaces);
        assert_eq!(
            child.seccomp.allowed_syscalls,
            spawned.seccomp.allowed_syscalls
        );
        assert_eq!(child.rlimits, spawned.rlimits);
        assert!(child.no_new_privs && !child.dumpable);
        assert!(verify(&child, false).is_ok());
    }
}

#[test]
fn a_forked_child_is_denied_what_a_worker_is_denied() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let created = std::env::temp_dir().join(format!("forked-probe-{}", std::process::id()));
    let ops = [
        "open-file /etc/hostname".to_owned(),
        format!("create-file {}", created.display()),
        "list-root".to_owned(),
        "read-environ".to_owned(),
        format!("connect {port}"),
        "exec".to_owned(),
        "fork".to_owned(),
        "ptrace".to_owned(),
    ];
    let mut server = server(&["--fork-server"]).expect("fork server");
    for op in ops {
        let line = forked(&mut server, &op).line.expect("forked line");
        enforcement_of(&line);
        assert_eq!(line["ok"], Value::Bool(false), "{op} must fail: {line}");
        assert_eq!(line["errno"], Value::from(libc::EPERM), "{op}: {line}");
    }
    assert!(!created.exists());
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "nothing connected");
}

/// Like a spawned worker: an empty environment, and nothing open but 0-2
/// (the server's socket and the pipes' other copies are closed; the
/// descriptor list is compared where this process may read it).
#[test]
fn a_forked_child_has_an_empty_environment_and_only_fds_0_to_2() {
    let mut server = server(&["--fork-server"]).expect("fork server");
    let line = forked(&mut server, "env-count").line.expect("forked line");
    assert_eq!(line["value"], Value::from(0), "{line}");

    let mut child = server.fork(&limits()).expect("fork");
    child.write_line(b"hang").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(entries) = std::fs::read_dir(format!("/proc/{}/fd", child.pid())) {
        let mut fds: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        fds.sort();
        assert_eq!(fds, ["0", "1", "2"]);
    }
    child.close_stdin();
    child.wait(Duration::from_secs(20)).unwrap();
}

/// The fork server's own allowlist is wider than a worker's (it forks), but
/// none of the escapes: a plain `fork` (other clone flags) is denied too.
#[test]
fn the_fork_server_itself_is_denied_files_network_exec_fork_and_trace() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    for op in [
        vec!["open-file", "/etc/hostname"],
        vec!["list-root"],
        vec!["read-environ"],
        vec!["connect", &port],
        vec!["exec"],
        vec!["fork"],
        vec!["ptrace"],
    ] {
        let mut args = vec!["--as-fork-server"];
        args.extend(op);
        assert_denied(&args);
    }
}

/// `/proc/PID/ns/WHICH`, when this process may read it: the children and
/// the server are not dumpable, so only a process with `CAP_SYS_PTRACE`
/// (root, here) may.
fn ns(pid: u32, which: &str) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/{which}")).ok()
}

/// Two children at once: each is this process's child, and each has its
/// own user, network, mount and IPC namespaces, apart from its sibling's,
/// the server's and ours (compared where this process may read them).
#[test]
fn forked_children_are_ours_and_do_not_share_namespaces() {
    let spawned = enforcement_of(&run(&["enforcement"]).line.expect("spawned line"));
    let mut server = server(&["--fork-server"]).expect("fork server");
    let server_pid = u32::try_from(server.pid()).unwrap();
    let mut one = server.fork(&limits()).expect("fork one");
    let mut two = server.fork(&limits()).expect("fork two");
    // `hang` reads stdin to end-of-file: both children are alive and
    // past their narrowing until we close it.
    for child in [&mut one, &mut two] {
        child.write_line(b"hang").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let pids = [one.pid(), two.pid()].map(|p| u32::try_from(p).unwrap());
    for pid in pids {
        assert_eq!(
            procs::parent_of(pid),
            Some(std::process::id()),
            "the child is ours"
        );
    }
    let entered = [
        ("user", spawned.namespaces.user),
        ("net", spawned.namespaces.network),
        ("mnt", spawned.namespaces.mount),
        ("ipc", spawned.namespaces.ipc),
    ];
    for (which, entered) in entered {
        let [a, b] = pids.map(|pid| ns(pid, which));
        let (Some(a), Some(b), true) = (a, b, entered) else {
            // Not entered, or not ours to read: the children's reports
            // (each `unshare` it made succeeded) are checked by
            // `a_forked_child_reports_a_spawned_worker_s_sandbox`.
            continue;
        };
        assert_ne!(a, b, "{which}: siblings share");
        assert_ne!(Some(&a), ns(std::process::id(), which).as_ref(), "{which}");
        assert_ne!(Some(&a), ns(server_pid, which).as_ref(), "{which}");
    }
    for mut child in [one, two] {
        child.close_stdin();
        let line = child.read_line(Duration::from_secs(20)).unwrap().unwrap();
        let line: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(line["ok"], Value::Bool(true), "{line}");
        child.wait(Duration::from_secs(20)).unwrap();
    }
}

/// A child whose attempt panics exits with a Rust panic's status, and the
/// server goes on forking.
#[test]
fn a_child_that_panics_exits_and_the_server_serves_on() {
    let mut server = server(&["--fork-server"]).expect("fork server");
    let run = forked(&mut server, "panic");
    assert_eq!(run.line, None);
    assert_eq!(run.ended.ending, Ending::Exited { code: 101 });
    let line = forked(&mut server, "enforcement").line.expect("next child");
    enforcement_of(&line);
}

#[test]
fn a_pid_the_server_did_not_make_is_refused() {
    for (whom, why) in [
        ("init", PidRefusal::NotOurChild),
        ("self", PidRefusal::ServerItself),
    ] {
        let mut server = server(&["--lying-fork-server", whom]).expect("lying server");
        let err = server.fork(&limits()).expect_err(whom);
        assert!(
            matches!(err, SpawnError::PidRefused { refusal } if refusal == why),
            "{whom}: {err}"
        );
    }
}

/// A server that answers the pid of a worker we already hold (our child,
/// so the child check alone would take it) is refused, and the worker
/// lives on.
#[test]
fn a_pid_of_a_worker_in_use_is_refused() {
    let mut honest = server(&["--fork-server"]).expect("fork server");
    let mut held = honest.fork(&limits()).expect("fork");
    held.write_line(b"hang").unwrap();
    let held_pid = held.pid();
    let mut liar = server(&["--lying-fork-server", &held_pid.to_string()]).expect("liar");
    let err = liar
        .fork_among(&limits(), &|pid| pid == held_pid)
        .expect_err("in use");
    assert!(
        matches!(
            err,
            SpawnError::PidRefused {
                refusal: PidRefusal::InUse
            }
        ),
        "{err}"
    );
    held.close_stdin();
    let line = held.read_line(Duration::from_secs(20)).unwrap().unwrap();
    let line: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        line["ok"],
        Value::Bool(true),
        "the held worker lived on: {line}"
    );
    held.wait(Duration::from_secs(20)).unwrap();
}

/// A server that takes the request and never answers: the fork fails
/// within the wall clock (here shorter than the answer's own bound) instead
/// of waiting for it.
#[test]
fn a_fork_server_that_does_not_answer_fails_the_fork() {
    let mut server = server(&["--lying-fork-server", "mute"]).expect("mute server");
    let limits = SpawnLimits {
        wall_clock: Duration::from_millis(300),
        ..limits()
    };
    let err = server.fork(&limits).expect_err("no answer");
    assert!(matches!(err, SpawnError::Pipe { .. }), "{err}");
}

#[test]
fn a_dead_fork_server_fails_the_fork() {
    let mut server = server(&["--fork-server"]).expect("fork server");
    // SAFETY: a signal to the live server, our child.
    assert_eq!(unsafe { libc::kill(server.pid(), libc::SIGKILL) }, 0);
    std::thread::sleep(Duration::from_millis(100));
    assert!(server.fork(&limits()).is_err());
}

#[test]
fn a_binary_that_is_not_a_fork_server_is_refused() {
    assert!(server(&["enforcement"]).is_err());
}

/// Siblings do not share the server's stack-protector canary: each child
/// has `AT_RANDOM` bytes of its own, and runs with the canary glibc derives
/// from them (the first word, lowest byte zero), as a fresh process does.
#[test]
fn forked_children_have_distinct_at_random_bytes() {
    let mut server = server(&["--fork-server"]).expect("fork server");
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        let line = forked(&mut server, "at-random").line.expect("forked line");
        let value = &line["value"];
        let at_random = value["atRandom"].as_str().expect("atRandom").to_owned();
        assert_eq!(at_random.len(), 32);
        if let Some(canary) = value["canary"].as_str() {
            assert_eq!(canary, format!("00{}", &at_random[2..16]), "{line}");
        }
        assert!(seen.insert(at_random), "two children share AT_RANDOM");
    }
}
