//! The handlers: each reads its view on a blocking thread and renders it.

pub mod conversation;
pub mod exports;
pub mod memory;
pub mod now;
pub mod proposals;

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use crate::{App, PageError, turn};

type Page = Result<Html<String>, PageError>;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// `/`
pub async fn now(State(app): State<Arc<App>>) -> Page {
    let usage = app.usage.lock().ok().and_then(|u| *u);
    let view = app
        .read(move |s, settings| now::gather(s, settings, usage, now_ms()))
        .await?;
    Ok(Html(now::render(&view).into_string()))
}

#[derive(Debug, serde::Deserialize)]
pub struct Before {
    before: Option<u64>,
}

/// `/conversation`
pub async fn conversation(State(app): State<Arc<App>>, Query(q): Query<Before>) -> Page {
    let view = app
        .read(move |s, _| conversation::gather(s, q.before))
        .await?;
    Ok(Html(conversation::render(&view).into_string()))
}

/// `/turns/RUN_ID`
pub async fn turn(State(app): State<Arc<App>>, Path(run): Path<String>) -> Page {
    let view = app
        .read(move |s, settings| turn::gather(s, settings, &run))
        .await?;
    Ok(Html(turn::render(&view).into_string()))
}

/// `/proposals`
pub async fn proposals(State(app): State<Arc<App>>) -> Page {
    let views = app
        .read(|s, settings| proposals::gather_list(s, &settings.trusted))
        .await?;
    Ok(Html(proposals::render_list(&views).into_string()))
}

/// `/proposals/ID`
pub async fn proposal(State(app): State<Arc<App>>, Path(id): Path<String>) -> Page {
    let shown = app
        .read(move |s, settings| proposals::gather_one(s, &settings.trusted, &id))
        .await?;
    Ok(Html(proposals::render_one(&shown).into_string()))
}

/// `/memory`
pub async fn memory(State(app): State<Arc<App>>) -> Page {
    let view = app
        .read(|s, settings| memory::gather(s, &settings.trusted))
        .await?;
    Ok(Html(memory::render(&view).into_string()))
}

/// `/exports`
pub async fn exports(State(app): State<Arc<App>>) -> Page {
    let view = app
        .read(|s, settings| exports::gather(s, &settings.trusted))
        .await?;
    Ok(Html(exports::render(&view).into_string()))
}

/// Anything else.
pub async fn not_found() -> PageError {
    PageError::NotFound
}

/// The stylesheet, embedded in the binary.
pub async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/inspect.css"),
    )
        .into_response()
}

/// The live tail's script, embedded in the binary.
pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/live.js"),
    )
        .into_response()
}
