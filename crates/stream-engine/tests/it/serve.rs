//! A running `serve` in process, against loopback Telegram and provider
//! fakes and the real sandboxed worker: what wakes it and what must not
//! wait for what.

use std::path::Path;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_engine::cooperation::{ConsumerRequest, ConsumerState, read_status, write_request};
use stream_engine::serve::{connect, run};
use stream_engine::{EngineSettings, IngressSettings, ProviderSettings};
use stream_store::{SqliteStore, Store};
use stream_testkit::provider::{Reply, ScriptedCompletion, ScriptedProvider};
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

const OWNER: i64 = 7_000_002;

fn env() {
    static ONCE: Once = Once::new();
    // SAFETY: set once, before any serve of this binary reads them.
    ONCE.call_once(|| unsafe {
        std::env::set_var("SERVE_IT_BOT_TOKEN", "4242:fake-token");
        std::env::set_var("SERVE_IT_API_KEY", "sk-serve-it");
    });
}

fn settings(dir: &Path, telegram: &FakeTelegram, provider: &ScriptedProvider) -> EngineSettings {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations");
    let context = dir.join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::write(context.join("memory.md"), "---\nid: it\n---\n# Memory\n").unwrap();
    EngineSettings {
        context_root: context,
        max_memory_bytes: 262_144,
        lock_dir: dir.join("locks"),
        trusted_keys: Default::default(),
        telegram_api_base_url: telegram.base_url(),
        bot_token_env: "SERVE_IT_BOT_TOKEN".into(),
        owner_user_id: OWNER,
        ingress: IngressSettings::Polling,
        provider: ProviderSettings {
            api: ProviderApi::OpenaiChat,
            base_url: provider.base_url(ProviderApi::OpenaiChat),
            model: "it-model".into(),
            api_key_env: "SERVE_IT_API_KEY".into(),
            compat: Default::default(),
        },
        declaration: repo.join("telegram-conversation.v18.yaml"),
        replies_declaration: repo.join("telegram-replies.v2.yaml"),
        worker: stream_testkit::bin::binary("thestream-worker").unwrap(),
        allow_unenforced_sandbox: false,
        max_attempts: 3,
        retry_backoff: Duration::from_secs(60),
        provider_timeout: Duration::from_secs(30),
    }
}

fn owner_text(message_id: i64, text: &str) -> serde_json::Value {
    json!({"message": {
        "message_id": message_id, "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
        "chat": {"id": OWNER, "type": "private"}, "date": 1_790_000_000, "text": text
    }})
}

fn sent_texts(telegram: &FakeTelegram) -> Vec<String> {
    telegram
        .calls_of("sendMessage")
        .iter()
        .filter(|c| c.fault.is_none())
        .filter_map(|c| c.params["text"].as_str().map(str::to_owned))
        .collect()
}

/// When the consumer and delivery shared one loop, a run
/// sleeping in its retry backoff (up to 60 s) held back every reply
/// settled before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_a_60_s_backoff_does_not_delay_another_outputs_delivery() {
    env();
    let dir = tempfile::tempdir().unwrap();
    let telegram = FakeTelegram::start(FakeTelegramConfig::default())
        .await
        .unwrap();
    let provider = ScriptedProvider::start(vec![
        Reply::completion(ScriptedCompletion::text("canary-first-reply")),
        Reply::error(500, "server_error"),
    ])
    .unwrap();
    // Both stored in one poll: the consumer settles the first, then the
    // second fails transiently and waits 60 s before its next attempt.
    telegram.push_update(owner_text(1, "first"));
    telegram.push_update(owner_text(2, "second"));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let connected = connect(store, settings(dir.path(), &telegram, &provider))
        .await
        .unwrap();
    let settings = settings(dir.path(), &telegram, &provider);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let started = Instant::now();
    let serve = tokio::spawn(run(connected, settings, async {
        let _ = stop_rx.await;
    }));
    let in_backoff = telegram
        .wait_until(Duration::from_secs(20), |_| provider.requests().len() >= 2)
        .await;
    assert!(in_backoff, "the second run made its first attempt");
    let delivered = telegram
        .wait_until(Duration::from_secs(20), |t| {
            sent_texts(t)
                .iter()
                .any(|s| s.contains("canary-first-reply"))
        })
        .await;
    assert!(delivered, "the first reply waited for the backoff");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(provider.requests().len(), 2, "still in the 60 s backoff");
    // Shutdown ends the backoff early; the run stays pending.
    let _ = stop_tx.send(());
    let ended = tokio::time::timeout(Duration::from_secs(10), serve).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
}

/// A write by another process (here: another connection to the same file,
/// as `thestream activate` holds) wakes the idle serve through the
/// store's data version, with no commit of its own to wake it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_request_from_another_process_is_obeyed_while_serve_is_idle() {
    env();
    let dir = tempfile::tempdir().unwrap();
    let telegram = FakeTelegram::start(FakeTelegramConfig::default())
        .await
        .unwrap();
    let provider = ScriptedProvider::start(Vec::new()).unwrap();
    let path = dir.path().join("s.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let connected = connect(store, settings(dir.path(), &telegram, &provider))
        .await
        .unwrap();
    let consumer = connected.engine.consumer();
    let settings = settings(dir.path(), &telegram, &provider);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serve = tokio::spawn(run(connected, settings, async {
        let _ = stop_rx.await;
    }));
    let other = SqliteStore::open(&path).unwrap();
    let state = |other: &SqliteStore| read_status(other, &consumer).unwrap().map(|s| s.state);
    let deadline = Instant::now() + Duration::from_secs(20);
    while state(&other) != Some(ConsumerState::Running) {
        assert!(Instant::now() < deadline, "never reported running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let serve go idle, then write the request from the other connection.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut tx = other.begin().unwrap();
    let request = ConsumerRequest::Stopped {
        activation_id: "ab".into(),
        through_seq: 0,
    };
    write_request(&mut *tx, &consumer, &request).unwrap();
    tx.commit().unwrap();
    let asked = Instant::now();
    while state(&other) != Some(ConsumerState::Stopped) {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the stop request was not noticed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(());
    let ended = tokio::time::timeout(Duration::from_secs(10), serve).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
}
