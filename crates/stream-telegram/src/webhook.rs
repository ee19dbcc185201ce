//! The webhook server (axum): Telegram posts each update with the secret in
//! `X-Telegram-Bot-Api-Secret-Token`. The secret is checked in constant
//! time, the body is capped, and `200` is answered only after the update is
//! committed. A store failure answers `500` and a frozen ingress `503`, so
//! Telegram keeps the update and sends it again.
//!
//! The listener ([`serve_webhook`]) holds up against peers that never
//! authenticate: a connection still in its headers after 10 s is closed
//! (the same bound closes a keep-alive connection idle between requests),
//! a body stalled for 30 s is answered `408`, a connection lives at most
//! 5 minutes, and at most 256 connections are open at once (more are
//! closed as soon as they are accepted), so file descriptors stay bounded.

use std::future::Future;
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

/// The webhook listener's connection limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerLimits {
    /// The longest wait for a request's headers, from the connection's
    /// start or the end of the previous request (the keep-alive idle bound).
    pub header_read_timeout: Duration,
    /// Connections open at once; one more is closed as soon as accepted.
    pub max_connections: usize,
    /// The longest life of a keep-alive connection: after it, the
    /// connection finishes its request in flight and closes.
    pub max_connection_age: Duration,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 256,
            max_connection_age: Duration::from_secs(300),
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

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes; then accepts nothing more, lets each connection finish its
/// request in flight, and returns when all are closed.
pub async fn serve_webhook(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: &ListenerLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let max = limits
        .max_connections
        .clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
    let permits = Arc::new(tokio::sync::Semaphore::new(max));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept:
                    // pause instead of spinning, keep serving.
                    tracing::warn!(error = ?e.kind(), "webhook accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::debug!("webhook connection cap reached; connection closed");
            drop(stream);
            continue;
        };
        let router = router.clone();
        let limits = limits.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            serve_connection(stream, router, &limits, stop).await;
            drop(permit);
        });
    }
    let _ = stop_tx.send(true);
    // Every permit back means every connection closed.
    let _ = permits.acquire_many(max as u32).await;
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    router: Router,
    limits: &ListenerLimits,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(
        hyper_util::rt::TokioIo::new(stream),
        hyper_util::service::TowerToHyperService::new(router),
    );
    let mut conn = std::pin::pin!(conn);
    let aged = tokio::time::sleep(limits.max_connection_age);
    let mut aged = std::pin::pin!(aged);
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    // Header timeouts and resets of unauthenticated peers.
                    tracing::debug!(error = %e, "webhook connection ended");
                }
                return;
            }
            () = &mut aged, if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = stop.wait_for(|s| *s), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
