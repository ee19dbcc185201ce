//! `thestream scan`: records the configured context root's files as
//! documents of `filesystem:telegram-agent-context` (new immutable versions,
//! pointer moves, `file.changed@1` events; one transaction) and prints
//! counts, never paths or content.

use anyhow::anyhow;
use stream_core::SourceName;
use stream_memory::scan::{ScanError, ScanLimits, ScanReport, scan_with_limits};
use stream_store::Store;

use crate::Ctx;
use crate::config::Config;
use crate::exit::{CmdResult, Failure};

/// `scan` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Scans the configured context root into the store (as `scan` does, and
/// as the review commands do first so that staleness reflects the disk).
pub fn scan_context(config: &Config, store: &dyn Store) -> Result<ScanReport, Failure> {
    let context = config.context("scanning the context root")?;
    let source = SourceName::fixed(SourceName::CONTEXT);
    // A memory.md the materializer may write is always small enough to scan.
    let limits = ScanLimits {
        max_file_bytes: context
            .max_memory_bytes
            .max(ScanLimits::DEFAULT_MAX_FILE_BYTES),
        ..ScanLimits::default()
    };
    let root = &context.root;
    scan_with_limits(store, &source, root, &limits).map_err(|e| match e {
        ScanError::RootMissing | ScanError::RootIsSymlink | ScanError::RootNotADirectory => {
            Failure::usage(anyhow!("context root {}: {e}", root.display()))
        }
        ScanError::Store(e) => Failure::from(e),
        ScanError::NotAFilesystemSource { .. }
        | ScanError::Io(_)
        | ScanError::TooManyEntries { .. }
        | ScanError::TooManyNewBytes { .. }
        | ScanError::Record(_) => Failure::runtime(e),
    })
}

/// Runs `scan`.
pub fn run(ctx: &Ctx, _args: Args) -> CmdResult {
    let config = ctx.config()?;
    let store = super::open_store(&config)?;
    let source = SourceName::fixed(SourceName::CONTEXT);
    let report = scan_context(&config, &store)?;
    let s = &report.skipped;
    println!("source: {source}");
    println!("files: {}", report.files);
    println!("new versions: {}", report.new_versions.len());
    println!("unchanged: {}", report.unchanged);
    println!("missing: {}", report.missing);
    println!(
        "skipped: {} (symlinks {}, special {}, escaping {}, too large {}, hidden {}, unnamed {}, too deep {})",
        s.total(),
        s.symlinks,
        s.special,
        s.escaping,
        s.too_large,
        s.hidden,
        s.unnamed,
        s.too_deep
    );
    Ok(())
}
