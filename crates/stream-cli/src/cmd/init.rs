//! `thestream init [DIR]`: a config, a context root whose `memory.md` has
//! frontmatter with an `id`, the shipped declarations, and this place's
//! signing key in the data dir, enrolled in the config's `[authority]
//! keys`. Never overwrites.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use stream_core::payload::KeyId;

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

/// The data dir of the config `init` writes, and its signing key there.
const DATA_DIR: &str = ".thestream";
const KEY_FILE: &str = ".thestream/signing.key";

/// The config `init` writes, enrolling `key`.
fn config_text(key: &KeyId) -> String {
    TEMPLATE.replacen("keys = []", &format!("keys = [\"{key}\"]"), 1)
}

/// Every file `init` writes, relative to DIR, with its mode; the config
/// enrolls `key`.
fn files(key: &KeyId) -> Result<Vec<(PathBuf, String, u32)>, Failure> {
    let mut files = vec![
        (PathBuf::from("thestream.toml"), config_text(key), 0o600),
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

/// The declarations and prompts shipped with this build (the repository's
/// `declarations/` folder), by path relative to it.
pub fn shipped_declarations() -> &'static [(&'static str, &'static str)] {
    &[
        (
            "telegram-conversation.v17.yaml",
            include_str!("../../../../declarations/telegram-conversation.v17.yaml"),
        ),
        (
            "telegram-conversation.v18.yaml",
            include_str!("../../../../declarations/telegram-conversation.v18.yaml"),
        ),
        (
            "telegram-replies.v2.yaml",
            include_str!("../../../../declarations/telegram-replies.v2.yaml"),
        ),
        (
            "prompts/telegram-conversation.v17.md",
            include_str!("../../../../declarations/prompts/telegram-conversation.v17.md"),
        ),
        (
            "prompts/telegram-conversation.v18.md",
            include_str!("../../../../declarations/prompts/telegram-conversation.v18.md"),
        ),
    ]
}

/// Runs `init`.
pub fn run(args: Args) -> CmdResult {
    // The key is made first (its public half goes into the config) and
    // written after every check.
    let key_path = args.dir.join(KEY_FILE);
    let key = stream_proposals::authority::SigningKey::generate().map_err(Failure::runtime)?;
    let files = files(&key.key_id())?;
    // Check everything before writing anything: no half-initialized folder.
    let taken: Vec<String> = files
        .iter()
        .map(|(rel, _, _)| args.dir.join(rel))
        .chain([key_path.clone()])
        .filter(|p| p.symlink_metadata().is_ok())
        .map(|p| p.display().to_string())
        .collect();
    if !taken.is_empty() {
        return Err(Failure::usage(anyhow!(
            "refusing to overwrite existing files: {}",
            taken.join(", ")
        )));
    }
    for dir in ["context", "declarations", "declarations/prompts"] {
        super::create_private_dir(&args.dir.join(dir))?;
    }
    super::private_data_dir(&args.dir.join(DATA_DIR))?;
    let key = super::key::write_key(&key_path, key)?;
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
    println!("public key: {}", key.key_id());
    println!(
        "next: export the token and API key variables thestream.toml names, run `thestream pair` to set telegram.owner_user_id from a message you send the bot, then run `thestream serve`"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the repository's `declarations/` folder, by relative path.
    fn repository_files(dir: &Path, rel: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let rel = rel.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                repository_files(&entry.path(), &rel, out);
            } else {
                let text = std::fs::read_to_string(entry.path()).unwrap();
                out.push((rel.to_str().unwrap().to_owned(), text));
            }
        }
    }

    #[test]
    fn init_ships_exactly_the_repository_declarations() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations");
        let mut files = Vec::new();
        repository_files(&dir, Path::new(""), &mut files);
        files.sort();
        let mut shipped: Vec<_> = shipped_declarations()
            .iter()
            .map(|(name, text)| ((*name).to_owned(), (*text).to_owned()))
            .collect();
        shipped.sort();
        assert_eq!(shipped, files);
    }
}
