//! `proposal-list`, `proposal-show`, `memory-log`: the review surface. The
//! view-model comes from `stream_proposals::review` and
//! `stream_memory::review`; every untrusted text goes through
//! `stream_core::terminal`; sensitive text is shown only on a terminal or
//! with `--show-sensitive`, else `[sensitive: N chars]`.

use std::fmt::Write as _;
use std::io::IsTerminal;

use anyhow::anyhow;
use stream_core::SourceName;
use stream_core::terminal::{
    Rendered, Style, Window, render, render_styled, shorten_to_columns, thousands,
};
use stream_memory::review::{LogEntry, ReviewError, add_memory_diff, memory_log};
use stream_proposals::review::{
    Depth, DiffLine, ProposalShow, ProposalView, Resolved, age, candidates, get, list, marker,
    resolve_prefix, show,
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
    /// The proposal id, or a unique prefix of at least 4 hex digits.
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

/// What stdout is: its width in columns (none: not a terminal, no limit)
/// and whether diffs are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// The terminal's columns; `None` when piped (output unchanged).
    pub columns: Option<usize>,
    /// Colour on: a terminal, and `NO_COLOR` unset (any value turns it off).
    pub colour: bool,
}

impl Term {
    /// Not a terminal: no width limit, no colour.
    pub const PIPE: Term = Term {
        columns: None,
        colour: false,
    };

    /// The one rule for stdout: on a terminal its width is `COLUMNS` when
    /// set to a positive number, else the terminal's own (`TIOCGWINSZ`);
    /// colour unless `NO_COLOR` is set.
    pub fn of_stdout() -> Self {
        let out = std::io::stdout();
        if !out.is_terminal() {
            return Self::PIPE;
        }
        let from_env = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok());
        let from_tty = || {
            rustix::termios::tcgetwinsize(&out)
                .ok()
                .map(|w| usize::from(w.ws_col))
        };
        Self {
            columns: from_env
                .filter(|&c| c > 0)
                .or_else(from_tty)
                .filter(|&c| c > 0),
            colour: std::env::var_os("NO_COLOR").is_none(),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
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
    print!(
        "{}",
        list_table(&views, now_ms(), visible, Term::of_stdout().columns)
    );
    Ok(())
}

/// The table's fixed columns, and their widths when piped.
const HEADERS: [&str; 6] = ["ID", "KIND", "AGE", "STATE", "OUTCOME", "FLAGS"];
const PIPED_WIDTHS: [usize; 6] = [12, 17, 6, 8, 22, 14];

/// The fewest columns the summary gets beside the row (a multi-line cut's
/// announcement alone takes about 30); with fewer it goes on its own line
/// under the row.
const MIN_SUMMARY: usize = 40;

/// The table of `proposal-list` (a pure function of its views, for goldens).
/// With `columns` (a terminal's width) no line is wider: the fixed columns
/// fit their content and the summary is cut to the rest, announcing what it
/// leaves out; when fewer than 40 columns would be left, each summary goes
/// on its own indented line. Without, the layout is the piped one.
pub fn list_table(
    views: &[ProposalView],
    now_ms: i64,
    visible: bool,
    columns: Option<usize>,
) -> String {
    let rows: Vec<[String; 6]> = views
        .iter()
        .map(|v| {
            let flags: Vec<&str> = v.flags.iter().map(|f| f.as_str()).collect();
            [
                v.short_id.clone(),
                v.kind.as_str().to_owned(),
                age(now_ms, v.created_at_ms),
                v.state.as_str().to_owned(),
                v.outcome.map_or("-", |o| o.as_str()).to_owned(),
                if flags.is_empty() {
                    "-".to_owned()
                } else {
                    flags.join(",")
                },
            ]
        })
        .collect();
    let widths = match columns {
        None => PIPED_WIDTHS,
        // AGE keeps its width: "59 min" is as wide as it gets.
        Some(_) => std::array::from_fn(|i| {
            if i == 2 {
                return PIPED_WIDTHS[2];
            }
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([HEADERS[i].len()])
                .max()
                .unwrap_or_default()
        }),
    };
    let fixed: usize = widths.iter().map(|w| w + 2).sum();
    // The summary's columns, and whether it goes on its own line.
    let (summary_columns, own_line) = match columns {
        None => (usize::MAX, false),
        Some(c) if c >= fixed + MIN_SUMMARY => (c - fixed, false),
        Some(c) => (c.saturating_sub(4), true),
    };
    let cells = |cells: [&str; 6]| {
        let mut line = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            // AGE is right-aligned.
            let _ = if i == 2 {
                write!(line, "{cell:>width$}")
            } else {
                write!(line, "{cell:<width$}")
            };
        }
        line
    };
    let mut out = cells(HEADERS);
    if own_line {
        out = out.trim_end().to_owned();
    } else {
        out.push_str("  SUMMARY");
    }
    out.push('\n');
    for (v, row) in views.iter().zip(&rows) {
        let see = format!("proposal-show {}", v.short_id);
        // Redacted views already hold the marker, which is never cut by chars.
        let chars = if visible {
            Window::SUMMARY.line_chars
        } else {
            usize::MAX
        };
        let summary = shorten_to_columns(v.summary_text(), chars, summary_columns, &see).text;
        let line = cells(row.each_ref().map(String::as_str));
        if own_line {
            let _ = writeln!(out, "{}\n    {summary}", line.trim_end());
        } else {
            let _ = writeln!(out, "{line}  {summary}");
        }
    }
    out
}

/// The fewest hex digits `proposal-show` takes, as git does.
pub const SHOW_MIN_DIGITS: usize = 4;

/// Resolves the id argument `arg` (named `name` in refusals) to a proposal
/// through the view model's one resolver; every refusal is exit 2, names
/// the candidates of an ambiguous prefix, and prints no content.
pub fn resolve(
    store: &dyn Read,
    arg: &str,
    min_digits: usize,
    name: &str,
) -> Result<stream_core::EventId, Failure> {
    match resolve_prefix(store, arg, min_digits)? {
        Resolved::One(id) => Ok(id),
        Resolved::None => Err(Failure::usage(anyhow!(
            "no proposal has id {}",
            render(arg).text
        ))),
        Resolved::Ambiguous(ids) => Err(Failure::usage(anyhow!(
            "{} proposals start with {}: {}; give more digits",
            ids.len(),
            render(arg).text,
            candidates(&ids)
        ))),
        Resolved::BadPrefix { min_digits } => Err(Failure::usage(anyhow!(
            "{name} must be {min_digits} to 64 hex digits"
        ))),
    }
}

/// Runs `proposal-show`: everything is computed before anything is printed,
/// so a refusal prints nothing but its error.
pub fn run_show(ctx: &Ctx, args: ShowArgs) -> CmdResult {
    let store = open_scanned(ctx)?;
    let trusted = ctx.config()?.trusted_keys();
    let id = resolve(&store, &args.id, SHOW_MIN_DIGITS, "a proposal id")?;
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
    print!("{}", show_text(&shown, now_ms(), Term::of_stdout().colour));
    Ok(())
}

fn block(out: &mut String, title: &str, text: &str) {
    block_lines(out, title, &render_styled(text, false, |_| Style::Plain));
}

/// A diff's block: its lines coloured when `colour` is on, after escaping.
fn diff_block(out: &mut String, title: &str, diff: &str, colour: bool) {
    block_lines(out, title, &diff_lines(diff, colour));
}

/// `diff` rendered line by line, each styled by its kind (the view model's).
fn diff_lines(diff: &str, colour: bool) -> Vec<Rendered> {
    let mut kinds = DiffLine::kinds(diff).into_iter();
    render_styled(diff, colour, |_| match kinds.next() {
        Some(DiffLine::Header) => Style::Bold,
        Some(DiffLine::Added) => Style::Green,
        Some(DiffLine::Removed) => Style::Red,
        Some(DiffLine::Context) | None => Style::Plain,
    })
}

fn block_lines(out: &mut String, title: &str, lines: &[Rendered]) {
    let _ = writeln!(out, "{title}:");
    for line in lines {
        let _ = writeln!(out, "  {}", line.text);
    }
    let escaped: usize = lines.iter().map(|l| l.escaped).sum();
    if escaped > 0 {
        let _ = writeln!(
            out,
            "  ({} hidden characters shown as escapes)",
            thousands(escaped)
        );
    }
}

/// The text of `proposal-show` (pure, for goldens).
/// With `colour`, diffs are coloured (added green, removed red, headers
/// bold).
pub fn show_text(s: &ProposalShow, now_ms: i64, colour: bool) -> String {
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
        diff_block(&mut out, s.diff_tense().heading(), &memory.diff, colour);
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
            diff_block(&mut out, "changed since the base", since, colour);
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
    let term = Term::of_stdout();
    print!("{}", log_text(&entries, term.columns, term.colour));
    Ok(())
}

/// The text of `memory-log` (pure, for goldens). With `columns`, a line
/// that would be wider continues on indented lines, its fields whole (the
/// actor cut to fit, announced); with `colour`, patches are coloured.
pub fn log_text(entries: &[LogEntry], columns: Option<usize>, colour: bool) -> String {
    let mut out = String::new();
    for e in entries {
        let mut fields = vec![
            ("", e.version_id.short(12).to_owned()),
            ("  ", e.recorded_at.clone()),
            (
                "  ",
                format!(
                    "{:>7} bytes",
                    thousands(usize::try_from(e.bytes).unwrap_or(usize::MAX))
                ),
            ),
            (
                "  ",
                format!("sha256 {}", &e.sha256[..16.min(e.sha256.len())]),
            ),
            ("  ", e.origin.as_str().to_owned()),
        ];
        if let (Some(p), Some(d)) = (&e.proposal_id, &e.decision_id) {
            // On a continuation line of its own "by " and the actor fit.
            let room = columns.map_or(usize::MAX, |c| c.saturating_sub(4 + 3));
            let actor = e.actor.as_deref().unwrap_or("-");
            let actor = shorten_to_columns(actor, usize::MAX, room, "memory-log --json").text;
            fields.extend([
                ("  ", format!("proposal {}", p.short(12))),
                (" ", format!("decision {}", d.short(12))),
                (" ", format!("by {actor}")),
            ]);
        }
        out.push_str(&pack(&fields, columns));
        out.push('\n');
        if let Some(patch) = &e.patch {
            for line in diff_lines(patch, colour) {
                if !line.text.is_empty() {
                    let _ = writeln!(out, "    {}", line.text);
                }
            }
        }
    }
    out
}

/// `fields`, each after its separator, on one line; with `columns`, a
/// field that would pass the edge starts an indented continuation line
/// instead.
fn pack(fields: &[(&str, String)], columns: Option<usize>) -> String {
    let limit = columns.unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut width = 0;
    for (i, (separator, field)) in fields.iter().enumerate() {
        let w = stream_core::terminal::columns(field);
        if i > 0 && width + separator.len() + w <= limit {
            out.push_str(separator);
            width += separator.len();
        } else if i > 0 {
            out.push_str("\n    ");
            width = 4;
        }
        out.push_str(field);
        width += w;
    }
    out
}
