//! One module per command: its clap `Args` and its `run`.

pub mod activate;
pub mod backup;
pub mod decide;
pub mod declaration_check;
pub mod demo;
pub mod doctor;
pub mod events;
pub mod export;
pub mod init;
pub mod inspect;
pub mod key;
pub mod pair;
pub mod review;
pub mod scan;
pub mod serve;
pub mod stats;
pub mod telegram_menu_register;

use std::path::Path;

use stream_store::{PostgresStore, SqliteStore};

use crate::config::{Config, StoreBackend};
use crate::exit::Failure;
use crate::store::OpenedStore;

/// Opens the configured store: the SQLite file in the private data dir
/// (the store makes its own files owner-only), or the PostgreSQL database
/// whose URL is in the variable `[store] url_env` names. The data dir
/// (locks) is private either way.
pub fn open_store(config: &Config) -> Result<OpenedStore, Failure> {
    private_data_dir(&config.data_dir)?;
    Ok(match config.store.backend {
        StoreBackend::Sqlite => {
            let path = config.store_path();
            OpenedStore::Sqlite(
                SqliteStore::open(&path)
                    .map_err(|e| Failure::of_store(&path.display().to_string(), e))?,
            )
        }
        StoreBackend::Postgres => {
            let url = secret(&config.store.url_env, "store.url_env")?;
            OpenedStore::Postgres(PostgresStore::open(&url)?)
        }
    })
}

/// The data dir holds the store, blobs and locks, so it is private: created
/// 0700, an existing one tightened to 0700. One owned by another user, or
/// one that cannot be tightened, is refused (exit 2) naming it. Checked and
/// changed through one open descriptor, never a second path lookup.
pub fn private_data_dir(dir: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    create_private_dir(dir)?;
    let refuse =
        |why: String| Failure::usage(anyhow::anyhow!("the data dir {} {why}", dir.display()));
    let handle = std::fs::File::open(dir).map_err(|e| refuse(format!("cannot be opened: {e}")))?;
    let meta = handle
        .metadata()
        .map_err(|e| refuse(format!("cannot be read: {e}")))?;
    if !meta.is_dir() {
        return Err(refuse("is not a directory".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(refuse(format!(
            "is owned by uid {}, not by you (uid {uid})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        handle
            .set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| refuse(format!("cannot be made owner-only (0700): {e}")))?;
    }
    Ok(())
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
    bot_api_with(config, stream_telegram::ClientOptions::default())
}

/// [`bot_api`] with other client options (retries, timeouts).
pub fn bot_api_with(
    config: &Config,
    options: stream_telegram::ClientOptions,
) -> Result<stream_telegram::BotApi, Failure> {
    let name = &config.telegram.bot_token_env;
    let token = stream_telegram::BotToken::new(secret(name, "telegram.bot_token_env")?)
        .map_err(|e| Failure::usage(anyhow::anyhow!("{name}: {e}")))?;
    stream_telegram::BotApi::new(&config.telegram.api_base_url, token, options)
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
