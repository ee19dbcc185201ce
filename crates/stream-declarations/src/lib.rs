//! Declarations: what an agent is allowed to be.
//!
//! Owns the declaration file format of `docs/design.md §6` ([`model`], parsed
//! strictly from YAML), its rules ([`mod@validate`]), the
//! proposal capability manifest as code — fixed tool names, descriptions and
//! JSON Schemas with every bound ([`tools`]) — the trusted parent's typed
//! second validation of tool arguments ([`args`]), the fingerprint over
//! declaration + manifest + prompt hash ([`load`]), the registry that
//! refuses a changed capability under an unchanged version ([`registry`]),
//! and a version's installed files, which a running serve follows
//! ([`install`]).
//!
//! Read [`LoadedDeclaration::load`] and [`tools::tool_spec`] first.
//!
//! It does not run anything: it neither builds snapshots nor talks to a
//! provider or the worker, and it does not decide which tools a given run
//! exposes (that needs the snapshot's capabilities). The focus declaration
//! contract (`docs/design.md §18`) lives in `stream_core::payload::focus`.

#![deny(missing_docs)]

pub mod args;
pub mod error;
pub mod install;
pub mod load;
pub mod model;
pub mod registry;
pub mod tools;
pub mod validate;

pub use args::{
    ArgsError, ArgsProblem, ProposeFocusArgs, RequestMemoryChangeArgs, SubmitCorrectionArgs,
    TargetOutput, ToolArgs, parse_arguments, parse_arguments_text,
};
pub use error::{DeclarationError, PromptProblem};
pub use load::{LoadedDeclaration, Prompt, fingerprint, parse_yaml};
pub use model::{Declaration, Kind};
pub use registry::{Installed, RegistryError};
pub use tools::{CapabilityManifest, PACKET_PROTOCOL, ToolSpec, tool_def, tool_name, tool_spec};
pub use validate::validate;
