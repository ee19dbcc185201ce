//! History calls rebuilt from proposal events: the canonical tool name and
//! arguments, a stable synthetic call id, the resolved correction target.
//! Never from reply text, traces or the provider's original call ids.

use serde_json::{Value, json};
use stream_core::payload::{
    CorrectionProposed, FocusDeclarationProposed, MemoryChangeProposed, ProposalKind,
};
use stream_core::{EventId, Payload, StoredEvent};

use crate::{ContextError, HistoryCall};

/// The normalized result every reconstructed call gets.
pub const NORMALIZED_RESULT: &str =
    "Proposal captured as a durable inert proposal; approval and application are pending.";

/// A tool-call id valid for every provider (`^[A-Za-z0-9_-]{1,64}$`),
/// stable for the proposal event.
pub fn synthetic_call_id(proposal: &EventId) -> String {
    format!("proposal_{}", &proposal.as_str()[..48])
}

/// The history call for one stored proposal event.
pub fn call_of(event: &StoredEvent) -> Result<HistoryCall, ContextError> {
    let invalid = || ContextError::EventInvalid {
        id: event.id().clone(),
    };
    let (kind, arguments): (ProposalKind, Value) = if event.is::<MemoryChangeProposed>() {
        let p: MemoryChangeProposed = event.decode().map_err(|_| invalid())?;
        let args = json!({
            "operation": p.operation,
            "proposed_text": p.proposed_text,
            "reason": p.reason,
            "evidence_event_ids": p.evidence_event_ids,
        });
        (ProposalKind::MemoryChange, args)
    } else if event.is::<CorrectionProposed>() {
        let p: CorrectionProposed = event.decode().map_err(|_| invalid())?;
        // The resolved target, never `latest`.
        let args = json!({
            "target_output": p.target.output_event_id,
            "replacement": p.replacement.text,
            "reason": p.reason,
            "evidence_event_ids": p.evidence_event_ids,
        });
        (ProposalKind::SelfCorrection, args)
    } else if event.is::<FocusDeclarationProposed>() {
        let p: FocusDeclarationProposed = event.decode().map_err(|_| invalid())?;
        let args = serde_json::to_value(&p.declaration).map_err(|_| invalid())?;
        (ProposalKind::FocusDeclaration, args)
    } else {
        return Err(invalid());
    };
    Ok(HistoryCall {
        id: synthetic_call_id(event.id()),
        proposal_event_id: event.id().clone(),
        kind,
        arguments,
    })
}

/// Whether an event type is one of the three proposal types.
pub fn is_proposal_type(event_type: &str) -> bool {
    [
        MemoryChangeProposed::TYPE,
        CorrectionProposed::TYPE,
        FocusDeclarationProposed::TYPE,
    ]
    .contains(&event_type)
}
