//! Private destinations and owner-only atomic writes.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use stream_core::canon::sha256;

use std::collections::BTreeMap;

use crate::Format;
use crate::dpo::PairSelection;
use crate::example::{Provenance, check_complete};
use crate::folder::Destination;
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
    #[error(
        "the destination folder {path} is writable by group or others; choose a private folder"
    )]
    ParentShared {
        /// The folder.
        path: PathBuf,
    },
    /// The destination is a directory.
    #[error("the destination {path} is a directory")]
    Directory {
        /// The path.
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
/// and an existing destination that is not a regular file
/// ([`Destination::open`], the one rule).
pub fn check_destination(path: &Path) -> Result<(), DestinationError> {
    Destination::open(path).map(|_| ())
}

fn io(e: std::io::Error) -> ExportError {
    ExportError::Io(e.kind())
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
    let destination = Destination::open(path)?;
    let mut manifest_name = destination
        .path()
        .file_name()
        .unwrap_or_default()
        .to_owned();
    manifest_name.push(".manifest.json");
    let manifest = destination.beside(&manifest_name)?;
    let manifest_path = manifest.path().to_owned();
    let digest = sha256(&jsonl);
    let manifest_json = json!({
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
    let manifest_bytes = serde_json::to_vec_pretty(&manifest_json)
        .map_err(|_| ExportError::Io(std::io::ErrorKind::InvalidData))?;
    destination
        .write_with(|f| f.write_all(&jsonl))
        .map_err(io)?;
    manifest
        .write_with(|f| f.write_all(&manifest_bytes))
        .map_err(io)?;
    Ok(WriteReport {
        examples: lines.len(),
        sha256: digest.to_string(),
        manifest: manifest_path,
    })
}
