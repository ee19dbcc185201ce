//! The memory half of a decision's rendering: where the operator's config
//! says memory is materialized (root, source, size limit, locks folder),
//! and a materialization's outcome as printed lines and an exit. Prints ids
//! and status only, never text or paths.

use anyhow::anyhow;
use stream_core::payload::MaterializationFailure;
use stream_core::{EventId, SourceName};
use stream_memory::decide::Place;
use stream_memory::lock::LockError;
use stream_memory::materialize::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, Recorded,
};

use crate::config::Config;
use crate::exit::Failure;

/// Where this config decides: the materializer's configuration, from the
/// operator's config only, or review-only (no `[context]`).
pub fn place(config: &Config) -> Place {
    match &config.context {
        Some(context) => Place::Root(MaterializeConfig {
            root: context.root.clone(),
            source: SourceName::fixed(SourceName::CONTEXT),
            max_bytes: context.max_memory_bytes,
            lock_dir: config.data_dir.join("locks"),
            trusted: config.trusted_keys(),
        }),
        None => Place::ReviewOnly(config.trusted_keys()),
    }
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
        MaterializeError::Decision(p) => super::project_failure(p),
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
