//! `record_judgment`: the one way a human judgment enters the store. Only a
//! judgment changes a reply's effective output; proposals never do.

use stream_core::payload::{
    ConversationOutput, Criterion, JudgmentKind, JudgmentRecorded, OutputContract,
};
use stream_core::text::{Label, ReplyText};
use stream_core::{EventId, HumanAuthority, NewEvent, RunId, SourceName};

use crate::SettleError;

/// The delivered output a judgment is about.
#[derive(Debug, Clone)]
pub struct JudgedOutput {
    /// Its exact delivery receipt.
    pub delivery_receipt_event_id: EventId,
    /// The output.
    pub output_event_id: EventId,
    /// The run that produced it.
    pub run_id: RunId,
    /// The output's source root.
    pub source_root_event_id: EventId,
    /// Its frozen output contract.
    pub output_contract: OutputContract,
}

/// What the human decided, and under which criterion.
#[derive(Debug, Clone)]
pub struct JudgmentInput {
    /// The criterion.
    pub criterion: Criterion,
    /// The human actor.
    pub actor: Label,
    /// The judged output.
    pub target: JudgedOutput,
    /// The event that carried the feedback: the identity key.
    pub feedback_source_event_id: EventId,
    /// The replacement text, rebuilt as a full output under the target's contract.
    pub replacement: ReplyText,
}

/// Builds the `judgment.recorded@2` event: on `system:judgments`, rooted at
/// the target's source root, parented to the feedback source. An accepted
/// self-correction is quality-eligible and never externally exportable; an
/// owner's own `/correct` is both.
pub fn record_judgment(input: &JudgmentInput) -> Result<NewEvent, SettleError> {
    let (quality_eligible, external_export_eligible) = match input.criterion {
        Criterion::AgentSelfCorrection => (true, false),
        Criterion::TelegramCorrect => (true, true),
    };
    let payload = JudgmentRecorded {
        kind: JudgmentKind::Correct,
        criterion: input.criterion,
        criterion_version: 1,
        actor: input.actor.clone(),
        authority: HumanAuthority,
        target_delivery_receipt_event_id: input.target.delivery_receipt_event_id.clone(),
        target_output_event_id: input.target.output_event_id.clone(),
        target_run_id: input.target.run_id.clone(),
        feedback_source_event_id: input.feedback_source_event_id.clone(),
        replacement: ConversationOutput {
            contract: input.target.output_contract,
            text: input.replacement.clone(),
        },
        quality_eligible,
        external_export_eligible,
    };
    let source = SourceName::fixed(SourceName::JUDGMENTS);
    Ok(NewEvent::build(
        &source,
        Some(&input.target.source_root_event_id),
        Some(&input.feedback_source_event_id),
        &payload,
    )?)
}
