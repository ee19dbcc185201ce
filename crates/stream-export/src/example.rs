//! One training example: chat fine-tuning messages plus provenance.

use serde::Serialize;
use stream_core::payload::KeyId;
use stream_core::{EventId, Fingerprint, RunId, SnapshotId};

use crate::ExportError;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// Text.
    pub content: String,
}

/// Every id of the chain. Optional so the writer can refuse an example
/// supplied with any of them missing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The judgment.
    pub judgment_event_id: Option<EventId>,
    /// The judged run, completed.
    pub completed_run_id: Option<RunId>,
    /// Its completed-run receipt.
    pub run_completed_event_id: Option<EventId>,
    /// The judged output.
    pub output_event_id: Option<EventId>,
    /// The trigger of the judged run.
    pub trigger_event_id: Option<EventId>,
    /// The feedback source (a decision, or a `/correct` message).
    pub feedback_event_id: Option<EventId>,
    /// The exact single-run delivery receipt.
    pub delivery_receipt_event_id: Option<EventId>,
    /// The retry-stable context snapshot of the judged run.
    pub context_snapshot_id: Option<SnapshotId>,
    /// The declaration fingerprint of the judged run.
    pub declaration_fingerprint: Option<Fingerprint>,
    /// The key that signed the decision behind the judgment: `null` for an
    /// owner's `/correct` and for a decision recorded before signing. Not
    /// required by [`Provenance::missing`].
    pub decision_key_id: Option<KeyId>,
}

impl Provenance {
    /// The first missing id, by field name.
    pub fn missing(&self) -> Option<&'static str> {
        [
            ("judgmentEventId", self.judgment_event_id.is_none()),
            ("completedRunId", self.completed_run_id.is_none()),
            ("runCompletedEventId", self.run_completed_event_id.is_none()),
            ("outputEventId", self.output_event_id.is_none()),
            ("triggerEventId", self.trigger_event_id.is_none()),
            ("feedbackEventId", self.feedback_event_id.is_none()),
            (
                "deliveryReceiptEventId",
                self.delivery_receipt_event_id.is_none(),
            ),
            ("contextSnapshotId", self.context_snapshot_id.is_none()),
            (
                "declarationFingerprint",
                self.declaration_fingerprint.is_none(),
            ),
        ]
        .into_iter()
        .find_map(|(name, missing)| missing.then_some(name))
    }
}

/// One JSONL line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Example {
    /// System, transcript, trigger, and the judged replacement as the
    /// assistant turn.
    pub messages: Vec<ChatMessage>,
    /// The chain.
    pub provenance: Provenance,
}

/// Refuses the whole list if any example lacks an id.
pub fn check_complete(examples: &[Example]) -> Result<(), ExportError> {
    for (index, example) in examples.iter().enumerate() {
        if let Some(field) = example.provenance.missing() {
            return Err(ExportError::IncompleteExample { index, field });
        }
    }
    Ok(())
}
