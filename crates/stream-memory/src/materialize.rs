//! The bounded memory materializer (seed, "Memory materialization"; DESIGN
//! section 15): the only code that writes `memory.md`.
//!
//! [`materialize`] takes one decision id and, in this order:
//!
//! 1. **Trust.** [`verify_decision`] replays the decision's schema, human
//!    authorship and lineage and the proposal's whole authority chain. A
//!    forged or malformed decision or proposal is refused here with
//!    [`MaterializeError::Decision`] and *nothing* is appended: no receipt
//!    is ever built from untrusted ids.
//! 2. **Resolution.** One outcome per decision: if the outcome id already
//!    holds a receipt or a failure, that outcome is returned (idempotent).
//!    A rejection materializes nothing.
//! 3. **The root lock** ([`crate::lock`]); the outcome is looked up again
//!    under it.
//! 4. **Revalidation**, every item of the seed's list, each refusal a
//!    closed, content-dark [`MaterializationFailure`] code, in this order:
//!    the frozen base version's document, source, path, content type, size
//!    and hash, with the blob re-hashed (`content`); the configured root is
//!    a real directory, not a symlink (`path`, `symlink`); a scan of the
//!    exact configured source, so that the pointer reflects the disk and an
//!    unscannable root is refused before anything is written (`scan`); the
//!    current pointer is exactly the proposal's version (`stale-base`);
//!    `memory.md` is a regular file on the root's filesystem, opened
//!    relative to the root's descriptor without following links (`path`,
//!    `symlink`), and its bytes equal the frozen base (`stale-base`); old and
//!    new Markdown carry frontmatter with the same nonempty `id`
//!    (`frontmatter`); the result fits `max_bytes` (`size`). Nothing is
//!    rebased.
//! 5. **Write**: an owner-only hidden temporary file in the root, fsync, a
//!    last look that the file still holds the base, a check that the lock is
//!    still ours, an atomic rename over `memory.md`, fsync of the root
//!    (`write`).
//! 6. **Scan** of the exact configured source with [`scan_with_limits`]
//!    (`scan`), then **verification** of the new immutable version (hash,
//!    byte count, predecessor), the current pointer, the blob and the
//!    `file.changed@1` event (`receipt`).
//! 7. **Receipt**: `stream.thought.agent.memory-change.materialized@1` on
//!    `system:proposals`, rooted at the proposal's root, parented to the
//!    decision. Any refusal of step 4–6 appends
//!    `…materialization.failed@1` with its reason code instead — the same
//!    identity, so a decision has exactly one outcome.
//!
//! **Crash recovery.** A crash after the rename and before the receipt
//! leaves `memory.md` holding exactly the bytes this decision produces from
//! the frozen base, and the pointer at the base (crash before the scan) or
//! at the version those bytes derive from it (crash after). A rerun
//! recognises exactly those two states and finishes: mode, fsync, scan,
//! verify, receipt. Any other state is `stale-base`.
//!
//! **Transient failures are not outcomes.** A store error (including a
//! fault inside the scan's transaction), a root lock held by a live process,
//! or lock evidence that cannot be trusted returns a [`MaterializeError`]
//! and appends nothing: the decision stays unresolved for `proposal-project`.
//!
//! Errors and logs carry ids and reason codes only: never proposal text,
//! memory text or paths.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde_json::json;
use stream_core::canon::sha256;
use stream_core::ids::{derive_event_id, derive_version_id};
use stream_core::payload::{
    Disposition, FileChanged, MaterializationFailed, MaterializationFailure,
    MemoryChangeMaterialized, MemoryChangeProposed, MemoryOperation,
};
use stream_core::{EventId, MemoryPath, NewEvent, Payload, SourceName, VersionId};
use stream_proposals::chain::ProposalBody;
use stream_proposals::project::{
    ProjectError, VerifiedDecision, memory_outcome_id, verify_decision,
};
use stream_store::{AppendOutcome, Read, Store, StoreError, VersionRow};

use crate::frontmatter;
use crate::lock::{LockError, RootLock};
use crate::scan::{ScanError, ScanLimits, scan_with_limits};

/// Where and how memory may be materialized: from the operator's config,
/// never from a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializeConfig {
    /// The configured context root holding `memory.md`.
    pub root: PathBuf,
    /// The context source, `filesystem:telegram-agent-context`.
    pub source: SourceName,
    /// The largest `memory.md` a materialization may produce
    /// (`max_memory_bytes`).
    pub max_bytes: u64,
    /// The data dir's `locks/` folder.
    pub lock_dir: PathBuf,
}

/// Whether an outcome was appended by this call or found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Appended now.
    Now,
    /// Already recorded (by an earlier run, or a racing one).
    Already,
}

/// What came of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaterializeOutcome {
    /// `memory.md` changed; the receipt.
    Materialized {
        /// The receipt event.
        receipt: EventId,
        /// Its payload (ids, hashes, byte count).
        payload: Box<MemoryChangeMaterialized>,
        /// Now or already.
        recorded: Recorded,
    },
    /// Refused after revalidation; the failure event.
    Failed {
        /// The failure event.
        event: EventId,
        /// Its reason code.
        reason: MaterializationFailure,
        /// Now or already.
        recorded: Recorded,
    },
    /// A rejection: nothing to materialize, nothing appended.
    Rejected,
}

/// Nothing was appended. Ids, codes and OS errors only.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    /// The decision or its proposal's chain does not verify (forged,
    /// malformed, missing): refused before anything else.
    #[error(transparent)]
    Decision(#[from] ProjectError),
    /// The decision is not about a memory change.
    #[error("decision {decision} is not a memory-change decision")]
    NotAMemoryDecision {
        /// The decision.
        decision: EventId,
    },
    /// The outcome id holds an event that is not a valid outcome of this
    /// decision.
    #[error("the outcome of decision {decision} exists but does not verify")]
    OutcomeInvalid {
        /// The decision.
        decision: EventId,
    },
    /// The root lock is held by a live process, or its evidence cannot be
    /// trusted (fails closed).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The store failed; nothing was claimed and a rerun continues.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An id or event could not be built.
    #[error("an event for decision {decision} cannot be built")]
    Build {
        /// The decision.
        decision: EventId,
    },
}

/// How an attempt stopped short of a receipt.
#[derive(Debug)]
enum Stop {
    /// A refusal with a reason code: recorded as the decision's outcome.
    Fail(MaterializationFailure),
    /// A transient or trust failure: nothing recorded.
    Abort(MaterializeError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Self::Abort(MaterializeError::Store(e))
    }
}

fn fail<T>(reason: MaterializationFailure) -> Result<T, Stop> {
    Err(Stop::Fail(reason))
}

/// The ids a trusted decision fixes.
struct Trusted {
    proposal: EventId,
    decision: EventId,
    root: Option<EventId>,
    outcome: EventId,
}

impl Trusted {
    fn build<P: Payload>(&self, payload: &P) -> Result<NewEvent, MaterializeError> {
        let source = SourceName::fixed(SourceName::PROPOSALS);
        NewEvent::build(&source, self.root.as_ref(), Some(&self.decision), payload).map_err(|_| {
            MaterializeError::Build {
                decision: self.decision.clone(),
            }
        })
    }
}

/// Normalizes line endings to LF: CRLF and a lone CR each become LF.
pub fn normalize_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\r' => {
                out.push(b'\n');
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// The exact bytes a decision produces from the frozen base.
///
/// `append`: the base with line endings normalized to LF (and a final LF
/// if it had none), one blank line, the text normalized the same way
/// without trailing newlines, one final newline. `replace-document`: the
/// text, exactly.
pub fn compose(operation: MemoryOperation, base: &[u8], text: &str) -> Vec<u8> {
    match operation {
        MemoryOperation::Append => {
            let mut out = normalize_newlines(base);
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.push(b'\n');
            let mut text = normalize_newlines(text.as_bytes());
            while text.ends_with(b"\n") {
                text.pop();
            }
            out.extend_from_slice(&text);
            out.push(b'\n');
            out
        }
        MemoryOperation::ReplaceDocument => text.as_bytes().to_vec(),
    }
}

/// The identity of a context root for its lock: the device and inode of
/// the directory entry (not followed), so that every spelling of the path
/// (relative, absolute, through `..`) names one lock.
fn root_identity(root: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(root)
        .ok()
        .map(|st| (dev_of(&st), st.st_ino))
}

/// The lock file name of a context root: by device and inode when the root
/// exists, else by a digest of the path (nothing is written then). Carries
/// no path.
pub fn lock_name(root: &Path) -> String {
    match root_identity(root) {
        Some((dev, ino)) => format!("context-root-{dev:x}-{ino:x}.lock"),
        None => {
            let digest = sha256(root.as_os_str().as_encoded_bytes());
            format!("context-root-{}.lock", digest.short(16))
        }
    }
}

/// Materializes decision `decision_id` (see the module documentation).
pub fn materialize(
    store: &dyn Store,
    config: &MaterializeConfig,
    decision_id: &EventId,
) -> Result<MaterializeOutcome, MaterializeError> {
    let verified = verify_decision(store, decision_id)?;
    let ProposalBody::Memory(proposal) = &verified.proposal.body else {
        return Err(MaterializeError::NotAMemoryDecision {
            decision: decision_id.clone(),
        });
    };
    let trusted = Trusted {
        proposal: verified.proposal.event.id().clone(),
        decision: decision_id.clone(),
        root: verified.proposal.event.event.root.clone(),
        outcome: memory_outcome_id(decision_id)?,
    };
    if let Some(done) = existing_outcome(store, &trusted)? {
        return Ok(done);
    }
    let Some(text) = accepted_text(&verified, proposal)? else {
        tracing::info!(decision = %decision_id, "rejected: nothing to materialize");
        return Ok(MaterializeOutcome::Rejected);
    };

    let locked_root = root_identity(&config.root);
    let lock = RootLock::acquire(&config.lock_dir, &lock_name(&config.root))?;
    if let Some(done) = existing_outcome(store, &trusted)? {
        lock.release()?;
        return Ok(done);
    }
    let held = Held {
        lock: &lock,
        root: locked_root,
    };
    let outcome = match attempt(store, config, proposal, text, &held, &trusted) {
        Ok(payload) => record(store, &trusted, &payload, |receipt, recorded| {
            MaterializeOutcome::Materialized {
                receipt,
                payload: Box::new(payload.clone()),
                recorded,
            }
        })?,
        Err(Stop::Fail(reason)) => {
            let payload = MaterializationFailed {
                proposal_event_id: trusted.proposal.clone(),
                decision_event_id: trusted.decision.clone(),
                reason,
            };
            record(store, &trusted, &payload, |event, recorded| {
                MaterializeOutcome::Failed {
                    event,
                    reason,
                    recorded,
                }
            })?
        }
        // The lock is released on drop (only if it is still ours).
        Err(Stop::Abort(e)) => return Err(e),
    };
    match &outcome {
        MaterializeOutcome::Materialized {
            receipt, recorded, ..
        } => {
            tracing::info!(decision = %decision_id, receipt = %receipt, ?recorded, "memory materialized");
        }
        MaterializeOutcome::Failed {
            event,
            reason,
            recorded,
        } => {
            tracing::warn!(
                decision = %decision_id,
                event = %event,
                reason = reason.as_str(),
                ?recorded,
                "memory materialization failed"
            );
        }
        MaterializeOutcome::Rejected => {}
    }
    lock.release()?;
    Ok(outcome)
}

/// The text to use, or `None` for a rejection.
fn accepted_text<'a>(
    verified: &'a VerifiedDecision,
    proposal: &'a MemoryChangeProposed,
) -> Result<Option<&'a str>, MaterializeError> {
    let invalid = || {
        MaterializeError::Decision(ProjectError::DecisionInvalid {
            decision: verified.event.id().clone(),
        })
    };
    match (
        verified.decision.disposition,
        verified.decision.replacement.as_deref(),
    ) {
        (Disposition::Reject, None) => Ok(None),
        (Disposition::Accept, None) => Ok(Some(proposal.proposed_text.as_str())),
        (Disposition::Edit, Some(text)) => Ok(Some(text)),
        (Disposition::Reject | Disposition::Accept, Some(_)) | (Disposition::Edit, None) => {
            Err(invalid())
        }
    }
}

/// The decision's outcome, if one is recorded. An event under the outcome
/// id that is not exactly an outcome of this decision fails closed.
fn existing_outcome(
    store: &dyn Read,
    trusted: &Trusted,
) -> Result<Option<MaterializeOutcome>, MaterializeError> {
    let Some(event) = store.event(&trusted.outcome)? else {
        return Ok(None);
    };
    let invalid = || MaterializeError::OutcomeInvalid {
        decision: trusted.decision.clone(),
    };
    if let Ok(payload) = event.decode::<MemoryChangeMaterialized>() {
        let ours = payload.decision_event_id == trusted.decision
            && payload.proposal_event_id == trusted.proposal
            && trusted.build(&payload)? == event.event;
        return if ours {
            Ok(Some(MaterializeOutcome::Materialized {
                receipt: event.event.id,
                payload: Box::new(payload),
                recorded: Recorded::Already,
            }))
        } else {
            Err(invalid())
        };
    }
    if let Ok(payload) = event.decode::<MaterializationFailed>() {
        let ours = payload.decision_event_id == trusted.decision
            && payload.proposal_event_id == trusted.proposal
            && trusted.build(&payload)? == event.event;
        return if ours {
            Ok(Some(MaterializeOutcome::Failed {
                event: event.event.id,
                reason: payload.reason,
                recorded: Recorded::Already,
            }))
        } else {
            Err(invalid())
        };
    }
    Err(invalid())
}

/// Appends an outcome; on a conflict (another outcome won), returns that one.
fn record<P: Payload>(
    store: &dyn Store,
    trusted: &Trusted,
    payload: &P,
    outcome: impl FnOnce(EventId, Recorded) -> MaterializeOutcome,
) -> Result<MaterializeOutcome, MaterializeError> {
    let event = trusted.build(payload)?;
    if event.id != trusted.outcome {
        return Err(MaterializeError::Build {
            decision: trusted.decision.clone(),
        });
    }
    match store.append(&event)? {
        AppendOutcome::Inserted { .. } => Ok(outcome(event.id, Recorded::Now)),
        AppendOutcome::Converged { .. } => Ok(outcome(event.id, Recorded::Already)),
        AppendOutcome::Conflict => {
            existing_outcome(store, trusted)?.ok_or_else(|| MaterializeError::OutcomeInvalid {
                decision: trusted.decision.clone(),
            })
        }
    }
}

/// The verified frozen base.
struct Base {
    row: VersionRow,
    bytes: Vec<u8>,
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
struct Held<'a> {
    lock: &'a RootLock,
    root: Option<(u64, u64)>,
}

/// Steps 4–6: revalidate, write, scan, verify. Returns the receipt payload.
fn attempt(
    store: &dyn Store,
    config: &MaterializeConfig,
    proposal: &MemoryChangeProposed,
    text: &str,
    held: &Held<'_>,
    trusted: &Trusted,
) -> Result<MemoryChangeMaterialized, Stop> {
    use MaterializationFailure as F;
    let target = &proposal.target;
    let context = SourceName::fixed(SourceName::CONTEXT);
    if config.source != context || target.source != context {
        return fail(F::Path);
    }

    let base = frozen_base(store, proposal)?;
    let new = compose(proposal.operation, &base.bytes, text);
    let new_sha = sha256(&new);
    let new_version = if new == base.bytes {
        base.row.id.clone()
    } else {
        derive_version_id(&target.document_id, &new_sha, Some(&base.row.id))
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
    scan_root(store, config)?;
    let pointer = match store.document(&target.document_id)? {
        Some(doc) if doc.current_version.as_ref() == Some(&target.version_id) => Pointer::Base,
        Some(doc) if doc.current_version.as_ref() == Some(&new_version) => Pointer::New,
        Some(_) => return fail(F::StaleBase),
        None => return fail(F::Content),
    };

    let cap = (base.bytes.len().max(new.len()) as u64).saturating_add(1);
    let disk = root.read_memory(cap)?;
    let on_disk = if disk == base.bytes && (pointer == Pointer::Base || new == base.bytes) {
        OnDisk::Base
    } else if disk == new {
        OnDisk::New
    } else {
        return fail(F::StaleBase);
    };

    let old_fm = frontmatter::parse_bytes(&base.bytes).map_err(|_| Stop::Fail(F::Frontmatter))?;
    let new_fm = frontmatter::parse_bytes(&new).map_err(|_| Stop::Fail(F::Frontmatter))?;
    if old_fm.id() != new_fm.id() {
        return fail(F::Frontmatter);
    }
    if new.len() as u64 > config.max_bytes {
        return fail(F::Size);
    }

    match on_disk {
        OnDisk::Base => root.replace_memory(&new, &base.bytes, cap, held.lock)?,
        OnDisk::New => {
            tracing::info!(
                decision = %trusted.decision,
                "memory.md already holds this decision's bytes; finishing"
            );
            root.settle_memory()?;
        }
    }

    scan_root(store, config)?;
    let file_event_id = verify_new_version(store, &config.source, &base.row, &new, &new_version)?;
    Ok(MemoryChangeMaterialized {
        proposal_event_id: trusted.proposal.clone(),
        decision_event_id: trusted.decision.clone(),
        source: config.source.clone(),
        document_id: target.document_id.clone(),
        base_version_id: base.row.id,
        base_sha256: base.row.sha256,
        new_version_id: new_version,
        new_sha256: new_sha,
        byte_count: new.len() as u64,
        file_event_id,
    })
}

/// Scans the exact configured source. A store error is transient (abort);
/// any other refusal is the `scan` reason.
fn scan_root(store: &dyn Store, config: &MaterializeConfig) -> Result<(), Stop> {
    let limits = ScanLimits {
        max_file_bytes: config.max_bytes.max(ScanLimits::DEFAULT_MAX_FILE_BYTES),
        ..ScanLimits::default()
    };
    match scan_with_limits(store, &config.source, &config.root, &limits) {
        Ok(_) => Ok(()),
        Err(ScanError::Store(e)) => Err(e.into()),
        Err(
            ScanError::NotAFilesystemSource { .. }
            | ScanError::RootMissing
            | ScanError::RootIsSymlink
            | ScanError::RootNotADirectory
            | ScanError::Io(_)
            | ScanError::TooManyEntries { .. }
            | ScanError::TooManyNewBytes { .. }
            | ScanError::Record(_),
        ) => fail(MaterializationFailure::Scan),
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
    let bytes = store.blob(&row.sha256)?.ok_or_else(content)?;
    if sha256(&bytes) != target.sha256 || bytes.len() as u64 != row.size {
        return Err(content());
    }
    Ok(Base { row, bytes })
}

/// After the scan: the pointer is at the expected new version, whose row
/// holds the hash, size, predecessor and content type of what was written,
/// whose blob re-hashes, and whose `file.changed@1` event is exactly the
/// one the scan builds. Returns that event's id.
fn verify_new_version(
    store: &dyn Read,
    source: &SourceName,
    base: &VersionRow,
    new: &[u8],
    new_version: &VersionId,
) -> Result<EventId, Stop> {
    let receipt = || Stop::Fail(MaterializationFailure::Receipt);
    let doc = store.document(&base.document_id)?.ok_or_else(receipt)?;
    if doc.current_version.as_ref() != Some(new_version) {
        return Err(receipt());
    }
    let row = store.version(new_version)?.ok_or_else(receipt)?;
    let new_sha = sha256(new);
    let expected_previous = if row.id == base.id {
        base.previous_version.as_ref()
    } else {
        Some(&base.id)
    };
    if row.id != *new_version
        || row.document_id != base.document_id
        || row.sha256 != new_sha
        || row.size != new.len() as u64
        || row.content_type != base.content_type
        || row.previous_version.as_ref() != expected_previous
    {
        return Err(receipt());
    }
    let blob = store.blob(&row.sha256)?.ok_or_else(receipt)?;
    if sha256(&blob) != new_sha {
        return Err(receipt());
    }
    let event_id = derive_event_id(
        source.as_str(),
        FileChanged::TYPE,
        &json!([row.document_id, row.id]),
    )
    .map_err(|_| receipt())?;
    let event = store.event(&event_id)?.ok_or_else(receipt)?;
    let changed: FileChanged = event.decode().map_err(|_| receipt())?;
    let rebuilt = NewEvent::build(source, None, None, &changed).map_err(|_| receipt())?;
    if rebuilt != event.event
        || changed.document_id != row.document_id
        || changed.path.as_str() != MemoryPath::VALUE
        || changed.version_id != row.id
        || changed.previous_version_id != row.previous_version
        || changed.sha256 != new_sha
        || changed.size != row.size
        || changed.content_type.as_str() != row.content_type
    {
        return Err(receipt());
    }
    Ok(event_id)
}

/// The context root, opened once: every later file operation is relative
/// to this descriptor and never follows a link.
struct Root {
    fd: OwnedFd,
    dev: u64,
    ino: u64,
}

#[allow(clippy::useless_conversion)]
fn dev_of(st: &rustix::fs::Stat) -> u64 {
    u64::from(st.st_dev)
}

fn read_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

impl Root {
    /// The root must exist and be a real directory, not a symlink.
    fn open(path: &Path) -> Result<Self, Stop> {
        use MaterializationFailure as F;
        match rustix::fs::lstat(path) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => {}
                FileType::Symlink => return fail(F::Symlink),
                FileType::RegularFile
                | FileType::Fifo
                | FileType::Socket
                | FileType::CharacterDevice
                | FileType::BlockDevice
                | FileType::Unknown => return fail(F::Path),
            },
            Err(_) => return fail(F::Path),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
            Errno::LOOP => Stop::Fail(F::Symlink),
            _ => Stop::Fail(F::Path),
        })?;
        let st = rustix::fs::fstat(&fd).map_err(|_| Stop::Fail(F::Path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return fail(F::Path);
        }
        Ok(Self {
            fd,
            dev: dev_of(&st),
            ino: st.st_ino,
        })
    }

    /// Opens `memory.md`: a regular file on the root's filesystem, never
    /// through a link.
    fn open_memory(&self) -> Result<OwnedFd, Stop> {
        use MaterializationFailure as F;
        let name = MemoryPath::VALUE;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => {}
                FileType::Symlink => return fail(F::Symlink),
                FileType::Directory
                | FileType::Fifo
                | FileType::Socket
                | FileType::CharacterDevice
                | FileType::BlockDevice
                | FileType::Unknown => return fail(F::Path),
            },
            Err(_) => return fail(F::Path),
        }
        let fd =
            rustix::fs::openat(&self.fd, name, read_flags(), Mode::empty()).map_err(
                |e| match e {
                    Errno::LOOP => Stop::Fail(F::Symlink),
                    _ => Stop::Fail(F::Path),
                },
            )?;
        let st = rustix::fs::fstat(&fd).map_err(|_| Stop::Fail(F::Path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || dev_of(&st) != self.dev {
            return fail(F::Path);
        }
        Ok(fd)
    }

    /// At most `cap` bytes of `memory.md` (more cannot match anything).
    fn read_memory(&self, cap: u64) -> Result<Vec<u8>, Stop> {
        let fd = self.open_memory()?;
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(cap)
            .read_to_end(&mut bytes)
            .map_err(|_| Stop::Fail(MaterializationFailure::Path))?;
        Ok(bytes)
    }

    /// Removes temporary files a crashed materializer left (the lock is
    /// ours, so no live writer owns them).
    fn remove_stale_temporaries(&self) {
        let Ok(dir) = Dir::read_from(&self.fd) else {
            return;
        };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let stale = name.to_str().is_ok_and(|n| {
                n.starts_with(TEMP_PREFIX) && n.ends_with(".tmp") && n.len() > TEMP_PREFIX.len()
            });
            if stale {
                let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
            }
        }
    }

    /// Writes `new` over `memory.md` atomically, owner-only.
    fn replace_memory(
        &self,
        new: &[u8],
        base: &[u8],
        cap: u64,
        lock: &RootLock,
    ) -> Result<(), Stop> {
        use MaterializationFailure as F;
        self.remove_stale_temporaries();
        let tmp = format!("{TEMP_PREFIX}{}.tmp", lock.evidence().token);
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&self.fd, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(|_| Stop::Fail(F::Write))?;
        let remove_tmp = || {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        };
        let written = (|| -> std::io::Result<()> {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(new)?;
            file.sync_all()?;
            let st = rustix::fs::fstat(&file)?;
            if st.st_mode & 0o7777 != 0o600 {
                return Err(std::io::ErrorKind::PermissionDenied.into());
            }
            Ok(())
        })();
        if written.is_err() {
            remove_tmp();
            return fail(F::Write);
        }
        // A last look: a hand edit since the check is not overwritten.
        match self.read_memory(cap) {
            Ok(bytes) if bytes == base => {}
            Ok(_) => {
                remove_tmp();
                return fail(F::StaleBase);
            }
            Err(stop) => {
                remove_tmp();
                return Err(stop);
            }
        }
        if let Err(e) = lock.check() {
            remove_tmp();
            return Err(Stop::Abort(e.into()));
        }
        if rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, MemoryPath::VALUE).is_err() {
            remove_tmp();
            return fail(F::Write);
        }
        rustix::fs::fsync(&self.fd).map_err(|_| Stop::Fail(F::Write))
    }

    /// Recovery: `memory.md` already holds the new bytes. Enforce 0600 and
    /// make the earlier rename durable.
    fn settle_memory(&self) -> Result<(), Stop> {
        let fd = self.open_memory()?;
        let settled = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600))
            .and_then(|()| rustix::fs::fsync(&fd))
            .and_then(|()| rustix::fs::fsync(&self.fd));
        settled.map_err(|_| Stop::Fail(MaterializationFailure::Write))
    }
}

/// Hidden (scans skip it): `.memory.md.<token>.tmp`.
const TEMP_PREFIX: &str = ".memory.md.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_normalize_to_lf() {
        assert_eq!(normalize_newlines(b"a\r\nb\rc\n\r\n"), b"a\nb\nc\n\n");
        assert_eq!(normalize_newlines(b"\r"), b"\n");
        assert_eq!(normalize_newlines(b""), b"");
    }

    #[test]
    fn append_is_base_blank_line_text_final_newline() {
        let base = b"---\r\nid: m\r\n---\r\n# Memory\r\n";
        assert_eq!(
            compose(
                MemoryOperation::Append,
                base,
                "likes tea\r\nand\rscones\n\n"
            ),
            b"---\nid: m\n---\n# Memory\n\nlikes tea\nand\nscones\n"
        );
        // A base without a final newline gets one before the blank line.
        assert_eq!(
            compose(MemoryOperation::Append, b"---\nid: m\n---\nx", "y"),
            b"---\nid: m\n---\nx\n\ny\n"
        );
    }

    #[test]
    fn replace_document_is_the_text_exactly() {
        let text = "---\nid: m\n---\nnew\r\n";
        assert_eq!(
            compose(MemoryOperation::ReplaceDocument, b"old", text),
            text.as_bytes()
        );
    }

    fn is_receipt_failure<T>(r: Result<T, Stop>) -> bool {
        matches!(r, Err(Stop::Fail(MaterializationFailure::Receipt)))
    }

    /// The `receipt` reason cannot be caused from outside without a race
    /// (something must change between the write and the scan), so the
    /// verification is exercised here against each thing it checks.
    #[test]
    fn verification_refuses_anything_the_scan_did_not_record_exactly() {
        use stream_core::ids::derive_document_id;
        use stream_store::SqliteStore;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("context");
        std::fs::create_dir(&root).unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let source = SourceName::fixed(SourceName::CONTEXT);
        let base_bytes = b"---\nid: m\n---\nbase\n";
        std::fs::write(root.join("memory.md"), base_bytes).unwrap();
        crate::scan::scan(&store, &source, &root).unwrap();
        let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
        let base_id = store
            .document(&doc)
            .unwrap()
            .unwrap()
            .current_version
            .unwrap();
        let base = store.version(&base_id).unwrap().unwrap();
        let new = b"---\nid: m\n---\nbase\n\nnew\n";
        let new_version = derive_version_id(&doc, &sha256(new), Some(&base_id)).unwrap();

        // Not scanned: the pointer is still at the base.
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            new,
            &new_version
        )));
        // Something else was written and scanned.
        std::fs::write(root.join("memory.md"), b"---\nid: m\n---\nother\n").unwrap();
        crate::scan::scan(&store, &source, &root).unwrap();
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            new,
            &new_version
        )));

        // The real thing verifies, and each tampered fact is refused.
        let scanned_pair = || {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("context");
            std::fs::create_dir(&root).unwrap();
            let path = dir.path().join("store.db");
            let store = SqliteStore::open(&path).unwrap();
            std::fs::write(root.join("memory.md"), base_bytes).unwrap();
            crate::scan::scan(&store, &source, &root).unwrap();
            std::fs::write(root.join("memory.md"), new).unwrap();
            crate::scan::scan(&store, &source, &root).unwrap();
            (dir, store, path)
        };
        let (_dir, store, _) = scanned_pair();
        let event = verify_new_version(&store, &source, &base, new, &new_version).unwrap();
        assert!(store.event(&event).unwrap().is_some());
        let tampering = [
            "UPDATE document_versions SET size = size + 1 WHERE version_id = ?1",
            "UPDATE document_versions SET content_type = 'text/plain' WHERE version_id = ?1",
            "UPDATE document_versions SET prev_version = NULL WHERE version_id = ?1",
            "UPDATE blobs SET bytes = x'00' WHERE sha256 = (SELECT sha256 FROM document_versions WHERE version_id = ?1)",
            "DELETE FROM events WHERE type = 'stream.filesystem.file.changed' AND json_extract(payload, '$.versionId') = ?1",
        ];
        for sql in tampering {
            let (_dir, store, path) = scanned_pair();
            let conn = rusqlite::Connection::open(&path).unwrap();
            assert_eq!(
                conn.execute(sql, [new_version.as_str()]).unwrap(),
                1,
                "{sql}"
            );
            assert!(
                is_receipt_failure(verify_new_version(
                    &store,
                    &source,
                    &base,
                    new,
                    &new_version
                )),
                "{sql}"
            );
        }
        // Bytes other than what was written.
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            b"---\nid: m\n---\nbase\n\nnew!\n",
            &new_version
        )));
    }

    #[test]
    fn lock_names_are_per_root_whatever_the_spelling_and_carry_no_path() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        assert_ne!(lock_name(&a), lock_name(&b));
        assert_eq!(lock_name(&a), lock_name(&dir.path().join("b/../a/.")));
        for name in [lock_name(&a), lock_name(Path::new("/srv/missing/context"))] {
            assert!(!name.contains("srv") && !name.contains('/'), "{name}");
            assert!(name.starts_with("context-root-") && name.ends_with(".lock"));
        }
    }
}
