//! The SQLite store opened for reading only (the inspector's): one
//! connection opened `file:…?mode=ro` with `PRAGMA query_only = ON`. It
//! creates no store, migrates nothing and changes no file mode.
//!
//! WAL, as measured by `tests/it/readonly.rs`:
//! - `store.db`, and `store.db-wal` when present, keep their bytes through
//!   a session that reads everything: the connection cannot write pages,
//!   so it never checkpoints or truncates the WAL.
//! - With no `-wal`/`-shm` (a `serve` that stopped cleanly removed both),
//!   opening creates an empty `store.db-wal` and a 32 KiB `store.db-shm`
//!   with the database file's mode, as any connection to a WAL database
//!   does, and leaves them at close (a read-only connection deletes
//!   nothing). The next writing open tightens them and removes them when
//!   it closes last.
//! - `store.db-shm`, SQLite's shared-memory index of the WAL, is written
//!   by readers too: a reader that finds no read mark at the WAL's end
//!   sets one. Its bytes change during a read-only session; it holds
//!   frame numbers and offsets, no row data.
//! - A writer that closes while a read-only session is open leaves its
//!   WAL in place (it is not the last connection, so it neither
//!   checkpoints nor deletes it); nothing is lost, the next open uses it.
//! - A writer's commit is seen at the reader's next statement:
//!   `PRAGMA data_version` moves, then the new rows are read, across a
//!   checkpoint that empties the WAL too.
//! - With `query_only` off, the `mode=ro` connection would still accept a
//!   `BEGIN IMMEDIATE` (its writes refused); `query_only` refuses it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};

use crate::sqlite::migrate::check_readable;
use crate::sqlite::{classify, configure_reads, data_version, lock};
use crate::{StoreError, StoreUsage};

/// A read-only connection to a store file.
#[derive(Debug)]
pub(crate) struct SqliteReader {
    path: PathBuf,
    pub(crate) conn: Mutex<Connection>,
}

impl SqliteReader {
    /// Opens the store file at `path` for reading. A missing file is
    /// [`StoreError::NoStore`]; an older schema [`StoreError::OlderSchema`];
    /// a newer, foreign or corrupt file as [`crate::SqliteStore::open`]
    /// refuses it.
    pub(crate) fn open(path: &Path) -> Result<Self, StoreError> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => {
                return Err(StoreError::Corrupt {
                    path: path.display().to_string(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NoStore {
                    path: path.display().to_string(),
                });
            }
            Err(e) => {
                return Err(StoreError::Backend(format!(
                    "cannot read {}: {}",
                    path.display(),
                    e.kind()
                )));
            }
        }
        // SQLITE_OPEN_READ_ONLY without CREATE: a file deleted since the
        // check above is an error, never a new empty store.
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(read_only_uri(path), flags)
            .map_err(|e| classify(path, e))?;
        conn.execute_batch("PRAGMA query_only = ON")
            .map_err(|e| classify(path, e))?;
        configure_reads(&conn)?;
        check_readable(path, &conn)?;
        Ok(Self {
            path: path.to_owned(),
            conn: Mutex::new(conn),
        })
    }

    /// `PRAGMA data_version` of the connection: this connection never
    /// writes, so it changes at every commit.
    pub(crate) fn data_version(&self) -> Result<u64, StoreError> {
        data_version(&lock(&self.conn))
    }

    /// The store's size and its bytes by kind.
    pub(crate) fn usage(&self) -> Result<StoreUsage, StoreError> {
        super::usage::usage_of(&self.path, &lock(&self.conn))
    }

    /// The connection itself, for tests that try to write through it.
    #[cfg(test)]
    pub(crate) fn raw(&self) -> std::sync::MutexGuard<'_, Connection> {
        lock(&self.conn)
    }
}

/// `file:<path>?mode=ro`, the path percent-encoded so that a `?`, `#` or
/// `%` in it is part of the name, not of the URI.
fn read_only_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(char::from(b));
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?mode=ro");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Read, Store};
    use rusqlite::ErrorCode;

    fn store() -> (SqliteReader, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let writer = crate::SqliteStore::open(&path).unwrap();
        writer
            .append(&crate::conformance::event(
                "test:a",
                "1",
                serde_json::json!(1),
            ))
            .unwrap();
        drop(writer);
        (SqliteReader::open(&path).unwrap(), dir)
    }

    fn refused(reader: &SqliteReader, sql: &str) {
        let Err(err) = reader.raw().execute_batch(sql) else {
            panic!("{sql} was allowed");
        };
        assert_eq!(
            err.sqlite_error_code(),
            Some(ErrorCode::ReadOnly),
            "{sql}: {err}"
        );
    }

    /// Every kind of write is refused by the connection itself, also with
    /// `query_only` switched off again: the file is open `mode=ro`.
    #[test]
    fn the_connection_refuses_every_write() {
        let (reader, _dir) = store();
        let writes = [
            "INSERT INTO controls (key, value) VALUES ('k', '1')",
            "DELETE FROM events",
            "CREATE TABLE t (x)",
            "PRAGMA user_version = 99",
        ];
        for sql in writes {
            refused(&reader, sql);
        }
        // `query_only` refuses even a write transaction's start.
        refused(&reader, "BEGIN IMMEDIATE");
        reader
            .raw()
            .execute_batch("PRAGMA query_only = OFF")
            .unwrap();
        for sql in writes {
            refused(&reader, sql);
        }
        let version: u32 = reader
            .raw()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, crate::SCHEMA_VERSION);
        assert_eq!(reader.last_position().unwrap(), 1);
        assert!(reader.control("k").unwrap().is_none());
    }

    /// `query_only` holds on its own: a connection opened read-write with
    /// only it set refuses writes too (the second of the two locks).
    #[test]
    fn query_only_alone_refuses_writes() {
        let (reader, dir) = store();
        drop(reader);
        let conn = Connection::open(dir.path().join("store.db")).unwrap();
        conn.execute_batch("PRAGMA query_only = ON").unwrap();
        let err = conn.execute_batch("DELETE FROM events").unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(ErrorCode::ReadOnly), "{err}");
    }

    /// With `query_only` off, SQLite accepts `BEGIN IMMEDIATE` on the
    /// `mode=ro` connection (its writes are still refused), but takes no
    /// write lock: a writer commits meanwhile, and the reader sees it
    /// after its transaction ends.
    #[test]
    fn a_transaction_on_the_read_only_connection_blocks_no_writer() {
        let (reader, dir) = store();
        reader
            .raw()
            .execute_batch("PRAGMA query_only = OFF; BEGIN IMMEDIATE")
            .unwrap();
        let writer = crate::SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let started = std::time::Instant::now();
        writer
            .append(&crate::conformance::event(
                "test:a",
                "2",
                serde_json::json!(2),
            ))
            .unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        refused(&reader, "DELETE FROM events");
        assert_eq!(reader.last_position().unwrap(), 1, "its snapshot");
        reader.raw().execute_batch("ROLLBACK").unwrap();
        assert_eq!(reader.last_position().unwrap(), 2);
    }

    #[test]
    fn the_read_only_store_is_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<crate::ReadOnlyStore>();
    }

    #[test]
    fn a_path_is_encoded_so_that_it_cannot_add_uri_parameters() {
        assert_eq!(
            read_only_uri(Path::new("/data/the stream/store.db")),
            "file:/data/the%20stream/store.db?mode=ro"
        );
        assert_eq!(
            read_only_uri(Path::new("/x/a?mode=rwc#b%")),
            "file:/x/a%3Fmode%3Drwc%23b%25?mode=ro"
        );
    }
}
