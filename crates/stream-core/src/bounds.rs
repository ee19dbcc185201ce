//! The one table of tool-argument and document bounds. The proposal tools'
//! JSON Schemas (`stream_protocol::tools`, which the worker checks calls
//! against) are generated from it, and the parent's typed checks
//! ([`crate::text`], [`crate::payload`]) are declared with it.
//!
//! Lengths count Unicode scalar values, never bytes or UTF-16 units: JSON
//! Schema's `minLength`/`maxLength` count them, so the worker's schema check
//! and the parent's typed check agree only in this unit.

/// `request_memory_change.proposed_text`: 1–32,768 characters.
pub const PROPOSED_TEXT_MAX: usize = 32_768;
/// A proposal's `reason`: 1–1,000 characters.
pub const REASON_MAX: usize = 1_000;
/// A reply, and `submit_correction.replacement`: 1–4,096 characters.
pub const REPLY_MAX: usize = 4_096;
/// The most evidence ids one call may cite.
pub const EVIDENCE_IDS_MAX: usize = 16;
/// `propose_focus.objective`: 1–2,000 characters.
pub const OBJECTIVE_MAX: usize = 2_000;
/// A focus's subscriptions, and the event types of each: at most 16.
pub const SUBSCRIPTIONS_MAX: usize = 16;
/// The event types of one subscription: 1–16.
pub const SUBSCRIPTION_TYPES_MAX: usize = 16;
/// One event type name: 1–128 characters.
pub const EVENT_TYPE_MAX: usize = 128;
/// Each half of a source name `<kind>:<name>`: 1–128 characters.
pub const SOURCE_PART_MAX: usize = 128;
/// A focus slug: 3–64 of `[a-z0-9-]`.
pub const SLUG_MIN: usize = 3;
/// See [`SLUG_MIN`].
pub const SLUG_MAX: usize = 64;
/// `budgets.maxRunsPerDay`: 1–1,000.
pub const RUNS_PER_DAY_MAX: u32 = 1_000;
/// `budgets.maxOutputTokensPerRun`: 1–32,000.
pub const OUTPUT_TOKENS_PER_RUN_MAX: u32 = 32_000;
/// `budgets.maxDays` and `retirement.days`: 1–365.
pub const DAYS_MAX: u32 = 365;
/// A context document's path relative to its root: 1–1,024 characters.
pub const DOCUMENT_PATH_MAX: usize = 1_024;
/// The literal that selects the most recent correctable reply.
pub const LATEST: &str = "latest";
