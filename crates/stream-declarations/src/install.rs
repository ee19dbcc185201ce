//! The installed files of a declaration version, so that a running `serve`
//! can follow an activation from the store instead of a path of its own
//! config: `declaration-install/<id>/<version>` ([`InstalledDeclaration`])
//! binds the declaration file and its prompt, stored as blobs, by their
//! SHA-256 and the fingerprint, plus the context manifest (context kind, the
//! Telegram source it was installed for, the exact subscribed documents,
//! the transcript bound). [`install_files`] writes them inside the caller's
//! transaction (activation's install step, beside the registry row of
//! [`crate::registry`]); [`load_installed`] rebuilds and checks them.

use serde::{Deserialize, Serialize};
use stream_core::canon::sha256;
use stream_core::{Fingerprint, Sha256Hex, SourceName};
use stream_store::{Read, StoreError, Tx};

use crate::error::DeclarationError;
use crate::load::{LoadedDeclaration, Prompt};
use crate::registry::RegistryError;

/// Why installed files could not be written, read or used. Keys, ids and
/// hashes only.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The install row does not parse.
    #[error("control row `{key}` is malformed")]
    Malformed {
        /// Its key.
        key: String,
    },
    /// The installed files of a declaration are missing.
    #[error("declaration {id}@{version} has no installed files; activate it first")]
    NotInstalled {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// A blob the install row names is missing or does not hash to its name.
    #[error("installed file {sha256} of declaration {id}@{version} is missing or altered")]
    FileAltered {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
        /// The SHA-256 the row names.
        sha256: Sha256Hex,
    },
    /// The installed files rebuild a declaration with another fingerprint
    /// than the one the install row or the caller names.
    #[error("installed declaration {id}@{version} does not rebuild to its recorded fingerprint")]
    FingerprintMismatch {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// The installed files do not load as a declaration.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    /// The registry refused.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// The control key of a declaration's installed files.
pub fn install_key(id: &str, version: u32) -> String {
    format!("declaration-install/{id}/{version}")
}

/// One exactly subscribed document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextDocument {
    /// Its source.
    pub source: SourceName,
    /// Its normalized path.
    pub path: String,
}

/// What the installed declaration's context reads, resolved for this store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextManifest {
    /// The context kind (`telegram-conversation`).
    pub context: String,
    /// The Telegram source it was installed for (`telegram:<bot-id>`).
    pub telegram_source: SourceName,
    /// The exactly subscribed documents.
    pub documents: Vec<ContextDocument>,
    /// The transcript bound, in turns.
    pub transcript_max_turns: Option<u32>,
}

/// The install row of one declaration version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstalledDeclaration {
    /// The fingerprint the files rebuild to.
    pub fingerprint: Fingerprint,
    /// The declaration file's blob.
    pub declaration_sha256: Sha256Hex,
    /// The prompt file's blob, when it names one.
    pub prompt_sha256: Option<Sha256Hex>,
    /// The context manifest.
    pub context: ContextManifest,
}

/// The context manifest of `decl` for `telegram`.
pub fn context_manifest(decl: &LoadedDeclaration, telegram: &SourceName) -> ContextManifest {
    let d = &decl.declaration;
    ContextManifest {
        context: d.context.as_str().to_owned(),
        telegram_source: telegram.clone(),
        documents: d
            .subscriptions
            .documents
            .iter()
            .filter_map(|doc| {
                doc.path.as_ref().map(|p| ContextDocument {
                    source: doc.source.clone(),
                    path: p.as_str().to_owned(),
                })
            })
            .collect(),
        transcript_max_turns: d.transcript.as_ref().map(|t| t.max_turns),
    }
}

/// Installs `decl`'s files inside `tx`: the declaration text and its prompt
/// as blobs and the install row. `yaml` must rebuild `decl` exactly (the
/// caller read both from the same file), which is checked here.
pub fn install_files(
    tx: &mut (impl Tx + ?Sized),
    decl: &LoadedDeclaration,
    yaml: &str,
    telegram: &SourceName,
) -> Result<InstalledDeclaration, InstallError> {
    let rebuilt = LoadedDeclaration::from_parts(yaml, decl.prompt.clone())?;
    if rebuilt.fingerprint != decl.fingerprint {
        return Err(InstallError::FingerprintMismatch {
            id: decl.id().to_owned(),
            version: decl.version(),
        });
    }
    let declaration_sha256 = tx.put_blob(yaml.as_bytes())?;
    let prompt_sha256 = match &decl.prompt {
        Some(prompt) => Some(tx.put_blob(prompt.text.as_bytes())?),
        None => None,
    };
    let row = InstalledDeclaration {
        fingerprint: decl.fingerprint.clone(),
        declaration_sha256,
        prompt_sha256,
        context: context_manifest(decl, telegram),
    };
    let key = install_key(decl.id(), decl.version());
    let value =
        serde_json::to_value(&row).map_err(|_| InstallError::Malformed { key: key.clone() })?;
    tx.set_control(&key, &value)?;
    Ok(row)
}

fn blob(
    reader: &(impl Read + ?Sized),
    expected: &Expected<'_>,
    sha: &Sha256Hex,
) -> Result<Vec<u8>, InstallError> {
    let altered = || InstallError::FileAltered {
        id: expected.id.to_owned(),
        version: expected.version,
        sha256: sha.clone(),
    };
    let bytes = reader.blob(sha)?.ok_or_else(altered)?;
    if sha256(&bytes) == *sha {
        Ok(bytes)
    } else {
        Err(altered())
    }
}

/// The declaration version a caller expects to load: the active row's id,
/// version and fingerprint.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// Declaration id.
    pub id: &'a str,
    /// Declaration version.
    pub version: u32,
    /// The fingerprint it must rebuild to.
    pub fingerprint: &'a Fingerprint,
}

/// Loads the installed files of the `expected` declaration and rebuilds it:
/// blobs re-hashed, the declaration re-validated, its fingerprint equal to
/// the install row's, the expected one and the registry's.
pub fn load_installed(
    reader: &(impl Read + ?Sized),
    expected: &Expected<'_>,
) -> Result<(LoadedDeclaration, InstalledDeclaration), InstallError> {
    let key = install_key(expected.id, expected.version);
    let row: InstalledDeclaration = match reader.control(&key)? {
        None => {
            return Err(InstallError::NotInstalled {
                id: expected.id.to_owned(),
                version: expected.version,
            });
        }
        Some(value) => {
            serde_json::from_value(value).map_err(|_| InstallError::Malformed { key })?
        }
    };
    let yaml =
        String::from_utf8(blob(reader, expected, &row.declaration_sha256)?).map_err(|_| {
            InstallError::FileAltered {
                id: expected.id.to_owned(),
                version: expected.version,
                sha256: row.declaration_sha256.clone(),
            }
        })?;
    let prompt = match &row.prompt_sha256 {
        None => None,
        Some(sha) => {
            let where_ = std::path::PathBuf::from(format!("store:blob/{sha}"));
            Some(Prompt::from_bytes(&where_, blob(reader, expected, sha)?)?)
        }
    };
    let decl = LoadedDeclaration::from_parts(&yaml, prompt)?;
    let same = decl.fingerprint == row.fingerprint
        && decl.fingerprint == *expected.fingerprint
        && decl.id() == expected.id
        && decl.version() == expected.version;
    if !same {
        return Err(InstallError::FingerprintMismatch {
            id: expected.id.to_owned(),
            version: expected.version,
        });
    }
    decl.verify(reader)?;
    Ok((decl, row))
}
