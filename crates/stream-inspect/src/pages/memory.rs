//! `/memory`: every stored version of `memory.md` with its diff (as
//! `memory-log --patch`), and the blame of the current one: for each line,
//! the version that introduced it and, for a materialized line, the
//! proposal, decision and actor behind it and the turn that proposed it.

use std::collections::BTreeMap;

use maud::{Markup, html};
use stream_core::{EventId, SourceName};
use stream_memory::blame::{BlameLine, blame};
use stream_memory::review::{LogEntry, Origin, memory_log};
use stream_proposals::authority::TrustedKeys;
use stream_store::Read;

use crate::PageError;
use crate::html::{Nav, Untrusted, diff, id_link, page};

/// What the page shows.
pub struct Memory {
    log: Vec<LogEntry>,
    blame: Vec<BlameLine>,
    /// The proposing run of each materializing proposal.
    runs: BTreeMap<EventId, String>,
}

/// Reads the versions, their diffs and the blame.
pub fn gather(store: &dyn Read, trusted: &TrustedKeys) -> Result<Memory, PageError> {
    let source = SourceName::fixed(SourceName::CONTEXT);
    let log = memory_log(store, &source, true)?;
    let blame = blame(store, &source, Some(log.clone()))?;
    let mut runs = BTreeMap::new();
    for entry in &log {
        if let Some(proposal) = &entry.proposal_id
            && let Some(view) = stream_proposals::review::get(store, proposal, trusted)?
        {
            runs.insert(proposal.clone(), view.run_id);
        }
    }
    Ok(Memory { log, blame, runs })
}

fn origin(entry: &LogEntry, runs: &BTreeMap<EventId, String>) -> Markup {
    html! {
        @match entry.origin {
            Origin::Edited => { span.badge.edited { "edited" } }
            Origin::Materialized => {
                span.badge.materialized { "materialized" } " "
                @if let Some(p) = &entry.proposal_id {
                    "proposal " (id_link("/proposals/", p.as_str())) " "
                    @if let Some(run) = runs.get(p) {
                        "from turn " (id_link("/turns/", run)) " "
                    }
                }
                @if let Some(d) = &entry.decision_id {
                    "decision " code title=(d.as_str()) { (d.short(12)) } " "
                }
                @if let Some(actor) = &entry.actor {
                    "by " (Untrusted(actor))
                }
            }
        }
    }
}

/// The page.
pub fn render(memory: &Memory) -> Markup {
    let body = html! {
        h1 { "memory.md" }
        @if memory.log.is_empty() {
            p { "No version of memory.md has been scanned into this store yet." }
        } @else {
            h2 { "Blame of the current version" }
            p { "Each line with the version that introduced it." }
            table.blame {
                thead { tr { th { "line" } th { "version" } th { "origin" } th { "text" } } }
                tbody {
                    @for line in &memory.blame {
                        tr class=(line.origin.origin.as_str()) {
                            td.num { (line.number) }
                            td { code title=(line.origin.version_id.as_str()) { (line.origin.version_id.short(12)) } }
                            td { (origin(&line.origin, &memory.runs)) }
                            td { pre.line { (Untrusted(&line.text)) } }
                        }
                    }
                }
            }
            h2 { "Versions, newest first" }
            @for entry in &memory.log {
                section.version id={ "v-" (entry.version_id.as_str()) } {
                    h3 { "version " code { (entry.version_id.short(12)) } }
                    dl.facts {
                        dt { "recorded" } dd { time { (entry.recorded_at) } }
                        dt { "size" } dd { (entry.bytes) " bytes" }
                        dt { "sha-256" } dd { code { (entry.sha256) } }
                        dt { "origin" } dd { (origin(entry, &memory.runs)) }
                    }
                    @if let Some(patch) = &entry.patch {
                        (diff(patch))
                    }
                }
            }
        }
    };
    page("memory.md", Nav::Memory, false, body)
}
