//! The declaration registry: (id, version) → fingerprint, in the store's
//! `controls` rows (`declaration/<id>/<version>` → `{"fingerprint": …}`).
//!
//! A capability change (a tool bound, the proposal set, the prompt, any
//! field) changes the fingerprint; installing or loading the same
//! (id, version) with another fingerprint is refused with
//! [`RegistryError::FingerprintChanged`], so it cannot ship without a
//! version bump.

use serde_json::json;
use stream_core::Fingerprint;
use stream_store::{Read, Store, StoreError};

use crate::load::LoadedDeclaration;

/// Why the registry refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The (id, version) is registered with another fingerprint.
    #[error(
        "declaration {id} version {version} is registered with another fingerprint: capability changed: bump the declaration version"
    )]
    FingerprintChanged {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// Loading an (id, version) that was never installed.
    #[error("declaration {id} version {version} is not installed")]
    NotInstalled {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// The registry row exists but does not hold a fingerprint.
    #[error("registry row {key} is malformed")]
    Malformed {
        /// The control key.
        key: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What [`install`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// The (id, version) was new; its fingerprint is now recorded.
    New,
    /// It was already recorded with the same fingerprint; nothing written.
    Converged,
}

/// The control key of one (id, version).
pub fn registry_key(id: &str, version: u32) -> String {
    format!("declaration/{id}/{version}")
}

fn recorded<R: Read + ?Sized>(
    reader: &R,
    id: &str,
    version: u32,
) -> Result<Option<Fingerprint>, RegistryError> {
    let key = registry_key(id, version);
    let Some(value) = reader.control(&key)? else {
        return Ok(None);
    };
    value
        .get("fingerprint")
        .and_then(|f| f.as_str())
        .and_then(|f| Fingerprint::parse(f).ok())
        .map(Some)
        .ok_or(RegistryError::Malformed { key })
}

fn compare(
    found: &Fingerprint,
    expected: &Fingerprint,
    id: &str,
    version: u32,
) -> Result<(), RegistryError> {
    if found == expected {
        Ok(())
    } else {
        Err(RegistryError::FingerprintChanged {
            id: id.to_owned(),
            version,
        })
    }
}

/// Records (id, version) → fingerprint in one transaction. The same
/// fingerprint converges; another is refused and nothing is written.
pub fn install(
    store: &dyn Store,
    id: &str,
    version: u32,
    fingerprint: &Fingerprint,
) -> Result<Installed, RegistryError> {
    let mut tx = store.begin()?;
    match recorded(&*tx, id, version)? {
        Some(found) => {
            compare(&found, fingerprint, id, version)?;
            Ok(Installed::Converged)
        }
        None => {
            tx.set_control(
                &registry_key(id, version),
                &json!({ "fingerprint": fingerprint }),
            )?;
            tx.commit()?;
            Ok(Installed::New)
        }
    }
}

/// Checks that (id, version) is installed with exactly this fingerprint.
pub fn verify<R: Read + ?Sized>(
    reader: &R,
    id: &str,
    version: u32,
    fingerprint: &Fingerprint,
) -> Result<(), RegistryError> {
    match recorded(reader, id, version)? {
        Some(found) => compare(&found, fingerprint, id, version),
        None => Err(RegistryError::NotInstalled {
            id: id.to_owned(),
            version,
        }),
    }
}

impl LoadedDeclaration {
    /// [`install`]s this declaration's fingerprint.
    pub fn install(&self, store: &dyn Store) -> Result<Installed, RegistryError> {
        install(store, self.id(), self.version(), &self.fingerprint)
    }

    /// [`verify`]s this declaration against the registry.
    pub fn verify<R: Read + ?Sized>(&self, reader: &R) -> Result<(), RegistryError> {
        verify(reader, self.id(), self.version(), &self.fingerprint)
    }
}
