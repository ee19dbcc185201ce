//! `thestream events`: stored events, sensitive payloads redacted unless
//! `--show-sensitive`. `--json` prints the envelope of docs/design.md §19.
//! `--stats` prints what the store holds instead (`stats`).

use std::io::Write as _;

use anyhow::anyhow;
use serde_json::{Value, json};
use stream_core::{SourceName, StoredEvent};
use stream_store::{EventQuery, Read};

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `events` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this source (e.g. `system:proposals`).
    #[arg(long)]
    source: Option<String>,
    /// Only this type, without `@version`.
    #[arg(long = "type")]
    event_type: Option<String>,
    /// JSON Lines, one envelope per line.
    #[arg(long)]
    json: bool,
    /// Print sensitive payloads too.
    #[arg(long)]
    show_sensitive: bool,
    /// Print the store's size, event count and bytes by kind instead.
    #[arg(long, conflicts_with_all = ["source", "event_type", "show_sensitive"])]
    stats: bool,
}

fn recorded_at(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The JSON envelope of one event; `payload` is null when redacted.
pub fn envelope(e: &StoredEvent, show_sensitive: bool) -> Value {
    let ev = &e.event;
    let payload = if ev.sensitive && !show_sensitive {
        Value::Null
    } else {
        serde_json::from_slice(&ev.payload).unwrap_or(Value::Null)
    };
    json!({
        "id": ev.id,
        "source": ev.source,
        "seq": e.seq,
        "type": ev.event_type,
        "version": ev.version,
        "authorship": ev.authorship.as_str(),
        "sensitive": ev.sensitive,
        "root": ev.root,
        "parent": ev.parent,
        "payload": payload,
        "recordedAt": recorded_at(e.recorded_at_ms),
    })
}

/// Runs `events`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    let source = args
        .source
        .map(SourceName::new)
        .transpose()
        .map_err(|e| Failure::usage(anyhow!("--source: {e}")))?;
    let store = super::open_store(&config)?;
    if args.stats {
        return super::stats::print(&store, args.json);
    }
    let query = EventQuery {
        source,
        event_type: args.event_type,
        ..EventQuery::default()
    };
    let events = store.events(&query)?;
    let mut out = std::io::stdout().lock();
    let write = |out: &mut std::io::StdoutLock<'_>, line: String| {
        writeln!(out, "{line}").map_err(|e| Failure::runtime(anyhow!("stdout: {e}")))
    };
    for e in &events {
        if args.json {
            // Payloads hold model and owner text: no hidden character raw.
            let line = envelope(e, args.show_sensitive).to_string();
            write(&mut out, stream_core::terminal::json(&line))?;
        } else {
            let ev = &e.event;
            let mut line = format!(
                "{} #{} {}@{} {} {}",
                ev.source,
                e.seq,
                ev.event_type,
                ev.version,
                ev.id.short(16),
                ev.authorship.as_str()
            );
            if ev.sensitive && !args.show_sensitive {
                line.push_str(" [sensitive: redacted]");
            } else {
                line.push(' ');
                line.push_str(&stream_core::terminal::json(&String::from_utf8_lossy(
                    &ev.payload,
                )));
            }
            write(&mut out, line)?;
        }
    }
    Ok(())
}
