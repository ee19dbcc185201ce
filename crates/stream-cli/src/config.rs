//! The TOML configuration of docs/design.md §19.
//!
//! Unknown keys and wrong types are errors that name the key; relative paths
//! resolve against the folder of the config file. The file holds the *names*
//! of environment variables with secrets, never secrets.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use stream_core::payload::{KeyId, ProviderApi};
use stream_engine::ProviderCompat;
use stream_proposals::authority::TrustedKeys;

/// Where the config was looked for and why it failed. Exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML was malformed, had an unknown key or a wrong type.
    #[error("invalid config {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key and its line.
        message: String,
    },
    /// A command that needs the context root, with a review-only config.
    #[error(
        "{what} needs the context root, and this config has no [context] section (review-only)"
    )]
    ReviewOnly {
        /// The command.
        what: String,
    },
}

/// Telegram ingress mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    /// Long polling with `getUpdates`.
    Polling,
    /// An HTTPS webhook Telegram pushes to.
    Webhook,
}

/// `[context]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The context root holding `memory.md`.
    #[serde(default = "default_context_root")]
    pub root: PathBuf,
    /// The largest `memory.md` a materialization may produce.
    #[serde(default = "default_max_memory_bytes")]
    pub max_memory_bytes: u64,
}

/// Which store backend holds the events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// One SQLite file in the data dir (the default).
    #[default]
    Sqlite,
    /// A PostgreSQL database, its URL in the environment.
    Postgres,
}

/// `[store]` (optional).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The backend.
    #[serde(default)]
    pub backend: StoreBackend,
    /// With `postgres`: the NAME of the environment variable holding the
    /// database URL (which holds a password: never in this file, never
    /// logged).
    #[serde(default = "default_url_env")]
    pub url_env: String,
}

/// `[telegram]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// Bot API base URL.
    #[serde(default = "default_telegram_url")]
    pub api_base_url: String,
    /// Name of the environment variable holding the bot token.
    #[serde(default = "default_bot_token_env")]
    pub bot_token_env: String,
    /// The one user whose private chat is served.
    #[serde(default)]
    pub owner_user_id: i64,
    /// Ingress mode.
    #[serde(default = "default_mode")]
    pub mode: TelegramMode,
    /// Where the webhook server listens.
    #[serde(default = "default_webhook_listen")]
    pub webhook_listen: String,
    /// Name of the environment variable holding the webhook secret.
    #[serde(default = "default_webhook_secret_env")]
    pub webhook_secret_env: String,
}

/// `[provider]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// `openai-chat` or `anthropic-messages`; any other name is refused
    /// while the file is read, naming the key.
    #[serde(default = "default_api")]
    pub api: ProviderApi,
    /// Provider base URL.
    #[serde(default = "default_provider_url")]
    pub base_url: String,
    /// Model name.
    #[serde(default = "default_model")]
    pub model: String,
    /// Name of the environment variable holding the API key.
    #[serde(default = "default_api_key_env")]
    pub api_key_env: String,
    /// The OpenAI-compatible server the request is shaped for: `openai`
    /// (default), `ollama`, `llama-cpp` or `vllm` (`docs/providers.md`).
    #[serde(default)]
    pub compat: ProviderCompat,
    /// The wall-clock limit of one provider attempt, for slow local models
    /// (`docs/providers.md` says how to size it).
    #[serde(default)]
    pub timeout_secs: TimeoutSecs,
}

/// `[provider] timeout_secs`: 1 to 3,600 seconds, 120 by default; anything
/// else is refused while the file is read, naming the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "i64")]
pub struct TimeoutSecs(u32);

impl TimeoutSecs {
    /// The bounds, in seconds.
    pub const RANGE: std::ops::RangeInclusive<u32> = 1..=3600;

    /// The limit as a duration.
    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.0))
    }

    /// The limit in seconds.
    pub fn secs(self) -> u32 {
        self.0
    }
}

impl Default for TimeoutSecs {
    fn default() -> Self {
        Self(120)
    }
}

impl TryFrom<i64> for TimeoutSecs {
    type Error = String;

    fn try_from(secs: i64) -> Result<Self, String> {
        match u32::try_from(secs) {
            Ok(secs) if Self::RANGE.contains(&secs) => Ok(Self(secs)),
            Ok(_) | Err(_) => Err(format!(
                "provider.timeout_secs must be {} to {} (seconds), not {secs}",
                Self::RANGE.start(),
                Self::RANGE.end()
            )),
        }
    }
}

/// `[agent]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The declaration `serve` installs on a fresh store.
    #[serde(default = "default_declaration")]
    pub declaration: PathBuf,
    /// The deterministic replies declaration; defaults to
    /// `telegram-replies.v2.yaml` beside `declaration`.
    #[serde(default)]
    pub replies: Option<PathBuf>,
}

/// `[authority]`: the keys whose decisions this config applies.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityConfig {
    /// `ed25519:BASE64` public keys (`thestream key init` prints one).
    #[serde(default)]
    pub keys: Vec<KeyId>,
}

/// `[sandbox]` (optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// The `thestream-worker` binary; defaults to the one beside `thestream`.
    #[serde(default)]
    pub worker: Option<PathBuf>,
    /// Development only: accept a worker whose Landlock or seccomp is not
    /// enforced. Off by default; logged loudly at every run when on.
    #[serde(default)]
    pub allow_unenforced: bool,
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Store, blobs and locks.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// `[store]`.
    #[serde(default)]
    pub store: StoreConfig,
    /// `[authority]`: none listed, no decision is applied.
    #[serde(default)]
    pub authority: AuthorityConfig,
    /// `[context]`; absent in a review-only config (a machine that lists,
    /// shows, decides and exports, but holds no `memory.md`).
    #[serde(default)]
    pub context: Option<ContextConfig>,
    /// `[telegram]`.
    #[serde(default = "TelegramConfig::default")]
    pub telegram: TelegramConfig,
    /// `[provider]`.
    #[serde(default = "ProviderConfig::default")]
    pub provider: ProviderConfig,
    /// `[agent]`.
    #[serde(default = "AgentConfig::default")]
    pub agent: AgentConfig,
    /// `[sandbox]`.
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

fn default_data_dir() -> PathBuf {
    ".thestream".into()
}
fn default_url_env() -> String {
    "THESTREAM_DATABASE_URL".into()
}
fn default_context_root() -> PathBuf {
    "context".into()
}
fn default_max_memory_bytes() -> u64 {
    262_144
}
fn default_telegram_url() -> String {
    "https://api.telegram.org".into()
}
fn default_bot_token_env() -> String {
    "TELEGRAM_BOT_TOKEN".into()
}
fn default_mode() -> TelegramMode {
    TelegramMode::Polling
}
fn default_webhook_listen() -> String {
    "127.0.0.1:8443".into()
}
fn default_webhook_secret_env() -> String {
    "TELEGRAM_WEBHOOK_SECRET".into()
}
fn default_api() -> ProviderApi {
    ProviderApi::OpenaiChat
}
fn default_provider_url() -> String {
    "https://api.openai.com/v1".into()
}
fn default_model() -> String {
    "gpt-4.1-mini".into()
}
fn default_api_key_env() -> String {
    "OPENAI_API_KEY".into()
}
fn default_declaration() -> PathBuf {
    "declarations/telegram-conversation.v18.yaml".into()
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            root: default_context_root(),
            max_memory_bytes: default_max_memory_bytes(),
        }
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Sqlite,
            url_env: default_url_env(),
        }
    }
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            api_base_url: default_telegram_url(),
            bot_token_env: default_bot_token_env(),
            owner_user_id: 0,
            mode: default_mode(),
            webhook_listen: default_webhook_listen(),
            webhook_secret_env: default_webhook_secret_env(),
        }
    }
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            api: default_api(),
            base_url: default_provider_url(),
            model: default_model(),
            api_key_env: default_api_key_env(),
            compat: ProviderCompat::Openai,
            timeout_secs: TimeoutSecs::default(),
        }
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            declaration: default_declaration(),
            replies: None,
        }
    }
}

/// The config file `init` writes: every key, with its default.
pub const TEMPLATE: &str = r#"# thestream configuration. Relative paths resolve against this file's folder.
data_dir = ".thestream"                  # store, blobs, locks

[store]
backend = "sqlite"                       # or "postgres": see docs/postgres.md
url_env = "THESTREAM_DATABASE_URL"       # postgres: the NAME of the variable holding the URL

[authority]                              # the keys whose decisions this config applies
keys = []                                # `thestream key init` on another machine prints one to add

[context]                                # leave out on a review-only machine
root = "context"                         # holds memory.md
max_memory_bytes = 262144

[telegram]
api_base_url = "https://api.telegram.org"
bot_token_env = "TELEGRAM_BOT_TOKEN"     # the NAME of the variable holding the token
owner_user_id = 0                        # your Telegram user id: only your private chat is served
mode = "polling"                         # or "webhook"
webhook_listen = "127.0.0.1:8443"
webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"

[provider]
api = "openai-chat"                      # or "anthropic-messages"
base_url = "https://api.openai.com/v1"
model = "gpt-4.1-mini"
api_key_env = "OPENAI_API_KEY"
compat = "openai"                        # or "ollama", "llama-cpp", "vllm": see docs/providers.md
timeout_secs = 120                       # one attempt's wall-clock limit (1-3600): raise for slow local models

[agent]
declaration = "declarations/telegram-conversation.v18.yaml"
"#;

impl ProviderConfig {
    /// A compat mode shapes `openai-chat` requests only: any other with
    /// `anthropic-messages` is a config error, refused at load.
    fn check_compat(&self) -> Result<(), String> {
        match (self.api, self.compat) {
            (ProviderApi::OpenaiChat, _)
            | (ProviderApi::AnthropicMessages, ProviderCompat::Openai) => Ok(()),
            (
                ProviderApi::AnthropicMessages,
                ProviderCompat::Ollama | ProviderCompat::LlamaCpp | ProviderCompat::Vllm,
            ) => Err(format!(
                "provider.compat: {:?} applies to api = \"openai-chat\" only",
                self.compat.as_str()
            )),
        }
    }
}

impl Config {
    /// Parses TOML text; `base` is the folder relative paths resolve against.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        config
            .provider
            .check_compat()
            .map_err(|message| ConfigError::Invalid {
                path: path.to_owned(),
                message,
            })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let optional = [
            config.agent.replies.as_mut(),
            config.sandbox.worker.as_mut(),
            config.context.as_mut().map(|c| &mut c.root),
        ];
        let required = [&mut config.data_dir, &mut config.agent.declaration];
        for p in required.into_iter().chain(optional.into_iter().flatten()) {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        Ok(config)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// `[context]`, or a usage error naming `what` needs it: a review-only
    /// config holds no `memory.md`.
    pub fn context(&self, what: &str) -> Result<&ContextConfig, ConfigError> {
        self.context
            .as_ref()
            .ok_or_else(|| ConfigError::ReviewOnly {
                what: what.to_owned(),
            })
    }

    /// The store file inside the data dir.
    pub fn store_path(&self) -> PathBuf {
        self.data_dir.join("store.db")
    }

    /// This place's signing key, in the data dir.
    pub fn signing_key_path(&self) -> PathBuf {
        self.data_dir.join("signing.key")
    }

    /// `[authority] keys`.
    pub fn trusted_keys(&self) -> TrustedKeys {
        TrustedKeys::new(self.authority.keys.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_parses_to_the_defaults() {
        let config = Config::parse(TEMPLATE, Path::new("/srv/bot/thestream.toml")).unwrap();
        assert_eq!(config.data_dir, Path::new("/srv/bot/.thestream"));
        let context = config.context.as_ref().unwrap();
        assert_eq!(context.root, Path::new("/srv/bot/context"));
        assert_eq!(context.max_memory_bytes, 262_144);
        assert_eq!(config.store.backend, StoreBackend::Sqlite);
        assert_eq!(config.store.url_env, "THESTREAM_DATABASE_URL");
        assert_eq!(config.telegram.mode, TelegramMode::Polling);
        assert_eq!(config.provider.timeout_secs, TimeoutSecs::default());
        assert_eq!(
            config.agent.declaration,
            Path::new("/srv/bot/declarations/telegram-conversation.v18.yaml")
        );
    }

    #[test]
    fn absolute_paths_stay_absolute() {
        let config = Config::parse(
            "data_dir = \"/var/lib/thestream\"",
            Path::new("/etc/t.toml"),
        )
        .unwrap();
        assert_eq!(config.data_dir, Path::new("/var/lib/thestream"));
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_the_key() {
        let err = Config::parse("[telegram]\nowner_id = 5\n", Path::new("t.toml")).unwrap_err();
        assert!(err.to_string().contains("owner_id"), "{err}");
        let err =
            Config::parse("[telegram]\nowner_user_id = \"me\"\n", Path::new("t.toml")).unwrap_err();
        assert!(err.to_string().contains("owner_user_id"), "{err}");
        let err = Config::parse(
            "[telegram]\nmode = \"carrier-pigeon\"\n",
            Path::new("t.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("mode"), "{err}");
    }

    #[test]
    fn a_config_without_context_is_review_only_and_store_keys_are_checked() {
        let config = Config::parse(
            "[store]\nbackend = \"postgres\"\nurl_env = \"DB\"\n",
            Path::new("t.toml"),
        )
        .unwrap();
        assert!(config.context.is_none());
        assert_eq!(config.store.backend, StoreBackend::Postgres);
        assert_eq!(config.store.url_env, "DB");
        for bad in [
            "[store]\nbackend = \"mysql\"\n",
            "[store]\nurl = \"postgres://\"\n",
        ] {
            let err = Config::parse(bad, Path::new("t.toml")).unwrap_err();
            assert!(
                err.to_string().contains("store")
                    || err.to_string().contains("backend")
                    || err.to_string().contains("url"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_compat_mode_with_anthropic_messages_is_refused_at_load() {
        let ok = "[provider]\napi = \"anthropic-messages\"\ncompat = \"openai\"\n";
        assert!(Config::parse(ok, Path::new("t.toml")).is_ok());
        for compat in ["ollama", "llama-cpp", "vllm"] {
            let text = format!("[provider]\napi = \"anthropic-messages\"\ncompat = \"{compat}\"\n");
            let err = Config::parse(&text, Path::new("t.toml")).unwrap_err();
            assert!(err.to_string().contains("provider.compat"), "{err}");
        }
    }

    #[test]
    fn provider_compat_defaults_to_openai_and_names_the_key_when_unknown() {
        let config = Config::parse("", Path::new("t.toml")).unwrap();
        assert_eq!(config.provider.compat, ProviderCompat::Openai);
        for compat in ProviderCompat::ALL {
            let text = format!("[provider]\ncompat = \"{}\"\n", compat.as_str());
            let config = Config::parse(&text, Path::new("t.toml")).unwrap();
            assert_eq!(config.provider.compat, compat);
        }
        let err =
            Config::parse("[provider]\ncompat = \"lm-studio\"\n", Path::new("t.toml")).unwrap_err();
        assert!(err.to_string().contains("compat"), "{err}");
    }

    #[test]
    fn provider_api_is_parsed_once_at_load_and_an_unknown_one_is_refused_there() {
        let config = Config::parse("", Path::new("t.toml")).unwrap();
        assert_eq!(config.provider.api, ProviderApi::OpenaiChat);
        for api in [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages] {
            let text = format!("[provider]\napi = \"{}\"\n", api.as_str());
            let config = Config::parse(&text, Path::new("t.toml")).unwrap();
            assert_eq!(config.provider.api, api);
        }
        let err = Config::parse("[provider]\napi = \"gemini\"\n", Path::new("t.toml")).unwrap_err();
        assert!(err.to_string().contains("api = \"gemini\""), "{err}");
    }

    #[test]
    fn provider_timeout_secs_defaults_to_120_and_is_held_to_1_to_3600() {
        let config = Config::parse("", Path::new("t.toml")).unwrap();
        assert_eq!(config.provider.timeout_secs.secs(), 120);
        for secs in [1, 600, 3600] {
            let text = format!("[provider]\ntimeout_secs = {secs}\n");
            let config = Config::parse(&text, Path::new("t.toml")).unwrap();
            assert_eq!(config.provider.timeout_secs.secs(), secs);
        }
        for bad in ["0", "3601", "-5", "4294967297", "1.5", "\"120\""] {
            let text = format!("[provider]\ntimeout_secs = {bad}\n");
            let err = Config::parse(&text, Path::new("t.toml")).unwrap_err();
            assert!(err.to_string().contains("timeout_secs"), "{bad}: {err}");
        }
        let err = Config::parse("[provider]\ntimeout_secs = 0\n", Path::new("t.toml")).unwrap_err();
        assert!(
            err.to_string()
                .contains("provider.timeout_secs must be 1 to 3600"),
            "{err}"
        );
    }
}
