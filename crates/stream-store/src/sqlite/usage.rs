//! What a SQLite store holds, in bytes by kind ([`StoreUsage`]), and its
//! online backup.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::backup::{Backup, StepResult};

use crate::sqlite::{SqliteStore, backend};
use crate::{StoreError, StoreUsage};

/// A blob in part encoding: it starts with one of `stream_core::parts::HEADERS`
/// (checked by `the_part_header_is_what_usage_recognises`). A
/// photo starting so would be counted as a part: statistics only. A
/// snapshot's text blob has no header. It counts once, as the document
/// version (`memory.md`) or the event (a message, a reply) holding the same
/// text, and among the other blobs when neither does (a long prompt).
const IS_PART: &str =
    "substr(bytes, 1, 4) IN (CAST('tsp3' AS BLOB), CAST('tsp2' AS BLOB), CAST('tsp1' AS BLOB))";

/// A blob that is a document version's.
const IS_DOCUMENT: &str = "sha256 IN (SELECT sha256 FROM document_versions)";

/// A blob that is a text cut out of an event's payload.
const IS_EVENT_TEXT: &str = "sha256 IN (SELECT text_sha FROM events WHERE text_sha IS NOT NULL)";

fn count(c: &Connection, sql: &str) -> Result<(u64, u64), StoreError> {
    c.query_row(sql, [], |r| {
        let n: i64 = r.get(0)?;
        let bytes: Option<i64> = r.get(1)?;
        Ok((
            u64::try_from(n).unwrap_or(0),
            u64::try_from(bytes.unwrap_or(0)).unwrap_or(0),
        ))
    })
    .map_err(backend)
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The size of the store at `path` and its bytes by kind, read through
/// `c` (the store's reader, or a read-only connection).
pub(crate) fn usage_of(path: &Path, c: &Connection) -> Result<StoreUsage, StoreError> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let file_bytes = file_len(path) + file_len(Path::new(&wal));
    let (events, row_bytes) = count(
        c,
        "SELECT count(*), sum(length(payload) + length(id) + length(source) + length(type) \
         + length(authorship) + ifnull(length(root), 0) + ifnull(length(parent), 0) \
         + length(payload_sha256) + ifnull(length(text_sha), 0) + 24) FROM events",
    )?;
    let (_, text_bytes) = count(
        c,
        &format!(
            "SELECT count(*), sum(length(bytes)) FROM blobs WHERE {IS_EVENT_TEXT} \
             AND NOT {IS_DOCUMENT}"
        ),
    )?;
    let event_bytes = row_bytes + text_bytes;
    let (snapshots, _) = count(c, "SELECT count(*), 0 FROM snapshots")?;
    // A part is recognised by its header; a document version's or
    // an event's blob counts as theirs whatever it starts with.
    let (snapshot_parts, snapshot_part_bytes) = count(
        c,
        &format!(
            "SELECT count(*), sum(length(bytes)) FROM blobs WHERE {IS_PART} \
             AND NOT {IS_DOCUMENT} AND NOT {IS_EVENT_TEXT}"
        ),
    )?;
    let (document_blobs, document_bytes) = count(
        c,
        &format!("SELECT count(*), sum(length(bytes)) FROM blobs WHERE {IS_DOCUMENT}"),
    )?;
    let (other_blobs, other_blob_bytes) = count(
        c,
        &format!(
            "SELECT count(*), sum(length(bytes)) FROM blobs WHERE NOT {IS_PART} \
             AND NOT {IS_DOCUMENT} AND NOT {IS_EVENT_TEXT}"
        ),
    )?;
    Ok(StoreUsage {
        file_bytes,
        events,
        event_bytes,
        snapshots,
        snapshot_parts,
        snapshot_part_bytes,
        document_blobs,
        document_bytes,
        other_blobs,
        other_blob_bytes,
    })
}

impl SqliteStore {
    /// The store's size and its bytes by kind.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        self.with_reader(|c| usage_of(self.path(), c))
    }

    /// Copies the whole store into the (new, empty) file `into` with
    /// SQLite's online backup: one read transaction, so the copy is
    /// consistent while other connections and processes write. The copy is
    /// left in rollback-journal mode, one self-contained file; opening it
    /// as a store turns WAL back on.
    pub fn backup_into(&self, into: &Path) -> Result<(), StoreError> {
        let mut dest = Connection::open(into).map_err(backend)?;
        self.with_reader(|c| {
            let backup = Backup::new(c, &mut dest).map_err(backend)?;
            // All pages in one step: one read transaction, one consistent
            // state. A busy or locked source is retried within the timeout.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                match backup.step(-1).map_err(backend)? {
                    StepResult::Done => return Ok(()),
                    StepResult::More | StepResult::Busy | StepResult::Locked
                        if std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    StepResult::More | StepResult::Busy | StepResult::Locked => {
                        return Err(StoreError::Backend("backup: source stayed busy".into()));
                    }
                    _ => return Err(StoreError::Backend("backup: unexpected step".into())),
                }
            }
        })?;
        dest.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
            .map_err(backend)?;
        dest.close().map_err(|(_, e)| backend(e))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_part_header_is_what_usage_recognises() {
        for header in stream_core::parts::HEADERS {
            let header = std::str::from_utf8(header).unwrap();
            assert_eq!(
                header.len(),
                4,
                "substr(bytes, 1, 4) reads the whole header"
            );
            assert!(super::IS_PART.contains(&format!("CAST('{header}' AS BLOB)")));
            assert!(crate::postgres::usage::USAGE.contains(&format!("'{header}'::bytea")));
        }
    }
}
