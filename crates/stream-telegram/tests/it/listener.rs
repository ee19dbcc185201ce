//! Issue 12: the webhook listener holds up against peers that never
//! authenticate — stuck headers and stalled bodies are cut, and thousands
//! of idle connections neither exhaust descriptors nor stop a real update.
//! Timeouts are shortened here; the defaults are pinned separately.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stream_telegram::{ListenerLimits, WebhookOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Env, OWNER, owner_text, text_from};
use crate::webhook::{serve_with, wait_stored};

fn quick(header_read_timeout: Duration, max_connections: usize) -> ListenerLimits {
    ListenerLimits {
        header_read_timeout,
        max_connections,
        ..ListenerLimits::default()
    }
}

/// Reads until the server closes; what it sent, or `None` when it never closed.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await
        .ok()
        .map(|()| String::from_utf8_lossy(&got).into_owned())
}

#[test]
fn the_defaults_are_the_issues_bounds() {
    let limits = ListenerLimits::default();
    assert_eq!(limits.header_read_timeout, Duration::from_secs(10));
    assert!(limits.max_connections > 0 && limits.max_connections <= 1024);
    assert!(limits.max_connection_age <= Duration::from_secs(600));
    let options = WebhookOptions::new(stream_telegram::WebhookSecret::new("s3cret").unwrap());
    assert_eq!(options.body_read_timeout, Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stuck_in_its_headers_is_disconnected() {
    let env = Env::start().await;
    let server = serve_with(
        env.ingress().await,
        |_| {},
        quick(Duration::from_millis(300), 16),
    )
    .await;
    // Half a request line and one header, then nothing.
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"POST /telegram/webhook HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // And a peer that connects and says nothing at all.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let started = Instant::now();
    let answer = until_closed(&mut slow, Duration::from_secs(5)).await;
    assert!(answer.is_some(), "the stuck connection was never closed");
    assert!(!answer.unwrap().contains("200 OK"));
    assert!(
        until_closed(&mut silent, Duration::from_secs(5))
            .await
            .is_some()
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_answered_408_and_nothing_stored() {
    let env = Env::start().await;
    let server = serve_with(
        env.ingress().await,
        |o| o.body_read_timeout = Duration::from_millis(300),
        ListenerLimits::default(),
    )
    .await;
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /telegram/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         X-Telegram-Bot-Api-Secret-Token: {}\r\nContent-Length: 500\r\n\r\n{{\"update_id\":",
        server.secret.expose()
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let answer = until_closed(&mut stalled, Duration::from_secs(5))
        .await
        .expect("the stalled body was never answered");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(env.messages().is_empty());
}

/// 2,000 idle connections: the server's descriptors stay bounded by its
/// cap, and a real update pushed meanwhile is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections_do_not_exhaust_descriptors() {
    const CAP: usize = 64;
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let server = serve_with(
        Arc::clone(&ingress),
        |_| {},
        quick(Duration::from_secs(2), CAP),
    )
    .await;
    let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = fds();
    let mut idle = Vec::with_capacity(2000);
    for _ in 0..2000 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // Let the server take every connection off its backlog.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let server_side = fds().saturating_sub(before + idle.len());
    assert!(
        server_side <= CAP + 32,
        "the server holds {server_side} descriptors for 2,000 idle peers"
    );
    env.api
        .set_webhook(&server.url, &server.secret)
        .await
        .unwrap();
    env.fake.push_update(owner_text("a real update"));
    assert!(wait_stored(&env, 1).await, "the real update was not stored");
    drop(idle);
}

/// Issue 41: room is kept for Telegram. With the default cap's worth of
/// idle connections open, a post carrying the secret on a new connection
/// still gets `200` (and is stored); the oldest idle connection made room
/// for it and was answered `408`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_post_gets_200_while_the_cap_s_worth_of_idle_connections_are_open() {
    let limits = ListenerLimits::default();
    let env = Env::start().await;
    let server = serve_with(env.ingress().await, |_| {}, limits.clone()).await;
    let mut idle = Vec::with_capacity(limits.max_connections);
    for _ in 0..limits.max_connections {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // Let the server take every connection off its backlog.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let update =
        serde_json::json!({"update_id": 7, "message": text_from(OWNER, "through the crowd")});
    let body = serde_json::to_vec(&update).unwrap();
    let head = format!(
        "POST /telegram/webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         X-Telegram-Bot-Api-Secret-Token: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.secret.expose(),
        body.len()
    );
    let mut post = TcpStream::connect(server.addr).await.unwrap();
    post.write_all(head.as_bytes()).await.unwrap();
    post.write_all(&body).await.unwrap();
    let answer = until_closed(&mut post, Duration::from_secs(5))
        .await
        .expect("the post was never answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    assert_eq!(env.messages().len(), 1);

    let oldest = until_closed(&mut idle[0], Duration::from_secs(5))
        .await
        .expect("the oldest idle connection was kept");
    assert!(oldest.starts_with("HTTP/1.1 408"), "{oldest:?}");
    drop(idle);
}
