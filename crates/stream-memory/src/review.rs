//! What a reviewer sees of `memory.md`: the diff a memory proposal would make
//! (computed with [`compose`], the materializer's own byte composition, so
//! that what is shown is what is written) and the audit log of every
//! version with its origin. Reads only; no write path.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::json;
use stream_core::ids::derive_event_id;
use stream_core::payload::{
    Disposition, FileChanged, MemoryChangeMaterialized, MemoryOperation, MemoryTarget,
    RecordedDecision,
};
use stream_core::{DocumentId, EventId, MemoryPath, Payload, SourceName, VersionId};
use stream_proposals::review::{
    MemoryDiff, ProposalShow, State, current_version, is_stale, rfc3339,
};
use stream_store::{EventQuery, Read, StoreError, VersionRow};

use crate::materialize::compose;

/// Why a review could not be computed. Ids only, never content.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The proposal's base version or its bytes are not in the store.
    #[error("the base version {version} of memory.md is missing from the store")]
    BaseMissing {
        /// The base version id.
        version: VersionId,
    },
}

/// A unified diff of two texts (line based), with `---`/`+++` headers.
/// Bytes that are not UTF-8 are shown replaced (U+FFFD); a file without a
/// final newline says so.
pub fn unified_diff(old: &[u8], new: &[u8], old_label: &str, new_label: &str) -> String {
    let old = String::from_utf8_lossy(old);
    let new = String::from_utf8_lossy(new);
    similar::TextDiff::from_lines(old.as_ref(), new.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

fn version_bytes(store: &dyn Read, version: &VersionId) -> Result<Option<Vec<u8>>, StoreError> {
    match store.version(version)? {
        Some(row) => store.blob(&row.sha256),
        None => Ok(None),
    }
}

/// The diff a memory change would make: from the frozen base to exactly the
/// bytes [`compose`] gives (what the materializer writes), plus — when the
/// proposal is stale ([`is_stale`]: pending, and the current version is no
/// longer the base) — the diff base → current. `text` is the proposed text,
/// or the operator's edit when there is one; `state` is the proposal's.
pub fn memory_diff(
    store: &dyn Read,
    target: &MemoryTarget,
    operation: MemoryOperation,
    text: &str,
    state: State,
) -> Result<MemoryDiff, ReviewError> {
    let missing = || ReviewError::BaseMissing {
        version: target.version_id.clone(),
    };
    let base = version_bytes(store, &target.version_id)?.ok_or_else(missing)?;
    let written = compose(operation, &base, text);
    let base_label = format!("memory.md@{}", target.version_id.short(12));
    let diff = unified_diff(
        &base,
        &written,
        &base_label,
        "memory.md (as written on accept)",
    );
    let current = current_version(store, target)?;
    let changed_since_base = match &current {
        Some(v) if is_stale(state, &target.version_id, Some(v)) => {
            let now = version_bytes(store, v)?.unwrap_or_default();
            Some(unified_diff(
                &base,
                &now,
                &base_label,
                &format!("memory.md@{} (current)", v.short(12)),
            ))
        }
        Some(_) | None => None,
    };
    Ok(MemoryDiff {
        base_version_id: target.version_id.clone(),
        current_version_id: current,
        diff,
        changed_since_base,
    })
}

/// Where a version of `memory.md` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Found by a scan: the person edited the file.
    Edited,
    /// Written by the materializer for an accepted or edited decision.
    Materialized,
}

impl Origin {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Edited => "edited",
            Self::Materialized => "materialized",
        }
    }
}

/// One version of `memory.md` (docs/design.md §19, `memory-log --json`).
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// The immutable version.
    pub version_id: VersionId,
    /// When the scan recorded it, RFC 3339.
    pub recorded_at: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// Edited or materialized.
    pub origin: Origin,
    /// Materialized: the proposal.
    pub proposal_id: Option<EventId>,
    /// Materialized: the decision.
    pub decision_id: Option<EventId>,
    /// Materialized: who decided.
    pub actor: Option<String>,
    /// With `--patch`: the diff from the previous version (from nothing
    /// for the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

impl std::fmt::Debug for LogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogEntry")
            .field("version_id", &self.version_id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The `memory.md` document of `source`, if scanned.
pub fn memory_document(
    store: &dyn Read,
    source: &SourceName,
) -> Result<Option<DocumentId>, StoreError> {
    Ok(store
        .documents(source)?
        .into_iter()
        .find(|d| d.path == MemoryPath::VALUE)
        .map(|d| d.id))
}

/// Every version of `memory.md`, newest first: from the current pointer back
/// along each version's predecessor. A version is `materialized` when a
/// `memory-change.materialized@1` receipt names it as its new version (with
/// the proposal, decision and actor behind it), else `edited`. With
/// `patch`, each entry carries its diff from its predecessor.
pub fn memory_log(
    store: &dyn Read,
    source: &SourceName,
    patch: bool,
) -> Result<Vec<LogEntry>, StoreError> {
    let Some(doc_id) = memory_document(store, source)? else {
        return Ok(Vec::new());
    };
    let Some(doc) = store.document(&doc_id)? else {
        return Ok(Vec::new());
    };
    let mut receipts: BTreeMap<VersionId, MemoryChangeMaterialized> = BTreeMap::new();
    for e in store.events(&EventQuery::of_type(MemoryChangeMaterialized::TYPE))? {
        if let Ok(m) = e.decode::<MemoryChangeMaterialized>()
            && m.document_id == doc_id
            && &m.source == source
        {
            receipts.insert(m.new_version_id.clone(), m);
        }
    }
    let mut rows: Vec<VersionRow> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut next = doc.current_version;
    while let Some(id) = next {
        if !seen.insert(id.clone()) {
            break;
        }
        let Some(row) = store.version(&id)? else {
            break;
        };
        next = row.previous_version.clone();
        rows.push(row);
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let file_event =
            derive_event_id(source.as_str(), FileChanged::TYPE, &json!([doc_id, row.id])).ok();
        let recorded_at = match &file_event {
            Some(id) => store.event(id)?.map(|e| rfc3339(e.recorded_at_ms)),
            None => None,
        };
        let mut entry = LogEntry {
            version_id: row.id.clone(),
            recorded_at: recorded_at.unwrap_or_default(),
            bytes: row.size,
            sha256: row.sha256.to_string(),
            origin: Origin::Edited,
            proposal_id: None,
            decision_id: None,
            actor: None,
            patch: None,
        };
        if let Some(m) = receipts.get(&row.id) {
            entry.origin = Origin::Materialized;
            entry.proposal_id = Some(m.proposal_event_id.clone());
            entry.decision_id = Some(m.decision_event_id.clone());
            entry.actor = store
                .event(&m.decision_event_id)?
                .and_then(|e| RecordedDecision::decode(&e).ok())
                .map(|d| d.decision().actor.to_string());
        }
        if patch {
            let new = store.blob(&row.sha256)?.unwrap_or_default();
            let (old, old_label) = match &row.previous_version {
                Some(prev) => (
                    version_bytes(store, prev)?.unwrap_or_default(),
                    format!("memory.md@{}", prev.short(12)),
                ),
                None => (Vec::new(), "/dev/null".to_owned()),
            };
            entry.patch = Some(unified_diff(
                &old,
                &new,
                &old_label,
                &format!("memory.md@{}", row.id.short(12)),
            ));
        }
        out.push(entry);
    }
    Ok(out)
}

/// Fills a memory proposal's `diff` and `memory` in its show view: the text
/// written is the operator's edit when the decision is an edit, else the
/// proposed text. Other kinds are left as they are.
pub fn add_memory_diff(store: &dyn Read, show: &mut ProposalShow) -> Result<(), ReviewError> {
    let (Some((target, operation)), Some(proposed)) =
        (&show.view.memory_target, &show.view.proposed_text)
    else {
        return Ok(());
    };
    let edit = show
        .decision
        .as_ref()
        .filter(|d| d.disposition == Disposition::Edit.as_str())
        .and_then(|d| d.replacement.as_deref());
    let memory = memory_diff(
        store,
        target,
        *operation,
        edit.unwrap_or(proposed),
        show.view.state,
    )?;
    show.diff = Some(memory.diff.clone());
    show.memory = Some(memory);
    Ok(())
}
