//! `thestream backup --output FILE [--force]`: a consistent copy of the
//! store taken while `serve` may be running (SQLite's online backup),
//! staged in the private data dir, then written owner-only through FILE's
//! folder's descriptor (`stream_export::Destination`, the exports' rule), a
//! temporary file fsynced and renamed into place. Refused (exit 2, nothing
//! written): an existing FILE without `--force`, a directory, a symlinked
//! folder, a folder not ours or others can write to.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use stream_export::Destination;

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

/// FILE's folder, checked and opened by the exports' one rule; an existing
/// FILE is refused without `--force`.
fn checked_destination(output: &Path, force: bool) -> Result<Destination, Failure> {
    let destination = Destination::open(output).map_err(Failure::usage)?;
    if !force && destination.exists().map_err(Failure::usage)? {
        return Err(Failure::usage(anyhow!(
            "{} exists; pass --force to replace it",
            output.display()
        )));
    }
    Ok(destination)
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
    let destination = checked_destination(&args.output, args.force)?;
    let source = config.store_path();
    if !source.is_file() {
        return Err(Failure::usage(anyhow!(
            "no store at {}: nothing to back up",
            source.display()
        )));
    }
    let store = super::open_store(&config)?;
    let crate::store::OpenedStore::Sqlite(sqlite) = &store else {
        return Err(Failure::usage(anyhow!("backup copies a SQLite store only")));
    };
    // SQLite's backup writes to a path, so it goes to the private data dir
    // first; the user's folder is written only through its descriptor.
    let staged = config
        .data_dir
        .join(format!(".backup-{}.partial", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    let written = (|| {
        sqlite
            .backup_into(&staged)
            .map_err(|e| runtime("cannot copy the store into", &staged, e))?;
        let mut copy = File::open(&staged).map_err(|e| runtime("cannot read", &staged, e))?;
        destination
            .write_with(|file| std::io::copy(&mut copy, file).map(|_| ()))
            .map_err(|e| runtime("cannot write", destination.path(), e))
    })();
    let _ = std::fs::remove_file(&staged);
    let size = written?;
    println!("backup: {} ({size} bytes)", args.output.display());
    Ok(())
}
