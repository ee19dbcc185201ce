//! The engine: what happens between a stored Telegram message and a stored
//! delivery receipt.
//!
//! Owns the consumer of the active conversation declaration
//! (`<agent>@<version>`): it reads the Telegram source after its progress and
//! routes each owner message — bare `/focus` and `/help` to the deterministic
//! replies declaration (no provider request), `/correct <text>` to a human
//! judgment plus a fixed acknowledgment, everything else to a model run. A
//! model run builds (or, on retry, loads) its snapshot, runs attempts through
//! the broker, validates each completion in the parent, and settles it
//! atomically. [`serve`] runs ingress, the consumer and delivery together.
//! [`activation`] moves the conversation to another declaration version in
//! recorded, resumable steps (`thestream activate`), cooperating with a
//! running `serve` through the control rows of [`cooperation`].
//!
//! Read [`Engine::process_available`] first, then [`model_run`]. The engine is
//! the only orchestrator besides the CLI; the rules it applies live in the
//! crates it calls.

#![deny(missing_docs)]

pub mod activation;
pub mod active;
pub mod attempter;
pub mod cooperation;
mod correct;
mod engine;
mod fixed;
pub mod model_run;
pub mod serve;
mod settings;

pub use engine::{Engine, EngineError, ProcessReport, StageTimes};
pub use settings::{EngineSettings, IngressSettings, ProviderSettings};
/// The `[provider] compat` modes, re-exported for the configuration.
pub use stream_context::packet::ProviderCompat;
