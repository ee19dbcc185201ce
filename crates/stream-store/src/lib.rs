//! The event store: the event log and document pointer of docs/design.md §2.
//!
//! Owns append-only events on named sources with a gap-free `seq`, the
//! append identity rule (Inserted / Converged / Conflict, docs/design.md §4),
//! transactions that commit many appends and row writes all or nothing, and
//! the rows beside the events: runs, consumer progress, controls, documents
//! with immutable versions and a current pointer, and content-addressed blobs.
//!
//! Read [`Store`], [`Tx`] and [`AppendOutcome`] first. [`SqliteStore`] is the
//! embedded backend; `conformance` (feature `conformance`) is the test
//! suite every backend must pass. [`ReadOnlyStore`] opens either backend
//! for reading only.
//!
//! This crate knows nothing of Telegram, providers or proposals: it stores
//! bytes under the rules of the envelope and never interprets payloads.

#![deny(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod delegate;
#[cfg(feature = "conformance")]
pub mod faulty;
mod lease;
mod parts;
#[cfg(feature = "conformance")]
pub mod pgtest;

/// What [`delegate_read!`] names from other crates, so that its callers need
/// not depend on them.
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
    pub use stream_core;
}

mod postgres;
mod private;
mod readonly;
mod rows;
mod sqlite;

pub use lease::{LEASE_ROW, Lease, LeaseAttempt, LeaseHolder, LeaseLost, LeaseState};
pub use parts::SnapshotBytes;
pub use postgres::{PG_SCHEMA_VERSION, PostgresStore, TlsRefusal};
pub use readonly::ReadOnlyStore;
pub use rows::*;
pub use sqlite::SqliteStore;
pub use sqlite::migrate::SCHEMA_VERSION;

use stream_core::canon::Hashed;
use stream_core::{
    DocumentId, EventId, NewEvent, RunId, Sha256Hex, SnapshotId, SourceName, StoredEvent, VersionId,
};

/// The store's size and what takes it up. Blob bytes are split into those
/// of snapshot parts, of document versions, and the rest (photos and other
/// blobs: the store does not know which blob is a photo).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// The database file plus its write-ahead log.
    pub file_bytes: u64,
    /// Events stored.
    pub events: u64,
    /// Bytes of event rows (payload and envelope columns), with the texts
    /// stored out of their payloads (SQLite, schema 11), each once.
    pub event_bytes: u64,
    /// Snapshots stored as parts.
    pub snapshots: u64,
    /// Distinct snapshot parts (blobs in part encoding).
    pub snapshot_parts: u64,
    /// Their bytes.
    pub snapshot_part_bytes: u64,
    /// Distinct blobs holding document versions.
    pub document_blobs: u64,
    /// Their bytes.
    pub document_bytes: u64,
    /// Every other blob (photos, declarations, whole snapshots of schema 1).
    pub other_blobs: u64,
    /// Their bytes.
    pub other_blob_bytes: u64,
}

/// Every way the store can refuse or fail. Carries ids and counts, never
/// payload content.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id exists with another source, type, version, authorship,
    /// sensitivity, root, parent or payload.
    #[error("event {id} already exists with different content")]
    Conflict {
        /// The contested id.
        id: EventId,
    },
    /// An immutable document version exists with different facts.
    #[error("document version {id} already exists with different content")]
    VersionConflict {
        /// The contested version.
        id: VersionId,
    },
    /// A document id is already bound to another source or path.
    #[error("document {id} is already bound to another source or path")]
    DocumentConflict {
        /// The contested document.
        id: DocumentId,
    },
    /// A row references something that does not exist.
    #[error("{what} does not exist")]
    Missing {
        /// What was missing, with its id.
        what: String,
    },
    /// The file is not an SQLite database, or is damaged.
    #[error("the store file {path} is corrupt or not a database")]
    Corrupt {
        /// The file.
        path: String,
    },
    /// The file is an SQLite database that thestream did not create.
    #[error("the store file {path} belongs to another application")]
    ForeignDatabase {
        /// The file.
        path: String,
    },
    /// The file was written by a newer thestream.
    #[error("the store schema version {found} is newer than this build supports ({supported})")]
    NewerSchema {
        /// Version in the file.
        found: u32,
        /// Newest version this build knows.
        supported: u32,
    },
    /// A read-only open found a schema this build reads only after
    /// migrating it, which a read-only open never does.
    #[error(
        "the store schema version {found} is older than this build's ({supported}); \
         run `thestream serve` (or any writing command) once to migrate it"
    )]
    OlderSchema {
        /// Version in the store.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A read-only open found no store: a missing file, or an empty
    /// database, which a read-only open never creates.
    #[error("there is no store at {path}; `thestream serve` (or any writing command) creates it")]
    NoStore {
        /// The file, or the database's label (never its URL).
        path: String,
    },
    /// A stored row did not decode (damaged or foreign data).
    #[error("stored {what} is invalid")]
    InvalidRow {
        /// Which row.
        what: String,
    },
    /// A store file could not be made owner-only (0600), or is not a
    /// regular file.
    #[error("the store file {path} cannot be made owner-only (mode 0600)")]
    NotPrivate {
        /// The file.
        path: String,
    },
    /// Snapshot bytes given to store do not hash to their id.
    #[error("snapshot {id} does not match its bytes")]
    SnapshotHash {
        /// The snapshot.
        id: SnapshotId,
    },
    /// A stored snapshot does not reassemble from its parts.
    #[error("snapshot {id}: part {part} is {fault}")]
    SnapshotPart {
        /// The snapshot.
        id: SnapshotId,
        /// The part's hash.
        part: String,
        /// What is wrong with it.
        fault: PartFault,
    },
    /// The PostgreSQL URL's TLS setting is refused before anything is
    /// sent: it could carry the login and the store in plain text.
    #[error("the database URL's TLS setting is refused: {0}")]
    Tls(#[from] TlsRefusal),
    /// The disk under the store failed ([`DiskFault`]); what failed was not
    /// committed.
    #[error("the disk under the store failed: {fault} (SQLite code {code})")]
    Disk {
        /// What failed.
        fault: DiskFault,
        /// SQLite's extended result code.
        code: i32,
    },
    /// The backend failed.
    #[error("store backend error: {0}")]
    Backend(String),
}

/// How the disk under the store failed, by what a running `serve` must do
/// about it (docs/operating.md, "A failing disk").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// No space left (ENOSPC): retrying once space returns is safe.
    Full,
    /// A sync (`fsync`) failed: the kernel may already have dropped the
    /// pages it could not write, so a later successful sync proves nothing.
    Sync,
    /// Any other I/O error (a read, a write, a lock): the file's state is
    /// unknown.
    Io,
}

impl std::fmt::Display for DiskFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Full => "no space left on the device",
            Self::Sync => "a sync to disk failed",
            Self::Io => "an I/O error",
        })
    }
}

/// What a long-running writer (`serve`) does after a store error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Log it and try again later.
    Retry,
    /// Refuse new work and try again once the disk has room.
    AwaitSpace,
    /// Stop the process: nothing it holds in memory about the store can be
    /// trusted; a restart re-reads it from disk.
    Stop,
}

impl StoreError {
    /// The one rule for what a long-running writer does after this error
    /// (docs/operating.md, "A failing disk"): a full disk is waited out, a
    /// failed sync or any other I/O error stops the process, everything
    /// else is retried as before.
    pub fn recovery(&self) -> Recovery {
        match self {
            Self::Disk { fault, .. } => match fault {
                DiskFault::Full => Recovery::AwaitSpace,
                DiskFault::Sync | DiskFault::Io => Recovery::Stop,
            },
            Self::Conflict { .. }
            | Self::VersionConflict { .. }
            | Self::DocumentConflict { .. }
            | Self::Missing { .. }
            | Self::Corrupt { .. }
            | Self::ForeignDatabase { .. }
            | Self::NewerSchema { .. }
            | Self::OlderSchema { .. }
            | Self::NoStore { .. }
            | Self::InvalidRow { .. }
            | Self::NotPrivate { .. }
            | Self::SnapshotHash { .. }
            | Self::SnapshotPart { .. }
            | Self::Tls(_)
            | Self::Backend(_) => Recovery::Retry,
        }
    }
}

/// The identity rule's comparison (docs/design.md §4): every envelope field
/// and the payload hash. Backends call it inside the appending transaction.
pub(crate) fn same_content(existing: &StoredEvent, new: &NewEvent) -> bool {
    let e = &existing.event;
    e.source == new.source
        && e.event_type == new.event_type
        && e.version == new.version
        && e.authorship == new.authorship
        && e.sensitive == new.sensitive
        && e.root == new.root
        && e.parent == new.parent
        && e.payload_sha256 == new.payload_sha256
}

/// The result of one append, as docs/design.md §4 defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The id was absent; the event now has this `seq`.
    Inserted {
        /// Its position in its source.
        seq: u64,
    },
    /// The id was present with identical content; nothing was written.
    Converged {
        /// The existing position.
        seq: u64,
    },
    /// The id was present with different content; nothing was written.
    Conflict,
}

impl AppendOutcome {
    /// Turns [`AppendOutcome::Conflict`] into [`StoreError::Conflict`], for
    /// callers whose transaction must not commit past a conflict.
    pub fn or_conflict(self, id: &EventId) -> Result<u64, StoreError> {
        match self {
            Self::Inserted { seq } | Self::Converged { seq } => Ok(seq),
            Self::Conflict => Err(StoreError::Conflict { id: id.clone() }),
        }
    }
}

/// Which events to read. Results are in commit order (by `seq` when a
/// source is given).
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// Only this source.
    pub source: Option<SourceName>,
    /// Only events after this `seq` (with `source`).
    pub after_seq: u64,
    /// Only events before this `seq` (with `source`).
    pub before_seq: Option<u64>,
    /// Newest first instead of oldest first.
    pub descending: bool,
    /// Only this type (without version).
    pub event_type: Option<String>,
    /// Only events whose root is one of these (`None`: any root; an empty
    /// list matches nothing).
    pub roots: Option<Vec<EventId>>,
    /// At most this many.
    pub limit: Option<usize>,
}

impl EventQuery {
    /// Events of `source` after `seq`.
    pub fn source_after(source: &SourceName, seq: u64) -> Self {
        Self {
            source: Some(source.clone()),
            after_seq: seq,
            ..Self::default()
        }
    }

    /// Events of `source` before `seq`, newest first: the tail of a source
    /// read backwards without touching its beginning.
    pub fn source_before(source: &SourceName, seq: u64) -> Self {
        Self {
            source: Some(source.clone()),
            before_seq: Some(seq),
            descending: true,
            ..Self::default()
        }
    }

    /// At most `n` events.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }

    /// Events of one type.
    pub fn of_type(event_type: &str) -> Self {
        Self {
            event_type: Some(event_type.to_owned()),
            ..Self::default()
        }
    }

    /// Events whose root is `root`.
    pub fn rooted_at(root: &EventId) -> Self {
        Self::rooted_at_any(vec![root.clone()])
    }

    /// Events whose root is one of `roots`, in commit order: the trees of
    /// several roots in one read.
    pub fn rooted_at_any(roots: Vec<EventId>) -> Self {
        Self {
            roots: Some(roots),
            ..Self::default()
        }
    }
}

/// Reads, available both on a store (each call sees the latest commit) and
/// inside a transaction (sees the transaction's own writes).
///
/// Every method must answer from committed state only (on a store) or from
/// committed state plus this transaction's writes (on a [`Tx`]); a dropped
/// transaction's writes must never be seen. Each method's "must"
/// sentences are what `conformance::a_random_history_answers_as_the_model_does`
/// checks a backend against.
pub trait Read {
    /// One event by id. Must return the event exactly as appended (every
    /// envelope field, the payload bytes) with the `seq` it was given, or
    /// `None` when no committed (or own) append inserted that id.
    fn event(&self, id: &EventId) -> Result<Option<StoredEvent>, StoreError>;
    /// Events matching a query. Must return exactly the events every given
    /// filter admits (source, `after_seq` < seq < `before_seq`, type,
    /// root), in commit order, or by `seq` when a source is given,
    /// descending when asked, cut to `limit`; an empty `roots` list must
    /// match nothing.
    fn events(&self, query: &EventQuery) -> Result<Vec<StoredEvent>, StoreError>;
    /// The highest `seq` of a source. Must be 0 for a source without events
    /// and equal the number of its events otherwise (`seq` is gap-free).
    fn source_head(&self, source: &SourceName) -> Result<u64, StoreError>;
    /// The names of all sources with events. Must name each source holding
    /// at least one event once, and no other.
    fn sources(&self) -> Result<Vec<SourceName>, StoreError>;
    /// A run row. Must return the row last put under that id, or `None`.
    fn run(&self, id: &RunId) -> Result<Option<RunRow>, StoreError>;
    /// Runs in a status, oldest first. Must return every run whose last
    /// put row has that status, and no other.
    fn runs_with_status(&self, status: RunStatus) -> Result<Vec<RunRow>, StoreError>;
    /// A consumer's progress. Must return the value last set, or `None`.
    fn progress(&self, consumer: &str) -> Result<Option<Progress>, StoreError>;
    /// A control value. Must return the value last set under `key`, or
    /// `None`.
    fn control(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError>;
    /// A document. Must return the row `ensure_document` made, with the
    /// current pointer last set, or `None`.
    fn document(&self, id: &DocumentId) -> Result<Option<DocumentRow>, StoreError>;
    /// All documents of a source. Must return each document bound to
    /// `source`, and no other.
    fn documents(&self, source: &SourceName) -> Result<Vec<DocumentRow>, StoreError>;
    /// An immutable document version. Must return the version as first
    /// inserted, or `None`.
    fn version(&self, id: &VersionId) -> Result<Option<VersionRow>, StoreError>;
    /// A blob's bytes. Must return the bytes stored under that SHA-256, or
    /// `None`.
    fn blob(&self, sha256: &Sha256Hex) -> Result<Option<Vec<u8>>, StoreError>;
    /// A snapshot's bytes, reassembled from its parts and the whole checked
    /// against its id; a missing or altered part is
    /// [`StoreError::SnapshotPart`] (each part is hashed to name it), a
    /// whole blob that does not match is [`StoreError::SnapshotHash`].
    /// Must return the bytes given to `put_snapshot` byte for byte, or
    /// `None` when that id was never stored.
    fn snapshot(&self, id: &SnapshotId) -> Result<Option<SnapshotBytes>, StoreError>;
    /// Up to `limit` events with position > `after`, in position order:
    /// a reader that pages from the last position it saw misses nothing
    /// and repeats nothing, since positions are handed out in commit order.
    /// Must return at most `limit` events, positions strictly increasing,
    /// and, paged to the end, every committed event once, in commit order.
    fn events_after_position(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<PositionedEvent>, StoreError>;
    /// The highest position. Must be 0 when empty, else the position of
    /// the last event `events_after_position` returns.
    fn last_position(&self) -> Result<u64, StoreError>;
}

/// One event with its global position: commit order across all sources
/// (the events' `pos` column on both backends). Positions only grow; they
/// may skip numbers (PostgreSQL hands a rolled-back insert's number to no
/// one), never go back, and a committed event's never changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionedEvent {
    /// Its position, from 1.
    pub position: u64,
    /// The event.
    pub event: StoredEvent,
}

/// A write transaction: everything in it commits together or not at all.
/// Dropping it without [`Tx::commit`] rolls back: none of its writes may
/// then be seen, nor any `seq` or position it used be left as a gap. Its
/// own reads ([`Read`]) must see its writes.
pub trait Tx: Read {
    /// Appends one event under the identity rule. Must insert an absent id
    /// at its source's next `seq` (`Inserted`); must write nothing for a
    /// present id, answering `Converged` with its `seq` when every envelope
    /// field and the payload are the same, else `Conflict`; the
    /// transaction must stay usable after either.
    fn append(&mut self, event: &NewEvent) -> Result<AppendOutcome, StoreError>;
    /// Stores bytes under the SHA-256 they were hashed with (idempotent):
    /// a reader that hashed them to name them in an event hands them on
    /// without a second hash. Must keep one copy per digest; storing it
    /// again must change nothing.
    fn put_hashed(&mut self, blob: &Hashed<&[u8]>) -> Result<(), StoreError>;
    /// Stores bytes under their SHA-256 (idempotent). Must return that
    /// digest, as [`Tx::put_hashed`] keeps it.
    fn put_blob(&mut self, bytes: &[u8]) -> Result<Sha256Hex, StoreError> {
        let blob = Hashed::new(bytes);
        self.put_hashed(&blob)?;
        Ok(blob.sha256().clone())
    }
    /// Stores snapshot bytes as content-addressed parts (parts shared with
    /// stored snapshots are stored once); idempotent. Must refuse bytes
    /// that do not hash to `id` with [`StoreError::SnapshotHash`], writing
    /// nothing, and leave the transaction usable.
    fn put_snapshot(&mut self, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError>;
    /// Inserts or replaces a run row. Must make `run` return this row.
    fn put_run(&mut self, run: &RunRow) -> Result<(), StoreError>;
    /// Sets a consumer's progress. Must make `progress` return this value.
    fn set_progress(&mut self, consumer: &str, progress: &Progress) -> Result<(), StoreError>;
    /// Sets a control value. Must make `control` return this value.
    fn set_control(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError>;
    /// Creates a document row if absent (no current version yet). Must
    /// change nothing for a document bound to the same source and path,
    /// and refuse one bound elsewhere ([`StoreError::DocumentConflict`]).
    fn ensure_document(
        &mut self,
        id: &DocumentId,
        source: &SourceName,
        path: &str,
    ) -> Result<(), StoreError>;
    /// Records an immutable version; an identical retry is a no-op. Must
    /// refuse the same id with other facts ([`StoreError::VersionConflict`]),
    /// and a version whose document or blob is not stored
    /// ([`StoreError::Missing`]).
    fn insert_version(&mut self, version: &VersionRow) -> Result<(), StoreError>;
    /// Moves a document's current pointer. Must refuse a version that is
    /// not stored as a version of that document ([`StoreError::Missing`]).
    fn set_current_version(
        &mut self,
        doc: &DocumentId,
        version: &VersionId,
    ) -> Result<(), StoreError>;
    /// Commits everything. Must make every write of the transaction
    /// durable and visible to every later read, with positions in commit
    /// order, or, failing, none of them.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// Free space a send needs on the store's filesystem ([`Store::has_room`]).
/// A receipt's commit appends whole pages to SQLite's WAL: the event row,
/// its four index entries and the watermark row, each with the pages a
/// b-tree split above them may touch, some dozens of 4 KiB pages at the
/// most; 1 MiB leaves room for several.
pub const COMMIT_ROOM: u64 = 1 << 20;

/// A store backend.
pub trait Store: Read + Send + Sync {
    /// Starts a write transaction, waiting for other writers (other
    /// processes included) within the backend's busy timeout. Must let one
    /// writer at a time run, so that what a transaction read stays true
    /// until it commits.
    fn begin(&self) -> Result<Box<dyn Tx + '_>, StoreError>;

    /// A cheap counter that differs from its last value when anything was
    /// committed since, by this process or another (SQLite's
    /// `PRAGMA data_version` on the reading connection). Lets a long-lived
    /// reader notice another process's writes without re-reading rows.
    /// Must move with every commit of another connection, and only then.
    fn data_version(&self) -> Result<u64, StoreError>;

    /// Whether a small commit (a delivery receipt) will find room: `false`
    /// while the filesystem holding the store has less than [`COMMIT_ROOM`]
    /// free. Delivery asks before `sendMessage`, so that no reply is sent
    /// whose receipt could not be stored (it would go out again once space
    /// returns). No default: a wrapper that answered for its inner store
    /// would send into a full disk. Must answer `false` whenever less than
    /// [`COMMIT_ROOM`] is free.
    fn has_room(&self) -> Result<bool, StoreError>;

    /// Appends one event in its own transaction. Must answer as
    /// [`Tx::append`] does, and commit unless the answer is `Conflict`.
    fn append(&self, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
        let mut tx = self.begin()?;
        let outcome = tx.append(event)?;
        if outcome != AppendOutcome::Conflict {
            tx.commit()?;
        }
        Ok(outcome)
    }
}
