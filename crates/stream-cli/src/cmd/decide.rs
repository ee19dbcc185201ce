//! `proposal-decision`, `proposal-project`: the bounded local surface for
//! human decisions (the review commands are in `review`). There is no network endpoint and no
//! generic event mutation; `proposal-decision` reads edit text from a file
//! and prints ids and status only.

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::anyhow;
use stream_core::EventId;
use stream_core::payload::Disposition;
use stream_core::text::Label;
use stream_memory::decide::{Applied, ApplyError, decide, project};
use stream_memory::materialize::Recorded;
use stream_proposals::chain::ChainError;
use stream_proposals::decision::{Decided, DecisionError, DecisionRequest};
use stream_proposals::project::{CorrectionProjection, ProjectError, decisions};
use stream_store::Read;

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

mod materialized;

use materialized::{MemoryStatus, error_failure, place, report};

/// `proposal-decision` arguments.
#[derive(Debug, clap::Args)]
#[command(group(
    clap::ArgGroup::new("disposition")
        .required(true)
        .args(["accept", "reject", "edit_file"])
))]
pub struct DecisionArgs {
    /// The proposal id, or a unique prefix of at least 12 hex digits.
    #[arg(long)]
    proposal: String,
    /// Use the proposed text or correction.
    #[arg(long)]
    accept: bool,
    /// Refuse it.
    #[arg(long)]
    reject: bool,
    /// Use the replacement in this file instead (one trailing newline is dropped).
    #[arg(long, value_name = "PATH")]
    edit_file: Option<PathBuf>,
    /// Operator/idempotency provenance (derived from the request when absent).
    #[arg(long)]
    submission_id: Option<String>,
    /// Who decides (default: $USER).
    #[arg(long)]
    actor: Option<String>,
}

/// The largest edit file read.
const MAX_EDIT_BYTES: u64 = 256 * 1024;

/// Reads the operator's replacement. Its content is never printed.
fn read_edit_file(path: &PathBuf) -> Result<String, Failure> {
    let cannot = |e: std::io::Error| {
        Failure::usage(anyhow!("cannot read --edit-file {}: {e}", path.display()))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(Failure::usage(anyhow!(
            "--edit-file is larger than {MAX_EDIT_BYTES} bytes"
        )));
    }
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Failure::usage(anyhow!("--edit-file is not UTF-8")))?;
    if text.ends_with("\r\n") {
        text.truncate(text.len() - 2);
    } else if text.ends_with('\n') {
        text.truncate(text.len() - 1);
    }
    Ok(text)
}

/// The fewest hex digits `--proposal` takes (docs/design.md §19).
const DECISION_MIN_DIGITS: usize = 12;

fn resolve(store: &dyn Read, prefix: &str) -> Result<EventId, Failure> {
    super::review::resolve(store, prefix, DECISION_MIN_DIGITS, "--proposal")
}

fn decision_failure(e: DecisionError) -> Failure {
    match e {
        DecisionError::Conflict { .. } => Failure::Conflict(e.into()),
        DecisionError::Chain(ChainError::Store(s)) | DecisionError::Store(s) => s.into(),
        DecisionError::Chain(ChainError::Broken { .. })
        | DecisionError::NotDecidable { .. }
        | DecisionError::Invalid(_)
        | DecisionError::Build => Failure::usage(e),
    }
}

/// Maps a projection refusal: a broken chain or forged decision is a
/// validation error (2), a different judgment a conflict (3).
pub fn project_failure(e: ProjectError) -> Failure {
    match e {
        ProjectError::Conflict { .. } | ProjectError::Unauthorized(_) => {
            Failure::Conflict(e.into())
        }
        ProjectError::Store(s) | ProjectError::Chain(ChainError::Store(s)) => s.into(),
        ProjectError::Chain(ChainError::Broken { .. })
        | ProjectError::DecisionInvalid { .. }
        | ProjectError::TargetInvalid { .. }
        | ProjectError::Build => Failure::usage(e),
    }
}

/// Prints what applying a decision came to (ids and codes only) and maps
/// it to an exit: a decision this config's keys do not authorize is never
/// applied (exit 3), its recorded outcome printed first if it has one.
fn render(applied: Result<Applied, ApplyError>) -> Result<MemoryStatus, Failure> {
    match applied {
        Ok(Applied::Correction(projected)) => Ok(print_correction(projected)),
        Ok(Applied::Memory(outcome)) => Ok(report(outcome)),
        Ok(Applied::LeftToServe) => {
            println!("recorded; will be materialized by the serve that holds memory.md");
            Ok(MemoryStatus::Settled)
        }
        Ok(Applied::Unauthorized { refused, outcome }) => {
            if let Some(outcome) = outcome {
                report(outcome);
            }
            Err(project_failure(ProjectError::Unauthorized(refused)))
        }
        Err(ApplyError::Project(e)) => Err(project_failure(e)),
        Err(ApplyError::Materialize(e)) => Err(error_failure(e)),
    }
}

fn print_correction(projected: CorrectionProjection) -> MemoryStatus {
    match projected {
        CorrectionProjection::Judgment(id) => println!("judgment {id} recorded"),
        CorrectionProjection::Rejected => println!("rejected: no judgment"),
    }
    MemoryStatus::Settled
}

/// Runs `proposal-decision`: appends the decision, then projects it.
pub fn run_decision(ctx: &Ctx, args: DecisionArgs) -> CmdResult {
    let (disposition, replacement) = match (args.accept, args.reject, &args.edit_file) {
        (true, false, None) => (Disposition::Accept, None),
        (false, true, None) => (Disposition::Reject, None),
        (false, false, Some(path)) => (Disposition::Edit, Some(read_edit_file(path)?)),
        _ => {
            return Err(Failure::usage(anyhow!(
                "give exactly one of --accept, --reject, --edit-file"
            )));
        }
    };
    let actor = args
        .actor
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "operator".into());
    let actor = Label::new(actor).map_err(|e| Failure::usage(anyhow!("--actor: {e}")))?;
    let submission_id = args
        .submission_id
        .map(Label::new)
        .transpose()
        .map_err(|e| Failure::usage(anyhow!("--submission-id: {e}")))?;
    let config = ctx.config()?;
    let signer = super::key::load(&config)?;
    let store = super::open_store(&config)?;
    let proposal = resolve(&store, &args.proposal)?;
    let request = DecisionRequest {
        proposal,
        disposition,
        replacement,
        submission_id,
        actor,
        signer,
    };
    let decision = decide(&store, &place(&config), &request).map_err(decision_failure)?;
    match &decision.decided {
        Decided::Recorded(id) => println!("decision {id} recorded"),
        Decided::Converged(id) => println!("decision {id} already recorded"),
    }
    match render(decision.applied)? {
        MemoryStatus::Settled => Ok(()),
        MemoryStatus::Failed(failure, _) => Err(failure),
    }
}

/// Runs `proposal-project`: finishes every decision left between append and
/// projection. Already projected decisions converge; an outcome recorded
/// earlier (even a failure) counts as settled. Exits with the first error
/// that left a decision unsettled, else the first failure recorded now.
pub fn run_project(ctx: &Ctx) -> CmdResult {
    let config = ctx.config()?;
    let place = place(&config);
    let store = super::open_store(&config)?;
    let (mut settled, mut failed_now, mut unsettled) = (0usize, 0usize, 0usize);
    let mut first_error: Option<Failure> = None;
    let mut first_failure: Option<Failure> = None;
    for decision in decisions(&store)? {
        let id = decision.id();
        println!("decision {id}");
        match render(project(&store, &place, id)) {
            Ok(MemoryStatus::Settled | MemoryStatus::Failed(_, Recorded::Already)) => settled += 1,
            Ok(MemoryStatus::Failed(failure, Recorded::Now)) => {
                failed_now += 1;
                first_failure.get_or_insert(failure);
            }
            Err(failure) => {
                eprintln!("decision {id} not projected: {:#}", failure.error());
                unsettled += 1;
                first_error.get_or_insert(failure);
            }
        }
    }
    println!(
        "{} decisions: {settled} settled, {failed_now} failed now, {unsettled} not projected",
        settled + failed_now + unsettled
    );
    match first_error.or(first_failure) {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}
