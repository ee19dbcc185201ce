//! One proposal whole, as `proposal-show` presents it: the list view plus
//! the proposer's provenance, the decision, and for a correction the
//! original reply beside the replacement with a word diff. The memory diff
//! is computed by `stream-memory` (with the materializer's own byte
//! composition) and handed in as a [`MemoryDiff`].

use serde::Serialize;
use stream_context::Snapshot;
use stream_context::Turn;
use stream_core::payload::{
    CorrectionProposed, FocusDeclarationProposed, MemoryChangeProposed, MessageObservation,
    Proposer, RecordedDecision,
};
use stream_core::{EventId, VersionId};
use stream_store::{Read, StoreError};

use super::list::{Outcome, ProposalView, State, rfc3339};

/// Who proposed: the run and its provenance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposerView {
    /// The proposing run.
    pub run_id: String,
    /// Agent id.
    pub agent_id: String,
    /// Declaration version.
    pub agent_version: u32,
    /// Declaration fingerprint.
    pub declaration_fingerprint: String,
    /// Provider wire format.
    pub provider: &'static str,
    /// Model name.
    pub model: String,
    /// The context snapshot the run saw.
    pub context_snapshot_id: String,
}

impl From<&Proposer> for ProposerView {
    fn from(p: &Proposer) -> Self {
        Self {
            run_id: p.run_id.to_string(),
            agent_id: p.agent_id.to_string(),
            agent_version: p.agent_version,
            declaration_fingerprint: p.declaration_fingerprint.to_string(),
            provider: p.provider.api.as_str(),
            model: p.provider.model.as_str().to_owned(),
            context_snapshot_id: p.context_snapshot_id.to_string(),
        }
    }
}

/// The human decision, when there is one.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionView {
    /// The decision event.
    pub id: EventId,
    /// `accept`, `edit` or `reject`.
    pub disposition: &'static str,
    /// Who decided.
    pub actor: String,
    /// Submission id.
    pub submission_id: String,
    /// Edit only: the operator's text.
    pub replacement: Option<String>,
    /// When it was recorded, RFC 3339.
    pub recorded_at: String,
}

impl std::fmt::Debug for DecisionView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionView")
            .field("id", &self.id)
            .field("disposition", &self.disposition)
            .finish_non_exhaustive()
    }
}

/// A memory change as the materializer would apply it.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDiff {
    /// `memory.md`'s frozen base version.
    pub base_version_id: VersionId,
    /// Its current version (after the scan), if any.
    pub current_version_id: Option<VersionId>,
    /// Unified diff from the base to exactly the bytes the materializer
    /// would write.
    pub diff: String,
    /// When stale: unified diff from the base to the current version.
    pub changed_since_base: Option<String>,
}

impl std::fmt::Debug for MemoryDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDiff")
            .field("base_version_id", &self.base_version_id)
            .field("current_version_id", &self.current_version_id)
            .finish_non_exhaustive()
    }
}

/// One proposal whole (docs/design.md §19, `proposal-show --json`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposalShow {
    /// Every `proposal-list` field.
    #[serde(flatten)]
    pub view: ProposalView,
    /// Memory: the diff to the written bytes; correction: the word diff of
    /// original → replacement (`[-removed-]{+added+}`); focus: null.
    pub diff: Option<String>,
    /// Correction: the reply as delivered and effective when proposed.
    pub original: Option<String>,
    /// Memory: versions and the diff since the base.
    pub memory: Option<MemoryDiff>,
    /// The proposing run.
    pub proposer: Option<ProposerView>,
    /// The decision, if any.
    pub decision: Option<DecisionView>,
}

/// What a memory change's diff says, by where the proposal stands: what
/// accepting would change, what the decision changed (or was, or is, to
/// change), what accepting would have changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffTense {
    /// Pending.
    Would,
    /// Accepted or edited, and materialized.
    Changed,
    /// Accepted or edited, and materialization failed or the decision was
    /// not authorized.
    WasTo,
    /// Accepted or edited, not materialized yet.
    WillChange,
    /// Rejected.
    WouldHave,
}

impl DiffTense {
    /// The tense of a proposal in `state` with `outcome`.
    pub fn of(state: State, outcome: Option<Outcome>) -> Self {
        match (state, outcome) {
            (State::Pending, _) => Self::Would,
            (State::Rejected, _) => Self::WouldHave,
            (State::Accepted | State::Edited, Some(Outcome::Materialized)) => Self::Changed,
            (
                State::Accepted | State::Edited,
                Some(Outcome::MaterializationFailed | Outcome::Unauthorized),
            ) => Self::WasTo,
            (State::Accepted | State::Edited, None | Some(Outcome::JudgmentRecorded)) => {
                Self::WillChange
            }
        }
    }

    /// The title of the diff.
    pub fn heading(self) -> &'static str {
        match self {
            Self::Would => "diff of memory.md: what accepting would change",
            Self::Changed => "diff of memory.md: what the decision changed",
            Self::WasTo => "diff of memory.md: what the decision was to change (not written)",
            Self::WillChange => {
                "diff of memory.md: what the decision will change (not yet written)"
            }
            Self::WouldHave => "diff of memory.md: what accepting would have changed",
        }
    }
}

impl ProposalShow {
    /// The tense of this proposal's memory diff.
    pub fn diff_tense(&self) -> DiffTense {
        DiffTense::of(self.view.state, self.view.outcome)
    }
}

/// What a line of a unified diff is, for a renderer to style it the same on
/// a terminal and on a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffLine {
    /// `---`/`+++` before the first hunk, and `@@` hunk headers.
    Header,
    /// `+` in a hunk.
    Added,
    /// `-` in a hunk.
    Removed,
    /// Unchanged, `\ No newline at end of file`, or not a diff at all (a
    /// `[sensitive: N chars]` marker).
    Context,
}

impl DiffLine {
    /// The kind of each line of `diff` (split at `\n`): `---`/`+++` are
    /// headers only before the first hunk, so that a removed line `-- x`
    /// is not taken for one.
    pub fn kinds(diff: &str) -> Vec<DiffLine> {
        let mut in_hunk = false;
        diff.split('\n')
            .map(|line| {
                if line.starts_with("@@") {
                    in_hunk = true;
                    return Self::Header;
                }
                match (in_hunk, line.as_bytes().first()) {
                    (false, Some(b'-' | b'+'))
                        if line.starts_with("---") || line.starts_with("+++") =>
                    {
                        Self::Header
                    }
                    (true, Some(b'+')) => Self::Added,
                    (true, Some(b'-')) => Self::Removed,
                    (_, _) => Self::Context,
                }
            })
            .collect()
    }
}

/// Builds the show view of `view` (its memory diff, if any, is added by the
/// caller).
pub fn show(store: &dyn Read, view: ProposalView) -> Result<ProposalShow, StoreError> {
    let event = store.event(&view.id)?;
    let proposer = event.as_ref().and_then(|e| {
        e.decode::<MemoryChangeProposed>()
            .map(|p| p.proposer)
            .or_else(|_| e.decode::<CorrectionProposed>().map(|p| p.proposer))
            .or_else(|_| e.decode::<FocusDeclarationProposed>().map(|p| p.proposer))
            .ok()
    });
    let original = match (&view.target_output_event_id, &view.snapshot_id) {
        (Some(target), snapshot_id) => {
            let snapshot = snapshot_id
                .as_ref()
                .and_then(|id| Snapshot::load(store, id).ok());
            original_text(store, snapshot.as_ref(), target)?
        }
        (None, _) => None,
    };
    let diff = match (&original, &view.replacement) {
        (Some(old), Some(new)) => Some(word_diff(old, new)),
        _ => None,
    };
    let decision = match &view.decision_event_id {
        Some(id) => store.event(id)?.and_then(|e| {
            let d = RecordedDecision::decode(&e).ok()?.decision();
            Some(DecisionView {
                id: id.clone(),
                disposition: d.disposition.as_str(),
                actor: d.actor.to_string(),
                submission_id: d.submission_id.to_string(),
                replacement: d.replacement,
                recorded_at: rfc3339(e.recorded_at_ms),
            })
        }),
        None => None,
    };
    Ok(ProposalShow {
        view,
        diff,
        original,
        memory: None,
        proposer: proposer.as_ref().map(ProposerView::from),
        decision,
    })
}

/// The corrected reply's text as it was effective when the proposal was
/// made: the proposer's snapshot transcript holds it (judgments applied);
/// else the output as delivered.
fn original_text(
    store: &dyn Read,
    snapshot: Option<&Snapshot>,
    target: &EventId,
) -> Result<Option<String>, StoreError> {
    let from_snapshot = snapshot.and_then(|s| {
        s.transcript.iter().find_map(|t| match t {
            Turn::Assistant(a) if &a.output_event_id == target => Some(a.text.clone()),
            Turn::Assistant(_) | Turn::User(_) => None,
        })
    });
    if from_snapshot.is_some() {
        return Ok(from_snapshot);
    }
    Ok(store
        .event(target)?
        .and_then(|e| e.decode::<MessageObservation>().ok())
        .map(|o| o.text.as_str().to_owned()))
}

/// A word diff in git's plain form: `[-removed-]` and `{+added+}` inline,
/// consecutive words of one kind in one bracket.
pub fn word_diff(old: &str, new: &str) -> String {
    use similar::{ChangeTag, TextDiff};
    let diff = TextDiff::from_words(old, new);
    let mut out = String::with_capacity(old.len() + new.len());
    let mut run: Option<(ChangeTag, String)> = None;
    let flush = |out: &mut String, run: Option<(ChangeTag, String)>| match run {
        Some((ChangeTag::Equal, text)) => out.push_str(&text),
        Some((ChangeTag::Delete, text)) => {
            out.push_str("[-");
            out.push_str(&text);
            out.push_str("-]");
        }
        Some((ChangeTag::Insert, text)) => {
            out.push_str("{+");
            out.push_str(&text);
            out.push_str("+}");
        }
        None => {}
    };
    for change in diff.iter_all_changes() {
        match &mut run {
            Some((tag, text)) if *tag == change.tag() => text.push_str(change.value()),
            _ => {
                flush(&mut out, run.take());
                run = Some((change.tag(), change.value().to_owned()));
            }
        }
    }
    flush(&mut out, run);
    out
}

#[cfg(test)]
mod tests {
    use super::{DiffLine, DiffTense, Outcome, State, word_diff};

    #[test]
    fn diff_lines_are_headers_only_before_the_first_hunk() {
        let diff = "--- a\n+++ b\n@@ -1,2 +1,2 @@\n same\n--- removed dashes\n+++ added pluses\n\\ No newline at end of file\n";
        use DiffLine::{Added, Context, Header, Removed};
        assert_eq!(
            DiffLine::kinds(diff),
            [
                Header, Header, Header, Context, Removed, Added, Context, Context
            ]
        );
        assert_eq!(DiffLine::kinds("[sensitive: 12 chars]"), [Context]);
    }

    #[test]
    fn a_diff_s_tense_follows_the_decision_and_its_outcome() {
        for (state, outcome, tense) in [
            (State::Pending, None, DiffTense::Would),
            (
                State::Accepted,
                Some(Outcome::Materialized),
                DiffTense::Changed,
            ),
            (
                State::Edited,
                Some(Outcome::Materialized),
                DiffTense::Changed,
            ),
            (
                State::Accepted,
                Some(Outcome::MaterializationFailed),
                DiffTense::WasTo,
            ),
            (
                State::Edited,
                Some(Outcome::MaterializationFailed),
                DiffTense::WasTo,
            ),
            (State::Accepted, None, DiffTense::WillChange),
            (State::Rejected, None, DiffTense::WouldHave),
        ] {
            assert_eq!(
                DiffTense::of(state, outcome),
                tense,
                "{state:?} {outcome:?}"
            );
        }
    }

    #[test]
    fn word_diff_marks_removed_and_added_words() {
        assert_eq!(
            word_diff("The capital is Lyon.", "The capital is Paris."),
            "The capital is [-Lyon.-]{+Paris.+}"
        );
        assert_eq!(word_diff("same", "same"), "same");
        assert_eq!(
            word_diff("Sydney.", "The capital is Canberra."),
            "[-Sydney.-]{+The capital is Canberra.+}"
        );
    }
}
