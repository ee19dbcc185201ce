//! The active declaration: a control row naming the conversation
//! declaration the consumer serves, and the first-install rule of `serve`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stream_core::Fingerprint;
use stream_declarations::LoadedDeclaration;
use stream_declarations::registry::RegistryError;
use stream_store::{Read, Store, StoreError};

/// The control key.
pub const ACTIVE_DECLARATION: &str = "active-declaration";

/// One menu entry of the active declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveCommand {
    /// Command without slash.
    pub command: String,
    /// Menu description.
    pub description: String,
}

/// The value of the `active-declaration` control row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActiveDeclaration {
    /// Declaration id.
    pub id: String,
    /// Declaration version.
    pub version: u32,
    /// Its fingerprint.
    pub fingerprint: Fingerprint,
    /// Its Telegram commands, in menu order.
    pub commands: Vec<ActiveCommand>,
}

impl ActiveDeclaration {
    /// The control value of a loaded declaration.
    pub fn of(decl: &LoadedDeclaration) -> Self {
        Self {
            id: decl.id().to_owned(),
            version: decl.version(),
            fingerprint: decl.fingerprint.clone(),
            commands: decl
                .declaration
                .commands
                .iter()
                .map(|c| ActiveCommand {
                    command: c.name.as_str().to_owned(),
                    description: c.description.as_str().to_owned(),
                })
                .collect(),
        }
    }

    /// The consumer name: `<agent>@<version>`.
    pub fn consumer(&self) -> String {
        format!("{}@{}", self.id, self.version)
    }
}

/// Why the configured declaration cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ActiveError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The registry refused (e.g. a changed capability under the same version).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Another version is active.
    #[error(
        "{active} is active, not the configured {configured}: set agent.declaration to the active declaration's file, or switch with `thestream activate --declaration FILE`"
    )]
    OtherActive {
        /// The active `<id>@<version>`.
        active: String,
        /// The configured `<id>@<version>`.
        configured: String,
    },
    /// The control row does not parse.
    #[error("the active-declaration control row is malformed")]
    Malformed,
}

/// Reads the active declaration.
pub fn active(reader: &dyn Read) -> Result<Option<ActiveDeclaration>, ActiveError> {
    match reader.control(ACTIVE_DECLARATION)? {
        None => Ok(None),
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|_| ActiveError::Malformed),
    }
}

/// `serve`'s rule: on a store with no active declaration, install and
/// activate the configured one (its consumer then starts at the beginning of
/// the Telegram source); when the same one is active, verify its fingerprint;
/// when another is active, refuse and name `activate`.
pub fn ensure_active(
    store: &dyn Store,
    conversation: &LoadedDeclaration,
    replies: &LoadedDeclaration,
) -> Result<ActiveDeclaration, ActiveError> {
    let wanted = ActiveDeclaration::of(conversation);
    conversation.install(store)?;
    replies.install(store)?;
    let mut tx = store.begin()?;
    match active(&*tx)? {
        Some(current) if current == wanted => Ok(current),
        Some(current) => Err(ActiveError::OtherActive {
            active: format!("{}@{}", current.id, current.version),
            configured: wanted.consumer(),
        }),
        None => {
            let value: Value = serde_json::to_value(&wanted).map_err(|_| ActiveError::Malformed)?;
            tx.set_control(ACTIVE_DECLARATION, &value)?;
            tx.commit()?;
            Ok(wanted)
        }
    }
}
