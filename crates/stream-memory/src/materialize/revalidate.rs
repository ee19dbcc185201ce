//! Steps 4–6 of [`super::materialize`]: the revalidation list of
//! `docs/design.md §15`, each refusal a closed reason code, then the
//! write (staged in a temporary file, then renamed); then, inside the
//! receipt's transaction, the scan and the verification of the new
//! version.

use stream_core::canon::Hashed;
use stream_core::ids::derive_version_id;
use stream_core::payload::{
    MaterializationFailure, MemoryChangeMaterialized, MemoryChangeProposed,
};
use stream_core::{DocumentId, MemoryPath, SourceName, VersionId};
use stream_store::{Read, Store, Tx, VersionRow};

use super::MaterializeConfig;
use super::compose::compose;
use super::error::{Stop, fail};
use super::identity;
use super::outcome::Trusted;
use super::root::{Renamed, Root, Temporary};
use super::verify::verify_new_version;
use crate::frontmatter;
use crate::lock::RootLock;
use crate::scan::{ScanError, ScanLimits, Walked, scan_knowing, walk_knowing};

/// The verified frozen base: its row, and its blob re-hashed.
struct Base {
    row: VersionRow,
    bytes: Hashed,
}

/// Where the current pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pointer {
    /// At the proposal's base version.
    Base,
    /// At the version this decision's bytes derive from the base: an
    /// earlier attempt scanned and crashed before its receipt.
    New,
}

/// What `memory.md` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnDisk {
    /// The frozen base: write.
    Base,
    /// Exactly this decision's bytes: an earlier attempt renamed and
    /// crashed; finish.
    New,
}

/// The root lock and the root identity it was named after.
pub(super) struct Held<'a> {
    pub(super) lock: &'a RootLock,
    pub(super) root: Option<(u64, u64)>,
}

/// What step 5 wrote, for step 6 to scan and verify.
pub(super) struct Written {
    document: DocumentId,
    base: VersionRow,
    new: Hashed,
    new_version: VersionId,
    /// The configured root's identity, recorded with the first receipt.
    identity: String,
}

/// Step 4 done and step 5's file durable, short of the rename: what may be
/// prepared before the decision itself is durable.
pub(super) struct Staged {
    written: Written,
    base: Vec<u8>,
    file: StagedFile,
}

enum StagedFile {
    /// The new bytes in a temporary file, to rename over the base.
    Temporary(Temporary),
    /// `memory.md` already holds them (an earlier attempt renamed and
    /// crashed): made owner-only and durable again at the rename, not
    /// before.
    InPlace(Root),
}

impl Staged {
    /// Step 5's end, once the decision is durable: the last look, the
    /// lock check and the rename (see [`Temporary::rename_over`]), or the
    /// recovered file's mode and fsync; the rename is not yet durable.
    pub(super) fn rename(self, lock: &RootLock) -> Result<(Written, Renamed), Stop> {
        let renamed = match self.file {
            StagedFile::Temporary(temporary) => {
                let cap = read_cap(&self.base, self.written.new.bytes());
                temporary.rename_over(&self.base, cap, lock)?
            }
            StagedFile::InPlace(root) => root.settle_memory()?,
        };
        Ok((self.written, renamed))
    }
}

/// Step 4 and step 5 short of the rename: revalidate, then write the new
/// bytes to a durable temporary file (or find this decision's bytes
/// already in `memory.md`).
pub(super) fn stage(
    store: &dyn Store,
    config: &MaterializeConfig,
    proposal: &MemoryChangeProposed,
    text: &str,
    held: &Held<'_>,
    trusted: &Trusted,
) -> Result<Staged, Stop> {
    use MaterializationFailure as F;
    let target = &proposal.target;
    let context = SourceName::fixed(SourceName::CONTEXT);
    if config.source != context || target.source != context {
        return fail(F::Path);
    }

    let base = frozen_base(store, proposal)?;
    let new = Hashed::new(compose(proposal.operation, base.bytes.bytes(), text));
    let unchanged = new.bytes() == base.bytes.bytes();
    let new_version = if unchanged {
        base.row.id.clone()
    } else {
        derive_version_id(&target.document_id, new.sha256(), Some(&base.row.id))
            .map_err(|_| Stop::Fail(F::Content))?
    };

    // The root first (path, symlink), then a scan so that the store's
    // pointer reflects the disk, and a root that cannot be scanned is refused
    // before anything is written.
    let root = Root::open(&config.root)?;
    if held.root != Some((root.dev, root.ino)) {
        // Replaced since the lock was named after it.
        return fail(F::Path);
    }
    // Another root is refused before its scan moves the store's pointer:
    // by its `memory.md`'s id when that reads (else the checks below
    // refuse it; the check after them is the one that must pass).
    let early = root.read_memory(read_cap(base.bytes.bytes(), new.bytes()));
    if let Some(fm) = early.ok().and_then(|d| frontmatter::parse_bytes(&d).ok()) {
        identity::admit(store, fm.id(), &trusted.decision).map_err(Stop::Abort)?;
    }
    // The file holds the base, or (after a crash) the new bytes: both hashed.
    scan_root(store, config, &[base.bytes.borrowed(), new.borrowed()])?;
    let pointer = match store.document(&target.document_id)? {
        Some(doc) if doc.current_version.as_ref() == Some(&target.version_id) => Pointer::Base,
        Some(doc) if doc.current_version.as_ref() == Some(&new_version) => Pointer::New,
        Some(_) => return fail(F::StaleBase),
        None => return fail(F::Content),
    };

    let (base_bytes, new_bytes) = (base.bytes.bytes(), new.bytes());
    let disk = root.read_memory(read_cap(base_bytes, new_bytes))?;
    let on_disk = if disk == base_bytes && (pointer == Pointer::Base || unchanged) {
        OnDisk::Base
    } else if disk == new_bytes {
        OnDisk::New
    } else {
        return fail(F::StaleBase);
    };

    let old_fm = frontmatter::parse_bytes(base_bytes).map_err(|_| Stop::Fail(F::Frontmatter))?;
    let new_fm = frontmatter::parse_bytes(new_bytes).map_err(|_| Stop::Fail(F::Frontmatter))?;
    if old_fm.id() != new_fm.id() {
        return fail(F::Frontmatter);
    }
    if new_bytes.len() as u64 > config.max_bytes {
        return fail(F::Size);
    }
    // `memory.md` holds the base or the new bytes, both carrying this id:
    // the configured root's identity, checked before anything is written.
    identity::admit(store, old_fm.id(), &trusted.decision).map_err(Stop::Abort)?;

    let file = match on_disk {
        OnDisk::Base => StagedFile::Temporary(root.stage_memory(new_bytes, held.lock)?),
        OnDisk::New => {
            tracing::info!(
                decision = %trusted.decision,
                "memory.md already holds this decision's bytes; finishing"
            );
            StagedFile::InPlace(root)
        }
    };

    Ok(Staged {
        written: Written {
            document: target.document_id.clone(),
            base: base.row,
            new,
            new_version,
            identity: old_fm.id().to_owned(),
        },
        base: base.bytes.into_bytes(),
        file,
    })
}

/// Step 6's reading half: the root walked and read again after the
/// rename (nothing decided yet), expecting `written`'s bytes.
pub(super) fn walk_written(config: &MaterializeConfig, written: &Written) -> Result<Walked, Stop> {
    let limits = scan_limits(config);
    walk_knowing(
        &config.source,
        &config.root,
        &limits,
        &[written.new.borrowed()],
    )
    .map_err(scan_refusal)
}

/// Step 6 inside `tx`, the transaction that also appends the receipt: the
/// scan records the written bytes as the new version, which is verified;
/// returns the receipt payload. The new version and its receipt commit
/// together, after `memory.md` was made durable (file and root fsynced).
pub(super) fn scan_and_verify(
    tx: &mut dyn Tx,
    config: &MaterializeConfig,
    (walked, written): (Walked, Written),
    trusted: &Trusted,
) -> Result<MemoryChangeMaterialized, Stop> {
    walked.record_in(tx).map_err(scan_refusal)?;
    let Written {
        document,
        base,
        new,
        new_version,
        identity,
    } = written;
    identity::record_in(tx, &identity, &trusted.decision).map_err(Stop::Abort)?;
    let file_event_id = verify_new_version(&*tx, &config.source, &base, &new, &new_version)?;
    Ok(MemoryChangeMaterialized {
        proposal_event_id: trusted.proposal.clone(),
        decision_event_id: trusted.decision.clone(),
        source: config.source.clone(),
        document_id: document,
        base_version_id: base.id,
        base_sha256: base.sha256,
        new_version_id: new_version,
        new_sha256: new.sha256().clone(),
        byte_count: new.bytes().len() as u64,
        file_event_id,
    })
}

/// How much of `memory.md` is worth reading to compare it with `base` and
/// `new`: one byte more than the longer, so that a longer file differs.
fn read_cap(base: &[u8], new: &[u8]) -> u64 {
    (base.len().max(new.len()) as u64).saturating_add(1)
}

/// Scans the exact configured source, expecting `known` bytes.
fn scan_root(
    store: &dyn Store,
    config: &MaterializeConfig,
    known: &[Hashed<&[u8]>],
) -> Result<(), Stop> {
    match scan_knowing(
        store,
        &config.source,
        &config.root,
        &scan_limits(config),
        known,
    ) {
        Ok(_) => Ok(()),
        Err(e) => Err(scan_refusal(e)),
    }
}

fn scan_limits(config: &MaterializeConfig) -> ScanLimits {
    ScanLimits {
        max_file_bytes: config.max_bytes.max(ScanLimits::DEFAULT_MAX_FILE_BYTES),
        ..ScanLimits::default()
    }
}

/// A store error is transient (abort); any other refusal is the `scan`
/// reason.
fn scan_refusal(e: ScanError) -> Stop {
    match e {
        ScanError::Store(e) => e.into(),
        ScanError::NotAFilesystemSource { .. }
        | ScanError::RootMissing
        | ScanError::RootIsSymlink
        | ScanError::RootNotADirectory
        | ScanError::Io(_)
        | ScanError::TooManyEntries { .. }
        | ScanError::TooManyNewBytes { .. }
        | ScanError::Record(_) => Stop::Fail(MaterializationFailure::Scan),
    }
}

/// The proposal's immutable base version: document, source, path, content
/// type, size and hash, with the blob re-hashed.
fn frozen_base(store: &dyn Read, proposal: &MemoryChangeProposed) -> Result<Base, Stop> {
    let target = &proposal.target;
    let content = || Stop::Fail(MaterializationFailure::Content);
    let doc = store.document(&target.document_id)?.ok_or_else(content)?;
    if doc.id != target.document_id || doc.source != target.source || doc.path != MemoryPath::VALUE
    {
        return Err(content());
    }
    let row = store.version(&target.version_id)?.ok_or_else(content)?;
    if row.id != target.version_id
        || row.document_id != target.document_id
        || row.sha256 != target.sha256
        || row.content_type != target.content_type.as_str()
    {
        return Err(content());
    }
    let bytes = Hashed::new(store.blob(&row.sha256)?.ok_or_else(content)?);
    if *bytes.sha256() != target.sha256 || bytes.bytes().len() as u64 != row.size {
        return Err(content());
    }
    Ok(Base { row, bytes })
}
