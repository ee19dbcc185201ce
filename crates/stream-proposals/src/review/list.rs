//! The operator's view of proposals: kind, decision state, outcome, age,
//! staleness, evidence and the proposal's own fields.

use serde::Serialize;
use serde_json::{Value, json};
use stream_core::ids::derive_event_id;
use stream_core::payload::{
    CorrectionProposed, Disposition, FocusDeclarationProposed, MaterializationFailed,
    MemoryChangeMaterialized, MemoryChangeProposed, MemoryOperation, MemoryTarget,
    ProposalDecision, ProposalKind, RecordedDecision,
};
use stream_core::terminal::count_hidden;
use stream_core::{EventId, Payload, SnapshotId, SourceName, StoredEvent, VersionId};
use stream_store::{EventQuery, Read, StoreError};

use super::evidence::{Evidence, SnapshotCache, resolve_evidence};
use crate::authority::{TrustedKeys, authorize, legacy_outcome};
use crate::project::{judgment_id, memory_outcome_id};

/// Where a proposal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// No decision yet.
    Pending,
    /// Accepted as proposed.
    Accepted,
    /// Accepted with the operator's text.
    Edited,
    /// Rejected.
    Rejected,
}

impl State {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Edited => "edited",
            Self::Rejected => "rejected",
        }
    }
}

/// What came of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// `memory.md` changed; the receipt exists.
    Materialized,
    /// Materialization failed with a reason code.
    MaterializationFailed,
    /// The correction became a judgment.
    JudgmentRecorded,
    /// The decision is not signed by a key the config lists (or its
    /// signature does not cover it): never applied.
    Unauthorized,
}

impl Outcome {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Materialized => "materialized",
            Self::MaterializationFailed => "materialization-failed",
            Self::JudgmentRecorded => "judgment-recorded",
            Self::Unauthorized => "unauthorized",
        }
    }
}

/// A mark the list shows beside a proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flag {
    /// A pending memory proposal's base is no longer the current
    /// `memory.md` version ([`is_stale`]).
    Stale,
    /// Some text of the proposal holds control, bidi or invisible characters.
    Controls,
}

impl Flag {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stale => "stale",
            Self::Controls => "controls",
        }
    }
}

/// One proposal as `proposal-list` shows it (docs/design.md §19).
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalView {
    /// The proposal event id.
    pub id: EventId,
    /// Its first 12 hex digits.
    pub short_id: String,
    /// Its kind.
    pub kind: ProposalKind,
    /// When it was recorded, RFC 3339.
    pub created_at: String,
    /// When it was recorded, ms since the epoch (for ages).
    #[serde(skip)]
    pub created_at_ms: i64,
    /// Decision state.
    pub state: State,
    /// Outcome, if any.
    pub outcome: Option<Outcome>,
    /// True when a pending memory proposal's base is no longer the current
    /// version ([`is_stale`]; never for a decided one).
    pub stale: bool,
    /// `stale`, `controls`.
    pub flags: Vec<Flag>,
    /// The decision event, if any.
    pub decision_event_id: Option<EventId>,
    /// The outcome event (judgment, materialization receipt or failure).
    pub outcome_event_id: Option<EventId>,
    /// The proposing run.
    pub run_id: String,
    /// Memory: `append` or `replace-document`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<Value>,
    /// Memory: the proposed text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proposed_text: Option<String>,
    /// Correction: the target output (resolved, never `latest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_output_event_id: Option<EventId>,
    /// Correction: the proposed replacement text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// Focus: the declaration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declaration: Option<Value>,
    /// Memory and correction: the model's reason (null for a focus).
    pub reason: Option<String>,
    /// The cited evidence, resolved to the text it names.
    pub evidence: Vec<Evidence>,
    /// Memory: the frozen base the change applies to, and the operation.
    #[serde(skip)]
    pub memory_target: Option<(MemoryTarget, MemoryOperation)>,
    /// The proposer's context snapshot.
    #[serde(skip)]
    pub snapshot_id: Option<SnapshotId>,
}

// Proposal text is sensitive: `Debug` shows ids only.
impl std::fmt::Debug for ProposalView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProposalView")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("state", &self.state)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl ProposalView {
    /// The one-line summary: the first line of the proposed text, of the
    /// replacement for a correction, of the objective for a focus.
    pub fn summary_text(&self) -> &str {
        let text = match self.kind {
            ProposalKind::MemoryChange => self.proposed_text.as_deref(),
            ProposalKind::SelfCorrection => self.replacement.as_deref(),
            // A redacted declaration is its marker string.
            ProposalKind::FocusDeclaration => self.declaration.as_ref().and_then(|d| {
                d.as_str()
                    .or_else(|| d.get("objective").and_then(Value::as_str))
            }),
        };
        text.unwrap_or_default()
    }

    /// The `controls` rule: any text of the proposal itself (what the
    /// model wrote: text, replacement, reason, declaration) holds a hidden
    /// character. Cited evidence is shown escaped but does not flag.
    fn has_controls(&self) -> bool {
        let declaration_hidden = self
            .declaration
            .as_ref()
            .is_some_and(|d| count_hidden(&d.to_string()) > 0);
        declaration_hidden
            || [
                self.proposed_text.as_deref(),
                self.replacement.as_deref(),
                self.reason.as_deref(),
            ]
            .into_iter()
            .flatten()
            .any(|t| count_hidden(t) > 0)
    }
}

/// Every stored proposal event, in commit order.
pub fn proposal_events(store: &dyn Read) -> Result<Vec<StoredEvent>, StoreError> {
    let mut all = Vec::new();
    for ty in PROPOSAL_TYPES {
        all.extend(store.events(&EventQuery::of_type(ty))?);
    }
    all.sort_by_key(|e| (e.recorded_at_ms, e.event.source.clone(), e.seq));
    Ok(all)
}

/// The id a decision on `proposal` has.
pub fn decision_id(proposal: &EventId) -> Option<EventId> {
    derive_event_id(
        SourceName::PROPOSALS,
        ProposalDecision::TYPE,
        &json!(proposal),
    )
    .ok()
}

/// How long ago `then_ms` was at `now_ms`: "12 s", "3 min", "5 h", "2 d"
/// (the list's age column and the inspector's oldest pending proposal).
pub fn age(now_ms: i64, then_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h", s / 3_600),
        _ => format!("{} d", s / 86_400),
    }
}

/// RFC 3339 of a store timestamp.
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The one staleness rule: a memory proposal is stale when it is still
/// pending and its document's current version (`current`, as the last scan
/// left the pointer; `None` when the document is gone) is no longer its
/// base. A decided proposal — accepted, edited or rejected, materialized or
/// not — is never stale: it will not be applied again, and after an accept
/// the current version is the one it wrote. This narrows docs/design.md
/// §19's older sentence ("true when the proposal's memory base is no longer
/// the current version"), which flagged every materialized proposal.
/// Computed, never stored.
pub fn is_stale(state: State, base: &VersionId, current: Option<&VersionId>) -> bool {
    match state {
        State::Pending => current != Some(base),
        State::Accepted | State::Edited | State::Rejected => false,
    }
}

/// The current version of `target`'s document, if it still exists.
pub fn current_version(
    store: &dyn Read,
    target: &MemoryTarget,
) -> Result<Option<VersionId>, StoreError> {
    Ok(store
        .document(&target.document_id)?
        .and_then(|doc| doc.current_version))
}

/// How much a listing resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Everything but evidence (the table).
    Summary,
    /// Evidence resolved too (`--json`, show).
    Full,
}

fn view(
    store: &dyn Read,
    event: &StoredEvent,
    snapshots: &mut SnapshotCache,
    depth: Depth,
    trusted: &TrustedKeys,
) -> Result<Option<ProposalView>, StoreError> {
    let id = event.id().clone();
    let mut v = ProposalView {
        short_id: id.short(12).to_owned(),
        id,
        kind: ProposalKind::MemoryChange,
        created_at: rfc3339(event.recorded_at_ms),
        created_at_ms: event.recorded_at_ms,
        state: State::Pending,
        outcome: None,
        stale: false,
        flags: Vec::new(),
        decision_event_id: None,
        outcome_event_id: None,
        run_id: String::new(),
        operation: None,
        proposed_text: None,
        target_output_event_id: None,
        replacement: None,
        declaration: None,
        reason: None,
        evidence: Vec::new(),
        memory_target: None,
        snapshot_id: None,
    };
    let evidence_ids: Vec<EventId>;
    if let Ok(p) = event.decode::<MemoryChangeProposed>() {
        v.run_id = p.proposer.run_id.to_string();
        v.snapshot_id = Some(p.proposer.context_snapshot_id);
        v.operation = Some(json!(p.operation));
        v.proposed_text = Some(p.proposed_text.into_string());
        v.reason = Some(p.reason.into_string());
        v.memory_target = Some((p.target, p.operation));
        evidence_ids = p.evidence_event_ids.as_slice().to_vec();
    } else if let Ok(p) = event.decode::<CorrectionProposed>() {
        v.kind = ProposalKind::SelfCorrection;
        v.run_id = p.proposer.run_id.to_string();
        v.snapshot_id = Some(p.proposer.context_snapshot_id);
        v.target_output_event_id = Some(p.target.output_event_id);
        v.replacement = Some(p.replacement.text.into_string());
        v.reason = Some(p.reason.into_string());
        evidence_ids = p.evidence_event_ids.as_slice().to_vec();
    } else if let Ok(p) = event.decode::<FocusDeclarationProposed>() {
        v.kind = ProposalKind::FocusDeclaration;
        v.run_id = p.proposer.run_id.to_string();
        v.snapshot_id = Some(p.proposer.context_snapshot_id);
        v.declaration = serde_json::to_value(&p.declaration).ok();
        evidence_ids = Vec::new();
    } else {
        return Ok(None);
    }
    if let (Depth::Full, false, Some(snapshot_id)) =
        (depth, evidence_ids.is_empty(), &v.snapshot_id)
    {
        v.evidence = resolve_evidence(store, Some(snapshot_id), snapshots, &evidence_ids)?;
    }
    decide(store, event, &mut v, trusted)?;
    if let Some((target, _)) = &v.memory_target {
        let current = current_version(store, target)?;
        v.stale = is_stale(v.state, &target.version_id, current.as_ref());
    }
    if v.stale {
        v.flags.push(Flag::Stale);
    }
    if v.has_controls() {
        v.flags.push(Flag::Controls);
    }
    Ok(Some(v))
}

/// Fills in the decision state and outcome; a decision `trusted` does not
/// authorize has the outcome `unauthorized`, whatever else is recorded.
fn decide(
    store: &dyn Read,
    proposal: &StoredEvent,
    v: &mut ProposalView,
    trusted: &TrustedKeys,
) -> Result<(), StoreError> {
    let Some(decision_id) = decision_id(&v.id) else {
        return Ok(());
    };
    let Some(decision_event) = store.event(&decision_id)? else {
        return Ok(());
    };
    let Ok(recorded) = RecordedDecision::decode(&decision_event) else {
        return Ok(());
    };
    let decision = recorded.decision();
    v.decision_event_id = Some(decision_id.clone());
    v.state = match decision.disposition {
        Disposition::Accept => State::Accepted,
        Disposition::Edit => State::Edited,
        Disposition::Reject => State::Rejected,
    };
    match v.kind {
        ProposalKind::SelfCorrection => {
            if let Ok(id) = judgment_id(&decision_id)
                && store.event(&id)?.is_some()
            {
                v.outcome = Some(Outcome::JudgmentRecorded);
                v.outcome_event_id = Some(id);
            }
        }
        ProposalKind::MemoryChange => {
            if let Ok(id) = memory_outcome_id(&decision_id)
                && let Some(outcome) = store.event(&id)?
            {
                v.outcome = if outcome.is::<MemoryChangeMaterialized>() {
                    Some(Outcome::Materialized)
                } else if outcome.is::<MaterializationFailed>() {
                    Some(Outcome::MaterializationFailed)
                } else {
                    None
                };
                v.outcome_event_id = v.outcome.map(|_| id);
            }
        }
        ProposalKind::FocusDeclaration => {}
    }
    let authorized = authorize(&recorded, &proposal.event.payload_sha256, trusted, || {
        legacy_outcome(store, &decision_id, decision.proposal_kind)
    })?;
    if authorized.is_err() {
        v.outcome = Some(Outcome::Unauthorized);
    }
    Ok(())
}

/// All proposals (or only pending ones and those whose decision is
/// unauthorized, which need the operator's eye), oldest first.
pub fn list(
    store: &dyn Read,
    all: bool,
    depth: Depth,
    trusted: &TrustedKeys,
) -> Result<Vec<ProposalView>, StoreError> {
    let mut snapshots = SnapshotCache::new();
    let mut views = Vec::new();
    for event in proposal_events(store)? {
        if let Some(v) = view(store, &event, &mut snapshots, depth, trusted)?
            && (all || v.state == State::Pending || v.outcome == Some(Outcome::Unauthorized))
        {
            views.push(v);
        }
    }
    Ok(views)
}

/// One proposal by its full id.
pub fn get(
    store: &dyn Read,
    id: &EventId,
    trusted: &TrustedKeys,
) -> Result<Option<ProposalView>, StoreError> {
    match store.event(id)? {
        Some(event) => view(
            store,
            &event,
            &mut SnapshotCache::new(),
            Depth::Full,
            trusted,
        ),
        None => Ok(None),
    }
}

/// The event types of proposals.
const PROPOSAL_TYPES: [&str; 3] = [
    MemoryChangeProposed::TYPE,
    CorrectionProposed::TYPE,
    FocusDeclarationProposed::TYPE,
];

/// Resolves a full id or a unique prefix of at least `min_digits` hex
/// digits, as git resolves a commit: `proposal-show` takes 4,
/// `proposal-decision` (an authority action, its interface fixed) 12.
/// Case is ignored.
pub fn resolve_prefix(
    store: &dyn Read,
    prefix: &str,
    min_digits: usize,
) -> Result<Resolved, StoreError> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.len() < min_digits.max(1)
        || prefix.len() > 64
        || !prefix.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Ok(Resolved::BadPrefix { min_digits });
    }
    // A full id is one indexed read, not a pass over every proposal.
    if let Ok(id) = EventId::parse(&prefix) {
        return Ok(match store.event(&id)? {
            Some(event) if PROPOSAL_TYPES.contains(&event.event.event_type.as_str()) => {
                Resolved::One(id)
            }
            Some(_) | None => Resolved::None,
        });
    }
    Ok(among(
        proposal_events(store)?.into_iter().map(|e| e.event.id),
        &prefix,
    ))
}

/// The ids of `ids` that start with `prefix` (lowercase hex), as a
/// resolution; several are sorted.
fn among(ids: impl Iterator<Item = EventId>, prefix: &str) -> Resolved {
    let mut matches: Vec<EventId> = ids.filter(|id| id.as_str().starts_with(prefix)).collect();
    if matches.len() > 1 {
        matches.sort();
        return Resolved::Ambiguous(matches);
    }
    match matches.pop() {
        Some(one) => Resolved::One(one),
        None => Resolved::None,
    }
}

/// The result of resolving a proposal id prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Exactly one proposal.
    One(EventId),
    /// No proposal has this prefix.
    None,
    /// Several do: all of them, sorted.
    Ambiguous(Vec<EventId>),
    /// Not `min_digits` to 64 hex digits.
    BadPrefix {
        /// The fewest digits accepted.
        min_digits: usize,
    },
}

/// How many candidates an ambiguous prefix names before "and N more".
pub const CANDIDATES_SHOWN: usize = 10;

/// The candidates of an ambiguous prefix as a person reads them: their
/// 12-digit short ids, at most [`CANDIDATES_SHOWN`], then `and N more`.
pub fn candidates(ids: &[EventId]) -> String {
    let mut out = ids
        .iter()
        .take(CANDIDATES_SHOWN)
        .map(|id| id.short(12))
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > CANDIDATES_SHOWN {
        out.push_str(&format!(" and {} more", ids.len() - CANDIDATES_SHOWN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Resolved, State, among, candidates, is_stale};
    use stream_core::{EventId, VersionId};

    fn event_id(hex: &str) -> EventId {
        EventId::parse(&format!("{hex:0<64}")).unwrap()
    }

    #[test]
    fn a_prefix_resolves_to_one_none_or_every_candidate() {
        let ids = ["3f9a1c", "3f9b00", "3f9a1d", "0000aa"].map(event_id);
        let of = |prefix: &str| among(ids.iter().cloned(), prefix);
        assert_eq!(of("3f9b"), Resolved::One(ids[1].clone()));
        assert_eq!(of("3f9a1d"), Resolved::One(ids[2].clone()));
        assert_eq!(of("4000"), Resolved::None);
        assert_eq!(
            of("3f9a"),
            Resolved::Ambiguous(vec![ids[0].clone(), ids[2].clone()])
        );
    }

    #[test]
    fn candidates_name_ten_short_ids_then_how_many_more() {
        let ids: Vec<EventId> = (0..13).map(|i| event_id(&format!("abcd{i:02}"))).collect();
        assert_eq!(candidates(&ids[..2]), "abcd00000000, abcd01000000");
        let many = candidates(&ids);
        assert!(many.starts_with("abcd00000000, abcd01000000, "), "{many}");
        assert!(many.ends_with(", abcd09000000 and 3 more"), "{many}");
        assert_eq!(many.matches(", ").count(), 9);
    }

    fn version(digit: char) -> VersionId {
        VersionId::parse(&digit.to_string().repeat(64)).unwrap()
    }

    /// One row per state × (base current, base replaced, document gone).
    #[test]
    fn only_a_pending_proposal_is_ever_stale() {
        let (base, other) = (version('a'), version('b'));
        for (state, current, stale) in [
            (State::Pending, Some(&base), false),
            (State::Pending, Some(&other), true),
            (State::Pending, None, true),
            // Accepted and materialized: the current version is the one it wrote.
            (State::Accepted, Some(&other), false),
            // Accepted, materialization failed (stale-base): still not stale.
            (State::Accepted, Some(&base), false),
            (State::Edited, Some(&other), false),
            (State::Edited, None, false),
            (State::Rejected, Some(&other), false),
            (State::Rejected, None, false),
        ] {
            assert_eq!(
                is_stale(state, &base, current),
                stale,
                "{state:?} {current:?}"
            );
        }
    }
}
