//! One module per command: its clap `Args` and its `run`.

pub mod activate;
pub mod declaration_check;
pub mod demo;
pub mod events;
pub mod export;
pub mod init;
pub mod memory;
pub mod proposals;
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
