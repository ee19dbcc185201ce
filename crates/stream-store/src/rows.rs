//! Rows stored beside the events.

use stream_core::{DocumentId, EventId, RunId, Sha256Hex, SnapshotId, SourceName, VersionId};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Started; attempts may have failed transiently.
    Pending,
    /// Settled with an output.
    Completed,
    /// Given up.
    Failed,
}

impl RunStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// One run of a declaration on one trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    /// Deterministic run id.
    pub run_id: RunId,
    /// Declaration id.
    pub agent_id: String,
    /// Declaration version.
    pub agent_version: u32,
    /// The trigger event.
    pub trigger_event_id: EventId,
    /// Status.
    pub status: RunStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// The retry-stable snapshot, once built.
    pub snapshot_id: Option<SnapshotId>,
}

/// A consumer's position in a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The source consumed.
    pub source: SourceName,
    /// Everything up to and including this `seq` is handled.
    pub seq: u64,
}

/// A document: a stable id for one path of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRow {
    /// Stable id.
    pub id: DocumentId,
    /// The source.
    pub source: SourceName,
    /// Normalized path.
    pub path: String,
    /// The current version, if any.
    pub current_version: Option<VersionId>,
}

/// An immutable document version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRow {
    /// Version id.
    pub id: VersionId,
    /// Its document.
    pub document_id: DocumentId,
    /// SHA-256 of the bytes (also the blob key).
    pub sha256: Sha256Hex,
    /// Size in bytes.
    pub size: u64,
    /// Content type.
    pub content_type: String,
    /// The version it follows.
    pub previous_version: Option<VersionId>,
}

/// How a stored snapshot part failed to reassemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartFault {
    /// Not stored.
    Missing,
    /// Its bytes do not hash to its key (or the whole not to the id).
    Altered,
    /// It does not parse as a part.
    Malformed,
    /// It nests too deep or reassembles too large.
    TooLarge,
}

impl std::fmt::Display for PartFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Missing => "missing",
            Self::Altered => "altered",
            Self::Malformed => "malformed",
            Self::TooLarge => "too large",
        })
    }
}
