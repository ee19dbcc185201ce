//! Webhook ingress end to end: the fake pushes updates to our axum server
//! with the secret header; 200 only after the commit; bad secrets, big
//! bodies and store failures; freeze/resume through deleteWebhook/setWebhook.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stream_telegram::{
    Ingress, IngressMode, ListenerLimits, WebhookOptions, WebhookSecret, freeze_ingress,
    resume_ingress, serve_webhook, webhook_router,
};
use stream_testkit::canary::{Canary, assert_no_leak};

use crate::common::{
    Env, OWNER, STRANGER, logs, message_update, messages_in, owner_text, text_from,
};

pub struct Server {
    pub url: String,
    pub addr: std::net::SocketAddr,
    pub secret: WebhookSecret,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn serve(ingress: Arc<Ingress>, max_body_bytes: usize) -> Server {
    serve_with(
        ingress,
        |o| o.max_body_bytes = max_body_bytes,
        ListenerLimits::default(),
    )
    .await
}

/// The webhook router on the production listener, with `tune`d options.
pub async fn serve_with(
    ingress: Arc<Ingress>,
    tune: impl FnOnce(&mut WebhookOptions),
    limits: ListenerLimits,
) -> Server {
    let secret = WebhookSecret::new(format!("hook_{}", std::process::id())).unwrap();
    let mut options = WebhookOptions::new(secret.clone());
    tune(&mut options);
    let path = options.path.clone();
    let router = webhook_router(ingress, options);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let secret_for_server = secret.clone();
    tokio::spawn(async move {
        serve_webhook(listener, router, &secret_for_server, &limits, async {
            let _ = stopped.await;
        })
        .await;
    });
    Server {
        url: format!("http://{addr}{path}"),
        addr,
        secret,
        _stop: stop,
    }
}

pub async fn wait_stored(env: &Env, n: usize) -> bool {
    let store = Arc::clone(&env.store);
    env.fake
        .wait_until(Duration::from_secs(10), |_| messages_in(&*store).len() >= n)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_stores_before_answering_and_drops_what_admission_refuses() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let server = serve(Arc::clone(&ingress), 64 * 1024).await;
    env.api
        .set_webhook(&server.url, &server.secret)
        .await
        .unwrap();

    let stranger = Canary::new("webhook-stranger");
    let a = env.fake.push_update(owner_text("one"));
    env.fake
        .push_update(message_update(text_from(STRANGER, stranger.as_str())));
    let dup = json!({"update_id": 9000, "message": text_from(OWNER, "dup")});
    env.fake.push_update(dup.clone());
    env.fake.push_update(dup);
    let b = env.fake.push_update(owner_text("two"));
    assert!(
        env.fake
            .wait_until(Duration::from_secs(10), |f| f.pending_updates() == 0)
            .await
    );

    let ids: Vec<i64> = env.messages().iter().map(|(_, m)| m.update_id).collect();
    assert_eq!(ids, vec![a, 9000, b]);
    let statuses: Vec<Option<u16>> = env.fake.webhook_pushes().iter().map(|p| p.status).collect();
    assert_eq!(
        statuses,
        vec![Some(200); 5],
        "dropped and duplicate updates are answered 200 too"
    );
    let stats = ingress.stats();
    assert_eq!((stats.stored, stats.converged), (3, 1));
    assert_eq!(stats.dropped.get("foreign-sender"), Some(&1));
    assert_no_leak(&[stranger], &logs(), "captured logs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_refuses_missing_or_wrong_secrets_and_oversized_bodies() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let server = serve(ingress, 2048).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let body = json!({"update_id": 1, "message": text_from(OWNER, "x")}).to_string();
    let post = |secret: Option<&str>, body: String| {
        let mut r = http
            .post(&server.url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = secret {
            r = r.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        r.send()
    };
    assert_eq!(post(None, body.clone()).await.unwrap().status(), 401);
    assert_eq!(
        post(Some("wrong"), body.clone()).await.unwrap().status(),
        401
    );
    let almost = format!("{}x", server.secret.expose());
    assert_eq!(
        post(Some(&almost), body.clone()).await.unwrap().status(),
        401
    );
    let big = json!({"update_id": 2, "message": text_from(OWNER, &"y".repeat(4000))}).to_string();
    assert_eq!(
        post(Some(server.secret.expose()), big)
            .await
            .unwrap()
            .status(),
        413
    );
    assert!(env.messages().is_empty());
    // Malformed JSON with the right secret: dropped, answered 200, nothing stored.
    assert_eq!(
        post(Some(server.secret.expose()), "{not json".into())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        post(Some(server.secret.expose()), body)
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(env.messages().len(), 1);
    let log = logs();
    assert!(
        log.contains("missing-secret")
            && log.contains("wrong-secret")
            && log.contains("body-too-large")
    );
    assert!(
        !log.contains(server.secret.expose()),
        "the webhook secret is never logged"
    );
}

/// "An error status when the store fails (Telegram retries)": the events
/// table is made unusable under the running server, then repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_answers_an_error_and_the_retry_is_stored() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let server = serve(ingress, 64 * 1024).await;
    let sql = rusqlite::Connection::open(&env.store_path).unwrap();
    sql.execute_batch("ALTER TABLE events RENAME TO events_away")
        .unwrap();
    env.api
        .set_webhook(&server.url, &server.secret)
        .await
        .unwrap();
    let id = env.fake.push_update(owner_text("retry me"));
    assert!(
        env.fake
            .wait_until(Duration::from_secs(10), |f| f.webhook_pushes().len() >= 2)
            .await
    );
    assert!(
        env.fake
            .webhook_pushes()
            .iter()
            .all(|p| p.status == Some(500))
    );
    assert_eq!(env.fake.pending_updates(), 1, "Telegram keeps the update");
    sql.execute_batch("ALTER TABLE events_away RENAME TO events")
        .unwrap();
    assert!(wait_stored(&env, 1).await);
    assert_eq!(env.messages()[0].1.update_id, id);
    assert!(
        env.fake
            .wait_until(Duration::from_secs(5), |f| f.pending_updates() == 0)
            .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeze_resume_in_webhook_mode_loses_no_update() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let server = serve(Arc::clone(&ingress), 64 * 1024).await;
    let mode = IngressMode::Webhook {
        url: server.url.clone(),
        secret: server.secret.clone(),
    };
    resume_ingress(&env.store, &env.api, &mode).await.unwrap();
    let before = env.fake.push_update(owner_text("before"));
    assert!(wait_stored(&env, 1).await);

    freeze_ingress(&env.store, &env.api, &mode).await.unwrap();
    let delete = env.fake.calls_of("deleteWebhook");
    assert_eq!(delete.len(), 1);
    assert_eq!(delete[0].params, json!({"drop_pending_updates": false}));
    assert_eq!(env.fake.webhook_url(), None);
    let frozen: Vec<i64> = (0..3)
        .map(|i| {
            env.fake
                .push_update(owner_text(&format!("while frozen {i}")))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.fake.pending_updates(), 3, "Telegram keeps them");
    assert_eq!(env.messages().len(), 1);

    // A push that was already in flight when the freeze committed: 503, not stored.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let late = reqwest::Client::new()
        .post(&server.url)
        .header("X-Telegram-Bot-Api-Secret-Token", server.secret.expose())
        .header("content-type", "application/json")
        .body(
            json!({"update_id": frozen[0], "message": text_from(OWNER, "while frozen 0")})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 503);
    assert_eq!(env.messages().len(), 1);

    resume_ingress(&env.store, &env.api, &mode).await.unwrap();
    let set: Vec<Value> = env
        .fake
        .calls_of("setWebhook")
        .iter()
        .map(|c| c.params.clone())
        .collect();
    assert_eq!(set.len(), 2);
    assert_eq!(set[0], set[1], "resumed with the same URL and secret");
    assert_eq!(set[1]["url"], json!(server.url));
    assert_eq!(set[1]["drop_pending_updates"], json!(false));
    assert!(wait_stored(&env, 4).await);
    let ids: Vec<i64> = env.messages().iter().map(|(_, m)| m.update_id).collect();
    assert_eq!(ids, [vec![before], frozen].concat());
}
