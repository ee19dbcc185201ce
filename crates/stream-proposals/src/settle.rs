//! Atomic settlement of one run, in the settlement order (docs/design.md §11): canonical output,
//! zero to three proposal events, the completed-run receipt, the run row,
//! consumer progress — one transaction, deterministic ids, so a replay
//! converges and a crash leaves all or nothing.

use std::collections::BTreeSet;

use stream_core::annotation;
use stream_core::payload::{
    CorrectionProposed, CorrectionTarget, EvidenceIds, FocusAuthority, FocusDeclaration,
    FocusDeclarationProposed, FocusResolution, MemoryChangeProposed, MemoryOperation, MemoryTarget,
    MessageObservation, OutputContract, ProposalKind, Proposer, ProviderRef, RunCompleted,
    RunFailed, RunFailureReason, TextOrigin, ThinkingMarker, focus_fingerprint,
};
use stream_core::text::{Label, MemoryText, ReasonText, ReplyText};
use stream_core::{
    AgentProposed, EventId, False, Fingerprint, NewEvent, RunId, Sha256Hex, SnapshotId, SourceName,
};
use stream_store::{AppendOutcome, Progress, RunRow, RunStatus, Store};

use crate::SettleError;
use crate::ack::acknowledgment;

/// Everything about a run that settlement records, none of it from the model.
#[derive(Debug, Clone)]
pub struct RunFacts {
    /// The run.
    pub run_id: RunId,
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// Declaration fingerprint.
    pub declaration_fingerprint: Fingerprint,
    /// SHA-256 of the worker binary (model runs only).
    pub worker_bundle_sha256: Option<Sha256Hex>,
    /// Provider and model (model runs only).
    pub provider: Option<ProviderRef>,
    /// The retry-stable snapshot (model runs only).
    pub snapshot_id: Option<SnapshotId>,
    /// The inbound message that triggered the run: its source root.
    pub trigger_event_id: EventId,
    /// Its position in the Telegram source.
    pub trigger_seq: u64,
    /// The Telegram source.
    pub telegram_source: SourceName,
    /// The chat the reply goes to.
    pub chat_id: i64,
    /// Attempts made, this one included.
    pub attempts: u32,
    /// The consumer whose progress moves (`<agent>@<version>`).
    pub consumer: String,
}

impl RunFacts {
    fn agent_source(&self) -> Result<SourceName, SettleError> {
        SourceName::agent(self.agent_id.as_str()).map_err(|_| {
            SettleError::Store(stream_store::StoreError::InvalidRow {
                what: "agent source".into(),
            })
        })
    }

    fn run_row(&self, status: RunStatus) -> RunRow {
        RunRow {
            run_id: self.run_id.clone(),
            agent_id: self.agent_id.as_str().to_owned(),
            agent_version: self.agent_version,
            trigger_event_id: self.trigger_event_id.clone(),
            status,
            attempts: self.attempts,
            snapshot_id: self.snapshot_id.clone(),
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            source: self.telegram_source.clone(),
            seq: self.trigger_seq,
        }
    }
}

/// One proposal after trusted validation: parent-bound targets, `latest`
/// already resolved, text canonicalized.
#[derive(Debug, Clone)]
pub enum ValidatedProposal {
    /// `request_memory_change`.
    Memory {
        /// The snapshot's exact memory target.
        target: MemoryTarget,
        /// Append or replace.
        operation: MemoryOperation,
        /// Proposed text.
        text: MemoryText,
        /// Reason.
        reason: ReasonText,
        /// Admitted evidence.
        evidence: EvidenceIds,
    },
    /// `submit_correction`.
    Correction {
        /// The resolved, admitted target (never `latest`).
        target: CorrectionTarget,
        /// The full replacement text under the target's contract.
        replacement: ReplyText,
        /// Reason.
        reason: ReasonText,
        /// Admitted evidence.
        evidence: EvidenceIds,
    },
    /// `propose_focus`.
    Focus {
        /// The strict declaration.
        declaration: FocusDeclaration,
    },
}

impl ValidatedProposal {
    /// Its kind.
    pub fn kind(&self) -> ProposalKind {
        match self {
            Self::Memory { .. } => ProposalKind::MemoryChange,
            Self::Correction { .. } => ProposalKind::SelfCorrection,
            Self::Focus { .. } => ProposalKind::FocusDeclaration,
        }
    }
}

/// A completion after trusted validation.
#[derive(Debug, Clone)]
pub struct ValidatedCompletion {
    /// Model-authored visible text, if any.
    pub text: Option<ReplyText>,
    /// Thinking marker.
    pub thinking: ThinkingMarker,
    /// Proposals in call order, at most one per kind.
    pub proposals: Vec<ValidatedProposal>,
    /// The provider cut the reply at its token limit (`length`,
    /// `max_tokens`): the delivered text ends with the cut marker.
    pub cut: bool,
}

/// The events and rows of one successful run, ready to commit.
#[derive(Debug, Clone)]
pub struct Settlement {
    /// Output, proposals, completed-run receipt — in that order.
    pub events: Vec<NewEvent>,
    /// The completed run row.
    pub run: RunRow,
    /// Consumer and its new progress.
    pub progress: (String, Progress),
}

impl Settlement {
    /// Assembles the settlement of a model run. Visible text is kept as the
    /// reply, its annotation delimiters neutralized (so the stored, sent and
    /// replayed texts are the same bytes); a tool-only completion gets the
    /// fixed acknowledgment. Nothing is appended but the cut marker, to
    /// either, when the provider cut the reply at its token limit
    /// (`ReplyText::marked_cut`): stored, sent and shown alike.
    pub fn assemble(
        facts: &RunFacts,
        completion: &ValidatedCompletion,
    ) -> Result<Self, SettleError> {
        let kinds: BTreeSet<ProposalKind> = completion.proposals.iter().map(|p| p.kind()).collect();
        if kinds.len() != completion.proposals.len() || kinds.len() > 3 {
            return Err(SettleError::DuplicateKind);
        }
        let (text, origin) = match &completion.text {
            Some(text) => (neutralized(facts, text), TextOrigin::Model),
            None => {
                let ack = acknowledgment(&kinds).ok_or(SettleError::EmptyCompletion)?;
                (
                    ReplyText::new(ack).map_err(|_| SettleError::EmptyCompletion)?,
                    TextOrigin::Acknowledgment,
                )
            }
        };
        let text = if completion.cut {
            text.marked_cut()
        } else {
            text
        };
        let source = facts.agent_source()?;
        let output = output_event(facts, &source, text, origin, completion.thinking)?;
        let proposer = match (&facts.provider, &facts.snapshot_id) {
            (Some(provider), Some(snapshot)) => Some(Proposer {
                run_id: facts.run_id.clone(),
                output_event_id: output.id.clone(),
                trigger_event_id: facts.trigger_event_id.clone(),
                agent_id: facts.agent_id.clone(),
                agent_version: facts.agent_version,
                declaration_fingerprint: facts.declaration_fingerprint.clone(),
                provider: provider.clone(),
                context_snapshot_id: snapshot.clone(),
            }),
            _ => None,
        };
        let mut proposals = Vec::new();
        for proposal in &completion.proposals {
            let proposer = proposer.clone().ok_or(SettleError::MissingProvenance)?;
            proposals.push(proposal_event(
                facts, &source, &output.id, proposer, proposal,
            )?);
        }
        Self::with_receipt(facts, &source, output, proposals)
    }

    /// Assembles the settlement of a deterministic run: a fixed reply, no
    /// provider, no snapshot, no proposal.
    pub fn deterministic(facts: &RunFacts, reply: ReplyText) -> Result<Self, SettleError> {
        let source = facts.agent_source()?;
        let output = output_event(
            facts,
            &source,
            reply,
            TextOrigin::Deterministic,
            ThinkingMarker::None,
        )?;
        Self::with_receipt(facts, &source, output, Vec::new())
    }

    fn with_receipt(
        facts: &RunFacts,
        source: &SourceName,
        output: NewEvent,
        proposals: Vec<NewEvent>,
    ) -> Result<Self, SettleError> {
        let receipt = RunCompleted {
            run_id: facts.run_id.clone(),
            agent_id: facts.agent_id.clone(),
            agent_version: facts.agent_version,
            declaration_fingerprint: facts.declaration_fingerprint.clone(),
            worker_bundle_sha256: facts.worker_bundle_sha256.clone(),
            provider: facts.provider.clone(),
            trigger_event_id: facts.trigger_event_id.clone(),
            context_snapshot_id: facts.snapshot_id.clone(),
            output_event_id: output.id.clone(),
            proposal_event_ids: proposals.iter().map(|p| p.id.clone()).collect(),
        };
        let receipt = NewEvent::build(
            source,
            Some(&facts.trigger_event_id),
            Some(&output.id),
            &receipt,
        )?;
        let mut events = vec![output];
        events.extend(proposals);
        events.push(receipt);
        Ok(Self {
            events,
            run: facts.run_row(RunStatus::Completed),
            progress: (facts.consumer.clone(), facts.progress()),
        })
    }

    /// The output event.
    pub fn output(&self) -> &NewEvent {
        &self.events[0]
    }

    /// The proposal events, in order.
    pub fn proposals(&self) -> &[NewEvent] {
        &self.events[1..self.events.len() - 1]
    }
}

/// The model's visible text with annotation look-alikes neutralized: the
/// reply must not pass a forged `⟨…⟩` to the owner or to later history.
/// Neutralized rather than refused: a refusal would turn a harmless copy
/// into a failed run. The log says how many, never what.
fn neutralized(facts: &RunFacts, text: &ReplyText) -> ReplyText {
    let out = text.clone().with_annotations_neutralized();
    if out != *text {
        tracing::warn!(
            run = %facts.run_id.short(12),
            delimiters = text.as_str().matches([annotation::OPEN, annotation::CLOSE]).count(),
            "visible text carried annotation delimiters; neutralized"
        );
    }
    out
}

fn output_event(
    facts: &RunFacts,
    source: &SourceName,
    text: ReplyText,
    origin: TextOrigin,
    thinking: ThinkingMarker,
) -> Result<NewEvent, SettleError> {
    let output = MessageObservation {
        run_id: facts.run_id.clone(),
        agent_id: facts.agent_id.clone(),
        agent_version: facts.agent_version,
        trigger_event_id: facts.trigger_event_id.clone(),
        chat_id: facts.chat_id,
        output_contract: OutputContract::ConversationText1,
        text,
        origin,
        thinking,
    };
    let trigger = &facts.trigger_event_id;
    Ok(NewEvent::build(
        source,
        Some(trigger),
        Some(trigger),
        &output,
    )?)
}

fn proposal_event(
    facts: &RunFacts,
    source: &SourceName,
    output: &EventId,
    proposer: Proposer,
    proposal: &ValidatedProposal,
) -> Result<NewEvent, SettleError> {
    let root = &facts.trigger_event_id;
    Ok(match proposal {
        ValidatedProposal::Memory {
            target,
            operation,
            text,
            reason,
            evidence,
        } => {
            let (len, hash) = MemoryChangeProposed::text_facts(text);
            let payload = MemoryChangeProposed {
                proposal_state: AgentProposed,
                proposer,
                target: target.clone(),
                operation: *operation,
                proposed_text: text.clone(),
                proposed_text_length: len,
                proposed_text_sha256: hash,
                reason: reason.clone(),
                evidence_event_ids: evidence.clone(),
                publication_eligible: False,
            };
            // Rooted in the current Telegram source root, parented to the
            // just-produced output.
            NewEvent::build(source, Some(root), Some(output), &payload)?
        }
        ValidatedProposal::Correction {
            target,
            replacement,
            reason,
            evidence,
        } => {
            let payload = CorrectionProposed {
                proposal_state: AgentProposed,
                proposer,
                target: target.clone(),
                replacement: stream_core::payload::ConversationOutput {
                    contract: target.output_contract,
                    text: replacement.clone(),
                },
                reason: reason.clone(),
                evidence_event_ids: evidence.clone(),
                quality_eligible: False,
                external_export_eligible: False,
                publication_eligible: False,
            };
            // Rooted in the target output's source root, parented to the
            // target output.
            NewEvent::build(
                source,
                Some(&target.source_root_event_id),
                Some(&target.output_event_id),
                &payload,
            )?
        }
        ValidatedProposal::Focus { declaration } => {
            let fingerprint =
                focus_fingerprint(declaration).map_err(stream_core::EventError::from)?;
            let payload = FocusDeclarationProposed {
                proposal_state: AgentProposed,
                proposer,
                declaration: declaration.clone(),
                fingerprint,
                resolution: FocusResolution::default(),
                authority: FocusAuthority::default(),
            };
            NewEvent::build(source, Some(root), Some(output), &payload)?
        }
    })
}

/// How a commit went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// At least one event was new.
    Inserted,
    /// Every event already existed identically (a replay).
    Converged,
}

/// Commits events, a run row and progress in one transaction. A conflict on
/// any event aborts everything. Progress never moves backwards, so a replay
/// of an old run cannot rewind its consumer.
pub fn commit_parts(
    store: &dyn Store,
    events: &[NewEvent],
    run: &RunRow,
    progress: Option<&(String, Progress)>,
) -> Result<Committed, SettleError> {
    commit_all(store, events, &[run], progress)
}

fn commit_all(
    store: &dyn Store,
    events: &[NewEvent],
    runs: &[&RunRow],
    progress: Option<&(String, Progress)>,
) -> Result<Committed, SettleError> {
    let mut tx = store.begin()?;
    let mut any_new = false;
    for event in events {
        match tx.append(event)? {
            AppendOutcome::Inserted { .. } => any_new = true,
            AppendOutcome::Converged { .. } => {}
            AppendOutcome::Conflict => {
                return Err(SettleError::Conflict {
                    id: event.id.clone(),
                });
            }
        }
    }
    for run in runs {
        tx.put_run(run)?;
    }
    if let Some((consumer, progress)) = progress {
        let current = tx.progress(consumer)?;
        if current
            .as_ref()
            .is_none_or(|c| c.source != progress.source || c.seq < progress.seq)
        {
            tx.set_progress(consumer, progress)?;
        }
    }
    tx.commit()?;
    Ok(if any_new {
        Committed::Inserted
    } else {
        Committed::Converged
    })
}

/// Commits a settlement.
pub fn commit(store: &dyn Store, settlement: &Settlement) -> Result<Committed, SettleError> {
    commit_parts(
        store,
        &settlement.events,
        &settlement.run,
        Some(&settlement.progress),
    )
}

/// A failed attempt: `run.failed@1` with a reason code, the run row, and —
/// when the failure is final — progress, all in one transaction.
#[derive(Debug, Clone)]
pub struct FailedAttempt {
    /// The `run.failed@1` event.
    pub event: NewEvent,
    /// The run row (pending for a retry, failed when final).
    pub run: RunRow,
    /// Progress, when final.
    pub progress: Option<(String, Progress)>,
}

impl FailedAttempt {
    /// Assembles the record of attempt `facts.attempts` failing for `reason`.
    pub fn assemble(
        facts: &RunFacts,
        reason: RunFailureReason,
        is_final: bool,
    ) -> Result<Self, SettleError> {
        let source = facts.agent_source()?;
        let payload = RunFailed {
            run_id: facts.run_id.clone(),
            agent_id: facts.agent_id.clone(),
            agent_version: facts.agent_version,
            trigger_event_id: facts.trigger_event_id.clone(),
            attempt: facts.attempts,
            reason,
            is_final,
        };
        let trigger = &facts.trigger_event_id;
        Ok(Self {
            event: NewEvent::build(&source, Some(trigger), Some(trigger), &payload)?,
            run: facts.run_row(if is_final {
                RunStatus::Failed
            } else {
                RunStatus::Pending
            }),
            progress: is_final.then(|| (facts.consumer.clone(), facts.progress())),
        })
    }

    /// Commits it.
    pub fn commit(&self, store: &dyn Store) -> Result<Committed, SettleError> {
        commit_parts(
            store,
            std::slice::from_ref(&self.event),
            &self.run,
            self.progress.as_ref(),
        )
    }

    /// Commits a final failure together with the fixed reply that answers
    /// it (the deterministic settlement of the replies declaration on the
    /// same trigger), in one transaction: the owner is answered exactly
    /// when the run is given up, and a replay converges.
    pub fn commit_with_reply(
        &self,
        store: &dyn Store,
        reply: &Settlement,
    ) -> Result<Committed, SettleError> {
        if self.run.status != RunStatus::Failed {
            return Err(SettleError::NotFinal);
        }
        let mut events = vec![self.event.clone()];
        events.extend(reply.events.iter().cloned());
        commit_all(
            store,
            &events,
            &[&self.run, &reply.run],
            self.progress.as_ref(),
        )
    }
}
