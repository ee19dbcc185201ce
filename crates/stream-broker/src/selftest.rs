//! The worker's sandbox self-test, on the same sealed bytes an attempt runs:
//! spawn it with no packet, read and parse its `hello`, end it; and, when
//! `serve` forks its workers ([`crate::serve_forks_workers`]), the same for
//! one worker forked by a fork server started from those bytes. `activate`
//! (verify-bundle) judges both reports; `doctor` also shows them feature by
//! feature.

use std::path::Path;
use std::time::Duration;

use stream_core::Sha256Hex;
use stream_protocol::framing::parse_frame;
use stream_protocol::{MAX_FRAME_BYTES, WorkerFrame};
use stream_sandbox::{
    Enforcement, ImageError, NotEnforced, SpawnError, SpawnLimits, StderrMode, WorkerChild,
    WorkerImage,
};

use crate::ALLOW_UNENFORCED_FLAG;

/// How long the self-test waits for the hello, at most: less when an
/// attempt's wall clock is shorter, so that it refuses what an attempt would.
const HELLO_WAIT: Duration = Duration::from_secs(20);

/// Why the self-test failed. Paths, kinds and codes only.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    /// The worker binary could not be read or sealed.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The worker could not be started.
    #[error("the worker could not be started: {0}")]
    Spawn(#[from] SpawnError),
    /// The worker could not be started as a fork server, or it did not
    /// fork (serve would fall back to spawning: a worker that cannot serve
    /// forks is refused here all the same).
    #[error("the worker could not fork a worker as serve does: {0}")]
    Fork(SpawnError),
    /// The worker did not answer a well-formed hello.
    #[error("the worker did not send a well-formed hello")]
    Hello,
    /// The worker's sandbox is not enforced.
    #[error(transparent)]
    NotEnforced(#[from] NotEnforced),
}

/// A worker binary sealed in memory with the SHA-256 of those bytes (the
/// bundle id receipts name): what the broker executes.
#[derive(Debug)]
pub struct SealedWorker {
    pub(crate) image: WorkerImage,
    pub(crate) sha256: Sha256Hex,
}

impl SealedWorker {
    /// Copies the file at `path` into a sealed memory file and hashes it.
    pub fn load(path: &Path) -> Result<Self, ImageError> {
        let image = WorkerImage::load(path)?;
        let sha256 = stream_core::canon::sha256(&image.contents()?);
        Ok(Self { image, sha256 })
    }

    /// The SHA-256 of the sealed bytes.
    pub fn sha256(&self) -> &Sha256Hex {
        &self.sha256
    }

    /// Spawns the sealed worker, reads its hello, ends it, and returns what
    /// its sandbox achieved, not yet judged (see `stream_sandbox::verify`).
    /// `timeout` is an attempt's (`[provider] timeout_secs`): the hello is
    /// awaited no longer than its wall clock. Blocking.
    pub fn self_test(
        &self,
        allow_unenforced: bool,
        timeout: Duration,
    ) -> Result<Enforcement, SelfTestError> {
        let (limits, args) = test_limits(allow_unenforced, timeout);
        let child = stream_sandbox::spawn_image(&self.image, &args, &limits)?;
        hello_of(child, limits.wall_clock)
    }

    /// [`SealedWorker::self_test`] for a worker forked as `serve` forks
    /// them: a fork server started from the sealed bytes, one child's
    /// hello, then both ended. Blocking.
    pub fn self_test_forked(
        &self,
        allow_unenforced: bool,
        timeout: Duration,
    ) -> Result<Enforcement, SelfTestError> {
        let (limits, args) = test_limits(allow_unenforced, timeout);
        let mut server =
            crate::forks::start_server(&self.image, &args).map_err(SelfTestError::Fork)?;
        let child = server.fork(&limits).map_err(SelfTestError::Fork)?;
        // Dropping the server kills and reaps it; the child is ours.
        drop(server);
        hello_of(child, limits.wall_clock)
    }
}

/// The self-test's limits (the hello awaited no longer than an attempt's
/// wall clock) and the worker's arguments.
fn test_limits(
    allow_unenforced: bool,
    timeout: Duration,
) -> (SpawnLimits, Vec<&'static std::ffi::OsStr>) {
    let wait = HELLO_WAIT.min(crate::AttemptTimeout::of(timeout).wall_clock);
    let args: Vec<&std::ffi::OsStr> = if allow_unenforced {
        vec![ALLOW_UNENFORCED_FLAG.as_ref()]
    } else {
        vec![]
    };
    let limits = SpawnLimits {
        wall_clock: wait,
        output_cap: 2 * MAX_FRAME_BYTES as u64,
        line_cap: MAX_FRAME_BYTES,
        stderr: StderrMode::Null,
    };
    (limits, args)
}

/// Reads `child`'s hello, ends it whatever it said, and returns its
/// sandbox report, not yet judged.
fn hello_of(mut child: WorkerChild, wait: Duration) -> Result<Enforcement, SelfTestError> {
    let hello = match child.read_line(wait) {
        Ok(Some(line)) => match parse_frame::<WorkerFrame>(&line) {
            Ok(WorkerFrame::Hello(hello)) => Some(hello),
            Ok(WorkerFrame::BrokerRequest(_) | WorkerFrame::Result(_) | WorkerFrame::Error(_))
            | Err(_) => None,
        },
        Ok(None) | Err(_) => None,
    };
    // The self-test ends here whatever the hello said.
    child.kill();
    let _ = child.wait(Duration::from_secs(5));
    let hello = hello.ok_or(SelfTestError::Hello)?;
    serde_json::from_value(hello.sandbox).map_err(|_| SelfTestError::Hello)
}

/// verify-bundle: seals the worker at `path`, self-tests it (spawned, and
/// forked when `serve` forks its workers) and judges each sandbox report;
/// returns the bundle id of the bytes tested. `timeout` as for
/// [`SealedWorker::self_test`]. Blocking.
pub fn verify_worker(
    path: &Path,
    allow_unenforced: bool,
    timeout: Duration,
) -> Result<Sha256Hex, SelfTestError> {
    let worker = SealedWorker::load(path)?;
    let enforcement = worker.self_test(allow_unenforced, timeout)?;
    stream_sandbox::verify(&enforcement, allow_unenforced)?;
    if crate::serve_forks_workers() {
        let forked = worker.self_test_forked(allow_unenforced, timeout)?;
        stream_sandbox::verify(&forked, allow_unenforced)?;
    }
    Ok(worker.sha256)
}
