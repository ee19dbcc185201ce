//! A loopback fake of the Telegram Bot API: a real HTTP server on
//! `127.0.0.1` that follows the public Bot API for the methods thestream
//! uses (`/bot<token>/<method>` and `/file/bot<token>/<path>`).
//!
//! It queues updates for `getUpdates` (with Telegram's offset confirmation
//! and long-poll timeout) or pushes them to a webhook with the secret
//! header, records every call (method, parsed parameters, time, status),
//! serves files for `getFile`, and injects faults: `429` with
//! `retry_after`, `5xx`, slow answers, dropped connections, scripted
//! results.
//!
//! Use [`FakeTelegram::start`] from Rust tests, or the `stream-fake-telegram`
//! binary, which exposes the same controls under `/_fake/`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The largest file the Bot API lets a bot download (`getFile`).
const MAX_BOT_DOWNLOAD_BYTES: usize = 20 * 1024 * 1024;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

mod wire;

use wire::{dropped_connection, fail, flag, int, ok, parse_params, rate_limited};

/// Telegram's bound on a message's text, in UTF-16 code units.
pub const MAX_MESSAGE_UTF16: usize = 4096;

/// Who the fake bot is.
#[derive(Debug, Clone)]
pub struct FakeTelegramConfig {
    /// The token accepted in URLs; any other gets `401`.
    pub token: String,
    /// The bot's user id (`getMe`).
    pub bot_id: i64,
    /// The bot's username (`getMe`).
    pub username: String,
    /// The first update id assigned to pushed updates.
    pub first_update_id: i64,
    /// The `date` of messages `sendMessage` returns.
    pub date: i64,
    /// The wait before a failed webhook push is tried again.
    pub webhook_retry: Duration,
}

impl Default for FakeTelegramConfig {
    fn default() -> Self {
        Self {
            token: "4242:fake-token".to_owned(),
            bot_id: 4242,
            username: "thestream_test_bot".to_owned(),
            first_update_id: 1000,
            date: 1_790_000_000,
            webhook_retry: Duration::from_millis(100),
        }
    }
}

/// A scripted misbehaviour, applied to the next call of one method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fault {
    /// `429 Too Many Requests` with `parameters.retry_after`.
    RateLimit {
        /// Seconds.
        retry_after: u64,
    },
    /// A server error with this status.
    ServerError {
        /// e.g. 502.
        status: u16,
    },
    /// Answer normally, after this many milliseconds.
    Delay {
        /// Milliseconds.
        millis: u64,
    },
    /// Break the connection instead of answering.
    DropConnection,
    /// `ok: true` with this `result`, instead of the normal one.
    Respond {
        /// The result.
        result: Value,
    },
    /// `ok: false` with this code and description.
    Refuse {
        /// `error_code` and HTTP status.
        code: u16,
        /// `description`.
        description: String,
    },
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedCall {
    /// The method (`file` for downloads).
    pub method: String,
    /// Parameters from the query string and the body (JSON or form).
    pub params: Value,
    /// When it arrived, relative to the fake's start.
    #[serde(rename = "atMillis")]
    pub at_millis: u64,
    /// The fault applied, if any.
    pub fault: Option<Fault>,
    /// When it arrived, to the microsecond (for benches).
    #[serde(skip)]
    pub arrived: Instant,
}

impl RecordedCall {
    /// When it arrived, relative to the fake's start.
    pub fn at(&self) -> Duration {
        Duration::from_millis(self.at_millis)
    }
}

/// One webhook push attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookPush {
    /// The update pushed.
    pub update_id: Option<i64>,
    /// The answer's status; `None` when the connection failed.
    pub status: Option<u16>,
}

#[derive(Debug, Clone)]
struct StoredFile {
    file_unique_id: String,
    path: String,
    bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    queue: VecDeque<Value>,
    next_update_id: i64,
    next_message_id: i64,
    calls: Vec<RecordedCall>,
    faults: HashMap<String, VecDeque<Fault>>,
    webhook: Option<(String, Option<String>)>,
    pushes: Vec<WebhookPush>,
    files: BTreeMap<String, StoredFile>,
    commands: Value,
}

struct Shared {
    config: FakeTelegramConfig,
    started: Instant,
    inner: Mutex<Inner>,
    updates: Notify,
    /// Signalled after every recorded call.
    recorded: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running fake. Dropping it stops the server.
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for FakeTelegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeTelegram")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl FakeTelegram {
    /// Starts the fake on `127.0.0.1` with an ephemeral port.
    pub async fn start(config: FakeTelegramConfig) -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0", config).await
    }

    /// Starts the fake on `listen`.
    pub async fn start_on(listen: &str, config: FakeTelegramConfig) -> std::io::Result<Self> {
        // reqwest is built without a bundled crypto provider (the webhook
        // pusher only speaks plain HTTP, but building a client needs one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_update_id: config.first_update_id,
                next_message_id: 1,
                commands: json!([]),
                ..Inner::default()
            }),
            config,
            started: Instant::now(),
            updates: Notify::new(),
            recorded: Condvar::new(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let router = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (stop_pusher_tx, stop_pusher_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            let _ = stop_pusher_tx.send(());
        });
        tokio::spawn(push_webhooks(Arc::clone(&shared), stop_pusher_rx));
        Ok(Self {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:<port>`: the Bot API base URL to configure.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bot's config.
    pub fn config(&self) -> &FakeTelegramConfig {
        &self.shared.config
    }

    /// Queues an update. When it has no `update_id`, the next one is
    /// assigned. Returns its id.
    pub fn push_update(&self, update: Value) -> i64 {
        let id = push_update(&self.shared, update);
        self.shared.updates.notify_waiters();
        id
    }

    /// Queues a value as it is, even when it is not a valid update.
    pub fn push_raw(&self, update: Value) {
        self.shared.lock().queue.push_back(update);
        self.shared.updates.notify_waiters();
    }

    /// Updates queued and not yet confirmed (polling) or accepted (webhook).
    pub fn pending_updates(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Applies `fault` to the next call of `method` (`file` for downloads).
    /// Several faults for one method apply in order, one per call.
    pub fn inject(&self, method: &str, fault: Fault) {
        self.shared
            .lock()
            .faults
            .entry(method.to_owned())
            .or_default()
            .push_back(fault);
    }

    /// Serves `bytes` as a file; returns the path `getFile` will give.
    pub fn add_file(&self, file_id: &str, file_unique_id: &str, bytes: Vec<u8>) -> String {
        let mut inner = self.shared.lock();
        let path = format!("photos/file_{}.jpg", inner.files.len());
        inner.files.insert(
            file_id.to_owned(),
            StoredFile {
                file_unique_id: file_unique_id.to_owned(),
                path: path.clone(),
                bytes,
            },
        );
        path
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.shared.lock().calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<RecordedCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// How many calls of `method` arrived, without copying them.
    pub fn count_of(&self, method: &str) -> usize {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// Blocks the calling thread until the call of `method` at `index` (from
    /// 0, in arrival order) has arrived, or `timeout` passed; returns when it
    /// arrived. Woken by each recorded call, not by polling: a bench waiting
    /// here takes no CPU and no lock from the system it measures.
    pub fn wait_for_call(&self, method: &str, index: usize, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        let mut inner = self.shared.lock();
        loop {
            let found = inner.calls.iter().filter(|c| c.method == method).nth(index);
            if let Some(call) = found {
                return Some(call.arrived);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            inner = self
                .shared
                .recorded
                .wait_timeout(inner, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The current webhook URL, if one is set.
    pub fn webhook_url(&self) -> Option<String> {
        self.shared
            .lock()
            .webhook
            .as_ref()
            .map(|(url, _)| url.clone())
    }

    /// Every webhook push attempt.
    pub fn webhook_pushes(&self) -> Vec<WebhookPush> {
        self.shared.lock().pushes.clone()
    }

    /// The menu last set with `setMyCommands`.
    pub fn commands(&self) -> Value {
        self.shared.lock().commands.clone()
    }

    /// Waits until `pred` holds (checked every 10 ms) or `timeout` passes;
    /// returns whether it held.
    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&Self) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn push_update(shared: &Shared, mut update: Value) -> i64 {
    let mut inner = shared.lock();
    let id = match update.get("update_id").and_then(Value::as_i64) {
        Some(id) => id,
        None => {
            let id = inner.next_update_id;
            if let Some(map) = update.as_object_mut() {
                map.insert("update_id".into(), json!(id));
            }
            id
        }
    };
    inner.next_update_id = inner.next_update_id.max(id + 1);
    inner.queue.push_back(update);
    id
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    if let Some(rest) = path.strip_prefix("/_fake/") {
        return control(&shared, &method, rest, &uri, &headers, &body);
    }
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let Some((token, file_path)) = rest.split_once('/') else {
            return fail(404, "Not Found");
        };
        return download(&shared, token, file_path).await;
    }
    let Some(rest) = path.strip_prefix("/bot") else {
        return fail(404, "Not Found");
    };
    let Some((token, api_method)) = rest.split_once('/') else {
        return fail(404, "Not Found");
    };
    if token != shared.config.token {
        return fail(401, "Unauthorized");
    }
    let params = parse_params(&uri, &headers, &body);
    let fault = record(&shared, api_method, params.clone());
    match fault {
        Some(Fault::RateLimit { retry_after }) => return rate_limited(retry_after),
        Some(Fault::ServerError { status }) => return fail(status, "Internal Server Error"),
        Some(Fault::DropConnection) => return dropped_connection(),
        Some(Fault::Respond { result }) => return ok(result),
        Some(Fault::Refuse { code, description }) => return fail(code, &description),
        Some(Fault::Delay { millis }) => tokio::time::sleep(Duration::from_millis(millis)).await,
        None => {}
    }
    api(&shared, api_method, &params).await
}

/// Records a call and takes the next fault of its method.
fn record(shared: &Shared, method: &str, params: Value) -> Option<Fault> {
    let mut inner = shared.lock();
    let fault = inner.faults.get_mut(method).and_then(VecDeque::pop_front);
    let arrived = Instant::now();
    let at_millis = u64::try_from((arrived - shared.started).as_millis()).unwrap_or(u64::MAX);
    inner.calls.push(RecordedCall {
        method: method.to_owned(),
        params,
        at_millis,
        fault: fault.clone(),
        arrived,
    });
    drop(inner);
    shared.recorded.notify_all();
    fault
}

async fn api(shared: &Arc<Shared>, method: &str, params: &Value) -> Response {
    let config = &shared.config;
    match method {
        "getMe" => ok(json!({
            "id": config.bot_id,
            "is_bot": true,
            "first_name": "Fake Bot",
            "username": config.username,
            "can_join_groups": true,
            "can_read_all_group_messages": false,
            "supports_inline_queries": false,
        })),
        "getUpdates" => get_updates(shared, params).await,
        "setWebhook" => {
            let Some(url) = params.get("url").and_then(Value::as_str) else {
                return fail(400, "Bad Request: bad webhook: URL is missing");
            };
            let secret = params
                .get("secret_token")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let mut inner = shared.lock();
            if flag(params, "drop_pending_updates") {
                inner.queue.clear();
            }
            inner.webhook = if url.is_empty() {
                None
            } else {
                Some((url.to_owned(), secret))
            };
            drop(inner);
            shared.updates.notify_waiters();
            ok(json!(true))
        }
        "deleteWebhook" => {
            let mut inner = shared.lock();
            if flag(params, "drop_pending_updates") {
                inner.queue.clear();
            }
            inner.webhook = None;
            ok(json!(true))
        }
        "getWebhookInfo" => {
            let inner = shared.lock();
            let url = inner
                .webhook
                .as_ref()
                .map(|(u, _)| u.clone())
                .unwrap_or_default();
            ok(json!({
                "url": url,
                "has_custom_certificate": false,
                "pending_update_count": inner.queue.len(),
            }))
        }
        "sendMessage" => {
            let Some(chat_id) = int(params, "chat_id") else {
                return fail(400, "Bad Request: chat_id is empty");
            };
            let text = params.get("text").and_then(Value::as_str).unwrap_or("");
            // Telegram trims the text and counts its length in UTF-16 code units.
            if text.trim().is_empty() {
                return fail(400, "Bad Request: message text is empty");
            }
            if text.trim().encode_utf16().count() > MAX_MESSAGE_UTF16 {
                return fail(400, "Bad Request: message is too long");
            }
            let mut inner = shared.lock();
            let message_id = inner.next_message_id;
            inner.next_message_id += 1;
            ok(json!({
                "message_id": message_id,
                "from": {"id": config.bot_id, "is_bot": true, "first_name": "Fake Bot", "username": config.username},
                "chat": {"id": chat_id, "type": "private"},
                "date": config.date,
                "text": text,
            }))
        }
        "getFile" => {
            let file_id = params.get("file_id").and_then(Value::as_str).unwrap_or("");
            let inner = shared.lock();
            match inner.files.get(file_id) {
                // As the Bot API: a bot downloads files up to 20 MB only.
                Some(file) if file.bytes.len() > MAX_BOT_DOWNLOAD_BYTES => {
                    fail(400, "Bad Request: file is too big")
                }
                Some(file) => ok(json!({
                    "file_id": file_id,
                    "file_unique_id": file.file_unique_id,
                    "file_size": file.bytes.len(),
                    "file_path": file.path,
                })),
                None => fail(400, "Bad Request: invalid file_id"),
            }
        }
        "setMyCommands" => {
            let Some(commands) = params.get("commands").filter(|c| c.is_array()) else {
                return fail(400, "Bad Request: commands must be an array");
            };
            shared.lock().commands = commands.clone();
            ok(json!(true))
        }
        "getMyCommands" => ok(shared.lock().commands.clone()),
        "deleteMyCommands" => {
            shared.lock().commands = json!([]);
            ok(json!(true))
        }
        _ => fail(404, "Not Found"),
    }
}

async fn get_updates(shared: &Arc<Shared>, params: &Value) -> Response {
    if shared.lock().webhook.is_some() {
        return fail(
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
        );
    }
    let offset = int(params, "offset");
    let limit = int(params, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = int(params, "timeout").unwrap_or(0).max(0) as u64;
    let deadline = Instant::now() + Duration::from_secs(timeout);
    loop {
        let notified = shared.updates.notified();
        {
            let mut inner = shared.lock();
            if let Some(offset) = offset {
                // Calling with an offset confirms every update below it (and
                // anything queued without an id, which Telegram never sends).
                inner.queue.retain(|u| {
                    u.get("update_id")
                        .and_then(Value::as_i64)
                        .is_some_and(|id| id >= offset)
                });
            }
            if !inner.queue.is_empty() {
                let batch: Vec<Value> = inner.queue.iter().take(limit).cloned().collect();
                return ok(Value::Array(batch));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return ok(json!([]));
        }
        let _ = tokio::time::timeout(deadline - now, notified).await;
    }
}

async fn download(shared: &Arc<Shared>, token: &str, file_path: &str) -> Response {
    if token != shared.config.token {
        return fail(401, "Unauthorized");
    }
    let fault = record(shared, "file", json!({"file_path": file_path}));
    match fault {
        Some(Fault::RateLimit { retry_after }) => return rate_limited(retry_after),
        Some(Fault::ServerError { status }) => return fail(status, "Internal Server Error"),
        Some(Fault::DropConnection) => return dropped_connection(),
        Some(Fault::Refuse { code, description }) => return fail(code, &description),
        Some(Fault::Delay { millis }) => tokio::time::sleep(Duration::from_millis(millis)).await,
        Some(Fault::Respond { .. }) | None => {}
    }
    let bytes = shared
        .lock()
        .files
        .values()
        .find(|f| f.path == file_path)
        .map(|f| f.bytes.clone());
    match bytes {
        Some(bytes) => (StatusCode::OK, bytes).into_response(),
        None => fail(404, "Not Found"),
    }
}

/// Pushes queued updates to the webhook, one at a time, in order; an
/// update leaves the queue only when the webhook answers `2xx`.
async fn push_webhooks(shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let Ok(client) = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    else {
        return;
    };
    loop {
        let next = {
            let inner = shared.lock();
            match (&inner.webhook, inner.queue.front()) {
                (Some((url, secret)), Some(update)) => {
                    Some((url.clone(), secret.clone(), update.clone()))
                }
                _ => None,
            }
        };
        let Some((url, secret, update)) = next else {
            tokio::select! {
                _ = &mut stop => return,
                () = shared.updates.notified() => continue,
                () = tokio::time::sleep(Duration::from_millis(50)) => continue,
            }
        };
        let update_id = update.get("update_id").and_then(Value::as_i64);
        let mut request = client
            .post(&url)
            .header(header::CONTENT_TYPE, "application/json")
            .body(update.to_string());
        if let Some(secret) = &secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        let status = tokio::select! {
            _ = &mut stop => return,
            r = request.send() => r.ok().map(|r| r.status().as_u16()),
        };
        let accepted = status.is_some_and(|s| (200..300).contains(&s));
        {
            let mut inner = shared.lock();
            inner.pushes.push(WebhookPush { update_id, status });
            let still_current = inner.webhook.as_ref().is_some_and(|(u, _)| *u == url);
            if accepted
                && still_current
                && inner
                    .queue
                    .front()
                    .and_then(|u| u.get("update_id"))
                    .and_then(Value::as_i64)
                    == update_id
            {
                inner.queue.pop_front();
            }
        }
        if !accepted {
            tokio::select! {
                _ = &mut stop => return,
                () = tokio::time::sleep(shared.config.webhook_retry) => {}
            }
        }
    }
}

/// The `/_fake/` controls, for the binary: `POST updates` (an update, JSON),
/// `GET calls`, `POST faults` (`{"method": …, "fault": {…}}`),
/// `POST files?file_id=…&file_unique_id=…` (raw bytes), `GET pushes`,
/// `GET commands`.
fn control(
    shared: &Arc<Shared>,
    method: &Method,
    rest: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    match (method.as_str(), rest) {
        ("POST", "updates") => match serde_json::from_slice::<Value>(body) {
            Ok(update) => {
                let id = push_update(shared, update);
                shared.updates.notify_waiters();
                ok(json!({"update_id": id}))
            }
            Err(_) => fail(400, "update is not JSON"),
        },
        ("GET", "calls") => ok(json!(shared.lock().calls)),
        ("GET", "pushes") => ok(json!(shared.lock().pushes)),
        ("GET", "commands") => ok(shared.lock().commands.clone()),
        ("POST", "faults") => {
            #[derive(Deserialize)]
            struct Injection {
                method: String,
                fault: Fault,
            }
            match serde_json::from_slice::<Injection>(body) {
                Ok(i) => {
                    shared
                        .lock()
                        .faults
                        .entry(i.method)
                        .or_default()
                        .push_back(i.fault);
                    ok(json!(true))
                }
                Err(_) => fail(400, "fault is not valid"),
            }
        }
        ("POST", "files") => {
            let params = parse_params(uri, headers, &[]);
            let (Some(file_id), Some(unique)) = (
                params.get("file_id").and_then(Value::as_str),
                params.get("file_unique_id").and_then(Value::as_str),
            ) else {
                return fail(400, "file_id and file_unique_id are required");
            };
            let mut inner = shared.lock();
            let path = format!("photos/file_{}.jpg", inner.files.len());
            inner.files.insert(
                file_id.to_owned(),
                StoredFile {
                    file_unique_id: unique.to_owned(),
                    path: path.clone(),
                    bytes: body.to_vec(),
                },
            );
            ok(json!({"file_path": path}))
        }
        _ => fail(404, "Not Found"),
    }
}
