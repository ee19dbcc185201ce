//! `stream.thought.judgment.recorded@2`: a human-authorized judgment on a
//! delivered output. Judgments, not proposals, change effective output.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::HumanAuthority;
use crate::event::{Authorship, Payload, PayloadInvalid};
use crate::ids::{EventId, RunId};
use crate::payload::common::ConversationOutput;
use crate::text::Label;

/// What kind of judgment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JudgmentKind {
    /// The output should have been the replacement.
    Correct,
}

/// The criterion the judgment applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Criterion {
    /// A human accepted or edited the agent's own correction proposal.
    AgentSelfCorrection,
    /// The owner corrected a reply with `/correct` in Telegram.
    TelegramCorrect,
}

impl Criterion {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentSelfCorrection => "agent-self-correction",
            Self::TelegramCorrect => "telegram-correct",
        }
    }
}

/// `stream.thought.judgment.recorded@2`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JudgmentRecorded {
    /// `correct`.
    pub kind: JudgmentKind,
    /// The criterion.
    pub criterion: Criterion,
    /// The criterion's version (1).
    pub criterion_version: u32,
    /// The human who authorized it.
    pub actor: Label,
    /// Literal `human`.
    pub authority: HumanAuthority,
    /// The exact delivery receipt of the judged output.
    pub target_delivery_receipt_event_id: EventId,
    /// The judged output.
    pub target_output_event_id: EventId,
    /// The run that produced it.
    pub target_run_id: RunId,
    /// The event that carried the feedback (a decision, or a `/correct`
    /// message): the identity key.
    pub feedback_source_event_id: EventId,
    /// The full replacement output under the target's frozen contract.
    pub replacement: ConversationOutput,
    /// May feed quality training.
    pub quality_eligible: bool,
    /// May leave the machine in an external export.
    pub external_export_eligible: bool,
}

impl Payload for JudgmentRecorded {
    const TYPE: &'static str = "stream.thought.judgment.recorded";
    const VERSION: u32 = 2;
    const AUTHORSHIP: Authorship = Authorship::Human;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.feedback_source_event_id)
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        if self.criterion_version != 1 {
            return Err(PayloadInvalid::new("criterionVersion", "must be 1"));
        }
        match self.criterion {
            // The specification fixes both flags for accepted self-corrections.
            Criterion::AgentSelfCorrection => {
                if !self.quality_eligible || self.external_export_eligible {
                    return Err(PayloadInvalid::new(
                        "externalExportEligible",
                        "self-corrections are quality-eligible and never externally exportable",
                    ));
                }
                Ok(())
            }
            Criterion::TelegramCorrect => Ok(()),
        }
    }
}
