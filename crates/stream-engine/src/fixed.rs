//! Fixed replies of the deterministic declaration: no provider request, no
//! snapshot, no proposal. Also the answer to a model run given up for good.

use stream_core::StoredEvent;
use stream_core::ids::derive_run_id;
use stream_core::payload::MessageReceived;
use stream_core::text::{Label, ReplyText};
use stream_proposals::settle::{FailedAttempt, RunFacts, Settlement, commit};

use crate::engine::{Engine, EngineError, Settled};

impl Engine {
    /// The facts of a deterministic run of the replies declaration on `trigger`.
    /// Progress is the conversation consumer's: it is the one reading the source.
    pub(crate) fn fixed_facts(
        &self,
        trigger: &StoredEvent,
        msg: &MessageReceived,
    ) -> Result<RunFacts, EngineError> {
        let agent = self.replies.id();
        let unservable = || EngineError::Unservable {
            id: agent.to_owned(),
            what: "a label-shaped id",
        };
        Ok(RunFacts {
            run_id: derive_run_id(agent, self.replies.version(), trigger.id())
                .map_err(|_| unservable())?,
            agent_id: Label::new(agent).map_err(|_| unservable())?,
            agent_version: self.replies.version(),
            declaration_fingerprint: self.replies.fingerprint.clone(),
            worker_bundle_sha256: None,
            provider: None,
            snapshot_id: None,
            trigger_event_id: trigger.id().clone(),
            trigger_seq: trigger.seq,
            telegram_source: self.telegram.clone(),
            chat_id: msg.chat_id,
            attempts: 1,
            consumer: self.consumer(),
        })
    }

    /// The answer to a message whose photo was over the one photo bound
    /// and not stored (ingress flagged it): fixed, naming nothing the owner
    /// sent.
    pub(crate) fn photo_too_large_reply(&self) -> Result<ReplyText, EngineError> {
        ReplyText::new(photo_too_large_text()).map_err(|_| EngineError::Unservable {
            id: self.replies.id().to_owned(),
            what: "the photo-too-large reply",
        })
    }

    /// Answers `trigger` with `text`, settled atomically like any run.
    pub(crate) fn fixed_reply(
        &self,
        trigger: &StoredEvent,
        msg: &MessageReceived,
        text: ReplyText,
    ) -> Result<Settled, EngineError> {
        let facts = self.fixed_facts(trigger, msg)?;
        let settlement = Settlement::deterministic(&facts, text)?;
        commit(self.store.as_ref(), &settlement)?;
        tracing::info!(run = %facts.run_id.short(12), agent = %facts.agent_id, "fixed reply settled");
        Ok(Settled::Completed)
    }

    /// Gives a model run up for good and answers its trigger with the
    /// declared failed-run reply, in one transaction: once per run (ids
    /// derive from the trigger), content-dark (a fixed text that names no
    /// reason).
    pub(crate) fn give_up(
        &self,
        failed: &FailedAttempt,
        trigger: &StoredEvent,
        msg: &MessageReceived,
    ) -> Result<(), EngineError> {
        let replies = self
            .replies
            .declaration
            .replies
            .as_ref()
            .ok_or(EngineError::Unservable {
                id: self.replies.id().to_owned(),
                what: "fixed replies",
            })?;
        let facts = self.fixed_facts(trigger, msg)?;
        let reply = Settlement::deterministic(&facts, replies.run_failed.clone())?;
        failed.commit_with_reply(self.store.as_ref(), &reply)?;
        tracing::info!(run = %failed.run.run_id.short(12), "run given up; failed-run reply settled");
        Ok(())
    }
}

/// The text of [`Engine::photo_too_large_reply`], the bound in MiB.
fn photo_too_large_text() -> String {
    let mib = stream_core::payload::MAX_PHOTO_BYTES / (1024 * 1024);
    format!(
        "That photo is larger than {mib} MiB, more than I can look at, so I did not keep it. \
         Please send a smaller one."
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_photo_too_large_reply_is_fixed() {
        assert_eq!(
            super::photo_too_large_text(),
            "That photo is larger than 5 MiB, more than I can look at, so I did not keep it. \
             Please send a smaller one."
        );
    }
}
