//! History calls rebuilt from proposal events: the canonical tool name and
//! arguments, a short stable synthetic call id, the resolved correction
//! target.
//! Never from reply text, traces or the provider's original call ids.

use std::collections::HashSet;

use serde_json::{Value, json};
use stream_core::canon::sha256;
use stream_core::payload::{
    CorrectionProposed, FocusDeclarationProposed, MemoryChangeProposed, ProposalKind,
};
use stream_core::{EventId, Payload, StoredEvent};

use crate::{ContextError, HistoryCall};

/// The normalized result every reconstructed call gets.
pub const NORMALIZED_RESULT: &str =
    "Proposal captured as a durable inert proposal; approval and application are pending.";

/// Length of a synthetic call id.
pub const CALL_ID_LEN: usize = 9;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Candidate `attempt` for the call id of `proposal`: 9 ASCII alphanumerics
/// from SHA-256 of the proposal id and the attempt number.
fn candidate_call_id(proposal: &EventId, attempt: u64) -> String {
    let digest = sha256(format!("thestream/tool-call-id/1:{proposal}:{attempt}").as_bytes());
    let mut n = digest
        .as_str()
        .bytes()
        .take(16)
        .fold(0u64, |acc, b| (acc << 4) | u64::from(hex_value(b)));
    let mut id = [b'0'; CALL_ID_LEN];
    for slot in id.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    id.iter().map(|&b| char::from(b)).collect()
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => 0,
    }
}

/// Gives the replayed tool calls of one snapshot their ids: exactly 9 ASCII
/// alphanumerics (Mistral models, also under vLLM, accept only that; OpenAI
/// has refused ids over 40 characters), derived from the proposal event id
/// and unique within the snapshot, hence within the request. A collision
/// takes the proposal's next candidate, so the same transcript always gets
/// the same ids.
#[derive(Debug, Default)]
pub struct CallIds {
    used: HashSet<String>,
}

impl CallIds {
    /// The id of the next call, for `proposal`.
    pub fn assign(&mut self, proposal: &EventId) -> String {
        let mut attempt = 0;
        loop {
            let id = candidate_call_id(proposal, attempt);
            if self.used.insert(id.clone()) {
                return id;
            }
            attempt += 1;
        }
    }
}

/// The history call for one stored proposal event, its id from `ids`.
pub fn call_of(event: &StoredEvent, ids: &mut CallIds) -> Result<HistoryCall, ContextError> {
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
        id: ids.assign(event.id()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(c: char) -> EventId {
        EventId::parse(&c.to_string().repeat(64)).unwrap()
    }

    #[test]
    fn call_ids_are_nine_alphanumerics_and_deterministic() {
        let mut a = CallIds::default();
        let mut b = CallIds::default();
        for c in ['a', 'b', 'c'] {
            let id = a.assign(&proposal(c));
            assert_eq!(id.len(), CALL_ID_LEN);
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric()), "{id}");
            assert_eq!(id, b.assign(&proposal(c)));
        }
    }

    #[test]
    fn a_colliding_call_id_takes_the_next_candidate_deterministically() {
        let mut ids = CallIds::default();
        let first = ids.assign(&proposal('a'));
        let second = ids.assign(&proposal('a'));
        assert_ne!(first, second);
        assert_eq!(second, candidate_call_id(&proposal('a'), 1));
        assert_eq!(second.len(), CALL_ID_LEN);
    }
}
