//! `private-training-export` and `training-export`: examples go to an
//! explicit private file, never to stdout; the private export also needs an
//! explicit acknowledgment.

use std::io::IsTerminal;
use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use stream_export::{
    DestinationError, ExportError, ExportKind, Format, check_destination, preference_pairs, select,
    write, write_pairs,
};

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `private-training-export` arguments.
#[derive(Debug, clap::Args)]
pub struct PrivateArgs {
    /// The private JSONL file to write (its manifest goes beside it).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
    /// Required: you understand the file holds sensitive private conversation data.
    #[arg(long, required = true)]
    acknowledge_sensitive_private_training: bool,
    /// `sft` (chat examples) or `dpo` (preference pairs).
    #[arg(long, value_enum, default_value = "sft")]
    format: FormatArg,
}

/// `--format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// Chat fine-tuning examples.
    Sft,
    /// Preference pairs (OpenAI preference fine-tuning).
    Dpo,
}

/// `training-export` arguments.
#[derive(Debug, clap::Args)]
pub struct ExternalArgs {
    /// The JSONL file to write (its manifest goes beside it).
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
}

fn failure(e: ExportError) -> Failure {
    match e {
        ExportError::Destination(_) | ExportError::IncompleteExample { .. } => Failure::usage(e),
        ExportError::Store(s) => s.into(),
        ExportError::Io(_) => Failure::runtime(e),
    }
}

fn run(ctx: &Ctx, output: PathBuf, kind: ExportKind, format: Format) -> CmdResult {
    // Refuse a bad destination before reading anything.
    check_destination(&output).map_err(|e: DestinationError| failure(e.into()))?;
    let config = ctx.config()?;
    let store = super::open_store(&config)?;
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:30} {pos}/{len}") {
        bar.set_style(style);
    }
    bar.set_message("checking judgments");
    let selection = select(&store, kind, &config.trusted_keys(), &|done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .map_err(failure)?;
    bar.finish_and_clear();
    let (report, excluded, left_out_turns) = match format {
        Format::Sft => (
            write(&output, kind, &selection).map_err(failure)?,
            selection.excluded,
            selection.left_out_turns,
        ),
        Format::Dpo => {
            let pairs = preference_pairs(&store, selection).map_err(failure)?;
            (
                write_pairs(&output, kind, &pairs).map_err(failure)?,
                pairs.excluded,
                pairs.left_out_turns,
            )
        }
    };
    println!(
        "{} examples written to {} (sha256 {})",
        report.examples,
        output.display(),
        report.sha256
    );
    println!("manifest {}", report.manifest.display());
    for (reason, count) in &excluded {
        println!("excluded {count}: {}", reason.as_str());
    }
    for (reason, count) in &left_out_turns {
        println!("earlier turns left out {count}: {}", reason.as_str());
    }
    Ok(())
}

/// Runs `private-training-export`.
pub fn run_private(ctx: &Ctx, args: PrivateArgs) -> CmdResult {
    // clap already requires the flag; keep the check where the decision is.
    if !args.acknowledge_sensitive_private_training {
        return Err(Failure::usage(anyhow::anyhow!(
            "--acknowledge-sensitive-private-training is required"
        )));
    }
    let format = match args.format {
        FormatArg::Sft => Format::Sft,
        FormatArg::Dpo => Format::Dpo,
    };
    run(ctx, args.output, ExportKind::Private, format)
}

/// Runs `training-export`.
pub fn run_external(ctx: &Ctx, args: ExternalArgs) -> CmdResult {
    run(ctx, args.output, ExportKind::External, Format::Sft)
}
