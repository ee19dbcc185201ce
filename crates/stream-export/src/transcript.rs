//! What an example's messages hold, for both exports.
//!
//! - system: the declaration's prompt; the private export adds `memory.md`
//!   (the external one must not: its content includes accepted memory
//!   proposals); neither has the annotation guide;
//! - each owner message: its text (after `⟨photo attached⟩` when it had a
//!   photo, look-alikes neutralized as the model saw them), without the
//!   internal `⟨message …⟩` annotation;
//! - each earlier reply the model wrote, without the internal `⟨reply …⟩`
//!   annotation: private, its effective text as the model saw it; external,
//!   the text originally delivered, or the replacement of an externally
//!   eligible judgment when that is what the model saw — never an accepted
//!   self-correction, which is private;
//! - an earlier reply the parent wrote ([`parent_written`]: a proposal's
//!   acknowledgment, a deterministic reply) is left out with the owner
//!   message it answered and the owner's `/correct` of it: its call is not
//!   in the example (proposals never are), so keeping "I saved that…" would
//!   teach a claim without the call;
//! - the trigger, then the judged replacement as the assistant turn.
//!
//! Ids stay in `provenance` only: an annotated assistant turn would teach
//! the model to write annotations.

use std::collections::{BTreeMap, BTreeSet};

use stream_context::packet::prompt_with_memory;
use stream_context::{Snapshot, Turn, UserTurn};
use stream_core::payload::{MessageObservation, TextOrigin};
use stream_core::{EventId, annotation};
use stream_store::Read;

use crate::ExportKind;
use crate::example::ChatMessage;
use crate::select::Exclusion;

/// What the manifest says about turns left out of every example.
macro_rules! left_out {
    () => {
        "; earlier replies the system wrote rather than the model (a proposal's fixed \
acknowledgment, a deterministic reply) are left out together with the owner message they \
answered and any /correct of them, and a judged reply the system wrote is no example (excluded: acknowledgment, \
deterministic)"
    };
}

/// What an external example holds, for the manifest.
pub const EXTERNAL_CONTENTS: &str = concat!(
    "system: the declaration's prompt only (no memory.md); user: the owner's message text, \
without internal id annotations; assistant (earlier): the reply as originally delivered, or as \
replaced by an externally eligible judgment, without internal id annotations; last assistant \
turn: the judged replacement; event ids only in provenance",
    left_out!()
);

/// What a private example holds, for the manifest.
pub const PRIVATE_CONTENTS: &str = concat!(
    "the snapshot the model saw, as text: system prompt with memory.md, the owner's messages and \
the effective reply texts, the trigger, without internal id annotations or their guide; last \
assistant turn: the judged replacement; event ids only in provenance",
    left_out!()
);

/// What the export's judgments say about earlier turns.
#[derive(Debug, Default)]
pub(crate) struct Judgments {
    /// Replacement texts of externally eligible judgments, by judged output.
    pub(crate) eligible: BTreeMap<EventId, BTreeSet<String>>,
    /// The output each judgment judged, by its feedback event (an owner
    /// `/correct` message, or a decision).
    pub(crate) judged_by_feedback: BTreeMap<EventId, EventId>,
}

/// Why a transcript could not be rendered.
#[derive(Debug)]
pub(crate) enum TranscriptError {
    /// An earlier reply's output event is missing or invalid: the example
    /// is excluded.
    Broken,
    /// The store failed: the export fails.
    Store(stream_store::StoreError),
}

/// The messages of one example and the earlier turns left out, by reason.
pub(crate) struct Rendered {
    pub(crate) messages: Vec<ChatMessage>,
    pub(crate) left_out: BTreeMap<Exclusion, usize>,
}

/// Whether a reply's text was written by the system rather than the model:
/// such a text is never a training target, judged or earlier.
pub(crate) fn parent_written(origin: TextOrigin) -> Option<Exclusion> {
    match origin {
        TextOrigin::Model => None,
        TextOrigin::Acknowledgment => Some(Exclusion::Acknowledgment),
        TextOrigin::Deterministic => Some(Exclusion::Deterministic),
    }
}

fn user_text(turn: &UserTurn) -> String {
    annotation::owner_message_without_id(turn.image.is_some(), turn.text.as_deref())
}

fn output(store: &dyn Read, id: &EventId) -> Result<MessageObservation, TranscriptError> {
    store
        .event(id)
        .map_err(TranscriptError::Store)?
        .ok_or(TranscriptError::Broken)?
        .decode()
        .map_err(|_| TranscriptError::Broken)
}

/// The messages of one example of `kind`.
pub(crate) fn messages(
    store: &dyn Read,
    snapshot: &Snapshot,
    replacement: &str,
    kind: ExportKind,
    judgments: &Judgments,
) -> Result<Rendered, TranscriptError> {
    // Every earlier reply's output: who wrote it, what it answered.
    let mut outputs = BTreeMap::new();
    let mut left_out = BTreeMap::new();
    let mut left = BTreeSet::new();
    let mut answered = BTreeSet::new();
    for turn in &snapshot.transcript {
        if let Turn::Assistant(reply) = turn {
            let out = output(store, &reply.output_event_id)?;
            if let Some(reason) = parent_written(out.origin) {
                *left_out.entry(reason).or_default() += 1;
                left.insert(reply.output_event_id.clone());
                answered.insert(out.trigger_event_id.clone());
            }
            outputs.insert(reply.output_event_id.clone(), out);
        }
    }
    let system = match kind {
        ExportKind::Private => prompt_with_memory(snapshot),
        ExportKind::External => snapshot.prompt.text.trim_end().to_owned(),
    };
    let mut out = vec![ChatMessage {
        role: "system",
        content: system,
    }];
    for turn in &snapshot.transcript {
        match turn {
            Turn::User(user)
                if answered.contains(&user.event_id)
                    || judgments
                        .judged_by_feedback
                        .get(&user.event_id)
                        .is_some_and(|output| left.contains(output)) => {}
            Turn::User(user) => out.push(ChatMessage {
                role: "user",
                content: user_text(user),
            }),
            Turn::Assistant(reply) => {
                let Some(delivered) = outputs.get(&reply.output_event_id) else {
                    return Err(TranscriptError::Broken);
                };
                if parent_written(delivered.origin).is_some() {
                    continue;
                }
                let text = match kind {
                    ExportKind::Private => reply.text.as_str(),
                    ExportKind::External => {
                        let seen_is_eligible = judgments
                            .eligible
                            .get(&reply.output_event_id)
                            .is_some_and(|texts| texts.contains(&reply.text));
                        if seen_is_eligible {
                            reply.text.as_str()
                        } else {
                            delivered.text.as_str()
                        }
                    }
                };
                out.push(ChatMessage {
                    role: "assistant",
                    content: annotation::neutralize(text).into_owned(),
                });
            }
        }
    }
    out.push(ChatMessage {
        role: "user",
        content: user_text(&snapshot.trigger),
    });
    out.push(ChatMessage {
        role: "assistant",
        content: replacement.to_owned(),
    });
    Ok(Rendered {
        messages: out,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_model_s_own_text_is_a_target() {
        for (origin, left_out) in [
            (TextOrigin::Model, None),
            (TextOrigin::Acknowledgment, Some(Exclusion::Acknowledgment)),
            (TextOrigin::Deterministic, Some(Exclusion::Deterministic)),
        ] {
            assert_eq!(parent_written(origin), left_out, "{origin:?}");
        }
    }
}
