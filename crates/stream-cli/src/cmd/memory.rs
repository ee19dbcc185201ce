//! The memory half of projection: a verified memory decision handed to the
//! materializer with the operator's configured root, source, size limit and
//! locks folder. Prints ids and status only, never text or paths.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use stream_core::payload::{Disposition, MaterializationFailure};
use stream_core::{EventId, SourceName};
use stream_memory::lock::LockError;
use stream_memory::materialize::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, Recorded, materialize_verified,
};
use stream_proposals::project::VerifiedDecision;
use stream_store::Store;

use crate::config::Config;
use crate::exit::Failure;

/// The materializer's configuration, from the operator's config only;
/// `None` for a review-only config (no `[context]`).
pub fn materialize_config(config: &Config) -> Option<MaterializeConfig> {
    let context = config.context.as_ref()?;
    Some(MaterializeConfig {
        root: context.root.clone(),
        source: SourceName::fixed(SourceName::CONTEXT),
        max_bytes: context.max_memory_bytes,
        lock_dir: config.data_dir.join("locks"),
        trusted: config.trusted_keys(),
    })
}

/// The exit code a recorded failure maps to: the base moved (3, conflict),
/// the request or the files do not validate (2), the machinery failed (1).
fn failure_exit(reason: MaterializationFailure, event: &EventId) -> Failure {
    let e = anyhow!(
        "memory materialization failed ({}); outcome event {event}",
        reason.as_str()
    );
    match reason {
        MaterializationFailure::StaleBase | MaterializationFailure::Unauthorized => {
            Failure::Conflict(e)
        }
        MaterializationFailure::Path
        | MaterializationFailure::Symlink
        | MaterializationFailure::Frontmatter
        | MaterializationFailure::Size
        | MaterializationFailure::Content => Failure::Usage(e),
        MaterializationFailure::Write
        | MaterializationFailure::Scan
        | MaterializationFailure::Receipt => Failure::Runtime(e),
    }
}

/// Maps a materializer refusal that recorded nothing.
pub fn error_failure(e: MaterializeError) -> Failure {
    match e {
        MaterializeError::Decision(p) => super::proposals::project_failure(p),
        MaterializeError::Lock(LockError::Held { .. }) => Failure::Conflict(e.into()),
        MaterializeError::Store(s) => s.into(),
        MaterializeError::NotAMemoryDecision { .. }
        | MaterializeError::OutcomeInvalid { .. }
        | MaterializeError::RootMismatch { .. } => Failure::usage(e),
        MaterializeError::Lock(
            LockError::Malformed
            | LockError::Replaced
            | LockError::UnsafeDir
            | LockError::Identity
            | LockError::Io(_),
        )
        | MaterializeError::RootIdentityInvalid { .. }
        | MaterializeError::Build { .. } => Failure::runtime(e),
    }
}

/// What projecting one memory decision came to.
#[derive(Debug)]
pub enum MemoryStatus {
    /// Settled without a failure (materialized now or before, or rejected).
    Settled,
    /// A failure outcome, with the exit it maps to and whether it was
    /// recorded by this run.
    Failed(Failure, Recorded),
}

/// How long projection waits while another live process holds the root
/// lock (a materialization holds it for milliseconds): identical decisions
/// racing each other then all converge on the one outcome. A lock still
/// held after this is a conflict (exit 3); `proposal-project` finishes later.
const LOCK_WAIT: Duration = Duration::from_secs(3);
const LOCK_POLL: Duration = Duration::from_millis(25);

/// Materializes a decision verified in this command and prints its
/// outcome. Waiting for the root lock does not replay the chain: it was
/// verified once, at the start of this command. `first` is an attempt
/// already made with the decision (`decide_and_materialize`), if any: a
/// lock held by another live process is waited for as on a first attempt
/// made here.
pub fn project_memory(
    store: &dyn Store,
    config: &Config,
    decision: &VerifiedDecision,
    mut first: Option<Result<MaterializeOutcome, MaterializeError>>,
) -> Result<MemoryStatus, Failure> {
    let Some(materialize) = materialize_config(config) else {
        // A review-only config: the decision is recorded; the serve that
        // holds memory.md materializes it (docs/design.md §19).
        match decision.decision().disposition {
            Disposition::Reject => println!("rejected: memory.md not changed"),
            Disposition::Accept | Disposition::Edit => {
                println!("recorded; will be materialized by the serve that holds memory.md")
            }
        }
        return Ok(MemoryStatus::Settled);
    };
    let started = Instant::now();
    let outcome = loop {
        let attempt = first
            .take()
            .unwrap_or_else(|| materialize_verified(store, &materialize, decision));
        match attempt {
            Err(MaterializeError::Lock(LockError::Held { .. }))
                if started.elapsed() < LOCK_WAIT =>
            {
                std::thread::sleep(LOCK_POLL);
            }
            other => break other.map_err(error_failure)?,
        }
    };
    Ok(report(outcome))
}

/// Prints a materialization's outcome (ids and codes only) and what it
/// comes to.
pub fn report(outcome: MaterializeOutcome) -> MemoryStatus {
    match outcome {
        MaterializeOutcome::Materialized {
            receipt,
            payload,
            recorded,
        } => {
            let already = match recorded {
                Recorded::Now => "",
                Recorded::Already => "already ",
            };
            println!(
                "memory.md {already}materialized: receipt {receipt}, version {}, {} bytes",
                payload.new_version_id, payload.byte_count
            );
            MemoryStatus::Settled
        }
        MaterializeOutcome::Failed {
            event,
            reason,
            recorded,
        } => {
            println!(
                "memory materialization failed: {} (event {event})",
                reason.as_str()
            );
            MemoryStatus::Failed(failure_exit(reason, &event), recorded)
        }
        MaterializeOutcome::Rejected => {
            println!("rejected: memory.md not changed");
            MemoryStatus::Settled
        }
    }
}
