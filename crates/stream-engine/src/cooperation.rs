//! How a running `serve` and `thestream activate` cooperate: control rows
//! only, no signal and no socket, so that either side may crash at any
//! point and the other notices.
//!
//! - `consumer-request:<consumer>` ([`ConsumerRequest`]), written by
//!   activation: `stopped` (with the activation id and the frozen Telegram
//!   head `throughSeq`) asks the serve running that consumer to answer every
//!   trigger up to the frozen head, then take no more; `running` (written
//!   when a consumer becomes active) clears an old request.
//! - `consumer-status:<consumer>` ([`ConsumerStatus`]), written by the serve
//!   running that consumer: `running` when it (re)built its engine — the
//!   readiness report: telegram source, worker bundle SHA-256, declaration
//!   fingerprint — and `stopped` (naming the activation) once it obeyed a
//!   stop request. Each status carries [`ProcessEvidence`] (boot id, PID,
//!   kernel start time), so a reader tells a live serve from one that exited,
//!   died, was rebooted away or whose PID was reused, instead of waiting for
//!   it forever ([`liveness`]).
//!
//! Whether a serve runs at all is the store's serve lease ([`ServeLease`]).
//!
//! The third row they share, a declaration's installed files
//! (`declaration-install/<id>/<version>`), is `stream_declarations::install`'s:
//! activation's install step writes it, a following serve loads from it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stream_core::{Fingerprint, Sha256Hex, SourceName};
use stream_declarations::install::InstallError;
use stream_memory::lock::{LockError, LockEvidence, OwnerState, boot_id, judge};
use stream_store::{Read, StoreError, Tx};

/// The evidence that names one process on one boot: boot id, PID, the
/// kernel's start time of that PID, and a random token (the root lock's
/// evidence, reused).
pub type ProcessEvidence = LockEvidence;

/// Why a cooperation row could not be read, written or used. Keys, ids and
/// hashes only.
#[derive(Debug, thiserror::Error)]
pub enum CooperationError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A row does not parse.
    #[error("control row `{key}` is malformed")]
    Malformed {
        /// Its key.
        key: String,
    },
    /// A declaration's installed files could not be written or loaded.
    #[error(transparent)]
    Install(#[from] InstallError),
    /// This process's identity could not be read from `/proc`.
    #[error("process identity unavailable: {0}")]
    Identity(#[from] LockError),
}

fn read_row<T: serde::de::DeserializeOwned>(
    reader: &(impl Read + ?Sized),
    key: &str,
) -> Result<Option<T>, CooperationError> {
    match reader.control(key)? {
        None => Ok(None),
        Some(value) => {
            serde_json::from_value(value)
                .map(Some)
                .map_err(|_| CooperationError::Malformed {
                    key: key.to_owned(),
                })
        }
    }
}

fn write_row<T: Serialize>(
    tx: &mut (impl Tx + ?Sized),
    key: &str,
    row: &T,
) -> Result<(), CooperationError> {
    let value: Value = serde_json::to_value(row).map_err(|_| CooperationError::Malformed {
        key: key.to_owned(),
    })?;
    tx.set_control(key, &value)?;
    Ok(())
}

/// The control key of a consumer's request row.
pub fn request_key(consumer: &str) -> String {
    format!("consumer-request:{consumer}")
}

/// The control key of a consumer's status row.
pub fn status_key(consumer: &str) -> String {
    format!("consumer-status:{consumer}")
}

/// What activation asks of the serve running a consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "state",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum ConsumerRequest {
    /// Serve it (the default when no row exists). A struct variant, so
    /// that an unknown field beside the tag is refused.
    Running {},
    /// Answer every trigger up to `through_seq` (the frozen Telegram head),
    /// then take no more triggers and acknowledge.
    Stopped {
        /// The activation asking.
        activation_id: String,
        /// The frozen Telegram head.
        through_seq: u64,
    },
}

/// What a serve says about the consumer it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsumerState {
    /// Its engine is built and taking triggers (the readiness report).
    Running,
    /// It obeyed a stop request: every trigger up to the frozen head is
    /// settled and it takes no more.
    Stopped,
}

/// The status row a serve writes for the consumer it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConsumerStatus {
    /// Running or stopped.
    pub state: ConsumerState,
    /// The activation whose stop request was obeyed (when stopped).
    pub activation_id: Option<String>,
    /// The serve process.
    pub process: ProcessEvidence,
    /// The Telegram source its engine reads.
    pub telegram_source: SourceName,
    /// SHA-256 of the worker binary its engine runs.
    pub worker_bundle_sha256: Sha256Hex,
    /// The fingerprint of the declaration its engine loaded.
    pub declaration_fingerprint: Fingerprint,
}

/// Reads a consumer's request; no row means [`ConsumerRequest::Running`].
pub fn read_request(
    reader: &(impl Read + ?Sized),
    consumer: &str,
) -> Result<ConsumerRequest, CooperationError> {
    Ok(read_row(reader, &request_key(consumer))?.unwrap_or(ConsumerRequest::Running {}))
}

/// Writes a consumer's request inside `tx`.
pub fn write_request(
    tx: &mut (impl Tx + ?Sized),
    consumer: &str,
    request: &ConsumerRequest,
) -> Result<(), CooperationError> {
    write_row(tx, &request_key(consumer), request)
}

/// Reads a consumer's status row.
pub fn read_status(
    reader: &(impl Read + ?Sized),
    consumer: &str,
) -> Result<Option<ConsumerStatus>, CooperationError> {
    read_row(reader, &status_key(consumer))
}

/// Writes a consumer's status row inside `tx`.
pub fn write_status(
    tx: &mut (impl Tx + ?Sized),
    consumer: &str,
    status: &ConsumerStatus,
) -> Result<(), CooperationError> {
    write_row(tx, &status_key(consumer), status)
}

/// Whether the process `evidence` names is still the one that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Same boot, same PID, same kernel start time.
    Live,
    /// Exited (or a zombie), from another boot, or its PID now runs
    /// another process.
    Gone,
}

/// Judges `evidence` against the running kernel. An error means the
/// evidence could not be judged; each caller decides which way that fails
/// closed.
pub fn liveness(evidence: &ProcessEvidence) -> Result<Liveness, CooperationError> {
    Ok(match judge(evidence, &boot_id()?)? {
        OwnerState::Live => Liveness::Live,
        OwnerState::Dead | OwnerState::Rebooted | OwnerState::PidReused => Liveness::Gone,
    })
}

/// Whether a `serve` holds the store: the store's serve lease
/// (`stream_store::lease`), which every machine sharing the store sees the
/// same, unlike a process's evidence, which only its own host can judge.
/// Activation asks it; the binary answers from the store it opened.
pub trait ServeLease: Send + Sync + std::fmt::Debug {
    /// `Some(true)` held, `Some(false)` free, `None` when it cannot be
    /// told (each caller decides which way that fails closed).
    fn held(&self) -> Option<bool>;
}

/// The status row of the `serve` running the active declaration's consumer,
/// when that process is alive (or its liveness cannot be told): what it
/// reads and which worker bundle it executes.
pub fn serving_status(reader: &dyn Read) -> Result<Option<ConsumerStatus>, CooperationError> {
    let active = crate::active::active(reader).map_err(|e| match e {
        crate::active::ActiveError::Store(s) => CooperationError::Store(s),
        crate::active::ActiveError::Registry(_)
        | crate::active::ActiveError::OtherActive { .. }
        | crate::active::ActiveError::Malformed => CooperationError::Malformed {
            key: crate::active::ACTIVE_DECLARATION.to_owned(),
        },
    })?;
    let Some(active) = active else {
        return Ok(None);
    };
    let Some(status) = read_status(reader, &active.consumer())? else {
        return Ok(None);
    };
    Ok(match (status.state, liveness(&status.process)) {
        (ConsumerState::Stopped, _) | (ConsumerState::Running, Ok(Liveness::Gone)) => None,
        (ConsumerState::Running, Ok(Liveness::Live) | Err(_)) => Some(status),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_rows_are_strict_and_golden() {
        let stop = ConsumerRequest::Stopped {
            activation_id: "ab".into(),
            through_seq: 7,
        };
        let value = serde_json::to_value(&stop).unwrap_or_default();
        assert_eq!(
            value,
            serde_json::json!({"state": "stopped", "activationId": "ab", "throughSeq": 7})
        );
        assert_eq!(
            serde_json::to_value(ConsumerRequest::Running {}).unwrap_or_default(),
            serde_json::json!({"state": "running"})
        );
        let extra = serde_json::json!({"state": "running", "extra": 1});
        assert!(serde_json::from_value::<ConsumerRequest>(extra).is_err());
        let unknown = serde_json::json!({"state": "paused"});
        assert!(serde_json::from_value::<ConsumerRequest>(unknown).is_err());
    }

    #[test]
    fn our_own_process_is_live() {
        let me = ProcessEvidence::current();
        assert!(matches!(me.as_ref().map(liveness), Ok(Ok(Liveness::Live))));
    }
}
