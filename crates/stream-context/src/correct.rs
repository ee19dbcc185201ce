//! `/correct <text>`: which delivered reply the owner's own correction
//! targets. The snapshot's correction targets (`build.rs`) decide what a
//! model may propose to correct; these rules decide what the owner's
//! command corrects, and live beside them.
//!
//! Walking the chat's Telegram source back from the trigger, at most
//! [`LOOKBACK`] events:
//! 1. only delivery receipts of the trigger's chat count;
//! 2. with a reply-to, only the receipt naming that message (any message of
//!    a split reply) counts; without one, the latest receipt does;
//! 3. only a reply of the conversation agent is a target: a fixed reply is
//!    passed over for the latest one, and replying to one targets nothing;
//! 4. a receipt that could be the target but does not decode, or names an
//!    output that is missing or does not decode, refuses the command
//!    (`ContextError::EventInvalid` naming it). Passing over it would
//!    silently correct an older reply than the one the owner meant.

use stream_core::StoredEvent;
use stream_core::payload::{
    CorrectionTarget, DeliveryReceipt, MessageObservation, MessageReceived,
};
use stream_store::{EventQuery, Read};

use crate::ContextError;

/// How many earlier Telegram events `/correct` looks through.
pub const LOOKBACK: usize = 4096;

/// The delivered conversation reply of `conversation_agent` that `msg` (the
/// owner's `/correct`, stored as `trigger`) targets; `None` when there is
/// none in reach. See the module doc for the rules.
pub fn owner_correction_target(
    store: &dyn Read,
    trigger: &StoredEvent,
    msg: &MessageReceived,
    conversation_agent: &str,
) -> Result<Option<CorrectionTarget>, ContextError> {
    let invalid = |e: &StoredEvent| ContextError::EventInvalid { id: e.id().clone() };
    let query = EventQuery::source_before(&trigger.event.source, trigger.seq).limit(LOOKBACK);
    for event in store.events(&query)? {
        if !event.is::<DeliveryReceipt>() {
            continue;
        }
        let receipt: DeliveryReceipt = event.decode().map_err(|_| invalid(&event))?;
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
        let output: MessageObservation = store
            .event(&receipt.output_event_id)?
            .ok_or_else(|| invalid(&event))?
            .decode()
            .map_err(|_| invalid(&event))?;
        // Only conversation replies are corrected; fixed replies are not.
        if output.agent_id.as_str() != conversation_agent {
            if msg.reply_to_message_id.is_some() {
                return Ok(None);
            }
            continue;
        }
        return Ok(Some(CorrectionTarget {
            run_id: receipt.run_id,
            output_event_id: receipt.output_event_id,
            delivery_receipt_event_id: event.id().clone(),
            source_root_event_id: receipt.source_root_event_id,
            output_contract: output.output_contract,
        }));
    }
    Ok(None)
}
