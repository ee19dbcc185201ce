//! Strict payload types for every event of the catalog (docs/design.md §5).
//!
//! All payloads deny unknown fields; literal fields are literal types.

pub mod activation;
pub mod agent;
pub mod common;
pub mod decision;
pub mod filesystem;
pub mod focus;
pub mod judgment;
pub mod proposals;
pub mod signed;
pub mod telegram;

pub use activation::*;
pub use agent::*;
pub use common::*;
pub use decision::*;
pub use filesystem::*;
pub use focus::*;
pub use judgment::*;
pub use proposals::*;
pub use signed::*;
pub use telegram::*;
