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
//! - `declaration-install/<id>/<version>` ([`InstalledDeclaration`]), written
//!   by activation's install step: the declaration file and its prompt as
//!   blobs, bound by their SHA-256 and the fingerprint, plus the context
//!   manifest (context kind, the Telegram source it was installed for, the
//!   exact subscribed documents, the transcript bound). A running serve
//!   loads the newly active declaration from here ([`load_installed`]), not
//!   from a path of its own config.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stream_core::canon::sha256;
use stream_core::{Fingerprint, Sha256Hex, SourceName};
use stream_declarations::{LoadedDeclaration, Prompt, RegistryError};
use stream_memory::lock::{LockError, LockEvidence, OwnerState, boot_id, judge};
use stream_store::{Read, StoreError, Tx};

use crate::active::ActiveDeclaration;

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
    /// The installed files of a declaration are missing.
    #[error("declaration {id}@{version} has no installed files; activate it first")]
    NotInstalled {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// A blob the install row names is missing or does not hash to its name.
    #[error("installed file {sha256} of declaration {id}@{version} is missing or altered")]
    FileAltered {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
        /// The SHA-256 the row names.
        sha256: Sha256Hex,
    },
    /// The installed files rebuild a declaration with another fingerprint
    /// than the one the install row or the active row names.
    #[error("installed declaration {id}@{version} does not rebuild to its recorded fingerprint")]
    FingerprintMismatch {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// The installed files do not load as a declaration.
    #[error(transparent)]
    Declaration(#[from] stream_declarations::DeclarationError),
    /// The registry refused.
    #[error(transparent)]
    Registry(#[from] RegistryError),
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

/// The control key of a declaration's installed files.
pub fn install_key(id: &str, version: u32) -> String {
    format!("declaration-install/{id}/{version}")
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

/// One exactly subscribed document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextDocument {
    /// Its source.
    pub source: SourceName,
    /// Its normalized path.
    pub path: String,
}

/// What the installed declaration's context reads, resolved for this store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextManifest {
    /// The context kind (`telegram-conversation`).
    pub context: String,
    /// The Telegram source it was installed for (`telegram:<bot-id>`).
    pub telegram_source: SourceName,
    /// The exactly subscribed documents.
    pub documents: Vec<ContextDocument>,
    /// The transcript bound, in turns.
    pub transcript_max_turns: Option<u32>,
}

/// The install row of one declaration version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstalledDeclaration {
    /// The fingerprint the files rebuild to.
    pub fingerprint: Fingerprint,
    /// The declaration file's blob.
    pub declaration_sha256: Sha256Hex,
    /// The prompt file's blob, when it names one.
    pub prompt_sha256: Option<Sha256Hex>,
    /// The context manifest.
    pub context: ContextManifest,
}

/// The context manifest of `decl` for `telegram`.
pub fn context_manifest(decl: &LoadedDeclaration, telegram: &SourceName) -> ContextManifest {
    let d = &decl.declaration;
    ContextManifest {
        context: d.context.as_str().to_owned(),
        telegram_source: telegram.clone(),
        documents: d
            .subscriptions
            .documents
            .iter()
            .filter_map(|doc| {
                doc.path.as_ref().map(|p| ContextDocument {
                    source: doc.source.clone(),
                    path: p.as_str().to_owned(),
                })
            })
            .collect(),
        transcript_max_turns: d.transcript.as_ref().map(|t| t.max_turns),
    }
}

/// Installs `decl`'s files inside `tx`: the declaration text and its prompt
/// as blobs and the install row. `yaml` must rebuild `decl` exactly (the
/// caller read both from the same file), which is checked here.
pub fn install_files(
    tx: &mut (impl Tx + ?Sized),
    decl: &LoadedDeclaration,
    yaml: &str,
    telegram: &SourceName,
) -> Result<InstalledDeclaration, CooperationError> {
    let rebuilt = LoadedDeclaration::from_parts(yaml, decl.prompt.clone())?;
    if rebuilt.fingerprint != decl.fingerprint {
        return Err(CooperationError::FingerprintMismatch {
            id: decl.id().to_owned(),
            version: decl.version(),
        });
    }
    let declaration_sha256 = tx.put_blob(yaml.as_bytes())?;
    let prompt_sha256 = match &decl.prompt {
        Some(prompt) => Some(tx.put_blob(prompt.text.as_bytes())?),
        None => None,
    };
    let row = InstalledDeclaration {
        fingerprint: decl.fingerprint.clone(),
        declaration_sha256,
        prompt_sha256,
        context: context_manifest(decl, telegram),
    };
    write_row(tx, &install_key(decl.id(), decl.version()), &row)?;
    Ok(row)
}

fn blob(
    reader: &(impl Read + ?Sized),
    active: &ActiveDeclaration,
    sha: &Sha256Hex,
) -> Result<Vec<u8>, CooperationError> {
    let altered = || CooperationError::FileAltered {
        id: active.id.clone(),
        version: active.version,
        sha256: sha.clone(),
    };
    let bytes = reader.blob(sha)?.ok_or_else(altered)?;
    if sha256(&bytes) == *sha {
        Ok(bytes)
    } else {
        Err(altered())
    }
}

/// Loads the installed files of the `active` declaration and rebuilds it:
/// blobs re-hashed, the declaration re-validated, its fingerprint equal to
/// the install row's, the active row's and the registry's.
pub fn load_installed(
    reader: &(impl Read + ?Sized),
    active: &ActiveDeclaration,
) -> Result<(LoadedDeclaration, InstalledDeclaration), CooperationError> {
    let row: InstalledDeclaration = read_row(reader, &install_key(&active.id, active.version))?
        .ok_or_else(|| CooperationError::NotInstalled {
            id: active.id.clone(),
            version: active.version,
        })?;
    let yaml = String::from_utf8(blob(reader, active, &row.declaration_sha256)?).map_err(|_| {
        CooperationError::FileAltered {
            id: active.id.clone(),
            version: active.version,
            sha256: row.declaration_sha256.clone(),
        }
    })?;
    let prompt = match &row.prompt_sha256 {
        None => None,
        Some(sha) => {
            let where_ = std::path::PathBuf::from(format!("store:blob/{sha}"));
            Some(Prompt::from_bytes(&where_, blob(reader, active, sha)?)?)
        }
    };
    let decl = LoadedDeclaration::from_parts(&yaml, prompt)?;
    let same = decl.fingerprint == row.fingerprint
        && decl.fingerprint == active.fingerprint
        && decl.id() == active.id
        && decl.version() == active.version;
    if !same {
        return Err(CooperationError::FingerprintMismatch {
            id: active.id.clone(),
            version: active.version,
        });
    }
    decl.verify(reader)?;
    Ok((decl, row))
}

/// The PID of a `serve` that holds this store: one whose status row for the
/// active consumer says running and whose process is still alive. Evidence
/// that cannot be judged counts as holding (fail closed). `pair` refuses
/// while one does.
pub fn serving_pid(reader: &dyn Read) -> Result<Option<u32>, CooperationError> {
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
        (ConsumerState::Running, Ok(Liveness::Live) | Err(_)) => Some(status.process.pid),
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
