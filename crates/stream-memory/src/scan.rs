//! The filesystem connector (docs/design.md §15, first paragraph: the
//! specification's `FilesystemConnector.scan()`).
//!
//! [`scan`] walks a context root and records every regular file in the store
//! as a document of one `filesystem:` source:
//!
//! - the **root** must be a real directory: a symlink or anything else is
//!   refused before anything is read;
//! - the walk never resolves a path twice: each directory is opened with
//!   `O_DIRECTORY | O_NOFOLLOW` relative to its parent's descriptor, each
//!   file with `O_NOFOLLOW | O_NONBLOCK` relative to its directory, and the
//!   opened descriptor is `fstat`ed — what is read is what was checked;
//! - **symlinks** (files or directories) are skipped and counted, never
//!   followed; **special files** (FIFOs, sockets, devices) are skipped and
//!   counted and never opened; entries on **another filesystem** than the
//!   root (mount points inside it) count as escaping the root and are
//!   skipped; **hidden** entries (name starting with `.`: `.git`, editor swap
//!   files, the materializer's temporary file) are skipped and counted;
//!   names that are not UTF-8 or hold control characters are skipped;
//! - a **file larger than** [`ScanLimits::max_file_bytes`] is skipped and
//!   counted, not truncated; its document keeps its last version;
//! - a **deleted file** keeps its document and current pointer (versions are
//!   immutable facts and the store has no tombstone): the report counts it
//!   as `missing`, and a materializer that compares the on-disk bytes with
//!   the frozen version refuses to write against it;
//! - the stable document id is `derive_document_id(source, path)` over the
//!   normalized `/`-separated path; a new version (SHA-256, size, content
//!   type, blob, previous version) is recorded only when the bytes differ
//!   from the current version's, together with the pointer move and one
//!   `stream.filesystem.file.changed@1` event — every new version of a scan
//!   in **one transaction**. A scan that finds nothing new writes nothing,
//!   not even an empty transaction.

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use stream_core::canon::Hashed;
use stream_core::ids::{derive_document_id, derive_version_id};
use stream_core::payload::FileChanged;
use stream_core::text::{BoundedText, Label};
use stream_core::{DocumentId, EventId, NewEvent, Sha256Hex, SourceName, VersionId};
use stream_store::{Read, Store, StoreError, Tx, VersionRow};

/// Bounds of one scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanLimits {
    /// Files larger than this are skipped (counted in `too_large`).
    pub max_file_bytes: u64,
    /// Directories deeper than this below the root are skipped.
    pub max_depth: usize,
    /// More directory entries than this in total fail the scan.
    pub max_entries: usize,
    /// More bytes of new versions than this in one scan fail it.
    pub max_new_bytes: u64,
}

impl ScanLimits {
    /// The default per-file cap: 1 MiB, four times the default
    /// `max_memory_bytes`.
    pub const DEFAULT_MAX_FILE_BYTES: u64 = 1024 * 1024;
}

impl Default for ScanLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: Self::DEFAULT_MAX_FILE_BYTES,
            max_depth: 16,
            max_entries: 10_000,
            max_new_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What was skipped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Symbolic links (to anything), never followed.
    pub symlinks: usize,
    /// FIFOs, sockets, character and block devices, never opened.
    pub special: usize,
    /// Entries on another filesystem than the root (mount points), which
    /// would take the walk outside the root.
    pub escaping: usize,
    /// Regular files over [`ScanLimits::max_file_bytes`].
    pub too_large: usize,
    /// Names starting with `.`.
    pub hidden: usize,
    /// Names that are not UTF-8, hold control characters or make a path
    /// longer than 1,024 characters.
    pub unnamed: usize,
    /// Directories deeper than [`ScanLimits::max_depth`].
    pub too_deep: usize,
}

impl Skipped {
    /// All skipped entries.
    pub fn total(&self) -> usize {
        self.symlinks
            + self.special
            + self.escaping
            + self.too_large
            + self.hidden
            + self.unnamed
            + self.too_deep
    }
}

/// One version recorded by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewVersion {
    /// The stable document id.
    pub document_id: DocumentId,
    /// The normalized path.
    pub path: String,
    /// The new immutable version.
    pub version_id: VersionId,
    /// The version it follows.
    pub previous_version_id: Option<VersionId>,
    /// SHA-256 of the bytes.
    pub sha256: Sha256Hex,
    /// Size in bytes.
    pub size: u64,
    /// The `file.changed@1` event.
    pub event_id: EventId,
}

/// What one scan found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Regular files read.
    pub files: usize,
    /// Files whose bytes equal their document's current version.
    pub unchanged: usize,
    /// New versions recorded, in path order.
    pub new_versions: Vec<NewVersion>,
    /// Documents of the source whose file was not found (deleted, or now
    /// skipped); their current pointer is kept.
    pub missing: usize,
    /// What was skipped.
    pub skipped: Skipped,
}

/// Why a scan failed. Nothing was written. Carries counts and OS error
/// codes, never paths or content.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The source is not a `filesystem:` source.
    #[error("source {source_name} is not a filesystem: source")]
    NotAFilesystemSource {
        /// The source.
        source_name: String,
    },
    /// The root does not exist.
    #[error("the context root does not exist")]
    RootMissing,
    /// The root is a symbolic link.
    #[error("the context root is a symbolic link, not a real directory")]
    RootIsSymlink,
    /// The root is not a directory.
    #[error("the context root is not a directory")]
    RootNotADirectory,
    /// Listing, opening or reading failed.
    #[error("reading the context root failed: {0}")]
    Io(std::io::Error),
    /// More entries than [`ScanLimits::max_entries`].
    #[error("the context root has more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: usize,
    },
    /// More new bytes than [`ScanLimits::max_new_bytes`].
    #[error("the scan found more than {limit} bytes of new versions")]
    TooManyNewBytes {
        /// The limit.
        limit: u64,
    },
    /// A document id, version id or event could not be built.
    #[error("a scanned file could not be recorded: {0}")]
    Record(String),
    /// The store failed or refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Errno> for ScanError {
    fn from(e: Errno) -> Self {
        Self::Io(e.into())
    }
}

/// One regular file as read, hashed once as it is read (outside any
/// transaction): the plan compares that digest and the store keeps the
/// blob under it.
struct Found {
    path: String,
    bytes: Hashed,
}

/// Scans `root` for `source` with [`ScanLimits::default`].
pub fn scan(store: &dyn Store, source: &SourceName, root: &Path) -> Result<ScanReport, ScanError> {
    scan_with_limits(store, source, root, &ScanLimits::default())
}

/// Scans `root` for `source`.
pub fn scan_with_limits(
    store: &dyn Store,
    source: &SourceName,
    root: &Path,
    limits: &ScanLimits,
) -> Result<ScanReport, ScanError> {
    scan_knowing(store, source, root, limits, &[])
}

/// [`scan_with_limits`] by a reader that expects some files to hold bytes
/// it already hashed: a file holding one of `known` takes its digest
/// ([`Hashed::new_knowing`]).
pub fn scan_knowing(
    store: &dyn Store,
    source: &SourceName,
    root: &Path,
    limits: &ScanLimits,
    known: &[Hashed<&[u8]>],
) -> Result<ScanReport, ScanError> {
    let Walked {
        mut report, found, ..
    } = walk_knowing(source, root, limits, known)?;
    // Decide against the latest commit; only if something is new, take the
    // write lock and decide again inside the transaction.
    let plan = plan(store, source, &found)?;
    check_new_bytes(&plan, limits)?;
    let plan = if plan.changes.is_empty() {
        plan
    } else {
        let mut tx = store.begin()?;
        let plan = record(&mut *tx, source, &found, limits)?;
        if !plan.changes.is_empty() {
            tx.commit()?;
        }
        plan
    };
    finish(&mut report, plan);
    Ok(report)
}

/// The first half of [`scan_with_limits`]: the root walked and every file
/// read, nothing decided or written yet. [`Walked::record_in`] is the
/// second half, inside the caller's transaction, for the same source and
/// limits.
pub fn walk(source: &SourceName, root: &Path, limits: &ScanLimits) -> Result<Walked, ScanError> {
    walk_knowing(source, root, limits, &[])
}

/// [`walk`] expecting `known` bytes, as [`scan_knowing`] does.
pub fn walk_knowing(
    source: &SourceName,
    root: &Path,
    limits: &ScanLimits,
    known: &[Hashed<&[u8]>],
) -> Result<Walked, ScanError> {
    if !source.as_str().starts_with("filesystem:") {
        return Err(ScanError::NotAFilesystemSource {
            source_name: source.to_string(),
        });
    }
    let mut report = ScanReport::default();
    let found = walk_root(root, limits, known, &mut report)?;
    report.files = found.len();
    Ok(Walked {
        source: source.clone(),
        limits: limits.clone(),
        report,
        found,
    })
}

/// A root as [`walk`] read it, with the source and limits it was read for.
pub struct Walked {
    source: SourceName,
    limits: ScanLimits,
    report: ScanReport,
    found: Vec<Found>,
}

/// Content-dark: how many files were read, never their paths or bytes.
impl std::fmt::Debug for Walked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Walked")
            .field("files", &self.found.len())
            .finish_non_exhaustive()
    }
}

impl Walked {
    /// Decides and writes what was read inside the caller's transaction,
    /// which commits it (or not) with whatever else it holds: the
    /// materializer commits the new version of `memory.md` with its
    /// receipt, in one commit.
    pub fn record_in(self, tx: &mut dyn Tx) -> Result<ScanReport, ScanError> {
        let Self {
            source,
            limits,
            mut report,
            found,
        } = self;
        let plan = record(tx, &source, &found, &limits)?;
        finish(&mut report, plan);
        Ok(report)
    }
}

fn check_new_bytes(plan: &Plan, limits: &ScanLimits) -> Result<(), ScanError> {
    let mut new_bytes: u64 = 0;
    for change in &plan.changes {
        new_bytes = new_bytes.saturating_add(change.version.size);
        if new_bytes > limits.max_new_bytes {
            return Err(ScanError::TooManyNewBytes {
                limit: limits.max_new_bytes,
            });
        }
    }
    Ok(())
}

/// Plans against `tx` and writes every new version into it (not
/// committed): the one place a scan writes.
fn record(
    tx: &mut dyn Tx,
    source: &SourceName,
    found: &[Found],
    limits: &ScanLimits,
) -> Result<Plan, ScanError> {
    let plan = plan(&*tx, source, found)?;
    check_new_bytes(&plan, limits)?;
    for change in &plan.changes {
        let blob = found[change.found].bytes.borrowed();
        debug_assert_eq!(blob.sha256(), &change.version.sha256);
        tx.put_hashed(&blob)?;
        tx.ensure_document(&change.version.document_id, source, &change.path)?;
        tx.insert_version(&change.version)?;
        tx.set_current_version(&change.version.document_id, &change.version.id)?;
        tx.append(&change.event)?.or_conflict(&change.event.id)?;
    }
    Ok(plan)
}

fn finish(report: &mut ScanReport, plan: Plan) {
    report.unchanged = plan.unchanged;
    report.missing = plan.missing;
    report.new_versions = plan
        .changes
        .into_iter()
        .map(|c| NewVersion {
            document_id: c.version.document_id,
            path: c.path,
            version_id: c.version.id,
            previous_version_id: c.version.previous_version,
            sha256: c.version.sha256,
            size: c.version.size,
            event_id: c.event.id,
        })
        .collect();
}

struct Change {
    found: usize,
    path: String,
    version: VersionRow,
    event: NewEvent,
}

struct Plan {
    changes: Vec<Change>,
    unchanged: usize,
    missing: usize,
}

/// What a scan would write, judged against `reader`.
fn plan<R: Read + ?Sized>(
    reader: &R,
    source: &SourceName,
    found: &[Found],
) -> Result<Plan, ScanError> {
    let record = |e: &dyn std::fmt::Display| ScanError::Record(e.to_string());
    let mut changes = Vec::new();
    let mut unchanged = 0;
    for (i, file) in found.iter().enumerate() {
        let document_id =
            derive_document_id(source.as_str(), &file.path).map_err(|e| record(&e))?;
        let sha = file.bytes.sha256().clone();
        let current = match reader.document(&document_id)? {
            Some(doc) => match doc.current_version {
                Some(v) => reader.version(&v)?,
                None => None,
            },
            None => None,
        };
        if current.as_ref().is_some_and(|v| v.sha256 == sha) {
            unchanged += 1;
            continue;
        }
        let previous = current.map(|v| v.id);
        let version_id =
            derive_version_id(&document_id, &sha, previous.as_ref()).map_err(|e| record(&e))?;
        let size = file.bytes.bytes().len() as u64;
        let content_type = content_type(&file.path);
        let payload = FileChanged {
            document_id: document_id.clone(),
            path: BoundedText::new(file.path.clone()).map_err(|e| record(&e))?,
            version_id: version_id.clone(),
            previous_version_id: previous.clone(),
            sha256: sha.clone(),
            size,
            content_type: Label::new(content_type).map_err(|e| record(&e))?,
        };
        let event = NewEvent::build(source, None, None, &payload).map_err(|e| record(&e))?;
        changes.push(Change {
            found: i,
            path: file.path.clone(),
            version: VersionRow {
                id: version_id,
                document_id,
                sha256: sha,
                size,
                content_type: content_type.to_owned(),
                previous_version: previous,
            },
            event,
        });
    }
    let seen: BTreeSet<&str> = found.iter().map(|f| f.path.as_str()).collect();
    let missing = reader
        .documents(source)?
        .iter()
        .filter(|d| d.current_version.is_some() && !seen.contains(d.path.as_str()))
        .count();
    Ok(Plan {
        changes,
        unchanged,
        missing,
    })
}

/// The content type recorded for a path, by extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        _ => "application/octet-stream",
    }
}

fn open_dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn walk_root(
    root: &Path,
    limits: &ScanLimits,
    known: &[Hashed<&[u8]>],
    report: &mut ScanReport,
) -> Result<Vec<Found>, ScanError> {
    match rustix::fs::lstat(root) {
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {}
            FileType::Symlink => return Err(ScanError::RootIsSymlink),
            FileType::RegularFile
            | FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice
            | FileType::Unknown => return Err(ScanError::RootNotADirectory),
        },
        Err(Errno::NOENT) => return Err(ScanError::RootMissing),
        Err(e) => return Err(e.into()),
    }
    // O_NOFOLLOW: if the root was swapped for a symlink since the lstat,
    // the open fails instead of following it.
    let fd = rustix::fs::open(root, open_dir_flags(), Mode::empty()).map_err(|e| match e {
        Errno::LOOP => ScanError::RootIsSymlink,
        Errno::NOTDIR => ScanError::RootNotADirectory,
        Errno::NOENT => ScanError::RootMissing,
        other => other.into(),
    })?;
    let root_stat = rustix::fs::fstat(&fd)?;
    #[allow(clippy::useless_conversion)]
    let root_dev = u64::from(root_stat.st_dev);
    let mut walk = Walk {
        limits,
        known,
        root_dev,
        entries: 0,
        found: Vec::new(),
    };
    walk.dir(&fd, "", 0, &mut report.skipped)?;
    walk.found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(walk.found)
}

struct Walk<'a> {
    limits: &'a ScanLimits,
    known: &'a [Hashed<&'a [u8]>],
    root_dev: u64,
    entries: usize,
    found: Vec<Found>,
}

/// A name usable in a normalized path: UTF-8, no control character, not `.`
/// or `..` (which `readdir` returns and are skipped before this).
fn usable_name(name: &CStr) -> Option<&str> {
    let name = name.to_str().ok()?;
    if name.is_empty() || name.contains('/') || name.chars().any(char::is_control) {
        None
    } else {
        Some(name)
    }
}

impl Walk<'_> {
    fn dir(
        &mut self,
        dir: &OwnedFd,
        prefix: &str,
        depth: usize,
        skipped: &mut Skipped,
    ) -> Result<(), ScanError> {
        let mut names = Vec::new();
        for entry in Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Err(ScanError::TooManyEntries {
                    limit: self.limits.max_entries,
                });
            }
            names.push(name.to_owned());
        }
        names.sort();
        for name in names {
            let Some(utf8) = usable_name(&name) else {
                skipped.unnamed += 1;
                continue;
            };
            if utf8.starts_with('.') {
                skipped.hidden += 1;
                continue;
            }
            let path = if prefix.is_empty() {
                utf8.to_owned()
            } else {
                format!("{prefix}/{utf8}")
            };
            if path.chars().count() > stream_core::bounds::DOCUMENT_PATH_MAX {
                skipped.unnamed += 1;
                continue;
            }
            // The entry may vanish between readdir and here: then it is
            // simply not part of this scan.
            let stat = match rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            if self.on_other_device(&stat) {
                skipped.escaping += 1;
                continue;
            }
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Symlink => skipped.symlinks += 1,
                FileType::Fifo
                | FileType::Socket
                | FileType::CharacterDevice
                | FileType::BlockDevice
                | FileType::Unknown => skipped.special += 1,
                FileType::Directory => {
                    if depth + 1 > self.limits.max_depth {
                        skipped.too_deep += 1;
                        continue;
                    }
                    let sub = match rustix::fs::openat(
                        dir,
                        name.as_c_str(),
                        open_dir_flags(),
                        Mode::empty(),
                    ) {
                        Ok(fd) => fd,
                        Err(Errno::NOENT) => continue,
                        // Swapped for a symlink or a non-directory since the
                        // statat: never followed.
                        Err(Errno::LOOP) => {
                            skipped.symlinks += 1;
                            continue;
                        }
                        Err(Errno::NOTDIR) => {
                            skipped.special += 1;
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    };
                    if self.on_other_device(&rustix::fs::fstat(&sub)?) {
                        skipped.escaping += 1;
                        continue;
                    }
                    self.dir(&sub, &path, depth + 1, skipped)?;
                }
                FileType::RegularFile => self.file(dir, &name, path, skipped)?,
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        dir: &OwnedFd,
        name: &CStr,
        path: String,
        skipped: &mut Skipped,
    ) -> Result<(), ScanError> {
        // O_NONBLOCK: should a FIFO have been swapped in since the statat,
        // opening it does not wait for a writer (and fstat refuses it).
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(()),
            Err(Errno::LOOP) => {
                skipped.symlinks += 1;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        // What is read is what this fstat describes: no path is resolved again.
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Symlink => {
                skipped.symlinks += 1;
                return Ok(());
            }
            FileType::Directory
            | FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice
            | FileType::Unknown => {
                skipped.special += 1;
                return Ok(());
            }
        }
        if self.on_other_device(&stat) {
            skipped.escaping += 1;
            return Ok(());
        }
        let max = self.limits.max_file_bytes;
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > max {
            skipped.too_large += 1;
            return Ok(());
        }
        // Sized by the fstat: two reads, not a dozen doubling ones.
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        std::fs::File::from(fd)
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(ScanError::Io)?;
        // It grew past the cap while being read.
        if bytes.len() as u64 > max {
            skipped.too_large += 1;
            return Ok(());
        }
        self.found.push(Found {
            path,
            bytes: Hashed::new_knowing(bytes, self.known),
        });
        Ok(())
    }

    #[allow(clippy::useless_conversion)]
    fn on_other_device(&self, stat: &Stat) -> bool {
        u64::from(stat.st_dev) != self.root_dev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type("memory.md"), "text/markdown");
        assert_eq!(content_type("notes/A.MARKDOWN"), "text/markdown");
        assert_eq!(content_type("x.txt"), "text/plain");
        assert_eq!(content_type("Makefile"), "application/octet-stream");
        for ct in [
            "text/markdown",
            "text/plain",
            "application/json",
            "application/yaml",
            "application/octet-stream",
        ] {
            assert!(Label::new(ct).is_ok(), "{ct}");
        }
    }
}
