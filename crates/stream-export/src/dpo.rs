//! Preference pairs (`--format dpo`, docs/design.md §19): OpenAI's preference
//! fine-tuning shape, built from the same revalidated selection as `sft`.
//! The preferred output is the judged replacement, the non-preferred one the
//! judged reply's original text; a judgment whose replacement equals the
//! original teaches no preference and is excluded (`no-preference`).

use serde::Serialize;
use stream_core::payload::MessageObservation;
use stream_store::Read;

use crate::ExportError;
use crate::example::{ChatMessage, Example, Provenance};
use crate::select::{Exclusion, Selection};

/// The prompt of a pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairInput {
    /// System, transcript and trigger: the example without its assistant turn.
    pub messages: Vec<ChatMessage>,
}

/// One JSONL line of `--format dpo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreferencePair {
    /// The prompt.
    pub input: PairInput,
    /// The judged replacement.
    pub preferred_output: Vec<ChatMessage>,
    /// The reply as the model produced it.
    pub non_preferred_output: Vec<ChatMessage>,
    /// The same chain as `sft`.
    pub provenance: Provenance,
}

/// Pairs and what was left out (the selection's exclusions plus
/// `no-preference`).
#[derive(Debug, Default)]
pub struct PairSelection {
    /// Pairs, in judgment order.
    pub pairs: Vec<PreferencePair>,
    /// Exclusions by reason.
    pub excluded: std::collections::BTreeMap<Exclusion, usize>,
    /// Earlier turns left out of the prompts, by reason.
    pub left_out_turns: std::collections::BTreeMap<Exclusion, usize>,
}

/// Turns a revalidated selection into preference pairs.
pub fn preference_pairs(
    store: &dyn Read,
    selection: Selection,
) -> Result<PairSelection, ExportError> {
    let mut out = PairSelection {
        pairs: Vec::new(),
        excluded: selection.excluded,
        left_out_turns: selection.left_out_turns,
    };
    for example in selection.examples {
        match pair_of(store, example)? {
            Some(pair) => out.pairs.push(pair),
            None => *out.excluded.entry(Exclusion::NoPreference).or_default() += 1,
        }
    }
    Ok(out)
}

fn pair_of(store: &dyn Read, example: Example) -> Result<Option<PreferencePair>, ExportError> {
    let Example {
        mut messages,
        provenance,
    } = example;
    let Some(output_id) = &provenance.output_event_id else {
        return Err(ExportError::IncompleteExample {
            index: 0,
            field: "outputEventId",
        });
    };
    let original = store
        .event(output_id)?
        .and_then(|e| e.decode::<MessageObservation>().ok())
        .map(|o| o.text.as_str().to_owned());
    let (Some(original), Some(preferred)) = (original, messages.pop()) else {
        return Ok(None);
    };
    if preferred.role != "assistant" || preferred.content == original {
        return Ok(None);
    }
    Ok(Some(PreferencePair {
        input: PairInput { messages },
        preferred_output: vec![preferred],
        non_preferred_output: vec![ChatMessage {
            role: "assistant",
            content: original,
        }],
        provenance,
    }))
}
