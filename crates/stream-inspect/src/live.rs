//! The live tail: server-sent events, one per stored event, each with its
//! global position as the SSE `id`, so that a page that reconnects resumes
//! with `Last-Event-ID` and misses nothing and repeats nothing.
//!
//! One watcher polls the store's `data_version` and publishes the newest
//! position; each stream reads the events after its own position when that
//! moves. At most [`Settings::max_streams`](crate::Settings) streams are
//! open; a client that does not read for [`STALL`] is dropped and resumes by
//! its id. An event's line is content-dark ([`line`]): its type, source,
//! time and the ids of its chain, never text; no stored string goes into an
//! SSE `event:` or `id:` field.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde_json::json;
use stream_store::PositionedEvent;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::{App, PageError};

/// How long a stream may wait for its client to take an event.
const STALL: Duration = Duration::from_secs(5);
/// How often the store's size is measured again.
const USAGE_EVERY: Duration = Duration::from_secs(300);
/// Events read per store query.
const PAGE: usize = 256;

/// The watcher's news and the stream slots.
#[derive(Debug)]
pub struct Hub {
    slots: Arc<Semaphore>,
    head: watch::Sender<u64>,
    closed: watch::Sender<bool>,
}

impl Hub {
    /// A hub admitting `max_streams` streams.
    pub fn new(max_streams: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max_streams)),
            head: watch::channel(0).0,
            closed: watch::channel(false).0,
        }
    }

    /// Ends every stream (the server is stopping).
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// Polls the store and publishes its newest position when it moves.
pub async fn watch(app: Arc<App>) {
    let mut seen: Option<u64> = None;
    let mut measured: Option<std::time::Instant> = None;
    loop {
        if measured.is_none_or(|at| at.elapsed() >= USAGE_EVERY) {
            measured = Some(std::time::Instant::now());
            match app.read(|store, _| Ok(store.usage()?)).await {
                Ok(u) => {
                    if let Ok(mut usage) = app.usage.lock() {
                        *usage = Some((u.events, u.file_bytes));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "the store's size could not be measured"),
            }
        }
        let polled = app
            .read(move |store, _| {
                let version = store.data_version()?;
                if seen == Some(version) {
                    return Ok((version, None));
                }
                Ok((version, Some(store.last_position()?)))
            })
            .await;
        match polled {
            Ok((version, head)) => {
                seen = Some(version);
                if let Some(head) = head {
                    app.live.head.send_if_modified(|h| {
                        let moved = *h != head;
                        *h = head;
                        moved
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "the live tail could not poll the store"),
        }
        tokio::time::sleep(app.settings.poll).await;
    }
}

/// The one content-dark line of an event, as the tail shows it.
pub fn line(e: &PositionedEvent) -> serde_json::Value {
    let ev = &e.event.event;
    json!({
        "position": e.position,
        "time": stream_proposals::review::rfc3339(e.event.recorded_at_ms),
        "type": ev.event_type,
        "version": ev.version,
        "source": ev.source.as_str(),
        "seq": e.event.seq,
        "authorship": ev.authorship.as_str(),
        "sensitive": ev.sensitive,
        "id": ev.id.as_str(),
        "root": ev.root.as_ref().map(|r| r.as_str()),
        "summary": format!(
            "{}{} · seq {}",
            ev.authorship.as_str(),
            if ev.sensitive { ", sensitive" } else { "" },
            e.event.seq
        ),
    })
}

#[derive(Debug, serde::Deserialize)]
pub struct After {
    after: Option<u64>,
}

/// `GET /events/stream`: events after `Last-Event-ID` (a reconnect), else
/// after `?after=` (the position the page was rendered at), else from now.
pub async fn stream(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(query): Query<After>,
) -> Result<Response, PageError> {
    let Ok(permit) = Arc::clone(&app.live.slots).try_acquire_owned() else {
        return Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            "503 too many live streams are open\n",
        )
            .into_response());
    };
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let after = match resume.or(query.after) {
        Some(after) => after,
        None => app.read(|store, _| Ok(store.last_position()?)).await?,
    };
    let (tx, rx) = mpsc::channel::<Event>(PAGE);
    tokio::spawn(produce(Arc::clone(&app), after, tx, permit));
    let events = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// Feeds one stream until the client goes, stalls, or the server stops.
async fn produce(
    app: Arc<App>,
    mut after: u64,
    tx: mpsc::Sender<Event>,
    _permit: tokio::sync::OwnedSemaphorePermit,
) {
    let mut head = app.live.head.subscribe();
    let mut closed = app.live.closed.subscribe();
    loop {
        let batch = app
            .read(move |store, _| Ok(store.events_after_position(after, PAGE)?))
            .await;
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(error = %e, "a live stream could not read the store");
                return;
            }
        };
        let full = batch.len() == PAGE;
        for e in &batch {
            let event = Event::default()
                .id(e.position.to_string())
                .data(line(e).to_string());
            match tx.send_timeout(event, STALL).await {
                Ok(()) => after = e.position,
                // Gone or too slow: it resumes by its id.
                Err(_) => return,
            }
        }
        if full {
            continue;
        }
        // Wait until the store holds something past `after`.
        while *head.borrow_and_update() <= after {
            tokio::select! {
                changed = head.changed() => if changed.is_err() { return },
                _ = closed.wait_for(|c| *c) => return,
                () = tx.closed() => return,
            }
        }
    }
}
