//! What an external example holds: only text that is itself externally
//! eligible (issue 12).
//!
//! - system: the declaration's prompt alone — no `memory.md` (its content
//!   includes accepted memory proposals) and no annotation guide;
//! - each owner message: its text (after `⟨photo attached⟩` when it had a
//!   photo, look-alikes neutralized as the model saw them), without the
//!   internal `⟨message …⟩` annotation;
//! - each earlier reply: the text originally delivered, or the replacement
//!   of an externally eligible judgment when that is what the model saw —
//!   never an accepted self-correction, which is private — without the
//!   internal `⟨reply …⟩` annotation;
//! - the trigger, then the judged replacement as the assistant turn.
//!
//! Ids stay in `provenance` only. The private export keeps exactly the
//! snapshot the model saw ([`crate::select`]).

use std::collections::{BTreeMap, BTreeSet};

use stream_context::{Snapshot, Turn, UserTurn};
use stream_core::payload::MessageObservation;
use stream_core::{EventId, annotation};
use stream_store::Read;

use crate::example::ChatMessage;

/// What an external example holds, for the manifest.
pub const EXTERNAL_CONTENTS: &str = "system: the declaration's prompt only (no memory.md); \
user: the owner's message text, without internal id annotations; assistant (earlier): the reply \
as originally delivered, or as replaced by an externally eligible judgment, without internal id \
annotations; last assistant turn: the judged replacement; event ids only in provenance";

/// What a private example holds, for the manifest.
pub const PRIVATE_CONTENTS: &str = "exactly the snapshot the model saw: system prompt with \
memory.md and the annotation guide, the transcript with its id annotations and effective reply \
texts, the trigger; last assistant turn: the judged replacement";

/// Replacement texts of externally eligible judgments, by judged output.
pub(crate) type EligibleReplacements = BTreeMap<EventId, BTreeSet<String>>;

/// Why a transcript could not be rendered for external use.
#[derive(Debug)]
pub(crate) enum TranscriptError {
    /// An earlier reply's output event is missing or invalid: the example
    /// is excluded.
    Broken,
    /// The store failed: the export fails.
    Store(stream_store::StoreError),
}

fn user_text(turn: &UserTurn) -> String {
    annotation::owner_message_without_id(turn.image.is_some(), turn.text.as_deref())
}

/// The external messages of one example.
pub(crate) fn messages(
    store: &dyn Read,
    snapshot: &Snapshot,
    replacement: &str,
    eligible: &EligibleReplacements,
) -> Result<Vec<ChatMessage>, TranscriptError> {
    let mut out = vec![ChatMessage {
        role: "system",
        content: snapshot.prompt.text.trim_end().to_owned(),
    }];
    for turn in &snapshot.transcript {
        match turn {
            Turn::User(user) => out.push(ChatMessage {
                role: "user",
                content: user_text(user),
            }),
            Turn::Assistant(reply) => {
                let seen_is_eligible = eligible
                    .get(&reply.output_event_id)
                    .is_some_and(|texts| texts.contains(&reply.text));
                let content = if seen_is_eligible {
                    reply.text.clone()
                } else {
                    let event = store
                        .event(&reply.output_event_id)
                        .map_err(TranscriptError::Store)?
                        .ok_or(TranscriptError::Broken)?;
                    let output: MessageObservation =
                        event.decode().map_err(|_| TranscriptError::Broken)?;
                    output.text.as_str().to_owned()
                };
                out.push(ChatMessage {
                    role: "assistant",
                    content,
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
    Ok(out)
}
