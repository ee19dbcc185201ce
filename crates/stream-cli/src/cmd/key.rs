//! `thestream key init`: this place's Ed25519 signing key, which
//! `proposal-decision` signs every decision with. The secret is 32 raw
//! bytes in `signing.key` in the data dir, owner-only (0600), created once
//! and never overwritten; only its public key is ever printed.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::anyhow;
use stream_proposals::authority::SigningKey;

use crate::Ctx;
use crate::config::Config;
use crate::exit::{CmdResult, Failure};

/// `key` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum KeyCommand {
    /// Write this place's signing key (owner-only, in the data dir) and print its public key.
    Init,
}

/// Runs `key`.
pub fn run(ctx: &Ctx, command: KeyCommand) -> CmdResult {
    match command {
        KeyCommand::Init => {
            let config = ctx.config()?;
            super::private_data_dir(&config.data_dir)?;
            let key = write_new(&config.signing_key_path())?;
            println!("public key: {}", key.key_id());
            Ok(())
        }
    }
}

/// Writes a new key to `path` (0600, fsynced), refusing (exit 2) an
/// existing file of any kind: a key is never replaced silently.
pub fn write_new(path: &Path) -> Result<SigningKey, Failure> {
    if path.symlink_metadata().is_ok() {
        return Err(refuse_existing(path));
    }
    write_key(path, SigningKey::generate().map_err(Failure::runtime)?)
}

/// Writes `key` to a new file at `path` (0600, fsynced); an existing file
/// is refused (exit 2), never replaced.
pub fn write_key(path: &Path, key: SigningKey) -> Result<SigningKey, Failure> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => refuse_existing(path),
            _ => Failure::runtime(anyhow!("cannot create {}: {e}", path.display())),
        })?;
    let mut secret = key.to_bytes();
    let written = file.write_all(&secret).and_then(|()| file.sync_all());
    secret.fill(0);
    written.map_err(|e| Failure::runtime(anyhow!("cannot write {}: {e}", path.display())))?;
    Ok(key)
}

fn refuse_existing(path: &Path) -> Failure {
    Failure::usage(anyhow!(
        "a signing key already exists at {}; it is never overwritten",
        path.display()
    ))
}

/// This place's key, for signing: exactly 32 bytes in a regular file
/// owned by this user and readable by nobody else; anything else is
/// refused (exit 2), naming `key init` when there is none.
pub fn load(config: &Config) -> Result<SigningKey, Failure> {
    let path = config.signing_key_path();
    let refuse = |why: String| Failure::usage(anyhow!("signing key {}: {why}", path.display()));
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::usage(anyhow!(
                "this place has no signing key: run `thestream key init` and add the public key it prints to [authority] keys of the config that holds the context root"
            )));
        }
        Err(e) => return Err(refuse(format!("cannot be opened: {e}"))),
    };
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot be read: {e}")))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(refuse(
            "must be a regular file of yours, readable by you only (0600)".into(),
        ));
    }
    let mut secret = [0u8; 32];
    let mut rest = Vec::new();
    file.read_exact(&mut secret)
        .and_then(|()| file.read_to_end(&mut rest).map(|_| ()))
        .map_err(|_| refuse("is not 32 bytes".into()))?;
    if !rest.is_empty() {
        return Err(refuse("is not 32 bytes".into()));
    }
    let key = SigningKey::from_bytes(&secret);
    secret.fill(0);
    Ok(key)
}
