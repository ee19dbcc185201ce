//! A scripted LLM provider: a real HTTP server on 127.0.0.1 speaking the
//! OpenAI Chat Completions (`POST {base}/chat/completions`, base ending in
//! `/v1`) and Anthropic Messages (`POST {base}/v1/messages`) shapes.
//!
//! Each request takes the next [`Reply`] of the script (text parts, thinking,
//! tool calls with JSON or raw invalid arguments, HTTP error statuses,
//! delays, raw bodies, a cut at the token limit) and is recorded with its path, headers and body, so a
//! test can assert exactly one request per run and that the credential was
//! added by the parent. When the script is exhausted the server answers 500.
//!
//! The server runs on its own thread and Tokio runtime, so sync and async
//! tests use it alike; dropping it stops the server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use tokio::sync::oneshot;

/// Arguments of a scripted tool call.
#[derive(Debug, Clone)]
pub enum ScriptedArgs {
    /// JSON arguments (serialized to a string for OpenAI, an object for Anthropic).
    Json(Value),
    /// A raw argument string sent verbatim (OpenAI `arguments`; for Anthropic
    /// the `input` becomes this string, which no object schema accepts).
    Raw(String),
}

/// One tool call of a scripted completion.
#[derive(Debug, Clone)]
pub struct ScriptedCall {
    /// Provider call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments.
    pub arguments: ScriptedArgs,
}

impl ScriptedCall {
    /// A call with JSON arguments.
    pub fn json(id: &str, name: &str, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: ScriptedArgs::Json(arguments),
        }
    }

    /// A call with a raw (possibly invalid) argument string.
    pub fn raw(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: ScriptedArgs::Raw(arguments.into()),
        }
    }
}

/// A completion rendered in the shape of the endpoint that was called.
#[derive(Debug, Clone, Default)]
pub struct ScriptedCompletion {
    /// Visible text parts (OpenAI: one string when there is one, text parts
    /// otherwise; Anthropic: one `text` block each).
    pub texts: Vec<String>,
    /// Thinking text (OpenAI `reasoning_content`, Anthropic `thinking` block).
    pub thinking: Option<String>,
    /// Tool calls.
    pub calls: Vec<ScriptedCall>,
    /// Cut short by the token limit: `finish_reason: "length"` (OpenAI),
    /// `stop_reason: "max_tokens"` (Anthropic).
    pub cut: bool,
}

impl ScriptedCompletion {
    /// A text-only completion.
    pub fn text(text: &str) -> Self {
        Self {
            texts: vec![text.into()],
            ..Self::default()
        }
    }

    /// A completion with only tool calls.
    pub fn calls(calls: Vec<ScriptedCall>) -> Self {
        Self {
            calls,
            ..Self::default()
        }
    }

    /// The same completion, cut short by the token limit.
    pub fn cut(mut self) -> Self {
        self.cut = true;
        self
    }
}

/// What the server answers one request with.
#[derive(Debug, Clone)]
pub enum ReplyBody {
    /// A completion in the called endpoint's shape.
    Completion(ScriptedCompletion),
    /// A body sent verbatim.
    Raw(String),
    /// The provider's error shape with this error type.
    Error(String),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Wait this long before answering.
    pub delay: Duration,
    /// The body.
    pub body: ReplyBody,
}

impl Reply {
    /// A 200 completion.
    pub fn completion(completion: ScriptedCompletion) -> Self {
        Self {
            status: 200,
            delay: Duration::ZERO,
            body: ReplyBody::Completion(completion),
        }
    }

    /// A provider error of `status` in the endpoint's error shape.
    pub fn error(status: u16, error_type: &str) -> Self {
        Self {
            status,
            delay: Duration::ZERO,
            body: ReplyBody::Error(error_type.into()),
        }
    }

    /// A verbatim body with `status`.
    pub fn raw(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            delay: Duration::ZERO,
            body: ReplyBody::Raw(body.into()),
        }
    }

    /// The same reply after `delay`.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The request path (`/v1/chat/completions`, `/v1/messages`).
    pub path: String,
    /// Headers, names lowercase, values lossily decoded.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The value of header `name` (case-insensitive), if present once or more.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    listings: Mutex<Vec<RecordedRequest>>,
    listing_delay: Mutex<Duration>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running scripted provider.
#[derive(Debug)]
pub struct ScriptedProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Shared")
    }
}

impl ScriptedProvider {
    /// Starts a server on 127.0.0.1 with an ephemeral port and `script`.
    pub fn start(script: Vec<Reply>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        lock(&shared.script).extend(script);
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/messages", post(handle))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name("scripted-provider".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stop_rx.await;
                        })
                        .await;
                });
            })?;
        Ok(Self {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure for `api`: `http://127.0.0.1:PORT/v1` for
    /// OpenAI, `http://127.0.0.1:PORT` for Anthropic.
    pub fn base_url(&self, api: ProviderApi) -> String {
        match api {
            ProviderApi::OpenaiChat => format!("http://{}/v1", self.addr),
            ProviderApi::AnthropicMessages => format!("http://{}", self.addr),
        }
    }

    /// Appends replies to the script.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.script).push_back(reply);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// Answers each `GET /v1/models` from now on after `delay` (a slow
    /// server, for `doctor`).
    pub fn delay_model_listings(&self, delay: Duration) {
        *lock(&self.shared.listing_delay) = delay;
    }

    /// Every `GET /v1/models` received so far (kept apart from
    /// [`Self::requests`]: listing models spends no tokens and is no run).
    pub fn model_listings(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.listings).clone()
    }
}

impl Drop for ScriptedProvider {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// `GET /v1/models`: one model, in the OpenAI list shape (Anthropic's
/// `data[].id` is read the same way); recorded, takes nothing from the script.
async fn models(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap) -> Response {
    lock(&shared.listings).push(RecordedRequest {
        path: uri.path().to_owned(),
        headers: header_pairs(&headers),
        body: Vec::new(),
    });
    let delay = *lock(&shared.listing_delay);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let body = json!({"object": "list", "data": [{"id": "loopback-model", "object": "model"}]});
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let request_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = {
        let mut requests = lock(&shared.requests);
        requests.push(RecordedRequest {
            path: path.clone(),
            headers: header_pairs(&headers),
            body: body.to_vec(),
        });
        requests.len()
    };
    let api = if path.ends_with("/chat/completions") {
        ProviderApi::OpenaiChat
    } else {
        ProviderApi::AnthropicMessages
    };
    let reply = lock(&shared.script).pop_front();
    let Some(reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            render_error(api, "script_exhausted"),
        )
            .into_response();
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let model = request_json.get("model").cloned().unwrap_or(Value::Null);
    let text = match reply.body {
        ReplyBody::Raw(raw) => raw,
        ReplyBody::Error(kind) => render_error(api, &kind),
        ReplyBody::Completion(c) => match api {
            ProviderApi::OpenaiChat => render_openai(&c, &model, n),
            ProviderApi::AnthropicMessages => render_anthropic(&c, &model, n),
        },
    };
    (status, [("content-type", "application/json")], text).into_response()
}

fn render_error(api: ProviderApi, kind: &str) -> String {
    match api {
        ProviderApi::OpenaiChat => json!({
            "error": {"message": "scripted error", "type": kind, "param": null, "code": null}
        }),
        ProviderApi::AnthropicMessages => json!({
            "type": "error", "error": {"type": kind, "message": "scripted error"}
        }),
    }
    .to_string()
}

fn render_openai(c: &ScriptedCompletion, model: &Value, n: usize) -> String {
    let content = match c.texts.as_slice() {
        [] => Value::Null,
        [one] => json!(one),
        many => Value::Array(
            many.iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect(),
        ),
    };
    let mut message = json!({"role": "assistant", "content": content, "refusal": null});
    if let Some(thinking) = &c.thinking {
        message["reasoning_content"] = json!(thinking);
    }
    if !c.calls.is_empty() {
        message["tool_calls"] = Value::Array(
            c.calls
                .iter()
                .map(|call| {
                    let arguments = match &call.arguments {
                        ScriptedArgs::Json(v) => v.to_string(),
                        ScriptedArgs::Raw(raw) => raw.clone(),
                    };
                    json!({"id": call.id, "type": "function",
                           "function": {"name": call.name, "arguments": arguments}})
                })
                .collect(),
        );
    }
    let finish = match (c.cut, c.calls.is_empty()) {
        (true, _) => "length",
        (false, true) => "stop",
        (false, false) => "tool_calls",
    };
    json!({
        "id": format!("chatcmpl-scripted-{n}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    })
    .to_string()
}

fn render_anthropic(c: &ScriptedCompletion, model: &Value, n: usize) -> String {
    let mut content = Vec::new();
    if let Some(thinking) = &c.thinking {
        content
            .push(json!({"type": "thinking", "thinking": thinking, "signature": "c2lnbmF0dXJl"}));
    }
    for text in &c.texts {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in &c.calls {
        let input = match &call.arguments {
            ScriptedArgs::Json(v) => v.clone(),
            ScriptedArgs::Raw(raw) => json!(raw),
        };
        content.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    let stop = match (c.cut, c.calls.is_empty()) {
        (true, _) => "max_tokens",
        (false, true) => "end_turn",
        (false, false) => "tool_use",
    };
    json!({
        "id": format!("msg_scripted_{n}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    })
    .to_string()
}
