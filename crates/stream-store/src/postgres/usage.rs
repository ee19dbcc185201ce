//! What the database holds, in bytes by kind (as [`crate::StoreUsage`]
//! reports for SQLite); the "file" is the database's size on the server.

use super::read::query;
use super::session::Session;
use super::{PostgresStore, backend};
use crate::{StoreError, StoreUsage};

/// As SQLite's usage: a part is a blob starting with one of
/// `stream_core::parts::HEADERS`, unless a document version
/// holds it (a snapshot's text blob that is a document's counts once, as a
/// document).
pub(crate) const USAGE: &str = "WITH kinds AS (SELECT octet_length(bytes) AS n, CASE \
        WHEN sha256 IN (SELECT sha256 FROM document_versions) THEN 'document' \
        WHEN substr(bytes, 1, 4) IN ('tsp3'::bytea, 'tsp2'::bytea, 'tsp1'::bytea) THEN 'part' ELSE 'other' END AS kind \
        FROM blobs) \
    SELECT pg_database_size(current_database()), \
    (SELECT count(*) FROM events), \
    (SELECT coalesce(sum(octet_length(payload) + octet_length(id) + octet_length(source) \
        + octet_length(type) + octet_length(authorship) + coalesce(octet_length(root), 0) \
        + coalesce(octet_length(parent), 0) + octet_length(payload_sha256) + 24), 0) FROM events), \
    (SELECT count(*) FROM snapshots), \
    (SELECT count(*) FROM kinds WHERE kind = 'part'), \
    (SELECT coalesce(sum(n), 0)::bigint FROM kinds WHERE kind = 'part'), \
    (SELECT count(*) FROM kinds WHERE kind = 'document'), \
    (SELECT coalesce(sum(n), 0)::bigint FROM kinds WHERE kind = 'document'), \
    (SELECT count(*) FROM kinds WHERE kind = 'other'), \
    (SELECT coalesce(sum(n), 0)::bigint FROM kinds WHERE kind = 'other')";

impl PostgresStore {
    /// The database's size and its bytes by kind.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        usage_on(&self.reader)
    }
}

/// The usage report, read on `session` (the store's reader, or a
/// read-only session).
pub(crate) fn usage_on(session: &Session) -> Result<StoreUsage, StoreError> {
    session.call(|c| {
        let rows = query(c, USAGE, &[])?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Backend("usage query returned nothing".into()))?;
        let n = |i: usize| -> Result<u64, StoreError> {
            let v: i64 = row.try_get(i).map_err(backend)?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        Ok(StoreUsage {
            file_bytes: n(0)?,
            events: n(1)?,
            event_bytes: n(2)?,
            snapshots: n(3)?,
            snapshot_parts: n(4)?,
            snapshot_part_bytes: n(5)?,
            document_blobs: n(6)?,
            document_bytes: n(7)?,
            other_blobs: n(8)?,
            other_blob_bytes: n(9)?,
        })
    })
}
