//! Training exports.
//!
//! Owns `private-training-export` (judgments with `qualityEligible: true`,
//! whatever `externalExportEligible` says, each with its complete exact
//! private-provenance chain revalidated) and `training-export` (both flags
//! true). Read [`select`] then [`write()`]; `--format dpo` turns the same
//! selection into preference pairs ([`preference_pairs`], [`write_pairs`]).
//! An external example holds only externally eligible text: no memory, no
//! private correction (see [`EXTERNAL_CONTENTS`]); a private one is the
//! snapshot the model saw, as text ([`PRIVATE_CONTENTS`]). Neither holds an
//! internal id annotation: ids live in `provenance`.
//!
//! Agent proposals are excluded from every training projection: examples
//! come only from human judgments, and their transcript carries text turns,
//! never proposal calls. So a reply the system wrote in the model's place (a
//! proposal's acknowledgment, a deterministic reply) is neither a target nor
//! a DPO answer (`acknowledgment`, `deterministic`), and as an earlier turn
//! it is left out with the owner message it answered: the example never
//! claims a call it does not show. Nothing is written to stdout; files are
//! owner-only and atomic.

#![deny(missing_docs)]

mod dest;
mod dpo;
mod example;
mod folder;
mod select;
mod transcript;

pub use dest::{DestinationError, WriteReport, check_destination, write, write_pairs};
pub use dpo::{PairInput, PairSelection, PreferencePair, preference_pairs};
pub use example::{ChatMessage, Example, Provenance};
pub use folder::Destination;
pub use select::{Exclusion, Selection, select};
pub use transcript::{EXTERNAL_CONTENTS, PRIVATE_CONTENTS};

/// Which export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// Private: quality-eligible judgments, any external flag.
    Private,
    /// External: quality- and externally-eligible judgments only.
    External,
}

impl ExportKind {
    /// What one example of this export holds, in words (in the manifest).
    pub fn contents(self) -> &'static str {
        match self {
            Self::Private => PRIVATE_CONTENTS,
            Self::External => EXTERNAL_CONTENTS,
        }
    }

    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private-training-export",
            Self::External => "training-export",
        }
    }
}

/// The shape of each JSONL line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Chat fine-tuning: `messages` + `provenance`.
    #[default]
    Sft,
    /// Preference pairs: `input`, `preferred_output`, `non_preferred_output`
    /// + `provenance`.
    Dpo,
}

impl Format {
    /// The stable name (`--format`, the manifest's `exampleFormat`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sft => "sft",
            Self::Dpo => "dpo",
        }
    }
}

/// An export failed. Ids and counts only.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] stream_store::StoreError),
    /// The destination was refused.
    #[error(transparent)]
    Destination(#[from] DestinationError),
    /// A supplied example lacks a provenance id; nothing was written.
    #[error("example {index} lacks its {field} provenance id; nothing was written")]
    IncompleteExample {
        /// Position in the supplied list.
        index: usize,
        /// The missing id.
        field: &'static str,
    },
    /// Writing failed.
    #[error("writing the export failed: {0}")]
    Io(std::io::ErrorKind),
}
