//! `thestream init [DIR]`: a config, a context root whose `memory.md` has
//! frontmatter with an `id`, and the shipped declarations. Never overwrites.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::config::TEMPLATE;
use crate::exit::{CmdResult, Failure};

/// `init` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The folder to initialize (created if missing).
    #[arg(default_value = ".")]
    dir: PathBuf,
}

/// The initial `memory.md`, with a fresh random frontmatter id.
fn memory_template() -> Result<String, Failure> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| Failure::runtime(anyhow!("no randomness: {e}")))?;
    Ok(format!(
        "---\nid: memory-{}\n---\n# Memory\n\nWhat the owner has approved for the agent to remember.\n",
        hex::encode(bytes)
    ))
}

/// Every file `init` writes, relative to DIR, with its mode.
fn files() -> Result<Vec<(PathBuf, String, u32)>, Failure> {
    let mut files = vec![
        (PathBuf::from("thestream.toml"), TEMPLATE.to_owned(), 0o600),
        (
            PathBuf::from("context/memory.md"),
            memory_template()?,
            0o600,
        ),
    ];
    for &(name, text) in shipped_declarations() {
        files.push((Path::new("declarations").join(name), text.to_owned(), 0o644));
    }
    Ok(files)
}

/// The declarations and prompts shipped with this build.
pub fn shipped_declarations() -> &'static [(&'static str, &'static str)] {
    &[]
}

/// Runs `init`.
pub fn run(args: Args) -> CmdResult {
    let files = files()?;
    // Check everything before writing anything: no half-initialized folder.
    let taken: Vec<String> = files
        .iter()
        .map(|(rel, _, _)| args.dir.join(rel))
        .filter(|p| p.symlink_metadata().is_ok())
        .map(|p| p.display().to_string())
        .collect();
    if !taken.is_empty() {
        return Err(Failure::usage(anyhow!(
            "refusing to overwrite existing files: {}",
            taken.join(", ")
        )));
    }
    for dir in ["context", "declarations"] {
        super::create_private_dir(&args.dir.join(dir))?;
    }
    for (rel, text, mode) in &files {
        let path = args.dir.join(rel);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(*mode)
            .open(&path)
            .map_err(|e| Failure::runtime(anyhow!("cannot create {}: {e}", path.display())))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| Failure::runtime(anyhow!("cannot write {}: {e}", path.display())))?;
    }
    println!("initialized {}", args.dir.display());
    println!(
        "next: set telegram.owner_user_id in thestream.toml, export the token and API key variables it names, then run `thestream serve`"
    );
    Ok(())
}
