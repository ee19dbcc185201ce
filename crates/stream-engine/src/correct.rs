//! `/correct <text>`: the owner's own correction of the latest delivered
//! conversation reply, or of the replied-to one (the target rules are
//! `stream_context::correct`'s). A human judgment
//! (criterion `telegram-correct`) and the fixed acknowledgment settle in one
//! transaction.

use stream_context::ContextError;
use stream_context::correct::owner_correction_target;
use stream_core::StoredEvent;
use stream_core::payload::{Criterion, MessageReceived};
use stream_core::text::{Label, ReplyText};
use stream_declarations::model::FixedReplies;
use stream_proposals::judgment::{JudgedOutput, JudgmentInput, record_judgment};
use stream_proposals::settle::{Settlement, commit_parts};

use crate::engine::{Engine, EngineError, Settled};

impl Engine {
    pub(crate) fn owner_correct(
        &self,
        trigger: &StoredEvent,
        msg: &MessageReceived,
        replies: &FixedReplies,
    ) -> Result<Settled, EngineError> {
        let text = msg
            .command
            .as_ref()
            .map(|c| c.args.as_str().trim().to_owned())
            .unwrap_or_default();
        let target = match owner_correction_target(
            self.store.as_ref(),
            trigger,
            msg,
            self.conversation.id(),
        ) {
            Ok(target) => target.map(|t| JudgedOutput {
                delivery_receipt_event_id: t.delivery_receipt_event_id,
                output_event_id: t.output_event_id,
                run_id: t.run_id,
                source_root_event_id: t.source_root_event_id,
                output_contract: t.output_contract,
            }),
            // A receipt that could be the target is unreadable: correct
            // nothing rather than an older reply; say so with the fixed
            // failure reply (content-dark) and name the event in the log.
            Err(ContextError::EventInvalid { id }) => {
                tracing::warn!(event = %id.short(12), "/correct refused: a candidate receipt does not decode");
                return self.fixed_reply(trigger, msg, replies.run_failed.clone());
            }
            Err(e) => return Err(e.into()),
        };
        let (Ok(replacement), Some(target)) = (ReplyText::new(text), target) else {
            // Nothing to correct, or no usable text: explain instead.
            return self.fixed_reply(trigger, msg, replies.help.clone());
        };
        let actor = Label::new(format!("telegram:{}", msg.sender_id)).map_err(|_| {
            EngineError::EventInvalid {
                id: trigger.id().clone(),
            }
        })?;
        let judgment = record_judgment(&JudgmentInput {
            criterion: Criterion::TelegramCorrect,
            actor,
            target,
            feedback_source_event_id: trigger.id().clone(),
            replacement,
        })?;
        let facts = self.fixed_facts(trigger, msg)?;
        let settlement = Settlement::deterministic(&facts, replies.correct_ack.clone())?;
        let mut events = vec![judgment];
        events.extend(settlement.events.iter().cloned());
        commit_parts(
            self.store.as_ref(),
            &events,
            &settlement.run,
            Some(&settlement.progress),
        )?;
        tracing::info!(run = %facts.run_id.short(12), "owner correction recorded");
        Ok(Settled::Completed)
    }
}
