//! Helpers: a store in a temporary folder, the loopback fake Bot API, a
//! client and ingress pointed at it, update builders, and a process-wide
//! capture of every tracing line (the `log` crate's lines included) so
//! tests can search them for canaries.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use stream_core::StoredEvent;
use stream_core::payload::MessageReceived;
use stream_store::{EventQuery, Read, SqliteStore, Store};
use stream_telegram::{
    BotApi, BotIdentity, BotToken, ClientOptions, Ingress, IngressConfig, RetryPolicy,
};
use stream_testkit::canary::Canary;
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

/// The owner's user id (and private chat id).
pub const OWNER: i64 = 777_001;
/// Someone else.
pub const STRANGER: i64 = 666_002;
/// The bot's id and username in the fake.
pub const BOT_ID: i64 = 4242;
pub const BOT_USERNAME: &str = "OurBot";

// ---------------------------------------------------------------- logs

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static INIT: OnceLock<()> = OnceLock::new();

#[derive(Clone, Copy)]
struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber (TRACE, every target) once per process.
pub fn capture_logs() {
    INIT.get_or_init(|| {
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(|| Capture)
            .try_init();
    });
}

/// Everything logged so far by any test of this process.
pub fn logs() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}

// ---------------------------------------------------------------- setup

/// A fresh token whose secret part is a canary, so a leak is detectable.
pub fn token_canary() -> (String, Canary) {
    let canary = Canary::new("token");
    (format!("{BOT_ID}:{canary}"), canary)
}

pub struct Env {
    pub fake: FakeTelegram,
    pub store: Arc<dyn Store>,
    pub store_path: PathBuf,
    pub api: BotApi,
    pub token: String,
    _dir: tempfile::TempDir,
}

/// Fast retries for tests: the fake answers in microseconds.
pub fn fast_options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            max_attempts: 4,
            base_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(5),
        },
        request_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        max_response_bytes: 1024 * 1024,
    }
}

impl Env {
    pub async fn start() -> Self {
        Self::start_with_token(&format!("{BOT_ID}:test_token_{}", std::process::id())).await
    }

    pub async fn start_with_token(token: &str) -> Self {
        capture_logs();
        let fake = FakeTelegram::start(FakeTelegramConfig {
            token: token.to_owned(),
            bot_id: BOT_ID,
            username: BOT_USERNAME.to_owned(),
            ..FakeTelegramConfig::default()
        })
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store_path = dir.path().join("store.db");
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&store_path).unwrap());
        let api = BotApi::new(
            &fake.base_url(),
            BotToken::new(token).unwrap(),
            fast_options(),
        )
        .unwrap();
        Self {
            fake,
            store,
            store_path,
            api,
            token: token.to_owned(),
            _dir: dir,
        }
    }

    pub async fn ingress(&self) -> Arc<Ingress> {
        self.ingress_with(IngressConfig::for_owner(OWNER)).await
    }

    pub async fn ingress_with(&self, config: IngressConfig) -> Arc<Ingress> {
        Arc::new(
            Ingress::connect(Arc::clone(&self.store), self.api.clone(), config)
                .await
                .unwrap(),
        )
    }

    pub fn messages(&self) -> Vec<(StoredEvent, MessageReceived)> {
        messages_in(&*self.store)
    }
}

/// The identity the fake's `getMe` gives.
pub fn bot() -> BotIdentity {
    BotIdentity {
        id: BOT_ID,
        username: BOT_USERNAME.to_owned(),
    }
}

pub fn messages_in(store: &dyn Read) -> Vec<(StoredEvent, MessageReceived)> {
    store
        .events(&EventQuery::of_type("stream.telegram.message.received"))
        .unwrap()
        .into_iter()
        .map(|e| {
            let m = e.decode::<MessageReceived>().unwrap();
            (e, m)
        })
        .collect()
}

pub fn open_store(path: &Path) -> SqliteStore {
    SqliteStore::open(path).unwrap()
}

// ---------------------------------------------------------------- updates

/// A `message` update (no `update_id`: the fake assigns one).
pub fn message_update(message: Value) -> Value {
    json!({ "message": message })
}

/// A private text message from `from` in their own chat.
pub fn text_from(from: i64, text: &str) -> Value {
    json!({
        "message_id": 10,
        "from": {"id": from, "is_bot": false, "first_name": "Owner"},
        "chat": {"id": from, "type": "private", "first_name": "Owner"},
        "date": 1_790_000_100,
        "text": text,
    })
}

/// An owner text message update.
pub fn owner_text(text: &str) -> Value {
    message_update(text_from(OWNER, text))
}

/// `text` with one `bot_command` entity at UTF-16 `offset` of `length`.
pub fn owner_command(text: &str, offset: usize, length: usize) -> Value {
    let mut m = text_from(OWNER, text);
    m["entities"] = json!([{"type": "bot_command", "offset": offset, "length": length}]);
    message_update(m)
}

/// The UTF-16 length of `s`.
pub fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

pub use stream_testkit::bin::KillOnDrop;
