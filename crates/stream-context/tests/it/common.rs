//! A store fixture that writes conversation chains the way the engine does.

use std::collections::BTreeSet;

use serde_json::json;
use stream_context::ContextSpec;
use stream_core::canon::sha256;
use stream_core::ids::{derive_document_id, derive_run_id, derive_version_id};
use stream_core::payload::*;
use stream_core::text::{BoundedText, Label, MemoryText};
use stream_core::*;
use stream_store::{Progress, Read, RunRow, RunStatus, SqliteStore, Store, Tx, VersionRow};

pub const CHAT: i64 = 42;
pub const CONVERSATION: &str = "telegram-conversation";
pub const FIXED: &str = "telegram-fixed-replies";

pub struct Fixture {
    pub store: SqliteStore,
    pub telegram: SourceName,
    next_update: i64,
    _dir: tempfile::TempDir,
}

pub struct Reply {
    pub run_id: RunId,
    pub output: EventId,
    pub receipt: Option<EventId>,
}

pub fn spec(proposals: &[ProposalKind]) -> ContextSpec {
    ContextSpec {
        agent_id: Label::new(CONVERSATION).unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        proposals: proposals.iter().copied().collect(),
        prompt: "You are the owner's assistant.".into(),
        transcript_messages: 20,
        history_agents: BTreeSet::from([CONVERSATION.to_owned()]),
        memory_subscribed: true,
    }
}

pub fn all_kinds() -> Vec<ProposalKind> {
    ProposalKind::ALL.to_vec()
}

fn commit(tx: Box<dyn Tx + '_>) {
    tx.commit().unwrap();
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        Self {
            store,
            telegram: SourceName::telegram(99),
            next_update: 1000,
            _dir: dir,
        }
    }

    pub fn message_in(&mut self, chat: i64, sender: i64, text: &str) -> StoredEvent {
        self.next_update += 1;
        let msg = MessageReceived {
            update_id: self.next_update,
            message_id: self.next_update,
            chat_id: chat,
            chat_type: PrivateChat,
            sender_id: sender,
            date: 1_790_000_000 + self.next_update,
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

    pub fn message(&mut self, text: &str) -> StoredEvent {
        self.message_in(CHAT, CHAT, text)
    }

    /// A settled run of `agent` answering `root`, optionally delivered.
    pub fn reply_as(
        &mut self,
        agent: &str,
        root: &StoredEvent,
        text: &str,
        delivered: bool,
        proposals: Vec<NewEvent>,
    ) -> Reply {
        let run_id = derive_run_id(agent, 18, root.id()).unwrap();
        let source = SourceName::agent(agent).unwrap();
        let output = MessageObservation {
            run_id: run_id.clone(),
            agent_id: Label::new(agent).unwrap(),
            agent_version: 18,
            trigger_event_id: root.id().clone(),
            chat_id: CHAT,
            output_contract: OutputContract::ConversationText1,
            text: BoundedText::new(text).unwrap(),
            origin: TextOrigin::Model,
            thinking: ThinkingMarker::None,
        };
        let output = NewEvent::build(&source, Some(root.id()), Some(root.id()), &output).unwrap();
        let done = RunCompleted {
            run_id: run_id.clone(),
            agent_id: Label::new(agent).unwrap(),
            agent_version: 18,
            declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
            worker_bundle_sha256: None,
            provider: None,
            trigger_event_id: root.id().clone(),
            context_snapshot_id: None,
            output_event_id: output.id.clone(),
            proposal_event_ids: proposals.iter().map(|p| p.id.clone()).collect(),
        };
        let done = NewEvent::build(&source, Some(root.id()), Some(&output.id), &done).unwrap();
        let mut tx = self.store.begin().unwrap();
        tx.append(&output).unwrap().or_conflict(&output.id).unwrap();
        for p in &proposals {
            tx.append(p).unwrap().or_conflict(&p.id).unwrap();
        }
        tx.append(&done).unwrap().or_conflict(&done.id).unwrap();
        tx.put_run(&RunRow {
            run_id: run_id.clone(),
            agent_id: agent.into(),
            agent_version: 18,
            trigger_event_id: root.id().clone(),
            status: RunStatus::Completed,
            attempts: 1,
            snapshot_id: None,
        })
        .unwrap();
        tx.set_progress(
            &format!("{agent}@18"),
            &Progress {
                source: self.telegram.clone(),
                seq: root.seq,
            },
        )
        .unwrap();
        commit(tx);
        let receipt = delivered.then(|| self.deliver(&output.id, root, CHAT, CHAT));
        Reply {
            run_id,
            output: output.id,
            receipt,
        }
    }

    pub fn reply(&mut self, root: &StoredEvent, text: &str) -> Reply {
        self.reply_as(CONVERSATION, root, text, true, Vec::new())
    }

    pub fn deliver(
        &mut self,
        output: &EventId,
        root: &StoredEvent,
        chat: i64,
        sender: i64,
    ) -> EventId {
        let out = self.store.event(output).unwrap().unwrap();
        let out: MessageObservation = out.decode().unwrap();
        let receipt = DeliveryReceipt {
            output_event_id: output.clone(),
            run_id: out.run_id,
            chat_id: chat,
            message_id: 5000 + root.seq as i64,
            date: 1_790_000_500,
            root_sender_id: sender,
            source_root_event_id: root.id().clone(),
            continuation_message_ids: Vec::new(),
        };
        let event =
            NewEvent::build(&self.telegram, Some(root.id()), Some(output), &receipt).unwrap();
        self.store.append(&event).unwrap();
        event.id
    }

    pub fn judge(&mut self, reply: &Reply, root: &StoredEvent, feedback: &StoredEvent, text: &str) {
        let judgment = JudgmentRecorded {
            kind: JudgmentKind::Correct,
            criterion: Criterion::TelegramCorrect,
            criterion_version: 1,
            actor: Label::new("owner").unwrap(),
            authority: HumanAuthority,
            target_delivery_receipt_event_id: reply.receipt.clone().unwrap(),
            target_output_event_id: reply.output.clone(),
            target_run_id: reply.run_id.clone(),
            feedback_source_event_id: feedback.id().clone(),
            replacement: ConversationOutput {
                contract: OutputContract::ConversationText1,
                text: BoundedText::new(text).unwrap(),
            },
            quality_eligible: true,
            external_export_eligible: true,
        };
        let source = SourceName::fixed(SourceName::JUDGMENTS);
        let event =
            NewEvent::build(&source, Some(root.id()), Some(feedback.id()), &judgment).unwrap();
        self.store.append(&event).unwrap();
    }

    /// `memory.md` as a scan would record it.
    pub fn memory(&mut self, text: &str) -> (DocumentId, VersionId, Sha256Hex) {
        let source = SourceName::fixed(SourceName::CONTEXT);
        let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
        let current = self
            .store
            .document(&doc)
            .unwrap()
            .and_then(|d| d.current_version);
        let mut tx = self.store.begin().unwrap();
        tx.ensure_document(&doc, &source, "memory.md").unwrap();
        let sha = tx.put_blob(text.as_bytes()).unwrap();
        let version = derive_version_id(&doc, &sha, current.as_ref()).unwrap();
        tx.insert_version(&VersionRow {
            id: version.clone(),
            document_id: doc.clone(),
            sha256: sha.clone(),
            size: text.len() as u64,
            content_type: "text/markdown".into(),
            previous_version: current,
        })
        .unwrap();
        tx.set_current_version(&doc, &version).unwrap();
        commit(tx);
        (doc, version, sha)
    }

    /// A memory proposal event of a run answering `root`.
    pub fn memory_proposal(&self, root: &StoredEvent, text: &str) -> NewEvent {
        let run_id = derive_run_id(CONVERSATION, 18, root.id()).unwrap();
        let source = SourceName::agent(CONVERSATION).unwrap();
        let output_id = stream_core::ids::derive_event_id(
            source.as_str(),
            MessageObservation::TYPE,
            &json!([run_id, "output"]),
        )
        .unwrap();
        let doc = derive_document_id(SourceName::CONTEXT, "memory.md").unwrap();
        let text = MemoryText::new(text).unwrap();
        let (len, hash) = MemoryChangeProposed::text_facts(&text);
        let proposal = MemoryChangeProposed {
            proposal_state: AgentProposed,
            proposer: Proposer {
                run_id: run_id.clone(),
                output_event_id: output_id.clone(),
                trigger_event_id: root.id().clone(),
                agent_id: Label::new(CONVERSATION).unwrap(),
                agent_version: 18,
                declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
                provider: ProviderRef {
                    api: ProviderApi::OpenaiChat,
                    model: BoundedText::new("m").unwrap(),
                },
                context_snapshot_id: SnapshotId::parse(&"5".repeat(64)).unwrap(),
            },
            target: MemoryTarget {
                source: SourceName::fixed(SourceName::CONTEXT),
                document_id: doc,
                path: MemoryPath,
                version_id: VersionId::parse(&"7".repeat(64)).unwrap(),
                sha256: sha256(b"x"),
                content_type: Label::new("text/markdown").unwrap(),
            },
            operation: MemoryOperation::Append,
            proposed_text: text,
            proposed_text_length: len,
            proposed_text_sha256: hash,
            reason: BoundedText::new("asked").unwrap(),
            evidence_event_ids: EvidenceIds::new(vec![root.id().clone()]).unwrap(),
            publication_eligible: False,
        };
        NewEvent::build(&source, Some(root.id()), Some(&output_id), &proposal).unwrap()
    }
}

/// A store's reads, forwarded, with the `events` queries counted.
pub struct CountingReads<'a> {
    pub inner: &'a dyn Read,
    pub event_queries: std::cell::Cell<usize>,
}

impl<'a> CountingReads<'a> {
    pub fn new(inner: &'a dyn Read) -> Self {
        Self {
            inner,
            event_queries: std::cell::Cell::new(0),
        }
    }
}

stream_store::delegate_read!([] CountingReads<'_>, s => s.inner, events(q) => {
    s.event_queries.set(s.event_queries.get() + 1);
    s.inner.events(q)
});
