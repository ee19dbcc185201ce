//! `thestream-worker`: the sandboxed model worker.
//!
//! One process per attempt. [`run_main`] enters the sandbox before reading
//! anything, then [`serve`] speaks `stream.sandbox/1` over stdin/stdout:
//! `hello` (with the sandbox report) → a canned warm-up exchange on built-in
//! constants (so a spare parked by the parent meets its packet on warm code
//! paths) → read the `packet` → build the one native request
//! (`stream-provider`) → exactly one `broker.request` → read the
//! `broker.response` → parse → apply the capture rules → one `result`.
//! There is never a second request: a captured call is answered with a
//! content-dark result carrying `terminate: true`.
//!
//! With [`FORK_SERVER_FLAG`] the binary is instead a fork server
//! (`stream_sandbox::fork`): sandboxed and warmed once, it never reads a
//! packet; each child it forks narrows itself to a worker's sandbox and
//! then serves one attempt exactly as above.
//!
//! Read [`capture::validate_completion`] first: every capture rule of the
//! tool rules (docs/design.md §9) is that one pure function.
//!
//! The worker has no filesystem, network, environment or credentials. It
//! links only `stream-core`, `stream-protocol`, `stream-provider` and
//! `stream-sandbox` (plus generic crates) — never the store, Telegram, the
//! broker, or anything holding credentials or paths. It writes no logs:
//! nothing model-authored leaves it except inside the result frame.

#![deny(missing_docs)]

pub mod capture;
mod fork_server;
mod run;
mod warm;

pub use run::{WorkerFailure, report_failure, serve, serve_then};
pub use warm::canned_exchange;

use std::io::Write as _;
use std::process::ExitCode;

pub use stream_protocol::{ALLOW_UNENFORCED_FLAG, FORK_SERVER_FLAG};

/// Exit code when the sandbox could not be entered.
pub const EXIT_SANDBOX: u8 = 3;
/// Exit code for a usage error (an unknown argument).
pub const EXIT_USAGE: u8 = 2;

/// The worker's `main`: sandbox first, then one attempt over stdin/stdout.
///
/// Exits 0 after a `result` frame, 1 after an `error` frame, 2 on unknown
/// arguments, 3 when the sandbox could not be entered (after an `error`
/// frame with code `sandbox`).
pub fn run_main() -> ExitCode {
    // A panic message could quote data: print a fixed line instead.
    std::panic::set_hook(Box::new(|_| {
        let _ = std::io::stderr().write_all(b"thestream-worker: internal error\n");
    }));
    let mut allow_unenforced = false;
    let mut fork_server = false;
    for arg in std::env::args_os().skip(1) {
        if arg == ALLOW_UNENFORCED_FLAG {
            allow_unenforced = true;
        } else if arg == FORK_SERVER_FLAG {
            fork_server = true;
        } else {
            let _ = std::io::stderr().write_all(b"thestream-worker: unknown argument\n");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let policy = stream_sandbox::Policy {
        allow_unenforced,
        ..stream_sandbox::Policy::default()
    };
    if fork_server {
        return fork_server::main(&policy);
    }
    ExitCode::from(attempt(
        stream_sandbox::enter(&policy),
        capture::Compiled::none(),
    ))
}

/// One attempt in a process that has entered its sandbox (or failed to):
/// the exit code.
fn attempt(
    entered: Result<stream_sandbox::Enforcement, stream_sandbox::SandboxError>,
    compiled: capture::Compiled,
) -> u8 {
    let mut stdout = std::io::stdout().lock();
    let sandbox = match entered.map(|e| serde_json::to_value(&e)) {
        Ok(Ok(report)) => report,
        Ok(Err(_)) | Err(_) => {
            report_failure(&mut stdout, &WorkerFailure::Sandbox);
            return EXIT_SANDBOX;
        }
    };
    let mut stdin = std::io::stdin().lock();
    // Exit as soon as the result is out, freeing nothing: the parent is
    // waiting for this exit (and its status) before it settles.
    let sent = || std::process::exit(0);
    match run::serve_warmed(&mut stdin, &mut stdout, sandbox, compiled, sent) {
        Ok(()) => 0,
        Err(failure) => {
            report_failure(&mut stdout, &failure);
            1
        }
    }
}
