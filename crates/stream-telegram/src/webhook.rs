//! The webhook server (axum): Telegram posts each update with the secret in
//! `X-Telegram-Bot-Api-Secret-Token`. The secret is checked in constant
//! time, the body is capped, and `200` is answered only after the update is
//! committed. A store failure answers `500` and a frozen ingress `503`, so
//! Telegram keeps the update and sends it again.
//!
//! The listener that serves it is [`crate::listener`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use crate::ingress::{Ack, Ingress, UpdateOutcome};
use crate::token::WebhookSecret;

/// The header Telegram echoes the secret in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Webhook settings.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// The secret given to `setWebhook`.
    pub secret: WebhookSecret,
    /// The largest body read; larger ones are answered `413`.
    pub max_body_bytes: usize,
    /// The path Telegram posts to, e.g. `/telegram/webhook`.
    pub path: String,
    /// The longest wait for the whole body once the headers are in;
    /// longer is answered `408`.
    pub body_read_timeout: Duration,
}

impl WebhookOptions {
    /// The default body cap: 1 MiB (updates are a few kilobytes).
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

    /// The default body read timeout: 30 s.
    pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

    /// `secret` at `/telegram/webhook` with the default cap and timeout.
    pub fn new(secret: WebhookSecret) -> Self {
        Self {
            secret,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            path: "/telegram/webhook".to_owned(),
            body_read_timeout: Self::DEFAULT_BODY_READ_TIMEOUT,
        }
    }
}

#[derive(Clone)]
struct Shared {
    ingress: Arc<Ingress>,
    options: Arc<WebhookOptions>,
}

/// The webhook router: `POST <path>` only. Serve it with `axum::serve`.
pub fn webhook_router(ingress: Arc<Ingress>, options: WebhookOptions) -> Router {
    let path = options.path.clone();
    let shared = Shared {
        ingress,
        options: Arc::new(options),
    };
    Router::new().route(&path, post(receive)).with_state(shared)
}

fn refuse(reason: &'static str, status: StatusCode) -> StatusCode {
    tracing::info!(reason, status = status.as_u16(), "webhook request refused");
    status
}

async fn receive(State(shared): State<Shared>, headers: HeaderMap, body: Body) -> StatusCode {
    let Some(presented) = headers.get(SECRET_HEADER) else {
        return refuse("missing-secret", StatusCode::UNAUTHORIZED);
    };
    if !shared.options.secret.verify(presented.as_bytes()) {
        return refuse("wrong-secret", StatusCode::UNAUTHORIZED);
    }
    let cap = shared.options.max_body_bytes;
    let declared_too_large = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > cap as u64);
    if declared_too_large {
        return refuse("body-too-large", StatusCode::PAYLOAD_TOO_LARGE);
    }
    let read = tokio::time::timeout(
        shared.options.body_read_timeout,
        axum::body::to_bytes(body, cap),
    );
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return refuse("body-too-large", StatusCode::PAYLOAD_TOO_LARGE),
        Err(_) => return refuse("body-timeout", StatusCode::REQUEST_TIMEOUT),
    };
    match shared.ingress.handle_bytes(&bytes, Ack::Caller).await {
        Ok(
            UpdateOutcome::Stored { .. }
            | UpdateOutcome::Converged { .. }
            | UpdateOutcome::Conflict { .. }
            | UpdateOutcome::Dropped(_),
        ) => StatusCode::OK,
        Ok(UpdateOutcome::Frozen) => refuse("frozen", StatusCode::SERVICE_UNAVAILABLE),
        Err(e) => {
            tracing::warn!(error = %e, "webhook update not stored; Telegram will retry");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}
