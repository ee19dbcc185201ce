//! One module per command: its clap `Args` and its `run`.

pub mod activate;
pub mod declaration_check;
pub mod demo;
pub mod events;
pub mod export;
pub mod init;
pub mod memory;
pub mod proposals;
pub mod review;
pub mod scan;
pub mod serve;
pub mod telegram_menu_register;

use std::path::Path;

use stream_store::SqliteStore;

use crate::config::Config;
use crate::exit::Failure;

/// Opens the configured store, creating the owner-only data dir if needed.
pub fn open_store(config: &Config) -> Result<SqliteStore, Failure> {
    create_private_dir(&config.data_dir)?;
    Ok(SqliteStore::open(&config.store_path())?)
}

/// Creates `dir` (and parents) with mode 0700 if it does not exist.
pub fn create_private_dir(dir: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Failure::runtime(anyhow::anyhow!("cannot create {}: {e}", dir.display())))
}

/// The value of the environment variable `name`, which config key `key` names.
pub fn secret(name: &str, key: &str) -> Result<String, Failure> {
    std::env::var(name).map_err(|_| {
        Failure::usage(anyhow::anyhow!(
            "the environment variable {name} ({key}) is not set"
        ))
    })
}

/// The Bot API client of the config, with the token from `telegram.bot_token_env`.
pub fn bot_api(config: &Config) -> Result<stream_telegram::BotApi, Failure> {
    let name = &config.telegram.bot_token_env;
    let token = stream_telegram::BotToken::new(secret(name, "telegram.bot_token_env")?)
        .map_err(|e| Failure::usage(anyhow::anyhow!("{name}: {e}")))?;
    stream_telegram::BotApi::new(
        &config.telegram.api_base_url,
        token,
        stream_telegram::ClientOptions::default(),
    )
    .map_err(|e| Failure::usage(anyhow::anyhow!("telegram.api_base_url: {e}")))
}

/// Where the help notice goes: the owner's chat, or nowhere with
/// `--skip-help-notice`; an unset owner is a usage error.
pub fn notice_chat(config: &Config, skip_help_notice: bool) -> Result<Option<i64>, Failure> {
    if skip_help_notice {
        Ok(None)
    } else if config.telegram.owner_user_id > 0 {
        Ok(Some(config.telegram.owner_user_id))
    } else {
        Err(Failure::usage(anyhow::anyhow!(
            "telegram.owner_user_id is not set, so the help notice has nowhere to go (or pass --skip-help-notice)"
        )))
    }
}
