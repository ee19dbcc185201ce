//! verify-bundle: the worker's hash and its sandbox self-test, both by the
//! broker on the same sealed bytes.

use std::path::Path;
use std::time::Duration;

use stream_core::Sha256Hex;

use super::error::ActivationError;

/// verify-bundle: the SHA-256 of the worker's sealed bytes, once those bytes
/// passed the sandbox self-test (spawn, read and verify the hello, end it),
/// the hello awaited no longer than an attempt of `timeout` would.
pub async fn verify_bundle(
    worker: &Path,
    allow_unenforced: bool,
    timeout: Duration,
) -> Result<Sha256Hex, ActivationError> {
    let worker = worker.to_owned();
    let bundle = tokio::task::spawn_blocking(move || {
        stream_broker::verify_worker(&worker, allow_unenforced, timeout)
    })
    .await
    .map_err(|_| ActivationError::Join)??;
    Ok(bundle)
}
