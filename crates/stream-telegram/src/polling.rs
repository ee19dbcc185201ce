//! Long polling: `getUpdates` from the stored offset, each update committed
//! (with the next offset) before the next call acknowledges it.
//!
//! The offset is the one the last handled update asked for (its id + 1),
//! persisted in the store — never recomputed from the highest stored update
//! id, because Telegram's update ids are unique but not reliably monotonic.

use std::future::Future;
use std::time::Duration;

use crate::control::IngressState;
use crate::ingress::{Ack, Ingress, IngressError, UpdateOutcome};

/// Polling settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollingOptions {
    /// The long-poll wait of each `getUpdates`, in seconds.
    pub timeout_secs: u32,
    /// Updates per call (1–100).
    pub limit: u8,
    /// How often a frozen loop re-reads the ingress state.
    pub frozen_recheck: Duration,
    /// The wait after a failed call or commit before trying again.
    pub error_backoff: Duration,
}

impl Default for PollingOptions {
    fn default() -> Self {
        Self {
            timeout_secs: 25,
            limit: 100,
            frozen_recheck: Duration::from_secs(1),
            error_backoff: Duration::from_secs(2),
        }
    }
}

/// How long the loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollMode {
    /// Until the shutdown future completes.
    UntilShutdown,
    /// Handle every update available now (`getUpdates` with timeout 0 until
    /// an empty answer), then return. Returns at once when frozen; errors
    /// are returned rather than retried.
    Drain,
}

/// What one run of the loop did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollReport {
    /// `getUpdates` calls that answered.
    pub calls: u64,
    /// Updates stored.
    pub stored: u64,
    /// Duplicates that converged.
    pub converged: u64,
    /// Updates dropped by admission or parsing.
    pub dropped: u64,
    /// Update ids already stored with other content.
    pub conflicts: u64,
    /// Whether the loop saw ingress frozen.
    pub saw_frozen: bool,
}

/// Runs the polling loop of `ingress` until `shutdown` completes (or, in
/// [`PollMode::Drain`], until nothing is left).
pub async fn run_polling(
    ingress: &Ingress,
    options: &PollingOptions,
    mode: PollMode,
    shutdown: impl Future<Output = ()>,
) -> Result<PollReport, IngressError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut report = PollReport::default();
    loop {
        let state = match ingress.state().await {
            Ok(state) => state,
            Err(e) if mode == PollMode::UntilShutdown => {
                tracing::warn!(error = %e, "reading the ingress state failed; retrying");
                if pause(&mut shutdown, options.error_backoff).await {
                    return Ok(report);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        match state {
            IngressState::Running => {}
            IngressState::Frozen => {
                report.saw_frozen = true;
                match mode {
                    PollMode::Drain => return Ok(report),
                    PollMode::UntilShutdown => {
                        if pause(&mut shutdown, options.frozen_recheck).await {
                            return Ok(report);
                        }
                        continue;
                    }
                }
            }
        }
        let timeout = match mode {
            PollMode::Drain => 0,
            PollMode::UntilShutdown => options.timeout_secs,
        };
        let fetched = async {
            let offset = ingress.polling_offset().await?;
            let updates = ingress
                .api()
                .get_updates(offset, options.limit, timeout)
                .await?;
            Ok::<_, IngressError>(updates)
        };
        let updates = tokio::select! {
            () = &mut shutdown => return Ok(report),
            r = fetched => r,
        };
        let updates = match updates {
            Ok(updates) => updates,
            Err(e) if mode == PollMode::UntilShutdown => {
                tracing::warn!(error = %e, "getUpdates failed; retrying");
                if pause(&mut shutdown, options.error_backoff).await {
                    return Ok(report);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        report.calls += 1;
        if updates.is_empty() && mode == PollMode::Drain {
            return Ok(report);
        }
        let mut progressed = false;
        let mut frozen_in_batch = false;
        for update in &updates {
            match ingress.handle_update(update, Ack::PollingOffset).await {
                Ok(outcome) => {
                    match outcome {
                        UpdateOutcome::Stored { .. } => report.stored += 1,
                        UpdateOutcome::Converged { .. } => report.converged += 1,
                        UpdateOutcome::Conflict { .. } => report.conflicts += 1,
                        UpdateOutcome::Dropped(d) => {
                            report.dropped += 1;
                            // An update without an id cannot move the offset.
                            if d.update_id.is_none() {
                                continue;
                            }
                        }
                        UpdateOutcome::Frozen => {
                            report.saw_frozen = true;
                            frozen_in_batch = true;
                            break;
                        }
                    }
                    progressed = true;
                }
                Err(e) if mode == PollMode::UntilShutdown => {
                    tracing::warn!(error = %e, "storing an update failed; it will be fetched again");
                    progressed = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if !progressed && !updates.is_empty() && !frozen_in_batch {
            // Nothing could be committed: do not spin on the same batch.
            if mode == PollMode::Drain {
                return Ok(report);
            }
            if pause(&mut shutdown, options.error_backoff).await {
                return Ok(report);
            }
        }
    }
}

/// Sleeps `wait`, or returns `true` early when shutdown completes.
async fn pause<F: Future<Output = ()>>(
    shutdown: &mut std::pin::Pin<&mut F>,
    wait: Duration,
) -> bool {
    tokio::select! {
        () = shutdown.as_mut() => true,
        () = tokio::time::sleep(wait) => false,
    }
}
