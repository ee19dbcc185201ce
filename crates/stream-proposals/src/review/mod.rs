//! The review surface's view-model: what `proposal-list` and
//! `proposal-show` present, computed here so that the CLI only lays it out.
//!
//! [`list::list`] gives one [`list::ProposalView`] per proposal (state,
//! outcome, age, staleness by [`list::is_stale`], `controls`, evidence
//! resolved by [`evidence::resolve_evidence`]); [`show::show`] adds the
//! proposer, the decision and a correction's original with a word diff;
//! `redact` replaces sensitive text by `[sensitive: N chars]`. Rendering for
//! a terminal is `stream_core::terminal`'s job, not this module's.

pub mod evidence;
pub mod list;
mod redact;
pub mod show;

pub use evidence::{Evidence, EvidenceKind};
pub use list::{
    CANDIDATES_SHOWN, Depth, Flag, Outcome, ProposalView, Resolved, State, age, candidates,
    current_version, decision_id, get, is_stale, list, proposal_events, resolve_prefix, rfc3339,
};
pub use redact::marker;
pub use show::{DiffLine, DiffTense, MemoryDiff, ProposalShow, ProposerView, show, word_diff};
