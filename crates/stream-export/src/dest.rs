//! Private destinations and owner-only atomic writes.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;
use stream_core::canon::sha256;

use std::collections::BTreeMap;

use crate::Format;
use crate::dpo::PairSelection;
use crate::example::{Provenance, check_complete};
use crate::select::Exclusion;
use crate::select::Selection;
use crate::{ExportError, ExportKind};

/// Why a destination was refused.
#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    /// Examples never go to stdout.
    #[error("refusing to write examples to stdout; give a file path")]
    Stdout,
    /// The path has no file name or no parent folder.
    #[error("the destination {path} is not a file path")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The parent is missing, a symlink, or not a directory.
    #[error("the destination folder {path} is not a real directory")]
    ParentNotDirectory {
        /// The folder.
        path: PathBuf,
    },
    /// The parent belongs to someone else.
    #[error("the destination folder {path} is not owned by you")]
    ParentNotOwned {
        /// The folder.
        path: PathBuf,
    },
    /// Others could write into the parent.
    #[error("the destination folder {path} is group- or world-writable")]
    ParentShared {
        /// The folder.
        path: PathBuf,
    },
    /// The destination exists and is not a regular file (a symlink, device…).
    #[error("the destination {path} exists and is not a regular file")]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
}

/// Refuses stdout, a parent that is not a real, owned, private directory,
/// and an existing destination that is not a regular file.
pub fn check_destination(path: &Path) -> Result<(), DestinationError> {
    let text = path.as_os_str();
    if text == "-" || path.starts_with("/dev") || path.starts_with("/proc") {
        return Err(DestinationError::Stdout);
    }
    let Some(_) = path.file_name() else {
        return Err(DestinationError::NotAFile {
            path: path.to_owned(),
        });
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        Some(_) => PathBuf::from("."),
        None => {
            return Err(DestinationError::NotAFile {
                path: path.to_owned(),
            });
        }
    };
    let meta = parent
        .symlink_metadata()
        .map_err(|_| DestinationError::ParentNotDirectory {
            path: parent.clone(),
        })?;
    if !meta.file_type().is_dir() {
        return Err(DestinationError::ParentNotDirectory { path: parent });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(DestinationError::ParentNotOwned { path: parent });
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(DestinationError::ParentShared { path: parent });
    }
    match path.symlink_metadata() {
        Ok(m) if !m.file_type().is_file() => Err(DestinationError::NotRegular {
            path: path.to_owned(),
        }),
        Ok(_) | Err(_) => Ok(()),
    }
}

fn io(e: std::io::Error) -> ExportError {
    ExportError::Io(e.kind())
}

/// Writes `bytes` to `path` owner-only and atomically: a fresh 0600 temp
/// file beside it, fsync, rename, fsync of the folder.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut nonce = [0u8; 8];
    getrandom::fill(&mut nonce).map_err(|_| ExportError::Io(std::io::ErrorKind::Other))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(
        ".{name}.{}.tmp",
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        File::open(parent).and_then(|d| d.sync_all()).map_err(io)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteReport {
    /// Examples written.
    pub examples: usize,
    /// SHA-256 of the JSONL file.
    pub sha256: String,
    /// The manifest file.
    pub manifest: PathBuf,
}

/// Checks the destination, refuses the whole selection if any example lacks
/// a provenance id, then writes the JSONL file and `FILE.manifest.json`
/// (`--format sft`).
pub fn write(
    path: &Path,
    kind: ExportKind,
    selection: &Selection,
) -> Result<WriteReport, ExportError> {
    check_destination(path)?;
    check_complete(&selection.examples)?;
    let provenance: Vec<&Provenance> = selection.examples.iter().map(|e| &e.provenance).collect();
    write_lines(
        path,
        kind,
        Format::Sft,
        &selection.examples,
        &provenance,
        LeftOut {
            judgments: &selection.excluded,
            turns: &selection.left_out_turns,
        },
    )
}

/// [`write()`] for preference pairs (`--format dpo`): the same destination
/// rules and the same refusal of a pair missing a provenance id.
pub fn write_pairs(
    path: &Path,
    kind: ExportKind,
    selection: &PairSelection,
) -> Result<WriteReport, ExportError> {
    check_destination(path)?;
    for (index, pair) in selection.pairs.iter().enumerate() {
        if let Some(field) = pair.provenance.missing() {
            return Err(ExportError::IncompleteExample { index, field });
        }
    }
    let provenance: Vec<&Provenance> = selection.pairs.iter().map(|p| &p.provenance).collect();
    write_lines(
        path,
        kind,
        Format::Dpo,
        &selection.pairs,
        &provenance,
        LeftOut {
            judgments: &selection.excluded,
            turns: &selection.left_out_turns,
        },
    )
}

/// What the manifest says was left out, by reason: whole judgments, and
/// earlier turns of the examples' transcripts.
struct LeftOut<'a> {
    judgments: &'a BTreeMap<Exclusion, usize>,
    turns: &'a BTreeMap<Exclusion, usize>,
}

fn counts(by_reason: &BTreeMap<Exclusion, usize>) -> serde_json::Value {
    by_reason
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn write_lines<T: serde::Serialize>(
    path: &Path,
    kind: ExportKind,
    format: Format,
    lines: &[T],
    provenance: &[&Provenance],
    left_out: LeftOut<'_>,
) -> Result<WriteReport, ExportError> {
    let mut jsonl = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut jsonl, line)
            .map_err(|_| ExportError::Io(std::io::ErrorKind::InvalidData))?;
        jsonl.push(b'\n');
    }
    let digest = sha256(&jsonl);
    let manifest_path = PathBuf::from(format!("{}.manifest.json", path.display()));
    check_destination(&manifest_path)?;
    let manifest = json!({
        "format": "thestream/training-export/1",
        "kind": kind.as_str(),
        "exampleContents": kind.contents(),
        "exampleFormat": format.as_str(),
        "examples": lines.len(),
        "sha256": digest,
        "judgmentEventIds": provenance.iter().map(|p| &p.judgment_event_id).collect::<Vec<_>>(),
        "excluded": counts(left_out.judgments),
        "leftOutTurns": counts(left_out.turns),
    });
    let manifest_bytes = serde_json::to_vec_pretty(&manifest)
        .map_err(|_| ExportError::Io(std::io::ErrorKind::InvalidData))?;
    write_atomic(path, &jsonl)?;
    write_atomic(&manifest_path, &manifest_bytes)?;
    Ok(WriteReport {
        examples: lines.len(),
        sha256: digest.to_string(),
        manifest: manifest_path,
    })
}
