//! A model run: snapshot (built once, loaded on retry), attempts through the
//! broker, trusted validation in the parent, atomic settlement; transient
//! failures retried with the same snapshot and a backoff, everything else
//! final.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use stream_broker::{AttemptError, AttemptReport};
use stream_context::packet::ProviderSpec;
use stream_context::{ContextSpec, Snapshot};
use stream_core::ids::derive_run_id;
use stream_core::payload::{MessageReceived, ProviderRef, RunFailureReason};
use stream_core::text::{BoundedText, Label};
use stream_core::{SnapshotId, SourceName, StoredEvent};
use stream_declarations::tool_def;
use stream_memory::scan::{ScanLimits, scan_with_limits};
use stream_proposals::settle::{FailedAttempt, RunFacts, Settlement, ValidatedCompletion, commit};
use stream_proposals::validate::{AttemptEvidence, validate_completion};
use stream_provider::{response_reason, status_reason};
use stream_store::{RunRow, RunStatus};

use crate::engine::{Engine, EngineError, Settled, StageTimes};

/// A run ready for attempts, or one whose stored snapshot does not verify.
enum Prepared {
    Ready {
        run: RunRow,
        snapshot: Box<Snapshot>,
        /// Built now and not stored yet (with `run`): the first attempt's
        /// worker starts while it is committed (see `model_run`).
        unstored: Option<SnapshotWrite>,
    },
    Unusable {
        run: RunRow,
        reason: RunFailureReason,
    },
}

/// A built snapshot, to be stored with its run row in one commit.
struct SnapshotWrite {
    id: SnapshotId,
    bytes: Vec<u8>,
}

/// A failed attempt as the parent judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Failure {
    reason: RunFailureReason,
    retryable: bool,
}

/// The parent's verdict on one attempt, from what it saw itself; the one
/// home of the retry rule. A non-2xx answer is judged by
/// `stream_provider::response_reason` (a 5xx saying the request itself is
/// unsupported is final); once the provider answered 2xx, no
/// failure is retryable, whatever the worker reported or however it ended,
/// so a worker can never cause a second provider request.
fn verdict(
    attempted: Result<AttemptReport, AttemptError>,
    validate: impl FnOnce(&AttemptReport) -> Result<ValidatedCompletion, RunFailureReason>,
) -> Result<ValidatedCompletion, Failure> {
    let transient_or_final = |reason: RunFailureReason| Failure {
        reason,
        retryable: reason.is_transient(),
    };
    match attempted {
        Ok(report) => match response_reason(report.status, &report.body) {
            Some(reason) => Err(transient_or_final(reason)),
            None => validate(&report).map_err(|reason| Failure {
                reason,
                retryable: false,
            }),
        },
        Err(error) => Err(match error.provider_status().map(status_reason) {
            // The provider refused: its status decides, not the worker.
            Some(Some(reason)) => transient_or_final(reason),
            // The provider answered 2xx and the worker failed after it.
            Some(None) => Failure {
                reason: error.reason(),
                retryable: false,
            },
            // No answer yet (spawn, sandbox, request check, network).
            None => transient_or_final(error.reason()),
        }),
    }
}

impl Engine {
    /// The snapshot inputs of the conversation declaration.
    pub fn context_spec(&self) -> Result<ContextSpec, EngineError> {
        let decl = &self.conversation.declaration;
        let unservable = |what| EngineError::Unservable {
            id: self.conversation.id().to_owned(),
            what,
        };
        let prompt = self
            .conversation
            .prompt
            .as_ref()
            .ok_or_else(|| unservable("a prompt"))?;
        let turns = decl
            .transcript
            .as_ref()
            .ok_or_else(|| unservable("transcript limits"))?
            .max_turns;
        let memory_subscribed = decl.subscriptions.documents.iter().any(|d| {
            d.source.as_str() == SourceName::CONTEXT
                && d.path.as_ref().is_some_and(|p| p.as_str() == "memory.md")
        });
        Ok(ContextSpec {
            agent_id: Label::new(self.conversation.id())
                .map_err(|_| unservable("a label-shaped id"))?,
            agent_version: self.conversation.version(),
            declaration_fingerprint: self.conversation.fingerprint.clone(),
            proposals: decl
                .policy
                .proposals
                .iter()
                .copied()
                .collect::<BTreeSet<_>>(),
            prompt: prompt.text.clone(),
            // A turn is an owner message or a reply: keep half as many messages.
            transcript_messages: turns.div_ceil(2) as usize,
            history_agents: BTreeSet::from([self.conversation.id().to_owned()]),
            memory_subscribed,
        })
    }

    fn scan_context(&self) {
        let limits = ScanLimits {
            max_file_bytes: self
                .settings
                .max_memory_bytes
                .max(ScanLimits::DEFAULT_MAX_FILE_BYTES),
            ..ScanLimits::default()
        };
        let source = SourceName::fixed(SourceName::CONTEXT);
        // A failed scan leaves the last recorded version current; the run
        // goes on with what the store holds (and a changed file on disk
        // makes any later materialization refuse as stale).
        if let Err(e) = scan_with_limits(
            self.store.as_ref(),
            &source,
            &self.settings.context_root,
            &limits,
        ) {
            tracing::warn!(error = %e, "context scan failed; using the recorded memory version");
        }
    }

    /// The run row and snapshot of `run_id`: loaded when a previous attempt
    /// stored them, otherwise built now (after scanning the context root, so
    /// a hand edit of `memory.md` is seen) and stored with a pending row.
    fn prepare(&self, run: &RunRow, trigger: &StoredEvent) -> Result<Prepared, EngineError> {
        if let Some(id) = &run.snapshot_id {
            return Ok(match Snapshot::load(self.store.as_ref(), id) {
                Ok(snapshot) => Prepared::Ready {
                    run: run.clone(),
                    snapshot: Box::new(snapshot),
                    unstored: None,
                },
                Err(e) => {
                    tracing::error!(run = %run.run_id.short(12), error = %e, "stored snapshot does not verify");
                    Prepared::Unusable {
                        run: run.clone(),
                        reason: RunFailureReason::SnapshotInvalid,
                    }
                }
            });
        }
        self.scan_context();
        let snapshot = stream_context::build(
            self.store.as_ref(),
            &self.context_spec()?,
            &run.run_id,
            trigger,
        )?;
        let (bytes, id) = snapshot.encode()?;
        Ok(Prepared::Ready {
            run: RunRow {
                snapshot_id: Some(id.clone()),
                ..run.clone()
            },
            snapshot: Box::new(snapshot),
            unstored: Some(SnapshotWrite { id, bytes }),
        })
    }

    /// Stores a snapshot built by `prepare`, if it is not stored yet, with
    /// its run row `run`: one fsync'd commit, before any provider request of
    /// the run and before anything else about the run is recorded.
    fn store_snapshot(
        &self,
        unstored: &mut Option<SnapshotWrite>,
        run: &RunRow,
    ) -> Result<(), EngineError> {
        let Some(write) = unstored.take() else {
            return Ok(());
        };
        let mut tx = self.store.begin()?;
        tx.put_snapshot(&write.id, &write.bytes)?;
        tx.put_run(run)?;
        tx.commit()?;
        Ok(())
    }

    fn facts(
        &self,
        run: &RunRow,
        trigger: &StoredEvent,
        msg: &MessageReceived,
        attempts: u32,
    ) -> Result<RunFacts, EngineError> {
        let unservable = |what| EngineError::Unservable {
            id: self.conversation.id().to_owned(),
            what,
        };
        Ok(RunFacts {
            run_id: run.run_id.clone(),
            agent_id: Label::new(self.conversation.id())
                .map_err(|_| unservable("a label-shaped id"))?,
            agent_version: self.conversation.version(),
            declaration_fingerprint: self.conversation.fingerprint.clone(),
            worker_bundle_sha256: Some(self.worker_bundle.clone()),
            provider: Some(ProviderRef {
                api: self.settings.provider.api,
                model: BoundedText::new(self.settings.provider.model.clone())
                    .map_err(|_| unservable("a model name"))?,
            }),
            snapshot_id: run.snapshot_id.clone(),
            trigger_event_id: trigger.id().clone(),
            trigger_seq: trigger.seq,
            telegram_source: self.telegram.clone(),
            chat_id: msg.chat_id,
            attempts,
            consumer: self.consumer(),
        })
    }

    /// Runs the conversation declaration on `trigger` until it settles or is
    /// given up.
    pub(crate) async fn model_run(
        &self,
        trigger: &StoredEvent,
        msg: &MessageReceived,
        stages: &mut StageTimes,
    ) -> Result<Settled, EngineError> {
        let agent = self.conversation.id();
        let run_id =
            derive_run_id(agent, self.conversation.version(), trigger.id()).map_err(|_| {
                EngineError::Unservable {
                    id: agent.to_owned(),
                    what: "a run id",
                }
            })?;
        let existing = self.store.run(&run_id)?;
        let run = match existing {
            Some(row) if row.status == RunStatus::Completed => return Ok(Settled::Completed),
            Some(row) if row.status == RunStatus::Failed => return Ok(Settled::Failed),
            Some(row) => row,
            None => RunRow {
                run_id: run_id.clone(),
                agent_id: agent.to_owned(),
                agent_version: self.conversation.version(),
                trigger_event_id: trigger.id().clone(),
                status: RunStatus::Pending,
                attempts: 0,
                snapshot_id: None,
            },
        };
        let preparing = Instant::now();
        let prepared = self.prepare(&run, trigger)?;
        stages.snapshot += preparing.elapsed();
        let (run, snapshot, mut unstored) = match prepared {
            Prepared::Ready {
                run,
                snapshot,
                unstored,
            } => (run, snapshot, unstored),
            Prepared::Unusable { run, reason } => {
                let facts = self.facts(&run, trigger, msg, run.attempts + 1)?;
                self.give_up(
                    &FailedAttempt::assemble(&facts, reason, true)?,
                    trigger,
                    msg,
                )?;
                return Ok(Settled::Failed);
            }
        };
        let max_tokens = self.conversation.max_output_tokens();
        let mut attempts = run.attempts;
        loop {
            attempts += 1;
            let facts = self.facts(&run, trigger, msg, attempts)?;
            let provider = ProviderSpec {
                api: self.settings.provider.api,
                model: self.settings.provider.model.clone(),
                max_output_tokens: max_tokens,
                compat: self.settings.provider.compat,
            };
            let started = Instant::now();
            let attempted = match stream_context::packet::build(
                &snapshot,
                attempts,
                provider,
                &tool_def,
                self.store.as_ref(),
            ) {
                Ok(packet) => {
                    // The snapshot's commit runs here while the worker
                    // takes the packet; the request waits for it.
                    let mut stored = Ok(());
                    let durable = Box::pin(async {
                        stored = self.store_snapshot(&mut unstored, &run);
                        stored.is_ok()
                    });
                    let attempted = self.broker.run_attempt(&packet, durable).await;
                    // An attempt that failed before it asked never ran
                    // `durable`: store the snapshot before the failure.
                    stored?;
                    self.store_snapshot(&mut unstored, &run)?;
                    Some(attempted)
                }
                Err(_) => {
                    self.store_snapshot(&mut unstored, &run)?;
                    None
                }
            };
            stages.attempt += started.elapsed();
            let settling = Instant::now();
            let outcome = match attempted {
                Some(attempted) => verdict(attempted, |report| {
                    validate_completion(
                        &snapshot,
                        AttemptEvidence {
                            api: self.settings.provider.api,
                            status: report.status,
                            body: &report.body,
                            worker: &report.result,
                        },
                    )
                }),
                None => Err(Failure {
                    reason: RunFailureReason::SnapshotInvalid,
                    retryable: false,
                }),
            };
            match outcome {
                Ok(completion) => {
                    let settlement = Settlement::assemble(&facts, &completion)?;
                    commit(self.store.as_ref(), &settlement)?;
                    stages.settle += settling.elapsed();
                    tracing::info!(
                        run = %facts.run_id.short(12),
                        attempt = attempts,
                        proposals = settlement.proposals().len(),
                        truncated = completion.cut,
                        snapshot_us = stages.snapshot.as_micros() as u64,
                        attempt_us = stages.attempt.as_micros() as u64,
                        settle_us = stages.settle.as_micros() as u64,
                        "run settled"
                    );
                    return Ok(Settled::Completed);
                }
                Err(Failure { reason, retryable }) => {
                    let is_final = !retryable || attempts >= self.settings.max_attempts;
                    let failed = FailedAttempt::assemble(&facts, reason, is_final)?;
                    if is_final {
                        self.give_up(&failed, trigger, msg)?;
                    } else {
                        // A transient failure in retry says nothing to the owner.
                        failed.commit(self.store.as_ref())?;
                    }
                    tracing::warn!(
                        run = %facts.run_id.short(12),
                        attempt = attempts,
                        reason = reason.as_str(),
                        is_final,
                        "attempt failed"
                    );
                    if is_final {
                        return Ok(Settled::Failed);
                    }
                    let factor = 1u32 << (attempts - 1).min(6);
                    let wait = self
                        .settings
                        .retry_backoff
                        .saturating_mul(factor)
                        .min(Duration::from_secs(60));
                    // Idle until the retry: the moment to make its worker.
                    self.broker.prepare_spare();
                    if self.pause(wait).await {
                        return Err(EngineError::Interrupted);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunFailureReason as R;
    use stream_broker::Stage;

    fn after(status: u16, failure: AttemptError) -> AttemptError {
        AttemptError::AfterResponse {
            status,
            failure: Box::new(failure),
        }
    }

    /// A worker failure after a 2xx is final; before any answer, or after a
    /// transient status, it may be retried.
    #[test]
    fn verdict_of_failed_attempts_table() {
        // The worker's output ends without a result (an early exit).
        let bad_exit = || AttemptError::WorkerExited {
            stage: Stage::Result,
        };
        let hang = || AttemptError::WorkerTimeout {
            stage: Stage::Result,
        };
        let rows: Vec<(&str, AttemptError, R, bool)> = vec![
            (
                "bad exit after 200",
                after(200, bad_exit()),
                R::WorkerFailed,
                false,
            ),
            (
                "hang after 200",
                after(200, hang()),
                R::WorkerTimeout,
                false,
            ),
            (
                "second request after 200",
                after(200, AttemptError::SecondRequest),
                R::SecondRequest,
                false,
            ),
            (
                "bad exit after 503",
                after(503, bad_exit()),
                R::ProviderTransient,
                true,
            ),
            (
                "bad exit after 400",
                after(400, bad_exit()),
                R::ProviderRejected,
                false,
            ),
            (
                "provider timeout",
                AttemptError::ProviderTimeout,
                R::ProviderTransient,
                true,
            ),
            (
                "hang before the request",
                AttemptError::WorkerTimeout {
                    stage: Stage::Request,
                },
                R::WorkerTimeout,
                true,
            ),
            (
                "request mismatch",
                AttemptError::RequestMismatch,
                R::RequestMismatch,
                false,
            ),
        ];
        for (name, error, reason, retryable) in rows {
            let judged = verdict(Err(error), |_| Err(R::InvalidOutput));
            assert_eq!(judged.err(), Some(Failure { reason, retryable }), "{name}");
        }
    }
}
