//! Snapshots stored as content-addressed parts: each part once in `blobs`
//! under its SHA-256 (listed in `snapshot_parts`), and `snapshots` mapping a
//! snapshot id to its root part. The store does not interpret the bytes;
//! `stream_core::parts` cuts and rejoins them.

use rusqlite::{Connection, OptionalExtension, params};
use stream_core::canon::sha256;
use stream_core::parts::{JoinError, Split, join, join_unchecked, split};
use stream_core::{Sha256Hex, SnapshotId};

use crate::sqlite::{backend, read_blob};
use crate::{PartFault, StoreError};

/// A reassembled snapshot larger than this is refused.
const MAX_SNAPSHOT_BYTES: usize = 64 << 20;

/// Stores `bytes` as the parts of snapshot `id`; a snapshot already stored
/// is left as it is. Refuses bytes that do not hash to `id`.
pub(crate) fn put_snapshot(
    c: &Connection,
    id: &SnapshotId,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let split = checked_split(id, bytes)?;
    if snapshot_root(c, id)?.is_some() {
        return Ok(());
    }
    for (sha, part) in &split.parts {
        c.prepare_cached("INSERT OR IGNORE INTO blobs (sha256, bytes) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![sha.as_str(), part]))
            .map_err(backend)?;
        c.prepare_cached("INSERT OR IGNORE INTO snapshot_parts (sha256) VALUES (?1)")
            .and_then(|mut s| s.execute([sha.as_str()]))
            .map_err(backend)?;
    }
    c.execute(
        "INSERT INTO snapshots (id, root) VALUES (?1, ?2)",
        [id.as_str(), split.root.as_str()],
    )
    .map_err(backend)?;
    Ok(())
}

/// The parts of snapshot `id`; refuses bytes that do not hash to it.
pub(crate) fn checked_split(id: &SnapshotId, bytes: &[u8]) -> Result<Split, StoreError> {
    if sha256(bytes).as_str() != id.as_str() {
        return Err(StoreError::SnapshotHash { id: id.clone() });
    }
    Ok(split(bytes))
}

fn snapshot_root(c: &Connection, id: &SnapshotId) -> Result<Option<String>, StoreError> {
    c.prepare_cached("SELECT root FROM snapshots WHERE id = ?1")
        .and_then(|mut s| s.query_row([id.as_str()], |r| r.get(0)).optional())
        .map_err(backend)
}

/// The bytes of snapshot `id`, reassembled from its parts and checked
/// against every part's hash and the id. A snapshot without a parts row is
/// read as a whole blob (written by schema 1 and not rewritten because it
/// does not verify), for the caller to refuse.
pub(crate) fn read_snapshot(
    c: &Connection,
    id: &SnapshotId,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(root) = snapshot_root(c, id)? else {
        let Ok(whole) = Sha256Hex::parse(id.as_str()) else {
            return Ok(None);
        };
        return read_blob(c, &whole);
    };
    reassemble(id, &root, |sha| read_blob(c, sha)).map(Some)
}

/// Joins the parts from `root` with `fetch` and checks them against `id`:
/// the one home of the refusal rules every backend shares.
pub(crate) fn reassemble(
    id: &SnapshotId,
    root: &str,
    mut fetch: impl FnMut(&Sha256Hex) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Vec<u8>, StoreError> {
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
    // The whole is checked against the id, which no altered part can
    // match; only then is each part hashed, to name the altered one.
    let bytes = join_unchecked(&root, MAX_SNAPSHOT_BYTES, &mut fetch).map_err(refusal)?;
    if sha256(&bytes).as_str() == id.as_str() {
        return Ok(bytes);
    }
    join(&root, MAX_SNAPSHOT_BYTES, &mut fetch).map_err(refusal)?;
    Err(fault(&root, PartFault::Altered))
}
