//! From inside the sandbox, every escape fails; each test also runs the same
//! operation without the sandbox, to show the probe would otherwise succeed.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use serde_json::Value;
use stream_sandbox::Ending;

use crate::common::*;

#[test]
fn opening_a_file_fails() {
    assert_denied(&["open-file", "/etc/hostname"]);
    assert_allowed_unsandboxed(&["open-file", "/etc/hostname"]);
}

#[test]
fn creating_a_file_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("escape");
    let path = path.to_str().unwrap();
    assert_denied(&["create-file", path]);
    assert!(!dir.path().join("escape").exists());
}

#[test]
fn listing_root_fails() {
    assert_denied(&["list-root"]);
    assert_allowed_unsandboxed(&["list-root"]);
}

#[test]
fn connecting_to_a_loopback_listener_fails_and_nothing_is_accepted() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();

    assert_denied(&["connect", &port]);
    let accepted = listener.accept();
    assert_eq!(
        accepted.map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the sandboxed probe reached the listener"
    );

    // Control: without the sandbox the same probe connects.
    assert_allowed_unsandboxed(&["connect", &port]);
    assert!(listener.accept().is_ok(), "control connection not accepted");
}

#[test]
fn execve_of_bin_true_fails() {
    assert_denied(&["exec"]);
    // Control: without the sandbox the probe becomes /bin/true, prints
    // nothing and exits 0.
    let control = run(&["--no-sandbox", "exec"]);
    assert!(control.line.is_none());
    assert_eq!(control.ended.ending, Ending::Exited { code: 0 });
}

#[test]
fn reading_proc_self_environ_fails() {
    assert_denied(&["read-environ"]);
    assert_allowed_unsandboxed(&["read-environ"]);
}

#[test]
fn forking_fails() {
    assert_denied(&["fork"]);
    assert_allowed_unsandboxed(&["fork"]);
}

#[test]
fn ptrace_fails() {
    assert_denied(&["ptrace"]);
}

/// A pipe whose write end is *not* close-on-exec, as a careless parent would
/// leave it. The read end is non-blocking: other tests' children may also
/// inherit the write end, so "nothing arrived" is checked as `EAGAIN`.
fn leaky_pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: a live two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe just returned these two descriptors; we own them.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETFL on a descriptor we own.
    unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    (read, write)
}

fn assert_nothing_arrived(read: &OwnedFd) {
    let mut buf = [0u8; 64];
    // SAFETY: a live buffer and its length.
    let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert_eq!(
        (n, errno),
        (-1, Some(libc::EAGAIN)),
        "the probe wrote to an inherited descriptor"
    );
}

#[test]
fn writing_to_an_inherited_fd_fails() {
    let (read, write) = leaky_pipe();
    let fd = write.as_raw_fd().to_string();
    let run = assert_denied(&["inherited-fd", &fd]);
    assert_nothing_arrived(&read);
    // spawn() left nothing to inherit.
    let line = run.line.unwrap();
    assert_eq!(
        line["enforcement"]["fds"]["inheritedClosed"],
        Value::from(0)
    );
}

/// The worker side alone: launched by a careless parent (plain `Command`,
/// the fd deliberately kept open across exec), `enter` closes what it
/// inherited before anything else and reports it.
#[test]
fn enter_closes_descriptors_a_careless_launcher_left_open() {
    let (read, write) = leaky_pipe();
    let raw = write.as_raw_fd();
    let mut command = Command::new(probe_path());
    command
        .args(["inherited-fd", &raw.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: one async-signal-safe fcntl between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::fcntl(raw, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let line: Value = serde_json::from_slice(&output.stdout).unwrap();
    enforcement_of(&line);
    assert_eq!(line["ok"], Value::Bool(false));
    let closed = line["enforcement"]["fds"]["inheritedClosed"]
        .as_u64()
        .unwrap();
    assert!(closed >= 1, "enter reported {closed} inherited descriptors");
    assert_nothing_arrived(&read);
}
