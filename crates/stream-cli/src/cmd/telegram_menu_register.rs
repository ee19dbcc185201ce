//! `thestream telegram-menu-register [--skip-help-notice]`: `setMyCommands`
//! with the active declaration's commands, then (unless skipped) a short
//! notice to the owner's chat.
//!
//! The active declaration is read from the store's `active-declaration`
//! control row (`{"id", "version", "fingerprint", "commands": [{"command",
//! "description"}]}`), which activation writes. The token comes from the
//! environment variable named by `telegram.bot_token_env`.

use anyhow::anyhow;
use serde::Deserialize;
use stream_store::Read;
use stream_telegram::{ApiError, MenuCommand, register_menu};

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// The control row naming the active declaration.
pub const ACTIVE_DECLARATION: &str = "active-declaration";

/// `telegram-menu-register` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Register the menu without sending the notice to the owner's chat.
    #[arg(long)]
    skip_help_notice: bool,
}

#[derive(Debug, Deserialize)]
struct ActiveDeclaration {
    id: String,
    version: u32,
    fingerprint: stream_core::Fingerprint,
    commands: Vec<ActiveCommand>,
}

#[derive(Debug, Deserialize)]
struct ActiveCommand {
    command: String,
    description: String,
}

fn api_failure(e: ApiError) -> Failure {
    Failure::runtime(anyhow!("telegram: {e}"))
}

/// Runs `telegram-menu-register`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    let store = super::open_store(&config)?;
    let Some(row) = store.control(ACTIVE_DECLARATION)? else {
        return Err(Failure::runtime(anyhow!(
            "no declaration is active: activate one first (`thestream activate --declaration FILE`)"
        )));
    };
    let active: ActiveDeclaration = serde_json::from_value(row).map_err(|_| {
        Failure::runtime(anyhow!(
            "the store's `{ACTIVE_DECLARATION}` control row is invalid"
        ))
    })?;
    let commands = active
        .commands
        .iter()
        .enumerate()
        .map(|(i, c)| MenuCommand::new(i, c.command.clone(), c.description.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            Failure::runtime(anyhow!("declaration {}@{}: {e}", active.id, active.version))
        })?;

    let api = super::bot_api(&config)?;
    let notice_chat = super::notice_chat(&config, args.skip_help_notice)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the async runtime: {e}")))?;
    let report = runtime
        .block_on(register_menu(&api, &commands, notice_chat))
        .map_err(api_failure)?;
    let notice = match report.notice_message_id {
        Some(id) => format!("notice sent (message {id})"),
        None => "no notice sent".to_owned(),
    };
    println!(
        "registered {} commands of {}@{} ({}); {notice}",
        report.commands,
        active.id,
        active.version,
        active.fingerprint.short(12)
    );
    Ok(())
}
