//! The errors of loading and checking a declaration. Each refusal names the
//! offending field as it is spelled in the YAML (`policy.externalActions`,
//! `commands[1].name`).

use std::path::PathBuf;

/// A declaration could not be loaded or broke a rule.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// The declaration file could not be read.
    #[error("cannot read declaration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML did not parse into the strict model, or a rule refused it.
    #[error("declaration field `{field}` is invalid: {rule}")]
    Invalid {
        /// The offending field.
        field: String,
        /// What is wrong with it.
        rule: String,
    },
    /// The prompt file named by `prompt` could not be used.
    #[error("declaration field `prompt` is invalid: prompt file {path} {problem}")]
    Prompt {
        /// The prompt file.
        path: PathBuf,
        /// What is wrong with it.
        problem: PromptProblem,
    },
    /// The declaration or its manifest could not be canonicalized.
    #[error("declaration cannot be canonicalized for its fingerprint")]
    Canon,
}

impl DeclarationError {
    /// A refusal naming `field`.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// The offending field, when the error names one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            Self::Prompt { .. } => Some("prompt"),
            Self::Read { .. } | Self::Canon => None,
        }
    }
}

/// Why a prompt file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PromptProblem {
    /// It could not be opened or read.
    #[error("cannot be read: {0}")]
    Unreadable(std::io::Error),
    /// It is not a regular file.
    #[error("is not a regular file")]
    NotAFile,
    /// It is empty.
    #[error("is empty")]
    Empty,
    /// It is larger than [`crate::load::MAX_PROMPT_BYTES`].
    #[error("has more than the {max} bytes allowed")]
    TooLarge {
        /// The bytes read (at most one more than the bound).
        size: u64,
        /// The bound.
        max: u64,
    },
    /// It is not UTF-8.
    #[error("is not UTF-8")]
    NotUtf8,
}
