//! `proposal-list`: the operator's view of proposals, their decision state
//! and outcome.

use stream_proposals::list::list;

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `proposal-list` arguments.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Decided proposals too, not only pending ones.
    #[arg(long)]
    all: bool,
    /// A JSON array instead of lines.
    #[arg(long)]
    json: bool,
}

/// Runs `proposal-list`.
pub fn run_list(ctx: &Ctx, args: ListArgs) -> CmdResult {
    let store = super::open_store(&ctx.config()?)?;
    let views = list(&store, args.all)?;
    if args.json {
        let text = serde_json::to_string_pretty(&views).map_err(Failure::runtime)?;
        println!("{text}");
        return Ok(());
    }
    for v in &views {
        let state = serde_json::to_value(v.state).map_err(Failure::runtime)?;
        let outcome = v
            .outcome
            .map(serde_json::to_value)
            .transpose()
            .map_err(Failure::runtime)?;
        println!(
            "{}  {:<18} {:<9} {}",
            v.id,
            v.kind.as_str(),
            state.as_str().unwrap_or_default(),
            outcome.as_ref().and_then(|o| o.as_str()).unwrap_or("-")
        );
        if let Some(text) = v.proposed_text.as_deref().or(v.replacement.as_deref()) {
            for line in text.lines().take(6) {
                println!("    │ {line}");
            }
        }
    }
    if views.is_empty() {
        eprintln!("no {}proposals", if args.all { "" } else { "pending " });
    }
    Ok(())
}
