//! Snapshots stored as content-addressed parts, the rules every backend
//! follows (docs/design.md §4): each part once in the blob store under its
//! SHA-256 (a part is recognised by its header, `stream_core::parts::HEADER`
//! or the older `HEADER_V1`), and the snapshot id mapped to its root part.
//! A long string (`memory.md`) is a raw text blob keyed by the text's own
//! hash: the very blob of the document version holding it, stored once.
//! The store does not interpret the bytes; `stream_core::parts` cuts and
//! rejoins them. A backend supplies the queries (for SQLite,
//! `sqlite::parts`): storing a [`Split`]'s parts, the root of an id, and
//! the parts of one level of the tree in one query.

use stream_core::canon::sha256;
use stream_core::parts::{Digest, JoinError, PartCheck, Split, join_levels, split};
use stream_core::{Sha256Hex, SnapshotId};

use crate::{PartFault, StoreError};

/// A reassembled snapshot larger than this is refused.
const MAX_SNAPSHOT_BYTES: usize = 64 << 20;

/// A stored snapshot's bytes, read by [`crate::Read::snapshot`] and checked
/// to hash to its id on the way out. Only this crate makes one, always
/// through `check_snapshot` or `join_snapshot`: a reader holding one
/// need not hash the bytes a second time.
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotBytes {
    id: SnapshotId,
    bytes: Vec<u8>,
}

/// The id and the length: the bytes hold messages and `memory.md`.
impl std::fmt::Debug for SnapshotBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotBytes")
            .field("id", &self.id)
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl SnapshotBytes {
    /// The id the bytes hash to.
    pub fn id(&self) -> &SnapshotId {
        &self.id
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Refuses snapshot bytes that do not hash to `id`, before anything else
/// (a snapshot already stored included).
pub(crate) fn check_snapshot(id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
    if sha256(bytes).as_str() == id.as_str() {
        Ok(())
    } else {
        Err(StoreError::SnapshotHash { id: id.clone() })
    }
}

/// Stored bytes of a whole snapshot blob (schema 1's form), checked.
pub(crate) fn checked_whole(id: &SnapshotId, bytes: Vec<u8>) -> Result<SnapshotBytes, StoreError> {
    check_snapshot(id, &bytes)?;
    Ok(SnapshotBytes {
        id: id.clone(),
        bytes,
    })
}

/// The parts to store for checked snapshot bytes: a backend stores every
/// part (once) and maps the id to the root, in the caller's transaction.
pub(crate) fn split_snapshot(bytes: &[u8]) -> Split {
    split(bytes)
}

/// The bytes of snapshot `id` rooted at `root`, fetched a level at a time
/// by `fetch_level` (the bytes of each given raw key, in order, `None` when
/// not stored). The whole is checked against the id, which no altered part
/// can match; only when that fails (or a part does not parse) is each part
/// hashed, so that the refusal names the bad part and calls an altered one
/// altered: [`StoreError::SnapshotPart`].
pub(crate) fn join_snapshot(
    id: &SnapshotId,
    root: &str,
    mut fetch_level: impl FnMut(&[Digest]) -> Result<Vec<Option<Vec<u8>>>, StoreError>,
) -> Result<SnapshotBytes, StoreError> {
    let fault = |part: &Sha256Hex, fault| StoreError::SnapshotPart {
        id: id.clone(),
        part: part.to_string(),
        fault,
    };
    let root = Sha256Hex::parse(root).map_err(|_| StoreError::InvalidRow {
        what: format!("snapshot {id}"),
    })?;
    let refusal = |e| match e {
        JoinError::Missing(part) => fault(&part, PartFault::Missing),
        JoinError::Altered(part) => fault(&part, PartFault::Altered),
        JoinError::Malformed(part) => fault(&part, PartFault::Malformed),
        JoinError::TooLarge => fault(&root, PartFault::TooLarge),
        JoinError::Fetch(e) => e,
    };
    match join_levels(
        &root,
        MAX_SNAPSHOT_BYTES,
        PartCheck::WholeOnly,
        &mut fetch_level,
    ) {
        Ok(bytes) if sha256(&bytes).as_str() == id.as_str() => {
            return Ok(SnapshotBytes {
                id: id.clone(),
                bytes,
            });
        }
        // Unchecked, an altered part may not parse: hash each to say which.
        Ok(_) | Err(JoinError::Malformed(_)) => {}
        Err(e) => return Err(refusal(e)),
    }
    join_levels(
        &root,
        MAX_SNAPSHOT_BYTES,
        PartCheck::EachPart,
        &mut fetch_level,
    )
    .map_err(refusal)?;
    Err(fault(&root, PartFault::Altered))
}
