//! The SQLite queries of snapshot parts (`parts` holds the rules): parts in
//! `blobs` (recognised by their header, schema 4), `snapshots` mapping an id
//! to its root.

use std::rc::Rc;
use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::vtab::array::Array;
use rusqlite::{Connection, OptionalExtension, params};
use stream_core::parts::Digest;
use stream_core::{Sha256Hex, SnapshotId};

use crate::parts::{check_snapshot, checked_whole, join_snapshot, split_snapshot};
use crate::sqlite::{INSERT_BLOB, backend, blob_key, raw_key, read_blob};
use crate::{SnapshotBytes, StoreError};

/// How blob keys (and snapshot ids) are written: 64 hex digits before the
/// binary-key rebuild (schema 1's rewrite into parts runs there), 32 raw
/// bytes since (snapshot ids since schema 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyForm {
    Hex,
    Raw,
}

impl KeyForm {
    /// A digest as this form stores it.
    fn key(self, sha: &Digest) -> Value {
        match self {
            Self::Hex => Value::Text(Sha256Hex::from_bytes(*sha).as_str().to_owned()),
            Self::Raw => Value::Blob(sha.to_vec()),
        }
    }

    /// A snapshot id as `snapshots.id` holds it: hex until schema 13, raw
    /// bytes since (the rewrite of schema 1 runs before, with `Hex`).
    fn id(self, id: &SnapshotId) -> Value {
        self.key(&id.to_bytes())
    }
}

/// The bytes of a level's blobs by key (`read_level`), written once: the
/// raw keys bound as one array (`rarray`, loaded by `configure`), each row
/// with its key's position in it.
pub(crate) static READ_LEVEL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.rowid - 1, b.bytes FROM rarray(?1) k JOIN blobs b ON {}",
        blob_key("b.sha256", "k.value")
    )
});

/// Which of an array of blob keys are stored, by position: one statement
/// for a snapshot's parts, most of which an earlier snapshot stored.
pub(crate) static STORED_KEYS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.rowid - 1 FROM rarray(?1) k \
         WHERE EXISTS (SELECT 1 FROM blobs b WHERE {})",
        blob_key("b.sha256", "k.value")
    )
});

/// Stores `bytes` as the parts of snapshot `id`; a snapshot already stored
/// is left as it is. Refuses bytes that do not hash to `id`.
pub(crate) fn put_snapshot(
    c: &Connection,
    id: &SnapshotId,
    bytes: &[u8],
    form: KeyForm,
) -> Result<(), StoreError> {
    check_snapshot(id, bytes)?;
    let stored = c
        .prepare_cached("SELECT 1 FROM snapshots WHERE id = ?1")
        .and_then(|mut s| s.exists([form.id(id)]))
        .map_err(backend)?;
    if stored {
        return Ok(());
    }
    let split = split_snapshot(bytes);
    let keys: Array = Rc::new(split.parts.iter().map(|(sha, _)| form.key(sha)).collect());
    let stored = stored_keys(c, Rc::clone(&keys))?;
    for ((key, (_, part)), stored) in keys.iter().zip(&split.parts).zip(stored) {
        if !stored {
            c.prepare_cached(&INSERT_BLOB)
                .and_then(|mut s| s.execute(params![key, part]))
                .map_err(backend)?;
        }
    }
    c.prepare_cached("INSERT INTO snapshots (id, root) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![form.id(id), form.key(&split.root)]))
        .map_err(backend)?;
    Ok(())
}

/// The root of snapshot `id`, as hex.
fn snapshot_root(c: &Connection, id: &SnapshotId) -> Result<Option<String>, StoreError> {
    let root: Option<Vec<u8>> = c
        .prepare_cached("SELECT root FROM snapshots WHERE id = ?1")
        .and_then(|mut s| s.query_row([KeyForm::Raw.id(id)], |r| r.get(0)).optional())
        .map_err(backend)?;
    root.map(|raw| {
        raw_key(&raw, &format!("snapshot {id}"))
            .map(|root| Sha256Hex::from_bytes(root).as_str().to_owned())
    })
    .transpose()
}

/// The bytes of snapshot `id`, reassembled from its parts and checked (see
/// `join_snapshot`). A snapshot without a parts row is read as a whole blob
/// (written by schema 1 and not rewritten because it does not verify), and
/// refused unless it hashes to the id.
pub(crate) fn read_snapshot(
    c: &Connection,
    id: &SnapshotId,
) -> Result<Option<SnapshotBytes>, StoreError> {
    let Some(root) = snapshot_root(c, id)? else {
        let Ok(whole) = Sha256Hex::parse(id.as_str()) else {
            return Ok(None);
        };
        return read_blob(c, &whole)?
            .map(|bytes| checked_whole(id, bytes))
            .transpose();
    };
    join_snapshot(id, &root, |level| read_level(c, level)).map(Some)
}

/// Runs `sql` over `keys` bound as one array: each row names a key by its
/// position (column 0) and `found` reads what the row says of it.
fn by_position<T: Clone>(
    c: &Connection,
    sql: &str,
    keys: Array,
    absent: T,
    found: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut out = vec![absent; keys.len()];
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let mut rows = stmt.query([keys]).map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        let at: i64 = row.get(0).map_err(backend)?;
        if let Some(slot) = usize::try_from(at).ok().and_then(|at| out.get_mut(at)) {
            *slot = found(row).map_err(backend)?;
        }
    }
    Ok(out)
}

/// For each key, whether a blob is stored under it.
fn stored_keys(c: &Connection, keys: Array) -> Result<Vec<bool>, StoreError> {
    by_position(c, &STORED_KEYS, keys, false, |_| Ok(true))
}

/// The bytes of each blob in `level`, in its order: one query, the keys
/// bound raw, so each lookup seeks the key's index.
fn read_level(c: &Connection, level: &[Digest]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    let keys = Rc::new(level.iter().map(|sha| KeyForm::Raw.key(sha)).collect());
    by_position(c, &READ_LEVEL, keys, None, |row| row.get(1).map(Some))
}
