//! Exit codes of docs/design.md §19 and the one error type commands return.

use std::process::ExitCode;

use stream_store::StoreError;

use crate::config::ConfigError;

/// A failed command, by the exit code it maps to.
#[derive(Debug)]
pub enum Failure {
    /// Exit 1: something failed at run time.
    Runtime(anyhow::Error),
    /// Exit 2: bad usage, bad config, or input that failed validation.
    Usage(anyhow::Error),
    /// Exit 3: the request conflicts with something already recorded.
    Conflict(anyhow::Error),
}

impl Failure {
    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Self::Runtime(_) => 1,
            Self::Usage(_) => 2,
            Self::Conflict(_) => 3,
        })
    }

    /// The error to print.
    pub fn error(&self) -> &anyhow::Error {
        match self {
            Self::Runtime(e) | Self::Usage(e) | Self::Conflict(e) => e,
        }
    }

    /// Exit 2 with this message.
    pub fn usage(e: impl Into<anyhow::Error>) -> Self {
        Self::Usage(e.into())
    }

    /// Exit 1 with this message.
    pub fn runtime(e: impl Into<anyhow::Error>) -> Self {
        Self::Runtime(e.into())
    }

    /// A store error of the store `label` names: as [`From<StoreError>`]
    /// maps it, and a disk failure says which store's disk failed.
    pub fn of_store(label: &str, e: StoreError) -> Self {
        match e {
            StoreError::Disk { .. } => {
                Self::Runtime(anyhow::Error::new(e).context(format!("the store {label}")))
            }
            other => other.into(),
        }
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Self::Usage(e.into())
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { .. }
            | StoreError::VersionConflict { .. }
            | StoreError::DocumentConflict { .. } => Self::Conflict(e.into()),
            // The configured file is not one this build may use: the
            // operator must point at another file or another binary, or
            // (a read-only open) run `serve` once to create or migrate it.
            StoreError::Corrupt { .. }
            | StoreError::ForeignDatabase { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::OlderSchema { .. }
            | StoreError::NoStore { .. }
            | StoreError::NotPrivate { .. }
            // A database URL whose TLS setting could expose the login and
            // the store: the operator fixes the URL.
            | StoreError::Tls(_) => Self::Usage(e.into()),
            // The disk failed under a store that was fine: a run-time
            // failure (exit 1, never 2), whenever it happens.
            StoreError::Disk { .. }
            | StoreError::Missing { .. }
            | StoreError::InvalidRow { .. }
            | StoreError::SnapshotHash { .. }
            | StoreError::SnapshotPart { .. }
            | StoreError::Backend(_) => Self::Runtime(e.into()),
        }
    }
}

/// What every command returns.
pub type CmdResult = Result<(), Failure>;
