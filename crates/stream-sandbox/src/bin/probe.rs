//! `stream-sandbox-probe`: enters the sandbox, attempts one operation, and
//! prints one line of JSON saying what happened. Used by this crate's tests
//! and benchmark.
//!
//! Usage: `stream-sandbox-probe [--no-sandbox] [--allow-unenforced] OP [ARG]`
//!
//! `--as-fork-server OP [ARG]` enters a fork server's sandbox instead of a
//! worker's and runs OP there. `--fork-server` serves forks
//! (`stream_sandbox::fork`): each child reads one line, `OP [ARG]`, runs it
//! and prints its line with the child's own report. `--lying-fork-server
//! init|self|mute|PID` is a fork server that answers pid 1, its own pid or
//! PID, or never answers.
//!
//! Output: `{"op":…,"ok":bool,"errno":n|null,"value":…,"enforcement":{…}|null,
//! "enterMicros":"…"}` (the time `enter` took, as a string);
//! if entering the sandbox fails, `{"op":…,"sandboxError":"…"}` and exit 3.
//! `at-random` reports the `AT_RANDOM` bytes and the stack-protector canary.
//! `echo` prints back every line it reads, and nothing else, until end-of-file; `flood` and
//! `stderr-flood` write until killed; `exec` prints nothing if it succeeds.

use std::ffi::CStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use serde_json::{Value, json};
use stream_sandbox::{Enforcement, Policy, enter, enter_fork_server};

/// What one operation did: success with a value, or a failure with its errno.
type Outcome = Result<Value, Option<i32>>;

fn io(result: std::io::Result<Value>) -> Outcome {
    result.map_err(|e| e.raw_os_error())
}

fn errno() -> Option<i32> {
    std::io::Error::last_os_error().raw_os_error()
}

fn arg_number(arg: Option<&str>) -> Option<i32> {
    arg.and_then(|a| a.parse().ok())
}

fn run(op: &str, arg: Option<&str>) -> Outcome {
    match op {
        "enforcement" => Ok(Value::Null),
        "open-file" => io(std::fs::File::open(arg.unwrap_or("/etc/hostname")).map(|_| json!(true))),
        "create-file" => io(
            std::fs::File::create(arg.unwrap_or("/tmp/stream-sandbox-probe")).map(|_| json!(true)),
        ),
        "list-root" => io(std::fs::read_dir("/").map(|d| json!(d.count()))),
        "read-environ" => io(std::fs::read("/proc/self/environ").map(|b| json!(b.len()))),
        "env-count" => Ok(json!(std::env::vars_os().count())),
        "connect" => {
            let port = arg_number(arg)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or(None)?;
            io(TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).map(|_| json!(port)))
        }
        "exec" => {
            let path: &CStr = c"/bin/true";
            let argv = [path.as_ptr(), std::ptr::null()];
            let envp = [std::ptr::null()];
            // SAFETY: NUL-terminated path and NULL-terminated argv/envp arrays
            // that outlive the call; on success the process image is replaced.
            unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
            Err(errno())
        }
        "fork" => {
            // SAFETY: the child only calls _exit.
            match unsafe { libc::fork() } {
                -1 => Err(errno()),
                0 => {
                    // SAFETY: _exit is async-signal-safe.
                    unsafe { libc::_exit(0) }
                }
                child => {
                    let mut status = 0;
                    // SAFETY: a live status pointer.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    Ok(json!(child))
                }
            }
        }
        "ptrace" => {
            // SAFETY: PTRACE_TRACEME takes no pointers.
            let rc = unsafe {
                libc::ptrace(
                    libc::PTRACE_TRACEME,
                    0,
                    std::ptr::null_mut::<libc::c_void>(),
                    std::ptr::null_mut::<libc::c_void>(),
                )
            };
            if rc == -1 {
                Err(errno())
            } else {
                Ok(json!(rc))
            }
        }
        "inherited-fd" => {
            let fd = arg_number(arg).ok_or(None)?;
            let bytes = b"probe-wrote-here";
            // SAFETY: a live buffer and its length.
            let rc = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if rc == -1 {
                Err(errno())
            } else {
                Ok(json!(rc))
            }
        }
        "alloc" => {
            let mib = usize::try_from(arg_number(arg).unwrap_or(50)).map_err(|_| None)?;
            let len = mib << 20;
            let mut block: Vec<u8> = Vec::new();
            block.try_reserve_exact(len).map_err(|_| None)?;
            block.resize(len, 0);
            for i in (0..len).step_by(4096) {
                block[i] = 1;
            }
            let touched: usize = std::hint::black_box(&block)
                .iter()
                .step_by(4096)
                .map(|b| usize::from(*b))
                .sum();
            Ok(json!(touched))
        }
        "clock" => {
            let start = std::time::Instant::now();
            let wall = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| None)?;
            Ok(
                json!({"unixNanos": wall.as_nanos().to_string(), "monotonicNanos": start.elapsed().as_nanos().to_string()}),
            )
        }
        "random" => {
            let mut buf = [0u8; 16];
            // SAFETY: a live buffer and its length.
            let rc = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
            if rc == 16 {
                Ok(json!(rc))
            } else {
                Err(errno())
            }
        }
        "at-random" => Ok(at_random()),
        "hang" => {
            let mut sink = Vec::new();
            io(std::io::stdin().read_to_end(&mut sink).map(|n| json!(n)))
        }
        "flood" => flood(&mut std::io::stdout()),
        "panic" => std::panic::resume_unwind(Box::new("probe panics on purpose")),
        "stderr-flood" => flood(&mut std::io::stderr()),
        _ => Err(None),
    }
}

/// The 16 `AT_RANDOM` bytes and, on x86_64, the stack-protector canary
/// (`%fs:0x28`), as hex.
fn at_random() -> Value {
    // SAFETY: getauxval reads the auxiliary vector; AT_RANDOM points at 16
    // bytes the kernel placed on the initial stack.
    let at = unsafe { libc::getauxval(libc::AT_RANDOM) } as *const u8;
    if at.is_null() {
        return Value::Null;
    }
    let mut bytes = [0u8; 16];
    // SAFETY: as above; 16 readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(at, bytes.as_mut_ptr(), 16) };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    #[cfg(target_arch = "x86_64")]
    let canary = {
        let value: u64;
        // SAFETY: reads the thread control block's canary word.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:0x28", out(reg) value, options(nostack, preserves_flags, readonly));
        }
        Value::from(hex(&value.to_le_bytes()))
    };
    #[cfg(not(target_arch = "x86_64"))]
    let canary = Value::Null;
    json!({"atRandom": hex(&bytes), "canary": canary})
}

fn flood(out: &mut dyn Write) -> Outcome {
    let chunk = [b'x'; 64 * 1024];
    loop {
        if let Err(e) = out.write_all(&chunk) {
            return Err(e.raw_os_error());
        }
    }
}

/// Echoes every line of stdin until end-of-file.
fn echo() -> i32 {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.read_line(&mut line) {
            Ok(0) => return 0,
            Ok(_) => {}
            Err(_) => return 1,
        }
        if out
            .write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return 1;
        }
    }
}

fn print(value: &Value) -> i32 {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{value}").and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Runs `op` and prints its line; the exit code.
fn probe(
    op: &str,
    arg: Option<&str>,
    enforcement: Option<&Enforcement>,
    enter_micros: u128,
) -> i32 {
    if op == "echo" {
        return echo();
    }
    let outcome = run(op, arg);
    let (ok, errno, value) = match outcome {
        Ok(value) => (true, None, value),
        Err(errno) => (false, errno, Value::Null),
    };
    print(&json!({
        "op": op,
        "ok": ok,
        "errno": errno,
        "value": value,
        "enforcement": enforcement,
        "enterMicros": enter_micros.to_string(),
    }))
}

/// A forked child: its operation from one line of stdin.
fn forked_child(entered: Result<Enforcement, stream_sandbox::SandboxError>) -> u8 {
    let enforcement = match entered {
        Ok(e) => e,
        Err(e) => {
            print(&json!({"op": "forked", "sandboxError": e.to_string()}));
            return 3;
        }
    };
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        return 1;
    }
    let mut words = line.split_whitespace();
    let op = words.next().unwrap_or("enforcement").to_owned();
    let arg = words.next().map(str::to_owned);
    u8::try_from(probe(&op, arg.as_deref(), Some(&enforcement), 0)).unwrap_or(1)
}

/// Answers every request with a pid that is not a child it made (`init`,
/// `self`, or the number given), or never answers (`mute`).
fn lying_fork_server(whom: Option<&str>) -> i32 {
    let pid = match whom {
        Some("self") => std::process::id(),
        Some("mute") => 0,
        Some(number) => number.parse().unwrap_or(1),
        None => 1,
    };
    // The socket is stdin, read and written as a server does.
    // SAFETY: fd 0 is open and nothing else in this process uses it.
    let mut socket = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(0) };
    if socket.write_all(stream_sandbox::fork::READY).is_err() {
        return 1;
    }
    let mut byte = [0u8; 1];
    while let Ok(1) = socket.read(&mut byte) {
        if pid == 0 {
            continue;
        }
        if socket.write_all(&pid.to_le_bytes()).is_err() {
            return 1;
        }
    }
    0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sandbox = true;
    let mut as_fork_server = false;
    let mut fork_server = false;
    let mut policy = Policy::default();
    let mut rest = Vec::new();
    for a in &args {
        match a.as_str() {
            "--no-sandbox" => sandbox = false,
            "--allow-unenforced" => policy.allow_unenforced = true,
            "--as-fork-server" => as_fork_server = true,
            "--fork-server" => fork_server = true,
            _ => rest.push(a.as_str()),
        }
    }
    let op = rest.first().copied().unwrap_or("enforcement");
    let arg = rest.get(1).copied();
    if op == "--lying-fork-server" {
        std::process::exit(lying_fork_server(arg));
    }

    let entering = std::time::Instant::now();
    let entered = match (sandbox, as_fork_server || fork_server) {
        (false, _) => Ok(None),
        (true, false) => enter(&policy).map(Some),
        (true, true) => enter_fork_server(&policy).map(Some),
    };
    let enforcement = match entered {
        Ok(e) => e,
        Err(e) => {
            print(&json!({"op": op, "sandboxError": e.to_string()}));
            std::process::exit(3);
        }
    };
    let enter_micros = entering.elapsed().as_micros();
    if fork_server {
        let Some(server) = enforcement else {
            std::process::exit(2);
        };
        // A panic that escaped a child's attempt would end here, with a
        // status of its own (a child's panic must end in the child: 101).
        let served = std::panic::catch_unwind(|| {
            stream_sandbox::fork::serve_forks(&policy, &server, forked_child)
        });
        std::process::exit(match served {
            Ok(Ok(())) => 0,
            Ok(Err(_)) => 1,
            Err(_) => 7,
        });
    }
    std::process::exit(probe(op, arg, enforcement.as_ref(), enter_micros));
}
