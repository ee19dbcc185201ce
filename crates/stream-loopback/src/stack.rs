//! A whole loopback world for end-to-end runs of the real `thestream`
//! binary: the fake Telegram Bot API, the scripted provider, and a folder
//! made by `thestream init` whose config points at both.
//!
//! End-to-end tests and `thestream demo` drive it the same way: queue owner
//! messages, script the model, run `thestream serve --drain`, then read the
//! results through the CLI and the servers' records.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;

use crate::provider::{Reply, ScriptedProvider};
use crate::telegram::{FakeTelegram, FakeTelegramConfig, RecordedCall};

/// The owner's Telegram user id in every stack.
pub const OWNER: i64 = 7_000_001;
/// The bot token the fake accepts.
pub const BOT_TOKEN: &str = "4242:fake-token";
/// The API key the scripted provider is given (the fake checks nothing).
pub const API_KEY: &str = "sk-loopback-test-key";
/// The model name configured.
pub const MODEL: &str = "loopback-model";

/// A running loopback world.
#[derive(Debug)]
pub struct Stack {
    /// The folder `thestream init` wrote (config, context, declarations, data).
    pub home: tempfile::TempDir,
    /// The fake Bot API.
    pub telegram: FakeTelegram,
    /// The scripted provider.
    pub provider: ScriptedProvider,
    /// The wire format configured.
    pub api: ProviderApi,
    thestream: PathBuf,
    /// With [`Stack::use_postgres`]: the database URL `thestream` is given.
    database_url: Option<String>,
    next_message_id: AtomicI64,
    // Runs the fake Bot API; dropped last.
    runtime: tokio::runtime::Runtime,
}

/// What a `thestream` invocation printed.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Exit code (-1 when killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error (the logs).
    pub stderr: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Stack {
    /// Starts both servers and initializes a home whose config points at
    /// them; `thestream` and `worker` are the binaries to run.
    pub fn start(thestream: &Path, worker: &Path, api: ProviderApi) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let telegram = runtime.block_on(FakeTelegram::start(FakeTelegramConfig {
            token: BOT_TOKEN.into(),
            ..FakeTelegramConfig::default()
        }))?;
        let provider = ScriptedProvider::start(Vec::new())?;
        let home = tempfile::tempdir()?;
        let stack = Self {
            home,
            telegram,
            provider,
            api,
            thestream: thestream.to_owned(),
            database_url: None,
            next_message_id: AtomicI64::new(1000),
            runtime,
        };
        let init = stack.run(&["init", "."])?;
        if init.code != 0 {
            return Err(io(format!("thestream init failed: {}", init.stderr)));
        }
        let config_path = stack.home.path().join("thestream.toml");
        let config = std::fs::read_to_string(&config_path)?;
        let (key_env, api_name) = match api {
            ProviderApi::OpenaiChat => ("OPENAI_API_KEY", "openai-chat"),
            ProviderApi::AnthropicMessages => ("ANTHROPIC_API_KEY", "anthropic-messages"),
        };
        let config = config
            .replace("https://api.telegram.org", &stack.telegram.base_url())
            .replace("owner_user_id = 0", &format!("owner_user_id = {OWNER}"))
            .replace("api = \"openai-chat\"", &format!("api = \"{api_name}\""))
            .replace("https://api.openai.com/v1", &stack.provider.base_url(api))
            .replace("model = \"gpt-4.1-mini\"", &format!("model = \"{MODEL}\""))
            .replace(
                "api_key_env = \"OPENAI_API_KEY\"",
                &format!("api_key_env = \"{key_env}\""),
            );
        let config = format!("{config}\n[sandbox]\nworker = \"{}\"\n", worker.display());
        std::fs::write(&config_path, config)?;
        Ok(stack)
    }

    /// Switches the home to the PostgreSQL store at `url` (an empty
    /// database): the config names `THESTREAM_DATABASE_URL`, which every
    /// command run from now on is given.
    pub fn use_postgres(&mut self, url: &str) -> std::io::Result<()> {
        let config_path = self.home.path().join("thestream.toml");
        let config = std::fs::read_to_string(&config_path)?;
        let switched = config.replace("backend = \"sqlite\"", "backend = \"postgres\"");
        if switched == config {
            return Err(io("the config has no `backend = \"sqlite\"` to switch"));
        }
        std::fs::write(&config_path, switched)?;
        self.database_url = Some(url.to_owned());
        Ok(())
    }

    /// The database URL of [`Stack::use_postgres`], if any.
    pub fn database_url(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    /// The home folder.
    pub fn path(&self) -> &Path {
        self.home.path()
    }

    /// The store file.
    pub fn store_path(&self) -> PathBuf {
        self.path().join(".thestream/store.db")
    }

    /// Runs `thestream` in the home with only PATH, the bot token and the
    /// API key in its environment.
    pub fn run(&self, args: &[&str]) -> std::io::Result<Ran> {
        self.command(args).output().map(Ran::from)
    }

    /// The command `run` would execute, for callers that spawn and kill it.
    pub fn command(&self, args: &[&str]) -> Command {
        let key_env = match self.api {
            ProviderApi::OpenaiChat => "OPENAI_API_KEY",
            ProviderApi::AnthropicMessages => "ANTHROPIC_API_KEY",
        };
        let mut cmd = Command::new(&self.thestream);
        cmd.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
            .env(key_env, API_KEY)
            .env("THESTREAM_LOG", "info");
        if let Some(url) = &self.database_url {
            cmd.env("THESTREAM_DATABASE_URL", url);
        }
        cmd
    }

    /// `thestream serve --drain`.
    pub fn drain(&self) -> std::io::Result<Ran> {
        self.run(&["serve", "--drain"])
    }

    fn message(&self, text: &str) -> Value {
        let message_id = self.next_message_id.fetch_add(1, Ordering::SeqCst);
        json!({
            "message_id": message_id,
            "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
            "chat": {"id": OWNER, "type": "private", "first_name": "Owner"},
            "date": 1_790_000_000 + message_id,
            "text": text,
        })
    }

    fn push(&self, mut message: Value, reply_to: Option<i64>) -> i64 {
        let text = message["text"].as_str().unwrap_or_default().to_owned();
        if text.starts_with('/') {
            let length = text
                .split_whitespace()
                .next()
                .map_or(0, |c| c.encode_utf16().count());
            message["entities"] = json!([{"type": "bot_command", "offset": 0, "length": length}]);
        }
        if let Some(id) = reply_to {
            message["reply_to_message"] = json!({
                "message_id": id,
                "from": {"id": 4242, "is_bot": true, "first_name": "Fake Bot"},
                "chat": {"id": OWNER, "type": "private"},
                "date": 1_790_000_000,
                "text": "earlier reply",
            });
        }
        self.telegram.push_update(json!({ "message": message }))
    }

    /// The owner sends `text` (a leading `/command` becomes a command entity).
    pub fn say(&self, text: &str) -> i64 {
        self.push(self.message(text), None)
    }

    /// The owner replies to the bot's message `message_id` with `text`.
    pub fn reply_to(&self, message_id: i64, text: &str) -> i64 {
        self.push(self.message(text), Some(message_id))
    }

    /// The owner sends a photo (with an optional caption).
    pub fn photo(&self, bytes: Vec<u8>, caption: Option<&str>) -> i64 {
        let mut message = self.message(caption.unwrap_or_default());
        let file_id = format!("photo-{}", message["message_id"]);
        let unique = format!("unique-{}", message["message_id"]);
        self.telegram.add_file(&file_id, &unique, bytes.clone());
        if let Some(obj) = message.as_object_mut() {
            obj.remove("text");
            obj.insert(
                "photo".into(),
                json!([{"file_id": file_id, "file_unique_id": unique, "width": 64, "height": 64, "file_size": bytes.len()}]),
            );
            if let Some(caption) = caption {
                obj.insert("caption".into(), json!(caption));
            }
        }
        self.telegram.push_update(json!({ "message": message }))
    }

    /// Scripts the provider's next answer.
    pub fn script(&self, reply: Reply) {
        self.provider.push(reply);
    }

    /// Every `sendMessage` the bot made, in order.
    pub fn sent(&self) -> Vec<RecordedCall> {
        self.telegram.calls_of("sendMessage")
    }

    /// The texts the bot sent, in order.
    pub fn sent_texts(&self) -> Vec<String> {
        self.sent()
            .iter()
            .map(|c| c.params["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// `thestream events --json --show-sensitive`, parsed.
    pub fn events(&self) -> std::io::Result<Vec<Value>> {
        let ran = self.run(&["events", "--json", "--show-sensitive"])?;
        ran.stdout
            .lines()
            .map(|l| serde_json::from_str(l).map_err(io))
            .collect()
    }

    /// `thestream proposal-list --all --json --show-sensitive`, parsed.
    pub fn proposals(&self) -> std::io::Result<Vec<Value>> {
        let ran = self.run(&["proposal-list", "--all", "--json", "--show-sensitive"])?;
        serde_json::from_str(&ran.stdout).map_err(io)
    }

    /// Runs a future on the stack's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}
