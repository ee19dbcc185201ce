//! `/turns/RUN_ID`, the exact view of one run: the inbound message, the
//! snapshot the run used (the `memory.md` version and text, the history
//! window), the request body sent to the provider — rebuilt from the stored
//! snapshot by the parent's own functions (`packet::build`,
//! `request_body`), so byte for byte what the broker sent, with its SHA-256
//! — the attempts and their outcomes, the output and its delivery, and the
//! proposals the run produced.

use std::sync::Arc;

use maud::{Markup, html};
use sha2::{Digest as _, Sha256};
use stream_context::{Snapshot, Turn as HistoryTurn};
use stream_core::payload::{
    DeliveryReceipt, MessageObservation, MessageReceived, ProviderApi, RunCompleted, RunFailed,
    TextOrigin,
};
use stream_core::{Payload as _, RunId, StoredEvent};
use stream_declarations::install::{Expected, load_installed};
use stream_proposals::review::{ProposalView, get};
use stream_protocol::{ProviderCompat, ProviderSpec};
use stream_store::{EventQuery, Read, RunRow};

use crate::html::{Nav, Untrusted, block, id_link, page};
use crate::{PageError, Settings};

/// The request as the broker sent it.
pub struct Request {
    /// The exact body.
    pub body: Vec<u8>,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// The wire format and model it was built for, and where they came from.
    pub api: ProviderApi,
    /// The model.
    pub model: String,
    /// Whether api and model are the run's recorded ones (the completed-run
    /// receipt) or the config's (a run that never completed).
    pub recorded: bool,
    /// The compat mode of the config it was rebuilt with.
    pub compat: ProviderCompat,
}

/// Everything the page shows of one run.
pub struct TurnView {
    run: RunRow,
    trigger: Option<(StoredEvent, MessageReceived)>,
    snapshot: Option<Snapshot>,
    request: Result<Request, &'static str>,
    completed: Option<RunCompleted>,
    failures: Vec<(StoredEvent, RunFailed)>,
    output: Option<(StoredEvent, MessageObservation)>,
    receipt: Option<(StoredEvent, DeliveryReceipt)>,
    proposals: Vec<ProposalView>,
}

/// Reads one run; an unknown or malformed id is not found.
pub fn gather(store: &dyn Read, settings: &Settings, run_id: &str) -> Result<TurnView, PageError> {
    let run_id = RunId::parse(run_id).map_err(|_| PageError::NotFound)?;
    let run = store.run(&run_id)?.ok_or(PageError::NotFound)?;
    let trigger = match store.event(&run.trigger_event_id)? {
        Some(e) => e.decode::<MessageReceived>().ok().map(|m| (e, m)),
        None => None,
    };
    let snapshot = match &run.snapshot_id {
        Some(id) => Some(Snapshot::load(store, id)?),
        None => None,
    };
    // The run's own events: its chain is rooted at the trigger.
    let chain = store.events(&EventQuery::rooted_at(&run.trigger_event_id))?;
    let mine = |e: &StoredEvent| -> bool {
        serde_json::from_slice::<serde_json::Value>(&e.event.payload)
            .ok()
            .and_then(|p| {
                p.get("runId")
                    .and_then(|r| r.as_str().map(|r| r == run_id.as_str()))
            })
            .unwrap_or(false)
    };
    let mut view = TurnView {
        run,
        trigger,
        request: Err("the run has no stored snapshot"),
        snapshot: None,
        completed: None,
        failures: Vec::new(),
        output: None,
        receipt: None,
        proposals: Vec::new(),
    };
    for e in chain.iter().filter(|e| mine(e)) {
        match e.event.event_type.as_str() {
            RunCompleted::TYPE => view.completed = e.decode().ok(),
            RunFailed::TYPE => {
                if let Ok(f) = e.decode() {
                    view.failures.push((e.clone(), f));
                }
            }
            MessageObservation::TYPE => view.output = e.decode().ok().map(|o| (e.clone(), o)),
            DeliveryReceipt::TYPE => view.receipt = e.decode().ok().map(|r| (e.clone(), r)),
            t if stream_context::history::is_proposal_type(t) => {
                if let Some(p) = get(store, e.id(), &settings.trusted)? {
                    view.proposals.push(p);
                }
            }
            _ => {}
        }
    }
    if let Some(snapshot) = &snapshot {
        view.request = rebuild(store, settings, snapshot, view.completed.as_ref());
    }
    view.snapshot = snapshot;
    Ok(view)
}

/// The request body of `snapshot` as the broker built and sent it. Api and
/// model are the completed-run receipt's when it exists (what the run
/// recorded), else the config's; the token limit is the installed
/// declaration's; compat is the config's.
fn rebuild(
    store: &dyn Read,
    settings: &Settings,
    snapshot: &Snapshot,
    completed: Option<&RunCompleted>,
) -> Result<Request, &'static str> {
    let (api, model, recorded) = match completed.and_then(|c| c.provider.as_ref()) {
        Some(p) => (p.api, p.model.as_str().to_owned(), true),
        None => match &settings.provider {
            Some((api, model)) => (*api, model.clone(), false),
            None => return Err("the run never completed and this config names no provider"),
        },
    };
    let expected = Expected {
        id: snapshot.agent.id.as_str(),
        version: snapshot.agent.version,
        fingerprint: &snapshot.agent.declaration_fingerprint,
    };
    let declaration = match load_installed(store, &expected) {
        Ok((declaration, _)) => Arc::new(declaration),
        // Only the very declaration the snapshot names: its fingerprint
        // binds the prompt, the tools and their bounds.
        Err(_) => match &settings.declaration {
            Some(d) if d.fingerprint == snapshot.agent.declaration_fingerprint => Arc::clone(d),
            Some(_) | None => {
                return Err(
                    "the run's declaration is neither installed in the store nor this config's",
                );
            }
        },
    };
    let spec = ProviderSpec {
        api,
        model: model.clone(),
        max_output_tokens: declaration.max_output_tokens(),
        compat: settings.compat,
    };
    let packet =
        stream_context::packet::build(snapshot, 1, spec, &stream_declarations::tool_def, store)
            .map_err(|_| "the snapshot's photo is not in the store")?;
    let body = stream_provider::request_body(&packet)
        .map_err(|_| "the snapshot does not build a request")?;
    let sha256 = hex::encode(Sha256::digest(&body));
    Ok(Request {
        body,
        sha256,
        api,
        model,
        recorded,
        compat: settings.compat,
    })
}

fn message(m: &MessageReceived) -> Markup {
    html! {
        dl.facts {
            dt { "telegram message" } dd { (m.message_id) " in chat " (m.chat_id) ", update " (m.update_id) }
            @if let Some(c) = &m.command {
                dt { "command" } dd { "/" (c.name.as_str()) }
            }
            @if let Some(p) = &m.photo {
                dt { "photo" } dd { (p.width) "×" (p.height) ", " (p.size) " bytes" }
            }
        }
        @if let Some(text) = &m.text {
            (block(text.as_str()))
        }
    }
}

fn history(snapshot: &Snapshot) -> Markup {
    html! {
        @if snapshot.transcript.is_empty() {
            p { "No earlier turns." }
        }
        ol.history {
            @for turn in &snapshot.transcript {
                @match turn {
                    HistoryTurn::User(u) => li.user {
                        span.role { "owner" } " message " code { (u.event_id.short(12)) }
                        @if u.image.is_some() { " (photo)" }
                        @if let Some(text) = &u.text { (block(text)) }
                    },
                    HistoryTurn::Assistant(a) => li.assistant {
                        span.role { "reply" } " of turn " (id_link("/turns/", a.run_id.as_str()))
                        " output " code { (a.output_event_id.short(12)) }
                        @for call in &a.calls {
                            " call " code { (call.kind.tool_name()) }
                            " → proposal " (id_link("/proposals/", call.proposal_event_id.as_str()))
                        }
                        (block(&a.text))
                    },
                }
            }
        }
    }
}

fn request(r: &Result<Request, &'static str>) -> Markup {
    html! {
        @match r {
            Ok(r) => {
                dl.facts {
                    dt { "sha-256" } dd { code #request-sha256 { (r.sha256) } }
                    dt { "size" } dd { (r.body.len()) " bytes" }
                    dt { "wire format" } dd { (r.api.as_str()) " · compat " (compat(r.compat)) }
                    dt { "model" } dd { (Untrusted(&r.model))
                        @if !r.recorded { " (from this config: the run recorded none)" } }
                }
                p { "The body exactly as the broker sent it (no header, no key):" }
                (block(&String::from_utf8_lossy(&r.body)))
            }
            Err(why) => p.flag { "Not rebuilt: " (why) "." },
        }
    }
}

/// Who wrote a reply's text, in words.
pub(crate) fn origin(o: TextOrigin) -> &'static str {
    match o {
        TextOrigin::Model => "the model",
        TextOrigin::Acknowledgment => "the parent's fixed acknowledgment",
        TextOrigin::Deterministic => "a deterministic declaration",
    }
}

fn compat(c: ProviderCompat) -> &'static str {
    match c {
        ProviderCompat::Openai => "openai",
        ProviderCompat::Ollama => "ollama",
        ProviderCompat::LlamaCpp => "llama-cpp",
        ProviderCompat::Vllm => "vllm",
    }
}

/// The page.
pub fn render(t: &TurnView) -> Markup {
    let run = &t.run;
    let body = html! {
        h1 { "Turn " code { (run.run_id.short(12)) } }
        dl.facts {
            dt { "run" } dd { code { (run.run_id.as_str()) } }
            dt { "declaration" } dd { (run.agent_id) " v" (run.agent_version) }
            dt { "status" } dd { (format!("{:?}", run.status).to_lowercase()) ", " (run.attempts) " attempt(s)" }
            @if let Some(c) = &t.completed {
                @if let Some(w) = &c.worker_bundle_sha256 {
                    dt { "worker bundle" } dd { code { (w.as_str()) } }
                }
            }
        }
        h2 { "The owner's message" }
        @match &t.trigger {
            Some((e, m)) => {
                p { "event " code { (e.id().as_str()) } " at " time { (stream_proposals::review::rfc3339(e.recorded_at_ms)) } }
                (message(m))
            }
            None => p { "The trigger event " code { (run.trigger_event_id.as_str()) } " is not a message." },
        }
        @if let Some(s) = &t.snapshot {
            h2 { "What the model saw" }
            dl.facts {
                dt { "snapshot" } dd { code { (run.snapshot_id.as_ref().map(|s| s.as_str()).unwrap_or_default()) } }
                dt { "tools exposed" } dd {
                    @for kind in &s.capabilities.tools { code { (kind.tool_name()) } " " }
                    @if s.capabilities.tools.is_empty() { "none" }
                }
            }
            h3 { "memory.md" }
            @match &s.memory {
                Some(m) => {
                    p { "version " code { (m.target.version_id.short(12)) } ", sha-256 " code { (m.target.sha256.as_str()) } }
                    (block(&m.text))
                }
                None => p { "No memory.md in this snapshot." },
            }
            h3 { "History window" }
            (history(s))
            h2 { "The request sent to the provider" }
            (request(&t.request))
        }
        h2 { "Attempts" }
        @if t.failures.is_empty() && t.completed.is_none() {
            p { "No attempt is recorded yet." }
        }
        ul {
            @for (e, f) in &t.failures {
                li { "attempt " (f.attempt) " failed: " code { (f.reason.as_str()) }
                    @if f.is_final { " (final)" } " at " time { (stream_proposals::review::rfc3339(e.recorded_at_ms)) } }
            }
            @if let Some(c) = &t.completed {
                li { "completed with " (c.proposal_event_ids.len()) " proposal(s)"
                    @if let Some(p) = &c.provider { " by " (p.api.as_str()) " " (Untrusted(p.model.as_str())) } }
            }
        }
        @if let Some((e, o)) = &t.output {
            h2 { "The reply" }
            p { "output " code { (e.id().as_str()) } ", text from " code { (origin(o.origin)) } }
            (block(o.text.as_str()))
        }
        @if let Some((e, r)) = &t.receipt {
            h3 { "Delivered" }
            p { "receipt " code { (e.id().short(12)) } ": telegram message " (r.message_id)
                @for id in &r.continuation_message_ids { ", " (id) }
                " at " time { (stream_proposals::review::rfc3339(e.recorded_at_ms)) } }
        }
        @if !t.proposals.is_empty() {
            h2 { "Proposals of this turn" }
            ul {
                @for p in &t.proposals {
                    li { (id_link("/proposals/", p.id.as_str())) " " (p.state.as_str())
                        @if let Some(o) = p.outcome { " · " (o.as_str()) } }
                }
            }
        }
    };
    page(
        &format!("Turn {}", run.run_id.short(12)),
        Nav::None,
        false,
        body,
    )
}
