//! `thestream`: the trusted parent's command line.
//!
//! Owns argument parsing, configuration loading and the exit codes of
//! docs/design.md §19 (0 ok or converged, 1 runtime failure, 2 usage or
//! validation error, 3 conflict). Each command lives in `cmd/` and returns a
//! [`exit::Failure`]; `anyhow` is used here and nowhere below this crate.

mod cmd;
mod config;
mod exit;
mod store;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::exit::{CmdResult, Failure};

/// A personal Telegram agent whose model may propose durable change but never make it.
#[derive(Debug, Parser)]
#[command(name = "thestream", version)]
struct Cli {
    /// The config file.
    #[arg(
        long,
        global = true,
        env = "THESTREAM_CONFIG",
        default_value = "thestream.toml"
    )]
    config: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a config, a context root with memory.md, and the shipped declarations.
    Init(cmd::init::Args),
    /// This place's signing key for decisions (`key init`).
    #[command(subcommand)]
    Key(cmd::key::KeyCommand),
    /// Print stored events (sensitive payloads redacted unless asked for).
    Events(cmd::events::Args),
    /// The whole chain in a temporary folder against built-in loopback fakes, narrated.
    Demo(cmd::demo::Args),
    /// Run ingress, the consumer and delivery (--drain: what is available now, then exit).
    Serve(cmd::serve::Args),
    /// List proposals (pending ones unless --all): id, kind, age, state, outcome, flags, summary.
    ProposalList(cmd::review::ListArgs),
    /// Show one proposal whole: reason, evidence, the memory diff or the correction.
    ProposalShow(cmd::review::ShowArgs),
    /// Every version of memory.md, newest first, with who put it there.
    MemoryLog(cmd::review::LogArgs),
    /// Accept, edit or reject one proposal, then project it (prints ids and status only).
    ProposalDecision(cmd::decide::DecisionArgs),
    /// Finish every decision left between its append and its projection.
    ProposalProject,
    /// Export quality-eligible judgments to a private JSONL file.
    PrivateTrainingExport(cmd::export::PrivateArgs),
    /// Export judgments eligible for external use to a JSONL file.
    TrainingExport(cmd::export::ExternalArgs),
    /// Validate a declaration and print its id, version and fingerprint.
    DeclarationCheck(cmd::declaration_check::Args),
    /// Record the context root's files as immutable document versions.
    Scan(cmd::scan::Args),
    /// Register the active declaration's commands as the bot's Telegram menu.
    TelegramMenuRegister(cmd::telegram_menu_register::Args),
    /// Switch the conversation to another declaration version (recorded, resumable steps).
    Activate(cmd::activate::Args),
    /// Copy the store consistently while serve may run (owner-only file).
    Backup(cmd::backup::Args),
    /// Check config, kernel sandbox, worker, secrets (by name), Telegram and provider.
    Doctor(cmd::doctor::Args),
    /// Learn the owner's Telegram id from a one-time code sent to the bot.
    Pair(cmd::pair::Args),
    /// The read-only inspector: pages of what the model saw, proposed and was told.
    Inspect(cmd::inspect::Args),
}

/// What a command may need: the config, loaded on first use.
#[derive(Debug)]
pub struct Ctx {
    config_path: PathBuf,
}

impl Ctx {
    /// Loads the config file.
    pub fn config(&self) -> Result<Config, Failure> {
        Ok(Config::load(&self.config_path)?)
    }
}

fn run(cli: Cli) -> CmdResult {
    let ctx = Ctx {
        config_path: cli.config,
    };
    match cli.command {
        Command::Init(args) => cmd::init::run(args),
        Command::Key(command) => cmd::key::run(&ctx, command),
        Command::Events(args) => cmd::events::run(&ctx, args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Serve(args) => cmd::serve::run(&ctx, args),
        Command::ProposalList(args) => cmd::review::run_list(&ctx, args),
        Command::ProposalShow(args) => cmd::review::run_show(&ctx, args),
        Command::MemoryLog(args) => cmd::review::run_log(&ctx, args),
        Command::ProposalDecision(args) => cmd::decide::run_decision(&ctx, args),
        Command::ProposalProject => cmd::decide::run_project(&ctx),
        Command::PrivateTrainingExport(args) => cmd::export::run_private(&ctx, args),
        Command::TrainingExport(args) => cmd::export::run_external(&ctx, args),
        Command::DeclarationCheck(args) => cmd::declaration_check::run(args),
        Command::Scan(args) => cmd::scan::run(&ctx, args),
        Command::TelegramMenuRegister(args) => cmd::telegram_menu_register::run(&ctx, args),
        Command::Activate(args) => cmd::activate::run(&ctx, args),
        Command::Backup(args) => cmd::backup::run(&ctx, args),
        Command::Doctor(args) => cmd::doctor::run(&ctx, args),
        Command::Pair(args) => cmd::pair::run(&ctx, args),
        Command::Inspect(args) => cmd::inspect::run(&ctx, args),
    }
}

fn init_tracing() {
    // Logs go to stderr; they carry ids, counts and reason codes only.
    let filter = tracing_subscriber::EnvFilter::try_from_env("THESTREAM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // No escape sequences into a file or pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    init_tracing();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {:#}", failure.error());
            failure.exit_code()
        }
    }
}
