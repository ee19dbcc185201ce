//! `thestream backup --output FILE [--force]`: a consistent copy of the
//! store taken while `serve` may be running (SQLite's online backup),
//! written owner-only to a temporary file in FILE's folder, fsynced and
//! renamed into place. Refused (exit 2, nothing written): an existing FILE
//! without `--force`, a directory, a folder others can write to.

use std::fs::OpenOptions;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `backup` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to write.
    #[arg(long)]
    output: PathBuf,
    /// Replace FILE if it exists.
    #[arg(long)]
    force: bool,
}

/// The folder FILE goes into, once FILE is known to be writable there by
/// the rules above.
fn checked_folder(output: &Path, force: bool) -> Result<PathBuf, Failure> {
    let shown = output.display();
    match std::fs::symlink_metadata(output) {
        Ok(meta) if meta.is_dir() => {
            return Err(Failure::usage(anyhow!("{shown} is a directory")));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(Failure::usage(anyhow!("{shown} is not a regular file")));
        }
        Ok(_) if !force => {
            return Err(Failure::usage(anyhow!(
                "{shown} exists; pass --force to replace it"
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Failure::usage(anyhow!("{shown}: {e}"))),
    }
    let folder = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let meta = std::fs::metadata(&folder)
        .map_err(|e| Failure::usage(anyhow!("{}: {e}", folder.display())))?;
    if !meta.is_dir() {
        return Err(Failure::usage(anyhow!(
            "{} is not a folder",
            folder.display()
        )));
    }
    // Another user able to write the folder could swap the file in or out.
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(Failure::usage(anyhow!(
            "{} is writable by group or others; choose a private folder",
            folder.display()
        )));
    }
    Ok(folder)
}

fn runtime(what: &str, path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::runtime(anyhow!("backup: {what} {}: {e}", path.display()))
}

/// Runs `backup`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    if config.store.backend == crate::config::StoreBackend::Postgres {
        return Err(Failure::usage(anyhow!(
            "a PostgreSQL store is backed up with pg_dump (docs/backup.md), not with `backup`"
        )));
    }
    let folder = checked_folder(&args.output, args.force)?;
    let source = config.store_path();
    if !source.is_file() {
        return Err(Failure::usage(anyhow!(
            "no store at {}: nothing to back up",
            source.display()
        )));
    }
    let store = super::open_store(&config)?;
    let name = args
        .output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".into());
    let temp = folder.join(format!(".{name}.partial-{}", std::process::id()));
    let written = (|| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| runtime("cannot create", &temp, e))?;
        let crate::store::OpenedStore::Sqlite(sqlite) = &store else {
            return Err(Failure::usage(anyhow!("backup copies a SQLite store only")));
        };
        sqlite
            .backup_into(&temp)
            .map_err(|e| runtime("cannot copy the store into", &temp, e))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&temp)
            .map_err(|e| runtime("cannot reopen", &temp, e))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| runtime("cannot restrict", &temp, e))?;
        file.sync_all()
            .map_err(|e| runtime("cannot sync", &temp, e))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        std::fs::rename(&temp, &args.output)
            .map_err(|e| runtime("cannot rename into", &args.output, e))?;
        std::fs::File::open(&folder)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| runtime("cannot sync", &folder, e))?;
        Ok::<_, Failure>(size)
    })();
    match written {
        Ok(size) => {
            println!("backup: {} ({size} bytes)", args.output.display());
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}
