//! Test support (feature `testing`): a store holding real settled runs — a
//! delivered earlier reply, a `memory.md` version, and a run whose three
//! proposals were made under a stored snapshot — for this crate's tests and
//! those of the crates above it (export, memory, engine).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;

use crate::settle::{RunFacts, Settlement, ValidatedCompletion, ValidatedProposal, commit};
use stream_context::{ContextSpec, Snapshot};
use stream_core::canon::sha256;
use stream_core::ids::{derive_document_id, derive_run_id, derive_version_id};
use stream_core::payload::*;
use stream_core::text::{BoundedText, Label};
use stream_core::*;
use stream_store::{Read, RunRow, RunStatus, SqliteStore, Store, VersionRow};

pub const AGENT: &str = "telegram-conversation";

/// The store and the helpers that write to it.
#[derive(Debug)]
pub struct Base {
    pub store: SqliteStore,
    pub path: std::path::PathBuf,
    pub telegram: SourceName,
    update: i64,
    _dir: tempfile::TempDir,
}

#[derive(Debug)]
pub struct World {
    pub base: Base,
    pub earlier_output: EventId,
    pub earlier_receipt: EventId,
    pub trigger: StoredEvent,
    pub snapshot: Snapshot,
    pub memory: EventId,
    pub correction: EventId,
    pub focus: EventId,
    /// The trigger run's own output (the acknowledgment), undelivered.
    pub trigger_output: NewEvent,
}

impl std::ops::Deref for World {
    type Target = Base;
    fn deref(&self) -> &Base {
        &self.base
    }
}

pub fn spec() -> ContextSpec {
    ContextSpec {
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        proposals: ProposalKind::ALL.into_iter().collect(),
        prompt: "prompt".into(),
        transcript_messages: 20,
        history_agents: BTreeSet::from([AGENT.to_owned()]),
        memory_subscribed: true,
    }
}

fn facts(trigger: &StoredEvent, snapshot: Option<SnapshotId>) -> RunFacts {
    RunFacts {
        run_id: derive_run_id(AGENT, 18, trigger.id()).unwrap(),
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        worker_bundle_sha256: Some(sha256(b"worker")),
        provider: Some(ProviderRef {
            api: ProviderApi::OpenaiChat,
            model: BoundedText::new("m").unwrap(),
        }),
        snapshot_id: snapshot,
        trigger_event_id: trigger.id().clone(),
        trigger_seq: trigger.seq,
        telegram_source: trigger.event.source.clone(),
        chat_id: 42,
        attempts: 1,
        consumer: format!("{AGENT}@18"),
    }
}

impl Base {
    pub fn message(&mut self, text: &str) -> StoredEvent {
        self.update += 1;
        let msg = MessageReceived {
            update_id: self.update,
            message_id: self.update,
            chat_id: 42,
            chat_type: PrivateChat,
            sender_id: 42,
            date: 1_790_000_000,
            text: Some(BoundedText::new(text).unwrap()),
            photo: None,
            photo_too_large: false,
            reply_to_message_id: None,
            command: None,
        };
        let event = NewEvent::build(&self.telegram, None, None, &msg).unwrap();
        self.store.append(&event).unwrap();
        self.store.event(&event.id).unwrap().unwrap()
    }

    /// Settles a model run on `trigger` under a freshly built and stored
    /// snapshot, with proposals made by `propose` from that snapshot.
    pub fn settle_run(
        &self,
        trigger: &StoredEvent,
        text: Option<&str>,
        propose: impl FnOnce(&Snapshot) -> Vec<ValidatedProposal>,
    ) -> (Settlement, Snapshot) {
        let run_id = derive_run_id(AGENT, 18, trigger.id()).unwrap();
        let snapshot = stream_context::build(&self.store, &spec(), &run_id, trigger).unwrap();
        let (bytes, snapshot_id) = snapshot.encode().unwrap();
        let mut tx = self.store.begin().unwrap();
        tx.put_snapshot(&snapshot_id, &bytes).unwrap();
        tx.put_run(&RunRow {
            run_id,
            agent_id: AGENT.into(),
            agent_version: 18,
            trigger_event_id: trigger.id().clone(),
            status: RunStatus::Pending,
            attempts: 0,
            snapshot_id: Some(snapshot_id.clone()),
        })
        .unwrap();
        tx.commit().unwrap();
        let completion = ValidatedCompletion {
            text: text.map(|t| BoundedText::new(t).unwrap()),
            thinking: ThinkingMarker::None,
            proposals: propose(&snapshot),
            cut: false,
        };
        let settlement =
            Settlement::assemble(&facts(trigger, Some(snapshot_id)), &completion).unwrap();
        commit(&self.store, &settlement).unwrap();
        (settlement, snapshot)
    }

    pub fn deliver(&self, output: &NewEvent, root: &StoredEvent) -> EventId {
        let out: MessageObservation = serde_json::from_slice(&output.payload).unwrap();
        let receipt = DeliveryReceipt {
            output_event_id: output.id.clone(),
            run_id: out.run_id,
            chat_id: 42,
            message_id: 900 + root.seq as i64,
            date: 1_790_000_100,
            root_sender_id: 42,
            source_root_event_id: root.id().clone(),
            continuation_message_ids: Vec::new(),
        };
        let event =
            NewEvent::build(&self.telegram, Some(root.id()), Some(&output.id), &receipt).unwrap();
        self.store.append(&event).unwrap();
        event.id
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        Self::build(dir, path, b"---\nid: memory-1\n---\n# Memory\n")
    }

    /// The same world with `memory.md` holding `text`.
    pub fn with_memory(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        Self::build(dir, path, text.as_bytes())
    }

    /// The same world in the store file at `path` (e.g. a CLI home's store).
    pub fn at(path: &std::path::Path) -> Self {
        Self::build(
            tempfile::tempdir().unwrap(),
            path.to_owned(),
            b"---\nid: memory-1\n---\n# Memory\n",
        )
    }

    fn build(dir: tempfile::TempDir, path: std::path::PathBuf, text: &[u8]) -> Self {
        let store = SqliteStore::open(&path).unwrap();
        // memory.md as a scan records it.
        let source = SourceName::fixed(SourceName::CONTEXT);
        let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
        let mut tx = store.begin().unwrap();
        tx.ensure_document(&doc, &source, "memory.md").unwrap();
        let sha = tx.put_blob(text).unwrap();
        let version = derive_version_id(&doc, &sha, None).unwrap();
        tx.insert_version(&VersionRow {
            id: version.clone(),
            document_id: doc.clone(),
            sha256: sha,
            size: text.len() as u64,
            content_type: "text/markdown".into(),
            previous_version: None,
        })
        .unwrap();
        tx.set_current_version(&doc, &version).unwrap();
        tx.commit().unwrap();

        let mut base = Base {
            store,
            path,
            telegram: SourceName::telegram(99),
            update: 0,
            _dir: dir,
        };
        let earlier = base.message("What is the capital of France?");
        let (earlier_settlement, _) = base.settle_run(&earlier, Some("Lyon."), |_| vec![]);
        let earlier_receipt = base.deliver(earlier_settlement.output(), &earlier);
        let trigger = base.message("Remember I like tea, and fix your last answer.");
        let (settlement, snapshot) = base.settle_run(&trigger, None, |s| {
            let latest = s.latest_correction_target().unwrap().clone();
            vec![
                ValidatedProposal::Memory {
                    target: s.capabilities.memory_target.clone().unwrap(),
                    operation: MemoryOperation::Append,
                    text: BoundedText::new("canary-world-memory: likes tea").unwrap(),
                    reason: BoundedText::new("asked").unwrap(),
                    evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
                },
                ValidatedProposal::Correction {
                    evidence: EvidenceIds::new(vec![latest.output_event_id.clone()]).unwrap(),
                    target: latest,
                    replacement: BoundedText::new("Paris.").unwrap(),
                    reason: BoundedText::new("wrong city").unwrap(),
                },
                focus(),
            ]
        });
        let [memory, correction, focus] = settlement.proposals() else {
            panic!()
        };
        let trigger = base.store.event(trigger.id()).unwrap().unwrap();
        World {
            earlier_output: earlier_settlement.output().id.clone(),
            earlier_receipt,
            trigger,
            snapshot,
            memory: memory.id.clone(),
            correction: correction.id.clone(),
            focus: focus.id.clone(),
            trigger_output: settlement.output().clone(),
            base,
        }
    }
}

/// A valid focus declaration proposal.
pub fn focus() -> ValidatedProposal {
    ValidatedProposal::Focus {
        declaration: FocusDeclaration {
            identity: FocusIdentity {
                id: "garden".into(),
                version: 1,
            },
            lineage: FocusLineage { parent: None },
            scope: FocusScope { chat: OriginChat },
            objective: BoundedText::new("Plan the garden.").unwrap(),
            subscriptions: vec![],
            budgets: FocusBudgets {
                max_runs_per_day: 3,
                max_output_tokens_per_run: 500,
                max_days: 30,
            },
            requested_permissions: FocusPermissions {
                tools: EmptyList,
                proposals: EmptyList,
                external_actions: False,
            },
            retirement: FocusRetirement {
                rule: RetirementRule::Manual,
                days: None,
            },
        },
    }
}

impl World {
    /// A later owner message answered by the model with `reply` (no
    /// proposal), delivered: its output, receipt and root message.
    pub fn model_turn(&mut self, text: &str, reply: &str) -> (NewEvent, EventId, StoredEvent) {
        let root = self.base.message(text);
        let (settlement, _) = self.base.settle_run(&root, Some(reply), |_| vec![]);
        let receipt = self.base.deliver(settlement.output(), &root);
        (settlement.output().clone(), receipt, root)
    }

    /// A later owner message answered with a deterministic fixed `reply`
    /// under the conversation agent's name (so later transcripts hold it),
    /// delivered: its output, receipt and root message.
    pub fn deterministic_turn(
        &mut self,
        text: &str,
        reply: &str,
    ) -> (NewEvent, EventId, StoredEvent) {
        let root = self.base.message(text);
        let mut facts = facts(&root, None);
        facts.provider = None;
        facts.worker_bundle_sha256 = None;
        let reply = stream_core::text::ReplyText::new(reply).unwrap();
        let settlement = Settlement::deterministic(&facts, reply).unwrap();
        commit(&self.base.store, &settlement).unwrap();
        let receipt = self.base.deliver(settlement.output(), &root);
        (settlement.output().clone(), receipt, root)
    }

    /// Delivers the trigger run's acknowledgment; returns the receipt id.
    pub fn deliver_trigger_reply(&self) -> EventId {
        self.base.deliver(&self.trigger_output, &self.trigger)
    }

    /// The owner's `/correct <text>` of a delivered reply, as the engine
    /// records it: the command message, then a `telegram-correct` judgment.
    pub fn owner_correct(
        &mut self,
        output: &NewEvent,
        receipt: &EventId,
        root: &EventId,
        text: &str,
    ) -> EventId {
        use crate::judgment::{JudgedOutput, JudgmentInput, record_judgment};
        self.base.update += 1;
        let msg = MessageReceived {
            update_id: self.base.update,
            message_id: self.base.update,
            chat_id: 42,
            chat_type: PrivateChat,
            sender_id: 42,
            date: 1_790_000_000,
            text: Some(BoundedText::new(format!("/correct {text}")).unwrap()),
            photo: None,
            photo_too_large: false,
            reply_to_message_id: None,
            command: Some(CommandRef {
                name: BotCommand::Correct,
                args: BoundedText::new(text).unwrap(),
            }),
        };
        let msg = NewEvent::build(&self.base.telegram, None, None, &msg).unwrap();
        self.base.store.append(&msg).unwrap();
        let out: MessageObservation = serde_json::from_slice(&output.payload).unwrap();
        let judgment = record_judgment(&JudgmentInput {
            criterion: Criterion::TelegramCorrect,
            actor: Label::new("owner").unwrap(),
            target: JudgedOutput {
                delivery_receipt_event_id: receipt.clone(),
                output_event_id: output.id.clone(),
                run_id: out.run_id,
                source_root_event_id: root.clone(),
                output_contract: OutputContract::ConversationText1,
            },
            feedback_source_event_id: msg.id.clone(),
            replacement: BoundedText::new(text).unwrap(),
        })
        .unwrap();
        self.base.store.append(&judgment).unwrap();
        judgment.id
    }
}

impl World {
    /// Records the owner's decision on the correction proposal and projects
    /// it, as `proposal-decision` does; returns the judgment id it implies.
    pub fn decide_correction(
        &self,
        disposition: Disposition,
        replacement: Option<&str>,
    ) -> EventId {
        use crate::decision::{DecisionRequest, record_decision};
        use crate::project::{judgment_id, project_correction};
        let decision = record_decision(
            &self.base.store,
            &DecisionRequest {
                proposal: self.correction.clone(),
                disposition,
                replacement: replacement.map(str::to_owned),
                submission_id: None,
                actor: Label::new("owner").unwrap(),
                signer: signer(),
            },
        )
        .unwrap();
        project_correction(&self.base.store, decision.id(), &trusted()).unwrap();
        judgment_id(decision.id()).unwrap()
    }
}

/// How a decision is written straight into the store, bypassing
/// `proposal-decision`: the forgeries an anyone-with-the-URL could append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A `decision@1`, unsigned.
    Unsigned,
    /// Signed by `key`, then its replacement or disposition changed.
    OtherBytes,
    /// Validly signed by a key `key` is not.
    ForeignKey,
    /// Validly signed by `key`.
    Signed,
}

impl World {
    /// Appends an accept of `proposal` as [`Written`] says, with a valid
    /// envelope and chain, through the `Store` API; returns its id.
    pub fn write_decision(
        &self,
        proposal: &EventId,
        written: Written,
        key: &crate::authority::SigningKey,
    ) -> EventId {
        use stream_core::payload::{ProposalDecision, SignatureBytes, SignedProposalDecision};
        let verified = crate::chain::verify_chain(&self.base.store, proposal).unwrap();
        let kind = stream_core::payload::DecidableKind::of(verified.body().kind()).unwrap();
        let unsigned = ProposalDecision {
            proposal_event_id: proposal.clone(),
            proposal_kind: kind,
            disposition: Disposition::Accept,
            replacement: None,
            submission_id: Label::new("sub-written").unwrap(),
            actor: Label::new("owner").unwrap(),
            authority: stream_core::HumanAuthority,
        };
        let mut signed = SignedProposalDecision {
            proposal_event_id: unsigned.proposal_event_id.clone(),
            proposal_kind: kind,
            disposition: Disposition::Accept,
            replacement: None,
            submission_id: unsigned.submission_id.clone(),
            actor: unsigned.actor.clone(),
            authority: stream_core::HumanAuthority,
            proposal_sha256: verified.event().event.payload_sha256.clone(),
            key_id: key.key_id(),
            signature: SignatureBytes::from_bytes([0; 64]),
        };
        let source = SourceName::fixed(SourceName::PROPOSALS);
        let root = verified.event().event.root.as_ref();
        let event = match written {
            Written::Unsigned => NewEvent::build(&source, root, Some(proposal), &unsigned),
            Written::OtherBytes => {
                key.sign(&mut signed).unwrap();
                signed.disposition = Disposition::Edit;
                signed.replacement = Some("canary-forged edit".into());
                NewEvent::build(&source, root, Some(proposal), &signed)
            }
            Written::ForeignKey => {
                crate::authority::SigningKey::from_bytes(&[0x66; 32])
                    .sign(&mut signed)
                    .unwrap();
                NewEvent::build(&source, root, Some(proposal), &signed)
            }
            Written::Signed => {
                key.sign(&mut signed).unwrap();
                NewEvent::build(&source, root, Some(proposal), &signed)
            }
        }
        .unwrap();
        let mut tx = self.base.store.begin().unwrap();
        tx.append(&event).unwrap();
        tx.commit().unwrap();
        event.id
    }

    /// A correction accepted before decisions were signed: a `decision@1`
    /// and the judgment its projection recorded then. Returns the judgment.
    pub fn decide_correction_legacy(&self) -> EventId {
        use crate::judgment::{JudgedOutput, JudgmentInput, record_judgment};
        let decision = self.write_decision(&self.correction, Written::Unsigned, &signer());
        let verified = crate::chain::verify_chain(&self.base.store, &self.correction).unwrap();
        let crate::chain::ProposalBody::Correction(p) = verified.body() else {
            panic!("not a correction")
        };
        let judgment = record_judgment(&JudgmentInput {
            criterion: stream_core::payload::Criterion::AgentSelfCorrection,
            actor: Label::new("owner").unwrap(),
            target: JudgedOutput {
                delivery_receipt_event_id: p.target.delivery_receipt_event_id.clone(),
                output_event_id: p.target.output_event_id.clone(),
                run_id: p.target.run_id.clone(),
                source_root_event_id: p.target.source_root_event_id.clone(),
                output_contract: p.target.output_contract,
            },
            feedback_source_event_id: decision,
            replacement: p.replacement.text.clone(),
        })
        .unwrap();
        let mut tx = self.base.store.begin().unwrap();
        tx.append(&judgment).unwrap();
        tx.commit().unwrap();
        judgment.id
    }
}

/// The signing key of the tests' decisions (fixed, so that goldens hold).
pub fn signer() -> crate::authority::SigningKey {
    crate::authority::SigningKey::from_bytes(&[0x42; 32])
}

/// The keys the tests trust: [`signer`]'s.
pub fn trusted() -> crate::authority::TrustedKeys {
    crate::authority::TrustedKeys::new([signer().key_id()])
}
