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
//! Read [`validate::validate_completion`] first: every capture rule of the
//! tool rules (docs/design.md §9) is that one pure function.
//!
//! The worker has no filesystem, network, environment or credentials. It
//! links only `stream-core`, `stream-protocol`, `stream-provider` and
//! `stream-sandbox` (plus generic crates) — never the store, Telegram, the
//! broker, or anything holding credentials or paths. It writes no logs:
//! nothing model-authored leaves it except inside the result frame.

#![deny(missing_docs)]

mod run;
pub mod validate;
mod warm;

pub use run::{WorkerFailure, report_failure, serve, serve_then};
pub use warm::canned_exchange;

use std::io::Write as _;
use std::process::ExitCode;

/// The one command-line flag: the development switch. With it the worker
/// runs even where Landlock or seccomp cannot be enforced, reporting so in its
/// hello frame; the parent still refuses such a worker unless its own
/// development switch is on. Never passed in production.
pub const ALLOW_UNENFORCED_FLAG: &str = "--allow-unenforced-sandbox";

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
    for arg in std::env::args_os().skip(1) {
        if arg == ALLOW_UNENFORCED_FLAG {
            allow_unenforced = true;
        } else {
            let _ = std::io::stderr().write_all(b"thestream-worker: unknown argument\n");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let policy = stream_sandbox::Policy {
        allow_unenforced,
        ..stream_sandbox::Policy::default()
    };
    let entered = stream_sandbox::enter(&policy);
    let mut stdout = std::io::stdout().lock();
    let sandbox = match entered.map(|e| serde_json::to_value(&e)) {
        Ok(Ok(report)) => report,
        Ok(Err(_)) | Err(_) => {
            report_failure(&mut stdout, &WorkerFailure::Sandbox);
            return ExitCode::from(EXIT_SANDBOX);
        }
    };
    let mut stdin = std::io::stdin().lock();
    // Exit as soon as the result is out, freeing nothing: the parent is
    // waiting for this exit (and its status) before it settles.
    match serve_then(&mut stdin, &mut stdout, sandbox, || std::process::exit(0)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            report_failure(&mut stdout, &failure);
            ExitCode::FAILURE
        }
    }
}
