//! The one shared trusted validator of a proposal's authority chain.
//!
//! Before a decision is recorded, projected or materialized, [`verify_chain`]
//! replays everything the proposal claims: the completed proposer run, its
//! exact output and trigger, the declaration fingerprint, the durable
//! snapshot bytes and manifest, the atomic completed-run receipt naming the
//! proposal, the admitted evidence, and the exact snapshot capability. Any
//! doubt is a refusal; nothing is inferred.

use stream_context::SnapshotClaims;
use stream_core::ids::derive_event_id;
use stream_core::payload::{
    CorrectionProposed, CorrectionTarget, EvidenceIds, FocusDeclarationProposed,
    MemoryChangeProposed, MemoryTarget, MessageObservation, MessageReceived, ProposalKind,
    Proposer, RunCompleted,
};
use stream_core::{Authorship, EventId, NewEvent, Payload, SourceName, StoredEvent};
use stream_store::{Read, RunStatus, StoreError};

/// Which link of the chain failed. Content-dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainLink {
    /// The proposal event itself (missing, wrong type, bad schema, forged envelope).
    Proposal,
    /// The proposer's run row.
    Run,
    /// The completed-run receipt.
    Receipt,
    /// The proposer's output event.
    Output,
    /// The trigger event.
    Trigger,
    /// The stored context snapshot.
    Snapshot,
    /// Cited evidence not admitted by the snapshot.
    Evidence,
    /// The target or tool not granted by the snapshot's capability.
    Capability,
}

impl ChainLink {
    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proposal => "proposal",
            Self::Run => "run",
            Self::Receipt => "receipt",
            Self::Output => "output",
            Self::Trigger => "trigger",
            Self::Snapshot => "snapshot",
            Self::Evidence => "evidence",
            Self::Capability => "capability",
        }
    }
}

/// The chain did not verify.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A link is missing or inconsistent.
    #[error("proposal {proposal} does not verify at its {} link", link.as_str())]
    Broken {
        /// The proposal.
        proposal: EventId,
        /// Where.
        link: ChainLink,
    },
}

/// A proposal whose whole chain verified. Only [`verify_chain`] makes one
/// and its parts are read-only, so a holder is proof of one replay: the
/// decision, its projection and the materializer take it instead of
/// replaying the chain again.
#[derive(Debug, Clone)]
pub struct VerifiedProposal {
    event: StoredEvent,
    body: ProposalBody,
    proposer: Proposer,
    snapshot: SnapshotClaims,
}

impl VerifiedProposal {
    /// The proposal event.
    pub fn event(&self) -> &StoredEvent {
        &self.event
    }

    /// Its kind and payload.
    pub fn body(&self) -> &ProposalBody {
        &self.body
    }

    /// Its proposer provenance.
    pub fn proposer(&self) -> &Proposer {
        &self.proposer
    }

    /// What the chain read of the verified snapshot it was made under.
    pub fn snapshot(&self) -> &SnapshotClaims {
        &self.snapshot
    }
}

/// The typed payload of a verified proposal.
#[derive(Debug, Clone)]
pub enum ProposalBody {
    /// A memory change.
    Memory(MemoryChangeProposed),
    /// A self-correction.
    Correction(CorrectionProposed),
    /// A focus declaration.
    Focus(FocusDeclarationProposed),
}

impl ProposalBody {
    /// Its kind.
    pub fn kind(&self) -> ProposalKind {
        match self {
            Self::Memory(_) => ProposalKind::MemoryChange,
            Self::Correction(_) => ProposalKind::SelfCorrection,
            Self::Focus(_) => ProposalKind::FocusDeclaration,
        }
    }
}

/// The kind of a stored proposal event by its type, without verifying.
pub fn proposal_kind(event: &StoredEvent) -> Option<ProposalKind> {
    if event.is::<MemoryChangeProposed>() {
        Some(ProposalKind::MemoryChange)
    } else if event.is::<CorrectionProposed>() {
        Some(ProposalKind::SelfCorrection)
    } else if event.is::<FocusDeclarationProposed>() {
        Some(ProposalKind::FocusDeclaration)
    } else {
        None
    }
}

struct Check<'a> {
    proposal: &'a EventId,
}

impl Check<'_> {
    fn that(&self, ok: bool, link: ChainLink) -> Result<(), ChainError> {
        if ok { Ok(()) } else { Err(self.broken(link)) }
    }

    fn broken(&self, link: ChainLink) -> ChainError {
        ChainError::Broken {
            proposal: self.proposal.clone(),
            link,
        }
    }

    fn decode<P: Payload>(&self, event: &StoredEvent, link: ChainLink) -> Result<P, ChainError> {
        event.decode().map_err(|_| self.broken(link))
    }

    /// The envelope must be exactly what building this payload produces:
    /// deterministic id, type, authorship, sensitivity, root and parent.
    fn rebuilt<P: Payload>(
        &self,
        event: &StoredEvent,
        payload: &P,
        root: &EventId,
        parent: &EventId,
        link: ChainLink,
    ) -> Result<(), ChainError> {
        let expected = NewEvent::build(&event.event.source, Some(root), Some(parent), payload)
            .map_err(|_| self.broken(link))?;
        self.that(expected == event.event, link)
    }
}

fn evidence_admitted(snapshot: &SnapshotClaims, evidence: &EvidenceIds) -> bool {
    evidence
        .as_slice()
        .iter()
        .all(|id| snapshot.capabilities.admits_evidence(id))
}

/// Replays the authority chain of proposal `id`.
pub fn verify_chain(store: &dyn Read, id: &EventId) -> Result<VerifiedProposal, ChainError> {
    let check = Check { proposal: id };
    let event = store
        .event(id)?
        .ok_or_else(|| check.broken(ChainLink::Proposal))?;
    let body = match proposal_kind(&event) {
        Some(ProposalKind::MemoryChange) => {
            ProposalBody::Memory(check.decode(&event, ChainLink::Proposal)?)
        }
        Some(ProposalKind::SelfCorrection) => {
            ProposalBody::Correction(check.decode(&event, ChainLink::Proposal)?)
        }
        Some(ProposalKind::FocusDeclaration) => {
            ProposalBody::Focus(check.decode(&event, ChainLink::Proposal)?)
        }
        None => return Err(check.broken(ChainLink::Proposal)),
    };
    let proposer = match &body {
        ProposalBody::Memory(p) => p.proposer.clone(),
        ProposalBody::Correction(p) => p.proposer.clone(),
        ProposalBody::Focus(p) => p.proposer.clone(),
    };
    let agent_source = SourceName::agent(proposer.agent_id.as_str())
        .map_err(|_| check.broken(ChainLink::Proposal))?;
    check.that(
        event.event.source == agent_source
            && event.event.authorship == Authorship::Agent
            && event.event.sensitive,
        ChainLink::Proposal,
    )?;

    // The completed proposer run.
    let run = store
        .run(&proposer.run_id)?
        .ok_or_else(|| check.broken(ChainLink::Run))?;
    check.that(
        run.status == RunStatus::Completed
            && run.agent_id == proposer.agent_id.as_str()
            && run.agent_version == proposer.agent_version
            && run.trigger_event_id == proposer.trigger_event_id
            && run.snapshot_id.as_ref() == Some(&proposer.context_snapshot_id),
        ChainLink::Run,
    )?;

    // The atomic completed-run receipt naming the proposal.
    let receipt_id = derive_event_id(
        agent_source.as_str(),
        RunCompleted::TYPE,
        &serde_json::json!(proposer.run_id),
    )
    .map_err(|_| check.broken(ChainLink::Receipt))?;
    let receipt_event = store
        .event(&receipt_id)?
        .ok_or_else(|| check.broken(ChainLink::Receipt))?;
    let receipt: RunCompleted = check.decode(&receipt_event, ChainLink::Receipt)?;
    check.that(
        receipt.proposal_event_ids.contains(id)
            && receipt.output_event_id == proposer.output_event_id
            && receipt.trigger_event_id == proposer.trigger_event_id
            && receipt.agent_id == proposer.agent_id
            && receipt.agent_version == proposer.agent_version
            && receipt.declaration_fingerprint == proposer.declaration_fingerprint
            && receipt.provider.as_ref() == Some(&proposer.provider)
            && receipt.context_snapshot_id.as_ref() == Some(&proposer.context_snapshot_id),
        ChainLink::Receipt,
    )?;
    check.rebuilt(
        &receipt_event,
        &receipt,
        &proposer.trigger_event_id,
        &proposer.output_event_id,
        ChainLink::Receipt,
    )?;

    // The exact proposer output and trigger.
    let output_event = store
        .event(&proposer.output_event_id)?
        .ok_or_else(|| check.broken(ChainLink::Output))?;
    let output: MessageObservation = check.decode(&output_event, ChainLink::Output)?;
    check.that(
        output.run_id == proposer.run_id
            && output.trigger_event_id == proposer.trigger_event_id
            && output.agent_id == proposer.agent_id
            && output.agent_version == proposer.agent_version,
        ChainLink::Output,
    )?;
    check.rebuilt(
        &output_event,
        &output,
        &proposer.trigger_event_id,
        &proposer.trigger_event_id,
        ChainLink::Output,
    )?;
    let trigger_event = store
        .event(&proposer.trigger_event_id)?
        .ok_or_else(|| check.broken(ChainLink::Trigger))?;
    let trigger: MessageReceived = check.decode(&trigger_event, ChainLink::Trigger)?;
    check.that(trigger.chat_id == output.chat_id, ChainLink::Trigger)?;

    // The durable snapshot: bytes, manifest, and that it is this run's. The
    // parts the chain does not read (prompt, transcript, memory text) are
    // bound by their manifest hashes, not decoded.
    let snapshot = SnapshotClaims::load(store, &proposer.context_snapshot_id)
        .map_err(|_| check.broken(ChainLink::Snapshot))?;
    check.that(
        snapshot.run_id == proposer.run_id
            && snapshot.trigger.event_id == proposer.trigger_event_id
            && snapshot.agent.id == proposer.agent_id
            && snapshot.agent.version == proposer.agent_version
            && snapshot.agent.declaration_fingerprint == proposer.declaration_fingerprint,
        ChainLink::Snapshot,
    )?;

    // Evidence, capability, and the proposal's own envelope.
    let trigger_id = &proposer.trigger_event_id;
    match &body {
        ProposalBody::Memory(p) => {
            check.that(
                evidence_admitted(&snapshot, &p.evidence_event_ids),
                ChainLink::Evidence,
            )?;
            let granted: Option<&MemoryTarget> = snapshot.capabilities.memory_target.as_ref();
            check.that(
                snapshot.capabilities.exposes(ProposalKind::MemoryChange)
                    && granted == Some(&p.target),
                ChainLink::Capability,
            )?;
            check.rebuilt(
                &event,
                p,
                trigger_id,
                &proposer.output_event_id,
                ChainLink::Proposal,
            )?;
        }
        ProposalBody::Correction(p) => {
            check.that(
                evidence_admitted(&snapshot, &p.evidence_event_ids),
                ChainLink::Evidence,
            )?;
            let granted: Option<&CorrectionTarget> = snapshot
                .capabilities
                .correction_target(&p.target.output_event_id);
            check.that(
                snapshot.capabilities.exposes(ProposalKind::SelfCorrection)
                    && granted == Some(&p.target),
                ChainLink::Capability,
            )?;
            check.rebuilt(
                &event,
                p,
                &p.target.source_root_event_id,
                &p.target.output_event_id,
                ChainLink::Proposal,
            )?;
        }
        ProposalBody::Focus(p) => {
            check.that(
                snapshot
                    .capabilities
                    .exposes(ProposalKind::FocusDeclaration),
                ChainLink::Capability,
            )?;
            check.rebuilt(
                &event,
                p,
                trigger_id,
                &proposer.output_event_id,
                ChainLink::Proposal,
            )?;
        }
    }
    Ok(VerifiedProposal {
        event,
        body,
        proposer,
        snapshot,
    })
}
