//! The webhook's listener ([`serve_webhook`]): it holds up against peers
//! that never authenticate, and keeps room for Telegram while they try.
//!
//! A connection first waits, in a queue of at most
//! [`ListenerLimits::max_connections`], for its first request's headers
//! (at most 10 s, then `408`). When the queue is full, a new connection
//! makes room by answering the oldest waiting one `408`: idle sockets
//! cannot keep a newcomer out, however many there are, and Telegram sends
//! its headers at once. Once the headers are in, a connection whose
//! headers carry the valid secret is served from a pool of its own
//! ([`ListenerLimits::max_authenticated`]), any other from a second pool as
//! large as the queue; a full pool closes the connection. Then hyper
//! serves it: a body stalled for 30 s is answered `408` (by the router), a
//! keep-alive connection idle for 10 s is closed, and a connection lives at
//! most 5 minutes. File descriptors stay bounded by the queue and the two
//! pools. The secret decides only where a connection waits: every request
//! is still judged by the router.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::token::WebhookSecret;
use crate::webhook::SECRET_HEADER;

/// The longest request head read before the pool is chosen (Telegram's
/// are a few hundred bytes).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The longest wait to write a refusal to a peer that does not read.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

const TIMEOUT_408: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
const TOO_LARGE_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
const BUSY_503: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// The webhook listener's connection limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerLimits {
    /// The longest wait for a request's headers, from the connection's
    /// start or the end of the previous request (the keep-alive idle bound).
    pub header_read_timeout: Duration,
    /// Connections waiting for their first headers at once (one more
    /// answers the oldest `408`), and connections without the secret
    /// served at once (one more is closed).
    pub max_connections: usize,
    /// Connections whose first headers carried the valid secret, served at
    /// once: Telegram's own room (it opens at most 100, 40 by default).
    pub max_authenticated: usize,
    /// The longest life of a keep-alive connection: after it, the
    /// connection finishes its request in flight and closes.
    pub max_connection_age: Duration,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 256,
            max_authenticated: 100,
            max_connection_age: Duration::from_secs(300),
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes; then accepts nothing more, lets each connection finish its
/// request in flight, and returns when all are closed. `secret` only
/// chooses a connection's pool (see the module).
pub async fn serve_webhook(
    listener: tokio::net::TcpListener,
    router: Router,
    secret: &WebhookSecret,
    limits: &ListenerLimits,
    shutdown: impl Future<Output = ()> + Send,
) {
    let pools = Arc::new(Pools {
        authenticated: pool(limits.max_authenticated),
        other: pool(limits.max_connections),
    });
    let queue_cap = limits.max_connections.max(1);
    let secret = Arc::new(secret.clone());
    // Each connection task holds a sender: all closed when `recv` ends.
    let (alive, mut all_closed) = mpsc::channel::<()>(1);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut waiting: std::collections::VecDeque<oneshot::Sender<()>> =
        std::collections::VecDeque::new();
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
        // A waiting connection drops its receiver once its headers are in.
        waiting.retain(|w| !w.is_closed());
        while waiting.len() >= queue_cap {
            if let Some(oldest) = waiting.pop_front() {
                let _ = oldest.send(());
            }
        }
        let (evict, evicted) = oneshot::channel();
        waiting.push_back(evict);
        let connection = Connection {
            router: router.clone(),
            limits: limits.clone(),
            secret: Arc::clone(&secret),
            pools: Arc::clone(&pools),
            stop: stop_rx.clone(),
        };
        let alive = alive.clone();
        tokio::spawn(async move {
            connection.run(stream, evicted).await;
            drop(alive);
        });
    }
    let _ = stop_tx.send(true);
    drop(waiting);
    drop(alive);
    let _ = all_closed.recv().await;
}

fn pool(size: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(size.clamp(1, Semaphore::MAX_PERMITS)))
}

struct Pools {
    authenticated: Arc<Semaphore>,
    other: Arc<Semaphore>,
}

struct Connection {
    router: Router,
    limits: ListenerLimits,
    secret: Arc<WebhookSecret>,
    pools: Arc<Pools>,
    stop: watch::Receiver<bool>,
}

/// How waiting for a connection's first headers ended.
enum Head {
    /// The whole head, possibly with the start of the body.
    In(Vec<u8>),
    /// Too slow, or made room for a newer connection.
    TimedOut,
    /// Over [`MAX_HEAD_BYTES`].
    TooLarge,
    /// The peer went away, or the listener is stopping.
    Gone,
}

impl Connection {
    async fn run(mut self, mut stream: TcpStream, evicted: oneshot::Receiver<()>) {
        let head = self.first_head(&mut stream, evicted).await;
        let head = match head {
            Head::In(head) => head,
            Head::TimedOut => return refuse(stream, TIMEOUT_408, "head-timeout").await,
            Head::TooLarge => return refuse(stream, TOO_LARGE_431, "head-too-large").await,
            Head::Gone => return,
        };
        let authenticated = carries_secret(&head, &self.secret);
        let pool = if authenticated {
            &self.pools.authenticated
        } else {
            &self.pools.other
        };
        let Ok(permit) = Arc::clone(pool).try_acquire_owned() else {
            tracing::debug!(authenticated, "webhook pool full; connection closed");
            if authenticated {
                refuse(stream, BUSY_503, "authenticated-pool-full").await;
            }
            return;
        };
        let io = Prefixed {
            head,
            at: 0,
            stream,
        };
        serve_connection(io, self.router, &self.limits, self.stop).await;
        drop(permit);
    }

    /// Reads until the end of the first request's head.
    async fn first_head(&mut self, stream: &mut TcpStream, evicted: oneshot::Receiver<()>) -> Head {
        let mut evicted = std::pin::pin!(evicted);
        let deadline = tokio::time::sleep(self.limits.header_read_timeout);
        let mut deadline = std::pin::pin!(deadline);
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0u8; 4096];
        loop {
            let read = tokio::select! {
                () = &mut deadline => return Head::TimedOut,
                made_room = &mut evicted => match made_room {
                    Ok(()) => return Head::TimedOut,
                    // The listener is gone.
                    Err(_) => return Head::Gone,
                },
                _ = self.stop.wait_for(|s| *s) => return Head::Gone,
                read = stream.read(&mut buf) => read,
            };
            let n = match read {
                Ok(0) | Err(_) => return Head::Gone,
                Ok(n) => n,
            };
            let from = head.len().saturating_sub(3);
            head.extend_from_slice(&buf[..n]);
            if head[from..].windows(4).any(|w| w == b"\r\n\r\n") {
                return Head::In(head);
            }
            if head.len() > MAX_HEAD_BYTES {
                return Head::TooLarge;
            }
        }
    }
}

/// Whether a request head carries the valid secret header. Chooses a pool
/// only: the router judges the request itself.
fn carries_secret(head: &[u8], secret: &WebhookSecret) -> bool {
    head.split(|b| *b == b'\n').skip(1).any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            return false;
        };
        let (name, value) = line.split_at(colon);
        name.eq_ignore_ascii_case(SECRET_HEADER.as_bytes())
            && secret.verify(value[1..].trim_ascii())
    })
}

async fn refuse(mut stream: TcpStream, answer: &[u8], reason: &'static str) {
    tracing::debug!(reason, "webhook connection refused");
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        let _ = stream.write_all(answer).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn serve_connection(
    io: Prefixed,
    router: Router,
    limits: &ListenerLimits,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(
        hyper_util::rt::TokioIo::new(io),
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

/// The stream with the head already read put back in front of it.
struct Prefixed {
    head: Vec<u8>,
    at: usize,
    stream: TcpStream,
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let rest = this.head.get(this.at..).unwrap_or_default();
        if !rest.is_empty() {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_valid_secret_header_chooses_the_authenticated_pool() {
        let secret = WebhookSecret::new("s3cret").unwrap();
        let head =
            |extra: &str| format!("POST /telegram/webhook HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
        let rows = [
            ("X-Telegram-Bot-Api-Secret-Token: s3cret\r\n", true),
            ("x-telegram-bot-api-secret-token:s3cret  \r\n", true),
            ("X-Telegram-Bot-Api-Secret-Token: s3cre\r\n", false),
            ("X-Other: s3cret\r\n", false),
            ("", false),
        ];
        for (extra, want) in rows {
            assert_eq!(
                carries_secret(head(extra).as_bytes(), &secret),
                want,
                "{extra:?}"
            );
        }
        // Not in the request line.
        assert!(!carries_secret(
            b"X-Telegram-Bot-Api-Secret-Token: s3cret\r\n\r\n",
            &secret
        ));
    }
}
