//! Facts and completions for settlement tests.

use stream_core::canon::sha256;
use stream_core::ids::{derive_document_id, derive_run_id};
use stream_core::payload::*;
use stream_core::text::{BoundedText, Label};
use stream_core::*;
use stream_proposals::settle::{RunFacts, ValidatedCompletion, ValidatedProposal};
use stream_store::SqliteStore;

pub fn id(c: char) -> EventId {
    EventId::parse(&c.to_string().repeat(64)).unwrap()
}

pub fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (
        SqliteStore::open(&dir.path().join("store.db")).unwrap(),
        dir,
    )
}

pub fn facts() -> RunFacts {
    let trigger = id('3');
    RunFacts {
        run_id: derive_run_id("telegram-conversation", 18, &trigger).unwrap(),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&"f".repeat(64)).unwrap(),
        worker_bundle_sha256: Some(sha256(b"worker")),
        provider: Some(ProviderRef {
            api: ProviderApi::OpenaiChat,
            model: BoundedText::new("gpt-4.1-mini").unwrap(),
        }),
        snapshot_id: Some(SnapshotId::parse(&"5".repeat(64)).unwrap()),
        trigger_event_id: trigger,
        trigger_seq: 7,
        telegram_source: SourceName::telegram(99),
        chat_id: 42,
        attempts: 1,
        consumer: "telegram-conversation@18".into(),
    }
}

pub fn memory() -> ValidatedProposal {
    ValidatedProposal::Memory {
        target: MemoryTarget {
            source: SourceName::fixed(SourceName::CONTEXT),
            document_id: derive_document_id(SourceName::CONTEXT, "memory.md").unwrap(),
            path: MemoryPath,
            version_id: VersionId::parse(&"7".repeat(64)).unwrap(),
            sha256: sha256(b"base"),
            content_type: Label::new("text/markdown").unwrap(),
        },
        operation: MemoryOperation::Append,
        text: BoundedText::new("canary-settle-memory likes tea").unwrap(),
        reason: BoundedText::new("the owner said so").unwrap(),
        evidence: EvidenceIds::new(vec![id('3')]).unwrap(),
    }
}

pub fn correction() -> ValidatedProposal {
    ValidatedProposal::Correction {
        target: CorrectionTarget {
            run_id: RunId::parse(&"a".repeat(64)).unwrap(),
            output_event_id: id('b'),
            delivery_receipt_event_id: id('c'),
            source_root_event_id: id('d'),
            output_contract: OutputContract::ConversationText1,
        },
        replacement: BoundedText::new("Paris is the capital of France.").unwrap(),
        reason: BoundedText::new("I said Lyon").unwrap(),
        evidence: EvidenceIds::new(vec![id('b')]).unwrap(),
    }
}

pub use stream_proposals::testing::focus;

pub fn completion(text: Option<&str>, proposals: Vec<ValidatedProposal>) -> ValidatedCompletion {
    ValidatedCompletion {
        text: text.map(|t| BoundedText::new(t).unwrap()),
        thinking: ThinkingMarker::Redacted,
        proposals,
        cut: false,
    }
}
