//! `/`: the health strip and the live tail.

use maud::{Markup, html};
use stream_core::payload::RunFailed;
use stream_core::{Payload as _, SourceName};
use stream_proposals::review::{State, age, list, rfc3339};
use stream_store::{EventQuery, PositionedEvent};

use crate::html::{Nav, page};
use crate::live::line;
use crate::{InspectStore, PageError, Serving, Settings};

/// Events the page is rendered with; newer ones arrive live.
const TAIL: u64 = 50;

/// The health strip's facts and the newest events.
pub struct Now {
    serving: Serving,
    last_event: Option<String>,
    failed_today: usize,
    pending: usize,
    oldest_pending: Option<String>,
    store: Option<(u64, u64)>,
    tail: Vec<PositionedEvent>,
    head: u64,
}

/// Reads the health strip and the tail.
pub fn gather(
    store: &dyn InspectStore,
    settings: &Settings,
    usage: Option<(u64, u64)>,
    now_ms: i64,
) -> Result<Now, PageError> {
    let head = store.last_position()?;
    let mut tail = store.events_after_position(head.saturating_sub(TAIL), TAIL as usize)?;
    tail.reverse();
    let last_event = tail.first().map(|e| rfc3339(e.event.recorded_at_ms));
    let day_start = now_ms - now_ms.rem_euclid(86_400_000);
    let failed_today = store
        .events(&EventQuery::of_type(RunFailed::TYPE))?
        .iter()
        .filter(|e| e.recorded_at_ms >= day_start)
        .filter(|e| e.decode::<RunFailed>().is_ok_and(|f| f.is_final))
        .count();
    let proposals = list(
        store,
        false,
        stream_proposals::review::Depth::Summary,
        &settings.trusted,
    )?;
    let pending: Vec<_> = proposals
        .iter()
        .filter(|p| p.state == State::Pending)
        .collect();
    let oldest_pending = pending
        .iter()
        .map(|p| p.created_at_ms)
        .min()
        .map(|ms| age(now_ms, ms));
    Ok(Now {
        serving: (settings.probe)(store),
        last_event,
        failed_today,
        pending: pending.len(),
        oldest_pending,
        store: usage,
        tail,
        head,
    })
}

fn thousands(n: u64) -> String {
    stream_core::terminal::thousands(usize::try_from(n).unwrap_or(usize::MAX))
}

/// The page.
pub fn render(now: &Now) -> Markup {
    let s = &now.serving;
    let body = html! {
        h1 { "Now" }
        ul.health {
            li { span.k { "serve" } " " span.v #serve-state { (s.serve) } }
            li { span.k { "declaration" } " " span.v { (s.active.as_deref().unwrap_or("none active")) } }
            li { span.k { "worker bundle" } " " span.v { code { (s.worker_bundle.as_deref().unwrap_or("—")) } } }
            li { span.k { "last event" } " " span.v { (now.last_event.as_deref().unwrap_or("none")) } }
            li { span.k { "runs failed today" } " " span.v { (now.failed_today) } }
            li { span.k { "deliveries pending" } " " span.v { (s.deliveries_pending.map_or("—".to_owned(), |n| n.to_string())) } }
            li { span.k { "proposals pending" } " " span.v { a href="/proposals" { (now.pending) }
                @if let Some(age) = &now.oldest_pending { " (oldest " (age) ")" } } }
            @if let Some((events, bytes)) = now.store {
                li { span.k { "store" } " " span.v { (thousands(events)) " events, " (thousands(bytes)) " bytes" } }
            }
        }
        h2 { "Events " span #live-status { "(live)" } }
        table #tail data-after=(now.head) {
            thead { tr { th { "position" } th { "time" } th { "type" } th { "source" } th { "summary" } } }
            tbody {
                @for e in &now.tail {
                    @let l = line(e);
                    tr {
                        td { (e.position) }
                        td { (l["time"].as_str().unwrap_or_default()) }
                        td { (l["type"].as_str().unwrap_or_default()) }
                        td { (l["source"].as_str().unwrap_or_default()) }
                        td { (l["summary"].as_str().unwrap_or_default()) }
                    }
                }
            }
        }
    };
    page("Now", Nav::Now, true, body)
}

/// The sources of Telegram chats in the store.
pub fn telegram_sources(store: &dyn stream_store::Read) -> Result<Vec<SourceName>, PageError> {
    Ok(store
        .sources()?
        .into_iter()
        .filter(|s| s.as_str().starts_with("telegram:"))
        .collect())
}
