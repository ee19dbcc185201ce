//! The operator's view of proposals: kind, decision state, outcome, and the
//! proposal's own fields.

use serde::Serialize;
use serde_json::{Value, json};
use stream_core::ids::derive_event_id;
use stream_core::payload::{
    CorrectionProposed, Disposition, FocusDeclarationProposed, MaterializationFailed,
    MemoryChangeMaterialized, MemoryChangeProposed, ProposalDecision, ProposalKind,
};
use stream_core::{EventId, Payload, SourceName, StoredEvent};
use stream_store::{EventQuery, Read, StoreError};

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
}

/// One proposal as `proposal-list` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalView {
    /// The proposal event id.
    pub id: EventId,
    /// Its kind.
    pub kind: ProposalKind,
    /// Decision state.
    pub state: State,
    /// Outcome, if any.
    pub outcome: Option<Outcome>,
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
    /// Memory and correction: the model's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Every stored proposal event, in commit order.
pub fn proposal_events(store: &dyn Read) -> Result<Vec<StoredEvent>, StoreError> {
    let mut all = Vec::new();
    for ty in [
        MemoryChangeProposed::TYPE,
        CorrectionProposed::TYPE,
        FocusDeclarationProposed::TYPE,
    ] {
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

fn view(store: &dyn Read, event: &StoredEvent) -> Result<Option<ProposalView>, StoreError> {
    let mut v = ProposalView {
        id: event.id().clone(),
        kind: ProposalKind::MemoryChange,
        state: State::Pending,
        outcome: None,
        decision_event_id: None,
        outcome_event_id: None,
        run_id: String::new(),
        operation: None,
        proposed_text: None,
        target_output_event_id: None,
        replacement: None,
        declaration: None,
        reason: None,
    };
    if let Ok(p) = event.decode::<MemoryChangeProposed>() {
        v.run_id = p.proposer.run_id.to_string();
        v.operation = Some(json!(p.operation));
        v.proposed_text = Some(p.proposed_text.into_string());
        v.reason = Some(p.reason.into_string());
    } else if let Ok(p) = event.decode::<CorrectionProposed>() {
        v.kind = ProposalKind::SelfCorrection;
        v.run_id = p.proposer.run_id.to_string();
        v.target_output_event_id = Some(p.target.output_event_id);
        v.replacement = Some(p.replacement.text.into_string());
        v.reason = Some(p.reason.into_string());
    } else if let Ok(p) = event.decode::<FocusDeclarationProposed>() {
        v.kind = ProposalKind::FocusDeclaration;
        v.run_id = p.proposer.run_id.to_string();
        v.declaration = serde_json::to_value(&p.declaration).ok();
    } else {
        return Ok(None);
    }
    let Some(decision_id) = decision_id(&v.id) else {
        return Ok(Some(v));
    };
    let Some(decision_event) = store.event(&decision_id)? else {
        return Ok(Some(v));
    };
    let Ok(decision) = decision_event.decode::<ProposalDecision>() else {
        return Ok(Some(v));
    };
    v.decision_event_id = Some(decision_id.clone());
    v.state = match decision.disposition {
        Disposition::Accept => State::Accepted,
        Disposition::Edit => State::Edited,
        Disposition::Reject => State::Rejected,
    };
    match v.kind {
        ProposalKind::SelfCorrection => {
            if let Ok(id) = judgment_id(&decision_id) {
                if store.event(&id)?.is_some() {
                    v.outcome = Some(Outcome::JudgmentRecorded);
                    v.outcome_event_id = Some(id);
                }
            }
        }
        ProposalKind::MemoryChange => {
            if let Ok(id) = memory_outcome_id(&decision_id) {
                if let Some(outcome) = store.event(&id)? {
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
        }
        ProposalKind::FocusDeclaration => {}
    }
    Ok(Some(v))
}

/// All proposals (or only pending ones), oldest first.
pub fn list(store: &dyn Read, all: bool) -> Result<Vec<ProposalView>, StoreError> {
    let mut views = Vec::new();
    for event in proposal_events(store)? {
        if let Some(v) = view(store, &event)? {
            if all || v.state == State::Pending {
                views.push(v);
            }
        }
    }
    Ok(views)
}

/// Resolves a full id or a unique prefix of at least 12 hex digits.
pub fn resolve_prefix(store: &dyn Read, prefix: &str) -> Result<Resolved, StoreError> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.len() < 12 || prefix.len() > 64 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Resolved::BadPrefix);
    }
    let matches: Vec<EventId> = proposal_events(store)?
        .into_iter()
        .map(|e| e.event.id)
        .filter(|id| id.as_str().starts_with(&prefix))
        .collect();
    Ok(match matches.as_slice() {
        [one] => Resolved::One(one.clone()),
        [] => Resolved::None,
        _ => Resolved::Ambiguous(matches.len()),
    })
}

/// The result of resolving a proposal id prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Exactly one proposal.
    One(EventId),
    /// No proposal has this prefix.
    None,
    /// Several do.
    Ambiguous(usize),
    /// Not 12–64 hex digits.
    BadPrefix,
}
