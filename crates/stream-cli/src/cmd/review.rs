//! `proposal-list`, `proposal-show`, `memory-log`: the review surface. The
//! view-model comes from `stream_proposals::review` and
//! `stream_memory::review`; every untrusted text goes through
//! `stream_core::terminal`; sensitive text is shown only on a terminal or
//! with `--show-sensitive`, else `[sensitive: N chars]`.

use std::fmt::Write as _;
use std::io::IsTerminal;

use anyhow::anyhow;
use stream_core::SourceName;
use stream_core::terminal::{Window, render, shorten, thousands};
use stream_memory::review::{LogEntry, ReviewError, add_memory_diff, memory_log};
use stream_proposals::review::{
    Depth, ProposalShow, ProposalView, Resolved, get, list, marker, show,
};
use stream_store::Read;

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `proposal-list` arguments.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Decided proposals too, not only pending ones.
    #[arg(long)]
    all: bool,
    /// A JSON array instead of a table.
    #[arg(long)]
    json: bool,
    /// Print sensitive text even when stdout is not a terminal.
    #[arg(long)]
    show_sensitive: bool,
}

/// `proposal-show` arguments.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The proposal id, or a unique prefix of at least 12 hex digits.
    id: String,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Print sensitive text even when stdout is not a terminal.
    #[arg(long)]
    show_sensitive: bool,
}

/// `memory-log` arguments.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// A JSON array instead of lines.
    #[arg(long)]
    json: bool,
    /// Each version's diff from its predecessor.
    #[arg(long)]
    patch: bool,
    /// Print sensitive text even when stdout is not a terminal.
    #[arg(long)]
    show_sensitive: bool,
}

/// The one rule: sensitive text only on a terminal or when asked.
pub fn sensitive_visible(show_sensitive: bool) -> bool {
    show_sensitive || std::io::stdout().is_terminal()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// "12 s", "3 min", "5 h", "2 d".
pub fn age(now_ms: i64, then_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h", s / 3_600),
        _ => format!("{} d", s / 86_400),
    }
}

fn json_out<T: serde::Serialize>(value: &T) -> CmdResult {
    let text = serde_json::to_string_pretty(value).map_err(Failure::runtime)?;
    // Model-written strings: no hidden character reaches the terminal raw.
    println!("{}", stream_core::terminal::json(&text));
    Ok(())
}

/// Scans the context root first, where this config holds it: staleness
/// must reflect the disk now. A review-only config shows staleness as of
/// the last scan the serve that holds `memory.md` recorded.
fn open_scanned(ctx: &Ctx) -> Result<crate::store::OpenedStore, Failure> {
    let config = ctx.config()?;
    let store = super::open_store(&config)?;
    if config.context.is_some() {
        super::scan::scan_context(&config, &store)?;
    }
    Ok(store)
}

/// Runs `proposal-list`.
pub fn run_list(ctx: &Ctx, args: ListArgs) -> CmdResult {
    let store = open_scanned(ctx)?;
    let trusted = ctx.config()?.trusted_keys();
    let visible = sensitive_visible(args.show_sensitive);
    let depth = if args.json {
        Depth::Full
    } else {
        Depth::Summary
    };
    let mut views = list(&store, args.all, depth, &trusted)?;
    if !visible {
        views.iter_mut().for_each(ProposalView::redact);
    }
    if args.json {
        return json_out(&views);
    }
    if views.is_empty() {
        eprintln!("no {}proposals", if args.all { "" } else { "pending " });
        return Ok(());
    }
    print!("{}", list_table(&views, now_ms(), visible));
    Ok(())
}

/// The table of `proposal-list` (a pure function of its views, for goldens).
pub fn list_table(views: &[ProposalView], now_ms: i64, visible: bool) -> String {
    let mut out = format!(
        "{:<12}  {:<17}  {:>6}  {:<8}  {:<22}  {:<14}  SUMMARY\n",
        "ID", "KIND", "AGE", "STATE", "OUTCOME", "FLAGS"
    );
    for v in views {
        let flags: Vec<&str> = v.flags.iter().map(|f| f.as_str()).collect();
        let summary = if visible {
            let see = format!("proposal-show {}", v.short_id);
            shorten(v.summary_text(), Window::SUMMARY, &see).text
        } else {
            // Redacted views already hold the marker.
            render(v.summary_text()).text
        };
        let _ = writeln!(
            out,
            "{:<12}  {:<17}  {:>6}  {:<8}  {:<22}  {:<14}  {}",
            v.short_id,
            v.kind.as_str(),
            age(now_ms, v.created_at_ms),
            v.state.as_str(),
            v.outcome.map_or("-", |o| o.as_str()),
            if flags.is_empty() {
                "-".to_owned()
            } else {
                flags.join(",")
            },
            summary.replace('\n', " ")
        );
    }
    out
}

/// Resolves an id argument; every refusal is exit 2 and prints no content.
pub fn resolve(store: &dyn Read, prefix: &str) -> Result<stream_core::EventId, Failure> {
    match stream_proposals::review::resolve_prefix(store, prefix)? {
        Resolved::One(id) => Ok(id),
        Resolved::None => Err(Failure::usage(anyhow!(
            "no proposal has id {}",
            render(prefix).text
        ))),
        Resolved::Ambiguous(n) => Err(Failure::usage(anyhow!(
            "{n} proposals start with {}; give more digits",
            render(prefix).text
        ))),
        Resolved::BadPrefix => Err(Failure::usage(anyhow!(
            "a proposal id must be 12 to 64 hex digits"
        ))),
    }
}

/// Runs `proposal-show`: everything is computed before anything is printed,
/// so a refusal prints nothing but its error.
pub fn run_show(ctx: &Ctx, args: ShowArgs) -> CmdResult {
    let store = open_scanned(ctx)?;
    let trusted = ctx.config()?.trusted_keys();
    let id = resolve(&store, &args.id)?;
    let view = get(&store, &id, &trusted)?
        .ok_or_else(|| Failure::usage(anyhow!("no proposal has id {id}")))?;
    let mut shown = show(&store, view)?;
    add_memory_diff(&store, &mut shown).map_err(|e| match e {
        ReviewError::Store(s) => Failure::from(s),
        ReviewError::BaseMissing { .. } => Failure::runtime(e),
    })?;
    let visible = sensitive_visible(args.show_sensitive);
    if !visible {
        shown.redact();
    }
    if args.json {
        return json_out(&shown);
    }
    print!("{}", show_text(&shown, now_ms()));
    Ok(())
}

fn block(out: &mut String, title: &str, text: &str) {
    let r = render(text);
    let _ = writeln!(out, "{title}:");
    for line in r.text.split('\n') {
        let _ = writeln!(out, "  {line}");
    }
    if r.escaped > 0 {
        let _ = writeln!(
            out,
            "  ({} hidden characters shown as escapes)",
            thousands(r.escaped)
        );
    }
}

/// The text of `proposal-show` (pure, for goldens).
pub fn show_text(s: &ProposalShow, now_ms: i64) -> String {
    let v = &s.view;
    let mut out = String::new();
    let _ = writeln!(out, "proposal  {}", v.id);
    let _ = writeln!(
        out,
        "kind      {}{}",
        v.kind.as_str(),
        v.operation
            .as_ref()
            .and_then(|o| o.as_str())
            .map(|o| format!(" ({o})"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "state     {}", v.state.as_str());
    let _ = writeln!(out, "outcome   {}", v.outcome.map_or("-", |o| o.as_str()));
    let _ = writeln!(
        out,
        "age       {} ({})",
        age(now_ms, v.created_at_ms),
        v.created_at
    );
    let flags: Vec<&str> = v.flags.iter().map(|f| f.as_str()).collect();
    let _ = writeln!(
        out,
        "flags     {}",
        if flags.is_empty() {
            "-".to_owned()
        } else {
            flags.join(",")
        }
    );
    if let Some(p) = &s.proposer {
        let _ = writeln!(out, "run       {}", p.run_id);
        let _ = writeln!(
            out,
            "agent     {} v{} ({} {})",
            render(&p.agent_id).text,
            p.agent_version,
            p.provider,
            render(&p.model).text
        );
        let _ = writeln!(out, "declared  {}", p.declaration_fingerprint);
        let _ = writeln!(out, "snapshot  {}", p.context_snapshot_id);
    }
    if let Some(d) = &s.decision {
        let _ = writeln!(
            out,
            "decision  {} by {} at {} ({})",
            d.disposition,
            render(&d.actor).text,
            d.recorded_at,
            d.id.short(12)
        );
    }
    if let Some(reason) = &v.reason {
        block(&mut out, "reason", reason);
    }
    if !v.evidence.is_empty() {
        let _ = writeln!(out, "evidence:");
        for e in &v.evidence {
            let at = e
                .recorded_at_ms
                .map(stream_proposals::review::rfc3339)
                .unwrap_or_default();
            let _ = writeln!(out, "  {} {} {at}", e.kind.as_str(), e.id.short(12));
            for line in render(&e.text).text.split('\n') {
                let _ = writeln!(out, "    │ {line}");
            }
        }
    }
    if let Some(text) = &v.proposed_text {
        block(&mut out, "proposed text", text);
    }
    if let Some(memory) = &s.memory {
        block(
            &mut out,
            "diff of memory.md (frozen base → bytes written on accept)",
            &memory.diff,
        );
        if let Some(since) = &memory.changed_since_base {
            let _ = writeln!(
                out,
                "stale: memory.md is now version {} (base {})",
                memory
                    .current_version_id
                    .as_ref()
                    .map_or("-", |c| c.as_str()),
                memory.base_version_id
            );
            block(&mut out, "changed since the base", since);
        }
    }
    if let Some(original) = &s.original {
        block(&mut out, "original reply", original);
    }
    if let (Some(replacement), Some(_)) = (&v.replacement, &v.target_output_event_id) {
        block(&mut out, "replacement", replacement);
        if let Some(diff) = &s.diff {
            block(&mut out, "word diff", diff);
        }
    }
    if let Some(declaration) = &v.declaration {
        let pretty = match declaration {
            serde_json::Value::String(marker) => marker.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_default(),
        };
        block(&mut out, "declaration", &pretty);
    }
    out
}

/// Runs `memory-log`.
pub fn run_log(ctx: &Ctx, args: LogArgs) -> CmdResult {
    let store = open_scanned(ctx)?;
    let source = SourceName::fixed(SourceName::CONTEXT);
    let mut entries = memory_log(&store, &source, args.patch)?;
    if !sensitive_visible(args.show_sensitive) {
        for e in &mut entries {
            if let Some(p) = &mut e.patch {
                *p = marker(p);
            }
        }
    }
    if args.json {
        return json_out(&entries);
    }
    if entries.is_empty() {
        eprintln!("no memory.md version recorded");
    }
    print!("{}", log_text(&entries));
    Ok(())
}

/// The text of `memory-log` (pure, for goldens).
pub fn log_text(entries: &[LogEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let _ = write!(
            out,
            "{}  {}  {:>7} bytes  sha256 {}  {}",
            e.version_id.short(12),
            e.recorded_at,
            thousands(usize::try_from(e.bytes).unwrap_or(usize::MAX)),
            &e.sha256[..16.min(e.sha256.len())],
            e.origin.as_str()
        );
        if let (Some(p), Some(d)) = (&e.proposal_id, &e.decision_id) {
            let _ = write!(
                out,
                "  proposal {} decision {} by {}",
                p.short(12),
                d.short(12),
                render(e.actor.as_deref().unwrap_or("-")).text
            );
        }
        out.push('\n');
        if let Some(patch) = &e.patch {
            for line in render(patch).text.split('\n') {
                if !line.is_empty() {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    out
}
