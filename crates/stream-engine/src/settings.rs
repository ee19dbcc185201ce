//! What the engine needs from the operator's configuration, as plain values.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use stream_context::packet::ProviderCompat;
use stream_core::payload::ProviderApi;

/// The provider the broker talks to.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// Wire format.
    pub api: ProviderApi,
    /// Base URL.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// The NAME of the environment variable holding the API key.
    pub api_key_env: String,
    /// The OpenAI-compatible server the request is shaped for.
    pub compat: ProviderCompat,
}

/// How updates arrive.
#[derive(Debug, Clone)]
pub enum IngressSettings {
    /// Long polling with `getUpdates`.
    Polling,
    /// A webhook server on `listen` (the operator registers its public URL
    /// with Telegram; freeze and resume reuse what `getWebhookInfo` reports).
    Webhook {
        /// Where the server listens.
        listen: SocketAddr,
        /// The NAME of the environment variable holding the secret token.
        secret_env: String,
    },
}

/// Everything the engine needs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The context root holding `memory.md`.
    pub context_root: PathBuf,
    /// The largest `memory.md` a materialization may produce (also the scan cap).
    pub max_memory_bytes: u64,
    /// The data dir's `locks/` folder (the materializer's root lock): a
    /// running serve materializes memory decisions recorded elsewhere.
    pub lock_dir: PathBuf,
    /// The keys whose decisions this serve materializes (`[authority] keys`).
    pub trusted_keys: stream_proposals::authority::TrustedKeys,
    /// Bot API base URL.
    pub telegram_api_base_url: String,
    /// The NAME of the environment variable holding the bot token.
    pub bot_token_env: String,
    /// The one user whose private chat is served.
    pub owner_user_id: i64,
    /// Ingress mode.
    pub ingress: IngressSettings,
    /// The provider.
    pub provider: ProviderSettings,
    /// The conversation declaration file.
    pub declaration: PathBuf,
    /// The deterministic replies declaration file.
    pub replies_declaration: PathBuf,
    /// The `thestream-worker` binary.
    pub worker: PathBuf,
    /// Development only: accept a worker whose sandbox is not enforced.
    pub allow_unenforced_sandbox: bool,
    /// Attempts per run before a transient failure becomes final.
    pub max_attempts: u32,
    /// The first retry delay; doubles per attempt.
    pub retry_backoff: Duration,
    /// The wall-clock limit of one attempt (`[provider] timeout_secs`); the
    /// broker derives the HTTP timeout from it
    /// (`stream_broker::AttemptTimeout::of`).
    pub provider_timeout: Duration,
}
