//! `/correct <text>`: the owner's own correction of the latest delivered
//! conversation reply, or of the replied-to one. A human judgment
//! (criterion `telegram-correct`) and the fixed acknowledgment settle in one
//! transaction.

use stream_core::StoredEvent;
use stream_core::payload::{Criterion, DeliveryReceipt, MessageObservation, MessageReceived};
use stream_core::text::{Label, ReplyText};
use stream_declarations::model::FixedReplies;
use stream_proposals::judgment::{JudgedOutput, JudgmentInput, record_judgment};
use stream_proposals::settle::{Settlement, commit_parts};
use stream_store::EventQuery;

use crate::engine::{Engine, EngineError, Settled};

/// How many earlier Telegram events `/correct` looks through.
const LOOKBACK: usize = 4096;

impl Engine {
    /// The delivered conversation reply `/correct` targets: the one whose
    /// Telegram message the owner replied to, else the latest one.
    fn correct_target(
        &self,
        trigger: &StoredEvent,
        msg: &MessageReceived,
    ) -> Result<Option<JudgedOutput>, EngineError> {
        let query = EventQuery::source_before(&self.telegram, trigger.seq).limit(LOOKBACK);
        for event in self.store.events(&query)? {
            if !event.is::<DeliveryReceipt>() {
                continue;
            }
            let Ok(receipt) = event.decode::<DeliveryReceipt>() else {
                continue;
            };
            if receipt.chat_id != msg.chat_id {
                continue;
            }
            // Replying to any message of a split reply targets the reply.
            if msg
                .reply_to_message_id
                .is_some_and(|mid| !receipt.message_ids().any(|id| id == mid))
            {
                continue;
            }
            let Some(output_event) = self.store.event(&receipt.output_event_id)? else {
                continue;
            };
            let Ok(output) = output_event.decode::<MessageObservation>() else {
                continue;
            };
            // Only conversation replies are corrected; fixed replies are not.
            if output.agent_id.as_str() != self.conversation.id() {
                if msg.reply_to_message_id.is_some() {
                    return Ok(None);
                }
                continue;
            }
            return Ok(Some(JudgedOutput {
                delivery_receipt_event_id: event.id().clone(),
                output_event_id: receipt.output_event_id,
                run_id: receipt.run_id,
                source_root_event_id: receipt.source_root_event_id,
                output_contract: output.output_contract,
            }));
        }
        Ok(None)
    }

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
        let (Ok(replacement), Some(target)) =
            (ReplyText::new(text), self.correct_target(trigger, msg)?)
        else {
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
