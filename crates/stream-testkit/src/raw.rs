//! The unit the benches divide by: one raw fsync'd SQLite commit, made as a
//! store in use makes it.
//!
//! A WAL is rewritten in place after its first checkpoint (1000 pages).
//! Until then every commit also grows the file and fsyncs its new size,
//! which made this unit up to twice a running store's own commit, and every
//! ratio to it look twice as good. [`RawCommits::open`] runs past that
//! point before anything is timed.

use std::path::Path;

use rusqlite::Connection;

/// Commits made before the unit is timed: past the first checkpoint.
const WARM_UP: u64 = 1500;
/// Rows written in turn, so the table stays a few pages.
const KEYS: u64 = 120;

/// A connection that makes one fsync'd commit per [`commit`](Self::commit).
#[derive(Debug)]
pub struct RawCommits {
    conn: Connection,
    next: u64,
}

impl RawCommits {
    /// Opens `path` (a bench's store file, or a file of its own) in WAL mode
    /// with `synchronous = FULL`, adds the `bench_raw` table if missing, and
    /// commits past the WAL's first checkpoint.
    pub fn open(path: &Path) -> Result<Self, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
             CREATE TABLE IF NOT EXISTS bench_raw (k INTEGER PRIMARY KEY, v BLOB NOT NULL);",
        )?;
        let mut raw = Self { conn, next: 0 };
        for _ in 0..WARM_UP {
            raw.commit()?;
        }
        Ok(raw)
    }

    /// One `BEGIN IMMEDIATE`, one 256-byte upsert, one fsync'd `COMMIT`.
    pub fn commit(&mut self) -> Result<(), rusqlite::Error> {
        self.commit_sized(256)
    }

    /// [`commit`](Self::commit) of a `len`-byte row: a commit that also
    /// stores a blob of that size.
    pub fn commit_sized(&mut self, len: usize) -> Result<(), rusqlite::Error> {
        let key = (self.next % KEYS) as i64;
        self.next += 1;
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.conn.execute(
            "INSERT OR REPLACE INTO bench_raw (k, v) VALUES (?1, zeroblob(?2))",
            [key, i64::try_from(len).unwrap_or(i64::MAX)],
        )?;
        self.conn.execute_batch("COMMIT")
    }
}
