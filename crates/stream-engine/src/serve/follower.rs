//! The running serve's side of the cooperation with activation: follow the
//! active declaration, obey the consumer's request, report the consumer's
//! status. Runs on the consumer's own thread (every call here blocks on
//! the store).

use std::sync::Arc;

use crate::active::{ActiveDeclaration, active};
use crate::cooperation::{
    ConsumerRequest, ConsumerState, ConsumerStatus, CooperationError, ProcessEvidence,
    read_request, write_status,
};
use crate::engine::Engine;
use stream_core::SourceName;
use stream_memory::materialize::{MaterializeConfig, materialize_pending};

/// What the consumer may do after [`Follower::cooperate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Take triggers now; `retry` when the readiness report could not be
    /// written and must be tried again after a wait.
    Take {
        /// The report is still to be written.
        retry: bool,
    },
    /// Take none until the store changes (a stop request obeyed, no active
    /// declaration, an active declaration that cannot be followed).
    Hold,
    /// Take none; something failed that may pass: look again after a wait
    /// (or at the next commit).
    Retry,
}

/// The engine a running serve drives, and what it reported about it.
pub(crate) struct Follower {
    pub(crate) engine: Engine,
    process: ProcessEvidence,
    /// The state last written to the status row, `None` until written.
    reported: Option<(ConsumerState, Option<String>)>,
    /// The active declaration that could not be followed, to log it once.
    unfollowable: Option<ActiveDeclaration>,
    /// The `system:proposals` seq up to which memory decisions were looked at.
    memory_cursor: u64,
}

impl Follower {
    pub(crate) fn new(engine: Engine) -> Result<Self, CooperationError> {
        let process = ProcessEvidence::current()?;
        Ok(Self {
            engine,
            process,
            reported: None,
            unfollowable: None,
            memory_cursor: 0,
        })
    }

    /// Materializes the memory decisions recorded since the last look:
    /// [`materialize_decisions`] with this serve's cursor.
    pub(crate) fn materialize_decisions(&mut self) {
        materialize_decisions(&self.engine, &mut self.memory_cursor);
    }

    /// Writes the status row of the engine's consumer (once per change);
    /// `false` when the write failed (it is tried again at the next pass).
    pub(crate) fn report(&mut self, state: ConsumerState, activation_id: Option<String>) -> bool {
        let wanted = (state, activation_id);
        if self.reported.as_ref() == Some(&wanted) {
            return true;
        }
        let status = ConsumerStatus {
            state,
            activation_id: wanted.1.clone(),
            process: self.process.clone(),
            telegram_source: self.engine.telegram().clone(),
            worker_bundle_sha256: self.engine.worker_bundle().clone(),
            declaration_fingerprint: self.engine.active().fingerprint.clone(),
        };
        let consumer = self.engine.consumer();
        let written = (|| {
            let mut tx = self.engine.store().begin()?;
            write_status(&mut *tx, &consumer, &status)?;
            tx.commit()?;
            Ok::<(), CooperationError>(())
        })();
        match written {
            Ok(()) => {
                tracing::info!(consumer, state = ?state, "consumer status reported");
                self.reported = Some(wanted);
                true
            }
            Err(e) => {
                tracing::error!(consumer, error = %e, "consumer status not written; retrying");
                false
            }
        }
    }

    /// Follows the active declaration and obeys the consumer's request.
    /// Anything unreadable fails closed: no trigger is taken until it reads
    /// again.
    pub(crate) async fn cooperate(&mut self) -> Turn {
        let store = Arc::clone(self.engine.store());
        match active(store.as_ref()) {
            Ok(Some(now)) if now != *self.engine.active() => match self.engine.follow(&now) {
                Ok(next) => {
                    tracing::info!(
                        from = %self.engine.consumer(),
                        to = %next.consumer(),
                        "following the activation"
                    );
                    self.engine = next;
                    self.reported = None;
                    self.unfollowable = None;
                }
                Err(e) => {
                    if self.unfollowable.as_ref() != Some(&now) {
                        tracing::error!(
                            active = %now.consumer(),
                            error = %e,
                            "cannot follow the active declaration; taking no triggers"
                        );
                        self.unfollowable = Some(now);
                    }
                    return Turn::Hold;
                }
            },
            Ok(Some(_)) => {}
            Ok(None) => {
                tracing::warn!("no active declaration; taking no triggers");
                return Turn::Hold;
            }
            Err(e) => {
                tracing::warn!(error = %e, "active declaration unreadable; taking no triggers");
                return Turn::Retry;
            }
        }
        match read_request(store.as_ref(), &self.engine.consumer()) {
            Ok(ConsumerRequest::Running {}) => Turn::Take {
                // Triggers are taken even while the report is retried.
                retry: !self.report(ConsumerState::Running, None),
            },
            Ok(ConsumerRequest::Stopped {
                activation_id,
                through_seq,
            }) => {
                let acknowledged = self.reported.as_ref()
                    == Some(&(ConsumerState::Stopped, Some(activation_id.clone())));
                if acknowledged {
                    return Turn::Hold;
                }
                match self.engine.process_through(through_seq).await {
                    Ok(_) if self.report(ConsumerState::Stopped, Some(activation_id)) => Turn::Hold,
                    Ok(_) => Turn::Retry,
                    Err(e) => {
                        tracing::error!(error = %e, "consumer pass before stopping failed; retrying");
                        Turn::Retry
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "consumer request unreadable; taking no triggers");
                Turn::Retry
            }
        }
    }
}

/// Materializes the memory decisions of `engine`'s store recorded since
/// `cursor` (by this process or another: a review-only config records and
/// leaves them to the serve that holds `memory.md`). A failure is logged;
/// the next call looks again. The running serve and a drain both call it.
pub(crate) fn materialize_decisions(engine: &Engine, cursor: &mut u64) {
    let settings = engine.settings();
    let config = MaterializeConfig {
        root: settings.context_root.clone(),
        source: SourceName::fixed(SourceName::CONTEXT),
        max_bytes: settings.max_memory_bytes,
        lock_dir: settings.lock_dir.clone(),
        trusted: settings.trusted_keys.clone(),
    };
    match materialize_pending(engine.store().as_ref(), &config, cursor) {
        Ok(report) if report.settled + report.unsettled > 0 => tracing::info!(
            settled = report.settled,
            unsettled = report.unsettled,
            "memory decisions materialized"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "memory decisions not materialized; retrying"),
    }
}
