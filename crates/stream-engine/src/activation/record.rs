//! What an activation records: its id, its step events, its working state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;
use stream_core::canon::canonical_sha256;
use stream_core::payload::{ActivationStep, ActivationStepKind, MessageReceived};
use stream_core::text::Label;
use stream_core::{EventId, SourceName};
use stream_declarations::LoadedDeclaration;
use stream_store::{EventQuery, Read};

use super::error::ActivationError;

/// The control key of an activation's working state.
pub fn state_key(activation_id: &str) -> String {
    format!("activation:{activation_id}")
}

/// The working state an activation keeps beside its step events: what a
/// rerun needs and the store no longer shows once a step has run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActivationState {
    /// The consumer that was active at the freeze.
    pub previous_consumer: Option<String>,
    /// The webhook URL Telegram reported before `deleteWebhook`.
    pub webhook_url: Option<String>,
}

/// The id of the activation of `decl` after `generation` completed ones.
pub fn activation_id(decl: &LoadedDeclaration, generation: u64) -> Result<Label, ActivationError> {
    let malformed = || ActivationError::RecordMalformed {
        activation: format!("{}@{}", decl.id(), decl.version()),
    };
    let hash = canonical_sha256(&json!({
        "ns": "thestream/activation/1",
        "id": decl.id(),
        "version": decl.version(),
        "fingerprint": decl.fingerprint,
        "generation": generation,
    }))
    .map_err(|_| malformed())?;
    Label::new(hash.as_str()).map_err(|_| malformed())
}

/// The steps recorded for one activation.
pub type RecordedSteps = BTreeMap<ActivationStepKind, RecordedStep>;

/// One recorded step.
#[derive(Debug, Clone)]
pub struct RecordedStep {
    /// Its event id.
    pub id: EventId,
    /// Its payload.
    pub step: ActivationStep,
}

/// Every recorded activation: id → its steps.
pub fn recorded_activations(
    reader: &(impl Read + ?Sized),
) -> Result<BTreeMap<String, RecordedSteps>, ActivationError> {
    let source = SourceName::fixed(SourceName::ACTIVATION);
    let mut all: BTreeMap<String, RecordedSteps> = BTreeMap::new();
    let mut after = 0;
    loop {
        let batch = reader.events(&EventQuery::source_after(&source, after).limit(512))?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        for event in &batch {
            let step: ActivationStep =
                event
                    .decode()
                    .map_err(|_| ActivationError::RecordMalformed {
                        activation: event.id().short(12).to_owned(),
                    })?;
            all.entry(step.activation_id.as_str().to_owned())
                .or_default()
                .insert(
                    step.step,
                    RecordedStep {
                        id: event.id().clone(),
                        step,
                    },
                );
        }
    }
    Ok(all)
}

/// Owner messages of `telegram` after `consumer`'s progress, up to `head`:
/// the triggers it has not answered.
pub fn unanswered(
    reader: &(impl Read + ?Sized),
    consumer: &str,
    telegram: &SourceName,
    head: u64,
) -> Result<u64, ActivationError> {
    let mut after = reader
        .progress(consumer)?
        .filter(|p| p.source == *telegram)
        .map_or(0, |p| p.seq);
    let mut count = 0;
    while after < head {
        let batch = reader.events(&EventQuery::source_after(telegram, after).limit(512))?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        count += batch
            .iter()
            .filter(|e| e.seq <= head && e.is::<MessageReceived>())
            .count() as u64;
    }
    Ok(count)
}
