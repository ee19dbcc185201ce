//! Which judgments become examples, with their chains revalidated.

use std::collections::BTreeMap;

use serde_json::json;
use stream_context::Snapshot;
use stream_core::ids::derive_event_id;
use stream_core::payload::KeyId;
use stream_core::payload::{
    BotCommand, Criterion, DeliveryReceipt, Disposition, JudgmentRecorded, MessageObservation,
    MessageReceived, RunCompleted,
};
use stream_core::{EventId, NewEvent, Payload, SourceName, StoredEvent};
use stream_proposals::authority::TrustedKeys;
use stream_proposals::chain::ProposalBody;
use stream_proposals::project::{ProjectError, verify_decision};
use stream_store::{EventQuery, Read, RunStatus};

use crate::example::{Example, Provenance};
use crate::transcript::{self, Judgments, Rendered, TranscriptError, parent_written};
use crate::{ExportError, ExportKind};

/// Why a judgment is not exported. Content-dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exclusion {
    /// `qualityEligible` is false.
    NotQualityEligible,
    /// External export needs `externalExportEligible`.
    NotExternallyEligible,
    /// A later judgment of the same output is the active one.
    Superseded,
    /// A link of the private-provenance chain is missing or inconsistent.
    Chain(&'static str),
    /// `--format dpo`: the replacement equals the original.
    NoPreference,
    /// The judged reply is the parent's fixed acknowledgment of a proposal:
    /// its call is not in the example, so it would teach a claim without it.
    Acknowledgment,
    /// The judged reply is a deterministic declaration's fixed text, which
    /// the model did not write.
    Deterministic,
}

impl Exclusion {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotQualityEligible => "not-quality-eligible",
            Self::NotExternallyEligible => "not-externally-eligible",
            Self::Superseded => "superseded",
            Self::Chain(link) => link,
            Self::NoPreference => "no-preference",
            Self::Acknowledgment => "acknowledgment",
            Self::Deterministic => "deterministic",
        }
    }
}

/// The examples and what was left out.
#[derive(Debug, Default)]
pub struct Selection {
    /// Examples, in judgment order.
    pub examples: Vec<Example>,
    /// Exclusions by reason.
    pub excluded: BTreeMap<Exclusion, usize>,
    /// Earlier turns left out of the examples' transcripts, by reason
    /// (`acknowledgment`, `deterministic`).
    pub left_out_turns: BTreeMap<Exclusion, usize>,
}

/// Why one judgment produced no example: excluded (counted) or a store
/// failure (the whole export fails).
enum Skip {
    Excluded(Exclusion),
    Failed(ExportError),
}

impl From<stream_store::StoreError> for Skip {
    fn from(e: stream_store::StoreError) -> Self {
        Self::Failed(ExportError::Store(e))
    }
}

fn broken(link: &'static str) -> Skip {
    Skip::Excluded(Exclusion::Chain(link))
}

fn require(ok: bool, link: &'static str) -> Result<(), Skip> {
    if ok { Ok(()) } else { Err(broken(link)) }
}

fn get(store: &dyn Read, id: &EventId, link: &'static str) -> Result<StoredEvent, Skip> {
    store.event(id)?.ok_or_else(|| broken(link))
}

fn decode<P: Payload>(e: &StoredEvent, link: &'static str) -> Result<P, Skip> {
    e.decode().map_err(|_| broken(link))
}

/// Whether the feedback source really carried this judgment: a verified
/// and authorized human decision on the matching correction (with the key
/// that signed it, if any), or the owner's `/correct`. `None`: it did not.
fn feedback_matches(
    store: &dyn Read,
    j: &JudgmentRecorded,
    chat: i64,
    trusted: &TrustedKeys,
) -> Result<Option<Option<KeyId>>, Skip> {
    Ok(match j.criterion {
        Criterion::AgentSelfCorrection => {
            match verify_decision(store, &j.feedback_source_event_id, trusted) {
                Ok(d) => {
                    let ProposalBody::Correction(p) = d.proposal().body() else {
                        return Ok(None);
                    };
                    let text = match (d.decision().disposition, &d.decision().replacement) {
                        (Disposition::Accept, None) => p.replacement.text.as_str(),
                        (Disposition::Edit, Some(text)) => text.as_str(),
                        (Disposition::Accept, Some(_))
                        | (Disposition::Edit, None)
                        | (Disposition::Reject, _) => {
                            return Ok(None);
                        }
                    };
                    (p.target.output_event_id == j.target_output_event_id
                        && text == j.replacement.text.as_str())
                    .then(|| d.authority().key_id().copied())
                }
                Err(ProjectError::Unauthorized(_)) => return Err(broken("unauthorized")),
                Err(_) => None,
            }
        }
        Criterion::TelegramCorrect => {
            let msg: MessageReceived = decode(
                &get(store, &j.feedback_source_event_id, "feedback")?,
                "feedback",
            )?;
            (msg.chat_id == chat
                && msg.command.as_ref().is_some_and(|c| {
                    c.name == BotCommand::Correct && c.args.as_str() == j.replacement.text.as_str()
                }))
            .then_some(None)
        }
    })
}

/// Revalidates one judgment's private-provenance chain — judgment, completed
/// run, output, trigger, feedback, exact single-run delivery receipt,
/// retry-stable snapshot — and builds its example: for the private export
/// the snapshot as the model saw it, for the external one only externally
/// eligible text ([`transcript`]). A judged reply the model did not write
/// is no example ([`parent_written`]).
fn example_of(
    store: &dyn Read,
    event: &StoredEvent,
    j: &JudgmentRecorded,
    kind: ExportKind,
    all: &Judgments,
    trusted: &TrustedKeys,
) -> Result<(Example, BTreeMap<Exclusion, usize>), Skip> {
    let output_event = get(store, &j.target_output_event_id, "output")?;
    let output: MessageObservation = decode(&output_event, "output")?;
    require(output.run_id == j.target_run_id, "output")?;
    if let Some(reason) = parent_written(output.origin) {
        return Err(Skip::Excluded(reason));
    }
    let trigger_id = output.trigger_event_id.clone();

    // The judgment envelope is exactly what recording it produces.
    let judgments = SourceName::fixed(SourceName::JUDGMENTS);
    let expected = NewEvent::build(
        &judgments,
        Some(&trigger_id),
        Some(&j.feedback_source_event_id),
        j,
    )
    .map_err(|_| broken("judgment"))?;
    require(expected == event.event, "judgment")?;

    let receipt_event = get(
        store,
        &j.target_delivery_receipt_event_id,
        "delivery-receipt",
    )?;
    let receipt: DeliveryReceipt = decode(&receipt_event, "delivery-receipt")?;
    require(
        receipt.output_event_id == j.target_output_event_id
            && receipt.run_id == j.target_run_id
            && receipt.source_root_event_id == trigger_id
            && receipt.chat_id == output.chat_id
            && receipt_event.event.parent.as_ref() == Some(&j.target_output_event_id),
        "delivery-receipt",
    )?;

    let agent = SourceName::agent(output.agent_id.as_str()).map_err(|_| broken("run"))?;
    let completed_id = derive_event_id(agent.as_str(), RunCompleted::TYPE, &json!(j.target_run_id))
        .map_err(|_| broken("run"))?;
    let completed: RunCompleted = decode(&get(store, &completed_id, "run")?, "run")?;
    let run_completed =
        matches!(store.run(&j.target_run_id)?, Some(run) if run.status == RunStatus::Completed);
    require(
        run_completed
            && completed.output_event_id == j.target_output_event_id
            && completed.trigger_event_id == trigger_id,
        "run",
    )?;

    decode::<MessageReceived>(&get(store, &trigger_id, "trigger")?, "trigger")?;

    let snapshot_id = completed
        .context_snapshot_id
        .clone()
        .ok_or_else(|| broken("snapshot"))?;
    let snapshot = Snapshot::load(store, &snapshot_id).map_err(|_| broken("snapshot"))?;
    require(
        snapshot.run_id == j.target_run_id && snapshot.trigger.event_id == trigger_id,
        "snapshot",
    )?;

    let decision_key_id =
        feedback_matches(store, j, output.chat_id, trusted)?.ok_or_else(|| broken("feedback"))?;

    let Rendered { messages, left_out } =
        transcript::messages(store, &snapshot, j.replacement.text.as_str(), kind, all).map_err(
            |e| match e {
                TranscriptError::Broken => broken("transcript"),
                TranscriptError::Store(e) => e.into(),
            },
        )?;
    let example = Example {
        messages,
        provenance: Provenance {
            judgment_event_id: Some(event.id().clone()),
            completed_run_id: Some(j.target_run_id.clone()),
            run_completed_event_id: Some(completed_id),
            output_event_id: Some(j.target_output_event_id.clone()),
            trigger_event_id: Some(trigger_id),
            feedback_event_id: Some(j.feedback_source_event_id.clone()),
            delivery_receipt_event_id: Some(j.target_delivery_receipt_event_id.clone()),
            context_snapshot_id: Some(snapshot_id),
            declaration_fingerprint: Some(completed.declaration_fingerprint),
            decision_key_id,
        },
    };
    Ok((example, left_out))
}

/// Selects the examples of `kind` whose decisions `trusted` authorizes,
/// with a callback per judgment examined (for a progress bar).
pub fn select(
    store: &dyn Read,
    kind: ExportKind,
    trusted: &TrustedKeys,
    progress: &dyn Fn(u64, u64),
) -> Result<Selection, ExportError> {
    let source = SourceName::fixed(SourceName::JUDGMENTS);
    let query = EventQuery {
        event_type: Some(JudgmentRecorded::TYPE.into()),
        ..EventQuery::source_after(&source, 0)
    };
    let events = store.events(&query)?;
    let mut selection = Selection::default();
    let mut judged: Vec<(StoredEvent, JudgmentRecorded)> = Vec::new();
    for event in events {
        match event.decode::<JudgmentRecorded>() {
            Ok(j) => judged.push((event, j)),
            Err(_) => {
                *selection
                    .excluded
                    .entry(Exclusion::Chain("judgment"))
                    .or_default() += 1
            }
        }
    }
    // The active judgment of an output is its latest.
    let mut latest: BTreeMap<EventId, EventId> = BTreeMap::new();
    // How an earlier reply may read externally, and which /correct judged it.
    let mut judgments = Judgments::default();
    for (event, j) in &judged {
        latest.insert(j.target_output_event_id.clone(), event.id().clone());
        judgments.judged_by_feedback.insert(
            j.feedback_source_event_id.clone(),
            j.target_output_event_id.clone(),
        );
        if j.external_export_eligible {
            judgments
                .eligible
                .entry(j.target_output_event_id.clone())
                .or_default()
                .insert(j.replacement.text.as_str().to_owned());
        }
    }
    let total = judged.len() as u64;
    for (done, (event, j)) in judged.iter().enumerate() {
        progress(done as u64, total);
        let verdict = if latest.get(&j.target_output_event_id) != Some(event.id()) {
            Err(Skip::Excluded(Exclusion::Superseded))
        } else if !j.quality_eligible {
            Err(Skip::Excluded(Exclusion::NotQualityEligible))
        } else if kind == ExportKind::External && !j.external_export_eligible {
            Err(Skip::Excluded(Exclusion::NotExternallyEligible))
        } else {
            example_of(store, event, j, kind, &judgments, trusted)
        };
        match verdict {
            Ok((example, left_out)) => {
                selection.examples.push(example);
                for (reason, count) in left_out {
                    *selection.left_out_turns.entry(reason).or_default() += count;
                }
            }
            Err(Skip::Excluded(reason)) => *selection.excluded.entry(reason).or_default() += 1,
            Err(Skip::Failed(e)) => return Err(e),
        }
    }
    progress(total, total);
    Ok(selection)
}
