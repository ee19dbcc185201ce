//! `thestream declaration-check FILE`: validates a declaration (DESIGN
//! section 6) with its prompt and prints its id, version and fingerprint.
//! An invalid declaration exits 2 with the offending field named.

use std::path::PathBuf;

use stream_declarations::{DeclarationError, LoadedDeclaration};

use crate::exit::{CmdResult, Failure};

/// `declaration-check` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The declaration file (YAML); its prompt is read relative to it.
    file: PathBuf,
}

/// Runs `declaration-check`. Needs no config and no store.
pub fn run(args: Args) -> CmdResult {
    let loaded = LoadedDeclaration::load(&args.file).map_err(|e| match e {
        DeclarationError::Read { .. }
        | DeclarationError::Invalid { .. }
        | DeclarationError::Prompt { .. } => Failure::usage(e),
        DeclarationError::Canon => Failure::runtime(e),
    })?;
    println!("id: {}", loaded.id());
    println!("version: {}", loaded.version());
    println!("fingerprint: {}", loaded.fingerprint);
    Ok(())
}
