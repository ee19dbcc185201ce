//! verify-bundle: the worker's hash and its sandbox self-test.

use std::path::Path;
use std::time::Duration;

use stream_core::Sha256Hex;
use stream_protocol::framing::parse_frame;
use stream_protocol::{MAX_FRAME_BYTES, WorkerFrame};
use stream_sandbox::{Enforcement, SpawnLimits, StderrMode};

use super::error::ActivationError;
use crate::engine::{EngineError, hash_worker};

/// verify-bundle: the worker's SHA-256 and its sandbox self-test (spawn,
/// read and verify the hello, end it).
pub async fn verify_bundle(
    worker: &Path,
    allow_unenforced: bool,
) -> Result<Sha256Hex, ActivationError> {
    let bundle = hash_worker(worker).map_err(|e| match e {
        EngineError::Worker { path, kind } => ActivationError::WorkerUnreadable { path, kind },
        _ => ActivationError::WorkerUnreadable {
            path: worker.display().to_string(),
            kind: std::io::ErrorKind::Other,
        },
    })?;
    let worker = worker.to_owned();
    let enforcement = tokio::task::spawn_blocking(move || self_test(&worker, allow_unenforced))
        .await
        .map_err(|_| ActivationError::Join)??;
    stream_sandbox::verify(&enforcement, allow_unenforced)?;
    Ok(bundle)
}

/// The sandbox self-test: spawns `worker`, reads its hello, ends it, and
/// returns what its sandbox achieved (not yet judged; see
/// `stream_sandbox::verify`). Blocking. `doctor` reports from it too.
pub fn self_test(worker: &Path, allow_unenforced: bool) -> Result<Enforcement, ActivationError> {
    let args: Vec<&std::ffi::OsStr> = if allow_unenforced {
        vec![stream_broker::ALLOW_UNENFORCED_FLAG.as_ref()]
    } else {
        vec![]
    };
    let wait = Duration::from_secs(20);
    let limits = SpawnLimits {
        wall_clock: wait,
        output_cap: 2 * MAX_FRAME_BYTES as u64,
        line_cap: MAX_FRAME_BYTES,
        stderr: StderrMode::Null,
    };
    let mut child = stream_sandbox::spawn(worker, &args, &limits)?;
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
    let hello = hello.ok_or(ActivationError::SelfTestHello)?;
    serde_json::from_value(hello.sandbox).map_err(|_| ActivationError::SelfTestHello)
}
