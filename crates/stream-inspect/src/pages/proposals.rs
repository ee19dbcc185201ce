//! `/proposals` and `/proposals/ID`: the queue and one proposal whole, from
//! the view model `proposal-list` and `proposal-show` print. The page decides
//! nothing: it shows the command that would.

use maud::{Markup, html};
use std::collections::BTreeMap;

use stream_core::ids::derive_run_id;
use stream_core::payload::MessageObservation;
use stream_core::payload::ProposalKind;
use stream_core::{EventId, RunId};
use stream_proposals::authority::TrustedKeys;
use stream_proposals::review::{
    DiffTense, EvidenceKind, ProposalShow, ProposalView, State, get, list, show,
};
use stream_store::Read;

use crate::PageError;
use crate::html::{Nav, Untrusted, block, diff, id_link, page, summary};

/// Pending first, oldest first; then the decided, newest first.
pub fn gather_list(
    store: &dyn Read,
    trusted: &TrustedKeys,
) -> Result<Vec<ProposalView>, PageError> {
    let mut views = list(
        store,
        true,
        stream_proposals::review::Depth::Summary,
        trusted,
    )?;
    views.sort_by(|a, b| {
        let pending = |v: &ProposalView| v.state != State::Pending;
        pending(a).cmp(&pending(b)).then_with(|| {
            if a.state == State::Pending {
                a.created_at_ms.cmp(&b.created_at_ms)
            } else {
                b.created_at_ms.cmp(&a.created_at_ms)
            }
        })
    });
    Ok(views)
}

/// One proposal whole, and the turn of each cited evidence.
pub struct One {
    shown: ProposalShow,
    turns: BTreeMap<EventId, RunId>,
}

/// One proposal with its memory diff, and the turn each evidence belongs
/// to: a cited reply's own run, a cited message's run of the proposing
/// declaration (when it exists).
pub fn gather_one(store: &dyn Read, trusted: &TrustedKeys, id: &str) -> Result<One, PageError> {
    let id = EventId::parse(id).map_err(|_| PageError::NotFound)?;
    let view = get(store, &id, trusted)?.ok_or(PageError::NotFound)?;
    let mut shown = show(store, view)?;
    stream_memory::review::add_memory_diff(store, &mut shown)?;
    let mut turns = BTreeMap::new();
    for e in &shown.view.evidence {
        let run = match e.kind {
            EvidenceKind::Reply => store
                .event(&e.id)?
                .and_then(|ev| ev.decode::<MessageObservation>().ok())
                .map(|o| o.run_id),
            EvidenceKind::Message => shown
                .proposer
                .as_ref()
                .and_then(|p| derive_run_id(&p.agent_id, p.agent_version, &e.id).ok()),
        };
        if let Some(run) = run
            && store.run(&run)?.is_some()
        {
            turns.insert(e.id.clone(), run);
        }
    }
    Ok(One { shown, turns })
}

fn kind(kind: ProposalKind) -> &'static str {
    match kind {
        ProposalKind::MemoryChange => "memory-change",
        ProposalKind::SelfCorrection => "self-correction",
        ProposalKind::FocusDeclaration => "focus-declaration",
    }
}

fn flags(view: &ProposalView) -> Markup {
    html! {
        @for flag in &view.flags {
            span class={ "badge " (flag.as_str()) } { (flag.as_str()) } " "
        }
    }
}

/// The queue.
pub fn render_list(views: &[ProposalView]) -> Markup {
    let pending = views.iter().filter(|v| v.state == State::Pending).count();
    let body = html! {
        h1 { "Proposals" }
        p { (pending) " pending, " (views.len() - pending) " decided. "
            "Decisions are made with the command line; this page only shows them." }
        table.list {
            thead { tr { th { "id" } th { "kind" } th { "created" } th { "state" } th { "outcome" } th { "flags" } th { "summary" } } }
            tbody {
                @for v in views {
                    tr class=(v.state.as_str()) {
                        td { (id_link("/proposals/", v.id.as_str())) }
                        td { (kind(v.kind)) }
                        td { time { (v.created_at) } }
                        td { (v.state.as_str()) }
                        td { (v.outcome.map_or("—", |o| o.as_str())) }
                        td { (flags(v)) }
                        td { (summary(v.summary_text(), 80)) }
                    }
                }
            }
        }
    };
    page("Proposals", Nav::Proposals, false, body)
}

/// One proposal whole, and the commands that would decide it.
pub fn render_one(one: &One) -> Markup {
    let shown = &one.shown;
    let v = &shown.view;
    let body = html! {
        h1 { "Proposal " code { (v.short_id) } }
        dl.facts {
            dt { "id" } dd { code { (v.id.as_str()) } }
            dt { "kind" } dd { (kind(v.kind)) }
            dt { "state" } dd { (v.state.as_str()) " " (flags(v)) }
            dt { "outcome" } dd { (v.outcome.map_or("—", |o| o.as_str())) }
            dt { "created" } dd { time { (v.created_at) } }
            @if let Some(p) = &shown.proposer {
                dt { "proposed by" } dd {
                    "run " (id_link("/turns/", &p.run_id)) " of " (p.agent_id) " v" (p.agent_version)
                    " (" (p.provider) ", " (p.model) ")"
                }
            }
        }
        @if let Some(reason) = &v.reason {
            h2 { "The model's reason" }
            (block(reason))
        }
        @if !v.evidence.is_empty() {
            h2 { "Evidence it cites" }
            @for e in &v.evidence {
                section.evidence {
                    h3 { (e.kind.as_str()) " " code { (e.id.short(12)) }
                        @if let Some(run) = one.turns.get(&e.id) {
                            " · turn " (id_link("/turns/", run.as_str()))
                        }
                    }
                    (block(&e.text))
                }
            }
        }
        (content(shown))
        @if let Some(d) = &shown.decision {
            h2 { "Decision" }
            dl.facts {
                dt { "decision" } dd { code { (d.id.as_str()) } }
                dt { "disposition" } dd { (d.disposition) }
                dt { "actor" } dd { (Untrusted(&d.actor)) }
                dt { "submission" } dd { (Untrusted(&d.submission_id)) }
                dt { "recorded" } dd { time { (d.recorded_at) } }
            }
            @if let Some(text) = &d.replacement {
                h3 { "The operator's text" }
                (block(text))
            }
        } @else {
            h2 { "Decide" }
            p { "Run one of these where the store and (for a memory change) the context root are:" }
            pre.command { "thestream proposal-decision --proposal " (v.id.as_str()) " --accept" }
            pre.command { "thestream proposal-decision --proposal " (v.id.as_str()) " --edit-file PATH" }
            pre.command { "thestream proposal-decision --proposal " (v.id.as_str()) " --reject" }
        }
    };
    page(
        &format!("Proposal {}", v.short_id),
        Nav::Proposals,
        false,
        body,
    )
}

/// What the proposal would change: the memory diff (and, when stale, what
/// changed since its base), the correction's original and replacement, or
/// the focus declaration.
fn content(shown: &ProposalShow) -> Markup {
    let v = &shown.view;
    html! {
        @match v.kind {
            ProposalKind::MemoryChange => {
                @if let Some(text) = &v.proposed_text {
                    h2 { "Proposed text" }
                    (block(text))
                }
                @if let Some(m) = &shown.memory {
                    h2 { (DiffTense::of(v.state, v.outcome).heading()) }
                    p { "From the frozen base " code { (m.base_version_id.short(12)) }
                        " to exactly the bytes the materializer writes." }
                    (diff(&m.diff))
                    @if let Some(since) = &m.changed_since_base {
                        h2 { "stale: memory.md changed since the proposal's base" }
                        p { "Current version: " code { (m.current_version_id.as_ref().map_or("none".to_owned(), |c| c.short(12).to_string())) } }
                        (diff(since))
                    }
                }
            }
            ProposalKind::SelfCorrection => {
                @if let Some(original) = &shown.original {
                    h2 { "The reply as delivered" }
                    (block(original))
                }
                @if let Some(replacement) = &v.replacement {
                    h2 { "The proposed replacement" }
                    (block(replacement))
                }
                @if let Some(target) = &v.target_output_event_id {
                    p { "Target output " code { (target.short(12)) } }
                }
            }
            ProposalKind::FocusDeclaration => {
                @if let Some(decl) = &v.declaration {
                    h2 { "The focus declaration" }
                    (block(&serde_json::to_string_pretty(decl).unwrap_or_default()))
                }
            }
        }
    }
}
