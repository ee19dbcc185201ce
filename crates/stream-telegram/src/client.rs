//! The Bot API client: one `POST` per call, the `{ok, result | error_code,
//! description, parameters}` envelope mapped to [`ApiError`], `429` answered
//! by waiting `parameters.retry_after`, `5xx`, timeouts and broken
//! connections retried with bounded exponential backoff.
//!
//! The token is part of every URL. No URL, and no error text of the HTTP
//! stack that could carry one, ever leaves this module: errors carry the
//! method name, status codes and counts.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::requests::{self, ApiRequest};
use crate::token::BotToken;
use crate::wire::{Envelope, File, MenuCommand, Message, User, WebhookInfo};

/// How a transport-level failure happened, without its text (which may
/// carry the URL, hence the token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Could not connect.
    Connect,
    /// The request could not be sent.
    Request,
    /// The connection broke while reading the answer.
    Body,
    /// Anything else.
    Other,
}

impl TransportKind {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::Request => "request",
            Self::Body => "body",
            Self::Other => "other",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Bot API call failed. Carries the method, codes and counts; never the
/// token, a URL, or message content.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Telegram answered `ok: false` with a client error (4xx other than 429).
    #[error("Telegram refused {method} with error {code}: {description}")]
    Refused {
        /// The method.
        method: &'static str,
        /// `error_code` (or the HTTP status when the body had none).
        code: i64,
        /// Telegram's `description`, token-scrubbed and shortened.
        description: String,
    },
    /// Still rate-limited after the allowed attempts, or asked to wait
    /// longer than the policy allows.
    #[error("Telegram rate-limited {method}: retry after {retry_after_secs} s")]
    RateLimited {
        /// The method.
        method: &'static str,
        /// `parameters.retry_after`.
        retry_after_secs: u64,
    },
    /// `5xx` on every attempt.
    #[error("Telegram answered {method} with HTTP {status} on all {attempts} attempts")]
    Server {
        /// The method.
        method: &'static str,
        /// The last status.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// Timed out on every attempt.
    #[error("{method} timed out on all {attempts} attempts")]
    Timeout {
        /// The method.
        method: &'static str,
        /// Attempts made.
        attempts: u32,
    },
    /// The connection failed on every attempt.
    #[error("{method} failed in transport ({kind}) on all {attempts} attempts")]
    Transport {
        /// The method.
        method: &'static str,
        /// How.
        kind: TransportKind,
        /// Attempts made.
        attempts: u32,
    },
    /// The answer was not a Bot API envelope, or its result not the expected shape.
    #[error("the answer to {method} is not a valid Bot API response")]
    Malformed {
        /// The method.
        method: &'static str,
    },
    /// The answer (or file) is larger than allowed.
    #[error("the answer to {method} exceeds {limit} bytes")]
    TooLarge {
        /// The method (`file` for downloads).
        method: &'static str,
        /// The cap.
        limit: u64,
    },
    /// `getFile` returned no path, or one that is not a plain relative path.
    #[error("the file path Telegram returned is missing or unsafe")]
    UnsafeFilePath,
    /// The configured base URL is not an http(s) URL.
    #[error("the Bot API base URL must be an http:// or https:// URL")]
    BaseUrl,
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built")]
    ClientBuild,
}

impl ApiError {
    /// Telegram's `error_code` when it refused the call.
    pub fn telegram_code(&self) -> Option<i64> {
        match self {
            Self::Refused { code, .. } => Some(*code),
            Self::RateLimited { .. } => Some(429),
            Self::Server { status, .. } => Some(i64::from(*status)),
            Self::Timeout { .. }
            | Self::Transport { .. }
            | Self::Malformed { .. }
            | Self::TooLarge { .. }
            | Self::UnsafeFilePath
            | Self::BaseUrl
            | Self::ClientBuild => None,
        }
    }

    /// A short stable code for logs and reports.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Refused { .. } => "refused",
            Self::RateLimited { .. } => "rate-limited",
            Self::Server { .. } => "server-error",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Malformed { .. } => "malformed",
            Self::TooLarge { .. } => "too-large",
            Self::UnsafeFilePath => "unsafe-file-path",
            Self::BaseUrl => "base-url",
            Self::ClientBuild => "client-build",
        }
    }
}

/// Bounded retries: how many attempts, how long to back off, and the
/// longest `retry_after` the client will sleep through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per call, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled each time.
    pub base_backoff: Duration,
    /// The longest backoff between two attempts.
    pub max_backoff: Duration,
    /// A `retry_after` above this is returned as [`ApiError::RateLimited`]
    /// instead of slept through.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.base_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Retries.
    pub retry: RetryPolicy,
    /// Per-request timeout (a long poll adds its own wait).
    pub request_timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// The largest API answer read.
    pub max_response_bytes: u64,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

/// The Bot API client. Cheap to clone.
#[derive(Clone)]
pub struct BotApi {
    http: reqwest::Client,
    base_url: String,
    token: BotToken,
    options: ClientOptions,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotApi")
            .field("base_url", &self.base_url)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// What one attempt produced.
enum Attempt {
    Done(serde_json::Value),
    Retry { why: Retry, wait: Option<Duration> },
    Fail(ApiError),
}

enum Retry {
    RateLimited(u64),
    Server(u16),
    Timeout,
    Transport(TransportKind),
}

fn transport_kind(e: &reqwest::Error) -> Retry {
    if e.is_timeout() {
        Retry::Timeout
    } else if e.is_connect() {
        Retry::Transport(TransportKind::Connect)
    } else if e.is_body() || e.is_decode() {
        Retry::Transport(TransportKind::Body)
    } else if e.is_request() {
        Retry::Transport(TransportKind::Request)
    } else {
        Retry::Transport(TransportKind::Other)
    }
}

/// Classifies a transport failure and logs it with the URL (hence the
/// token) stripped.
fn transport_failure(method: &'static str, e: reqwest::Error) -> Retry {
    let kind = transport_kind(&e);
    tracing::debug!(method, error = %e.without_url(), "bot api transport failure");
    kind
}

/// A file path from `getFile` is used in a URL: allow only plain relative paths.
fn safe_file_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 512
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
}

impl BotApi {
    /// A client for the Bot API at `base_url` (e.g. `https://api.telegram.org`,
    /// a local Bot API server, or the test fake).
    pub fn new(base_url: &str, token: BotToken, options: ClientOptions) -> Result<Self, ApiError> {
        let parsed = reqwest::Url::parse(base_url).map_err(|_| ApiError::BaseUrl)?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(ApiError::BaseUrl);
        }
        // reqwest is built without a bundled crypto provider; use ring. A
        // provider installed earlier by the process wins, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .user_agent(concat!("thestream/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|_| ApiError::ClientBuild)?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            token,
            options,
        })
    }

    /// The settings this client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    fn method_url(&self, method: &str) -> String {
        format!("{}/bot{}/{}", self.base_url, self.token.expose(), method)
    }

    fn scrub(&self, text: &str) -> String {
        let scrubbed = text.replace(self.token.expose(), "<token>");
        scrubbed
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect()
    }

    /// Sends `request`, retrying as the policy allows, and decodes the result.
    pub async fn call<T: DeserializeOwned>(&self, request: &ApiRequest) -> Result<T, ApiError> {
        let value = self.call_value(request).await?;
        serde_json::from_value(value).map_err(|_| ApiError::Malformed {
            method: request.method,
        })
    }

    async fn call_value(&self, request: &ApiRequest) -> Result<serde_json::Value, ApiError> {
        let policy = &self.options.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (why, wait) = match self.attempt(request).await {
                Attempt::Done(value) => return Ok(value),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { why, wait } => (why, wait),
            };
            let give_up = attempt >= max_attempts;
            if let Retry::RateLimited(secs) = why {
                let wait = Duration::from_secs(secs);
                if give_up || wait > policy.max_retry_after {
                    return Err(ApiError::RateLimited {
                        method: request.method,
                        retry_after_secs: secs,
                    });
                }
                tracing::info!(
                    method = request.method,
                    retry_after_secs = secs,
                    attempt,
                    "bot api rate-limited; waiting"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            if give_up {
                return Err(match why {
                    Retry::Server(status) => ApiError::Server {
                        method: request.method,
                        status,
                        attempts: attempt,
                    },
                    Retry::Timeout => ApiError::Timeout {
                        method: request.method,
                        attempts: attempt,
                    },
                    Retry::Transport(kind) => ApiError::Transport {
                        method: request.method,
                        kind,
                        attempts: attempt,
                    },
                    Retry::RateLimited(secs) => ApiError::RateLimited {
                        method: request.method,
                        retry_after_secs: secs,
                    },
                });
            }
            let backoff = wait.unwrap_or_else(|| policy.backoff(attempt));
            tracing::info!(
                method = request.method,
                attempt,
                backoff_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
                "bot api call failed transiently; retrying"
            );
            tokio::time::sleep(backoff).await;
        }
    }

    async fn attempt(&self, request: &ApiRequest) -> Attempt {
        let body = match serde_json::to_vec(&request.params) {
            Ok(body) => body,
            Err(_) => {
                return Attempt::Fail(ApiError::Malformed {
                    method: request.method,
                });
            }
        };
        let mut builder = self
            .http
            .post(self.method_url(request.method))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(timeout) = request.timeout {
            builder = builder.timeout(timeout);
        }
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Retry {
                    why: transport_failure(request.method, e),
                    wait: None,
                };
            }
        };
        let status = response.status().as_u16();
        let bytes = match read_capped(response, self.options.max_response_bytes).await {
            Ok(bytes) => bytes,
            Err(ReadError::TooLarge) => {
                return Attempt::Fail(ApiError::TooLarge {
                    method: request.method,
                    limit: self.options.max_response_bytes,
                });
            }
            Err(ReadError::Http(e)) => {
                return Attempt::Retry {
                    why: transport_failure(request.method, e),
                    wait: None,
                };
            }
        };
        let envelope: Option<Envelope> = serde_json::from_slice(&bytes).ok();
        match envelope {
            Some(env) if env.ok && (200..300).contains(&status) => match env.result {
                Some(result) => Attempt::Done(result),
                None => Attempt::Fail(ApiError::Malformed {
                    method: request.method,
                }),
            },
            Some(env) => {
                let code = env.error_code.unwrap_or(i64::from(status));
                if code == 429 || status == 429 {
                    let secs = env
                        .parameters
                        .and_then(|p| p.retry_after)
                        .unwrap_or(1)
                        .max(1);
                    Attempt::Retry {
                        why: Retry::RateLimited(secs),
                        wait: None,
                    }
                } else if status >= 500 || code >= 500 {
                    Attempt::Retry {
                        why: Retry::Server(status.max(500)),
                        wait: None,
                    }
                } else {
                    Attempt::Fail(ApiError::Refused {
                        method: request.method,
                        code,
                        description: self.scrub(env.description.as_deref().unwrap_or("")),
                    })
                }
            }
            None if status >= 500 || status == 429 => Attempt::Retry {
                why: if status == 429 {
                    Retry::RateLimited(1)
                } else {
                    Retry::Server(status)
                },
                wait: None,
            },
            None => Attempt::Fail(ApiError::Malformed {
                method: request.method,
            }),
        }
    }

    /// `getMe`.
    pub async fn get_me(&self) -> Result<User, ApiError> {
        self.call(&requests::get_me()).await
    }

    /// `getUpdates`. Each update is returned raw, so that one malformed
    /// update cannot hide the others.
    pub async fn get_updates(
        &self,
        offset: Option<i64>,
        limit: u8,
        timeout_secs: u32,
    ) -> Result<Vec<serde_json::Value>, ApiError> {
        self.call(&requests::get_updates(offset, limit, timeout_secs))
            .await
    }

    /// `setWebhook` with the secret Telegram will echo; pending updates kept.
    pub async fn set_webhook(
        &self,
        url: &str,
        secret: &crate::token::WebhookSecret,
    ) -> Result<bool, ApiError> {
        self.call(&requests::set_webhook(url, secret.expose()))
            .await
    }

    /// `deleteWebhook` with `drop_pending_updates: false`. There is no way
    /// to drop pending updates through this client.
    pub async fn delete_webhook(&self) -> Result<bool, ApiError> {
        self.call(&requests::delete_webhook()).await
    }

    /// `getWebhookInfo`.
    pub async fn get_webhook_info(&self) -> Result<WebhookInfo, ApiError> {
        self.call(&requests::get_webhook_info()).await
    }

    /// `sendMessage`, replying to `reply_to` when given.
    pub async fn send_message(
        &self,
        chat_id: i64,
        text: &str,
        reply_to: Option<i64>,
    ) -> Result<Message, ApiError> {
        self.call(&requests::send_message(chat_id, text, reply_to))
            .await
    }

    /// `getFile`.
    pub async fn get_file(&self, file_id: &str) -> Result<File, ApiError> {
        self.call(&requests::get_file(file_id)).await
    }

    /// `setMyCommands` (default scope).
    pub async fn set_my_commands(&self, commands: &[MenuCommand]) -> Result<bool, ApiError> {
        self.call(&requests::set_my_commands(commands)).await
    }

    /// `deleteMyCommands` (default scope).
    pub async fn delete_my_commands(&self) -> Result<bool, ApiError> {
        self.call(&requests::delete_my_commands()).await
    }

    /// Downloads a file `getFile` returned, refusing more than `max_bytes`.
    /// Retries like any call; a file over the cap is [`ApiError::TooLarge`].
    pub async fn download_file(
        &self,
        file_path: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ApiError> {
        const METHOD: &str = "file";
        if !safe_file_path(file_path) {
            return Err(ApiError::UnsafeFilePath);
        }
        let url = format!(
            "{}/file/bot{}/{}",
            self.base_url,
            self.token.expose(),
            file_path
        );
        let policy = &self.options.retry;
        let max_attempts = policy.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let why = match self.http.get(&url).send().await {
                Err(e) => transport_failure(METHOD, e),
                Ok(response) => {
                    let status = response.status().as_u16();
                    if status == 200 {
                        if response.content_length().is_some_and(|n| n > max_bytes) {
                            return Err(ApiError::TooLarge {
                                method: METHOD,
                                limit: max_bytes,
                            });
                        }
                        match read_capped(response, max_bytes).await {
                            Ok(bytes) => return Ok(bytes),
                            Err(ReadError::TooLarge) => {
                                return Err(ApiError::TooLarge {
                                    method: METHOD,
                                    limit: max_bytes,
                                });
                            }
                            Err(ReadError::Http(e)) => transport_failure(METHOD, e),
                        }
                    } else if status == 429 {
                        Retry::RateLimited(1)
                    } else if status >= 500 {
                        Retry::Server(status)
                    } else {
                        return Err(ApiError::Refused {
                            method: METHOD,
                            code: i64::from(status),
                            description: String::new(),
                        });
                    }
                }
            };
            if attempt >= max_attempts {
                return Err(match why {
                    Retry::Server(status) => ApiError::Server {
                        method: METHOD,
                        status,
                        attempts: attempt,
                    },
                    Retry::Timeout => ApiError::Timeout {
                        method: METHOD,
                        attempts: attempt,
                    },
                    Retry::Transport(kind) => ApiError::Transport {
                        method: METHOD,
                        kind,
                        attempts: attempt,
                    },
                    Retry::RateLimited(secs) => ApiError::RateLimited {
                        method: METHOD,
                        retry_after_secs: secs,
                    },
                });
            }
            tokio::time::sleep(policy.backoff(attempt)).await;
        }
    }
}

enum ReadError {
    TooLarge,
    Http(reqwest::Error),
}

async fn read_capped(mut response: reqwest::Response, cap: u64) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Http)? {
        if out.len() as u64 + chunk.len() as u64 > cap {
            return Err(ReadError::TooLarge);
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_must_be_plain_relative_paths() {
        assert!(safe_file_path("photos/file_0.jpg"));
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "a/./b",
            "a?b",
            "a b",
        ] {
            assert!(!safe_file_path(bad), "{bad}");
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy {
            max_attempts: 9,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(700),
            max_retry_after: Duration::from_secs(1),
        };
        let waits: Vec<_> = (1..=5).map(|a| p.backoff(a).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 400, 700, 700]);
    }

    #[test]
    fn debug_and_errors_never_show_the_token() {
        let token = BotToken::new("4242:canary-token-secret").unwrap();
        let api = BotApi::new("http://127.0.0.1:9", token, ClientOptions::default()).unwrap();
        assert!(!format!("{api:?}").contains("canary-token-secret"));
        assert_eq!(
            api.scrub("oops 4242:canary-token-secret leaked"),
            "oops <token> leaked"
        );
        assert!(matches!(
            BotApi::new(
                "ftp://x",
                BotToken::new("1:a").unwrap(),
                ClientOptions::default()
            ),
            Err(ApiError::BaseUrl)
        ));
    }
}
