//! Sample payloads for every event type, with fixed ids so golden bytes are stable.

use stream_core::payload::*;
use stream_core::text::{BoundedText, Label};
use stream_core::*;

pub fn hex(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}
pub fn event_id(c: char) -> EventId {
    EventId::parse(&hex(c)).unwrap()
}
pub fn run_id(c: char) -> RunId {
    RunId::parse(&hex(c)).unwrap()
}
pub fn sha(c: char) -> Sha256Hex {
    Sha256Hex::parse(&hex(c)).unwrap()
}

pub fn proposer() -> Proposer {
    Proposer {
        run_id: run_id('1'),
        output_event_id: event_id('2'),
        trigger_event_id: event_id('3'),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&hex('4')).unwrap(),
        provider: ProviderRef {
            api: ProviderApi::OpenaiChat,
            model: BoundedText::new("gpt-4.1-mini").unwrap(),
        },
        context_snapshot_id: SnapshotId::parse(&hex('5')).unwrap(),
    }
}

pub fn memory_proposal() -> MemoryChangeProposed {
    let text = stream_core::text::MemoryText::new("canary-memory-1 likes tea").unwrap();
    let (len, hash) = MemoryChangeProposed::text_facts(&text);
    MemoryChangeProposed {
        proposal_state: AgentProposed,
        proposer: proposer(),
        target: MemoryTarget {
            source: SourceName::fixed(SourceName::CONTEXT),
            document_id: DocumentId::parse(&hex('6')).unwrap(),
            path: MemoryPath,
            version_id: VersionId::parse(&hex('7')).unwrap(),
            sha256: sha('8'),
            content_type: Label::new("text/markdown").unwrap(),
        },
        operation: MemoryOperation::Append,
        proposed_text: text,
        proposed_text_length: len,
        proposed_text_sha256: hash,
        reason: BoundedText::new("the user said so").unwrap(),
        evidence_event_ids: EvidenceIds::new(vec![event_id('3')]).unwrap(),
        publication_eligible: False,
    }
}

pub fn correction_proposal() -> CorrectionProposed {
    CorrectionProposed {
        proposal_state: AgentProposed,
        proposer: proposer(),
        target: CorrectionTarget {
            run_id: run_id('a'),
            output_event_id: event_id('b'),
            delivery_receipt_event_id: event_id('c'),
            source_root_event_id: event_id('d'),
            output_contract: OutputContract::ConversationText1,
        },
        replacement: ConversationOutput {
            contract: OutputContract::ConversationText1,
            text: BoundedText::new("Paris is the capital of France.").unwrap(),
        },
        reason: BoundedText::new("I said Lyon").unwrap(),
        evidence_event_ids: EvidenceIds::default(),
        quality_eligible: False,
        external_export_eligible: False,
        publication_eligible: False,
    }
}

pub fn focus_declaration() -> FocusDeclaration {
    FocusDeclaration {
        identity: FocusIdentity {
            id: "garden-planning".into(),
            version: 1,
        },
        lineage: FocusLineage { parent: None },
        scope: FocusScope { chat: OriginChat },
        objective: BoundedText::new("Help plan the spring garden.").unwrap(),
        subscriptions: vec![FocusSubscription {
            source: SourceName::new("telegram:42").unwrap(),
            types: vec![BoundedText::new("stream.telegram.message.received").unwrap()],
        }],
        budgets: FocusBudgets {
            max_runs_per_day: 5,
            max_output_tokens_per_run: 800,
            max_days: 30,
        },
        requested_permissions: FocusPermissions {
            tools: EmptyList,
            proposals: EmptyList,
            external_actions: False,
        },
        retirement: FocusRetirement {
            rule: RetirementRule::AfterDays,
            days: Some(30),
        },
    }
}

pub fn focus_proposal() -> FocusDeclarationProposed {
    let declaration = focus_declaration();
    FocusDeclarationProposed {
        proposal_state: AgentProposed,
        proposer: proposer(),
        fingerprint: focus_fingerprint(&declaration).unwrap(),
        declaration,
        resolution: FocusResolution::default(),
        authority: FocusAuthority::default(),
    }
}

pub fn message_received() -> MessageReceived {
    MessageReceived {
        update_id: 1001,
        message_id: 7,
        chat_id: 42,
        chat_type: PrivateChat,
        sender_id: 42,
        date: 1_790_000_000,
        text: Some(BoundedText::new("canary-message-1 hello").unwrap()),
        photo: None,
        photo_too_large: false,
        reply_to_message_id: None,
        command: None,
    }
}

pub fn delivery_receipt() -> DeliveryReceipt {
    DeliveryReceipt {
        output_event_id: event_id('2'),
        run_id: run_id('1'),
        chat_id: 42,
        message_id: 8,
        date: 1_790_000_001,
        root_sender_id: 42,
        source_root_event_id: event_id('3'),
        continuation_message_ids: Vec::new(),
    }
}

pub fn split_delivery_receipt() -> DeliveryReceipt {
    DeliveryReceipt {
        continuation_message_ids: vec![9, 10],
        ..delivery_receipt()
    }
}

pub fn delivery_failed() -> DeliveryFailed {
    DeliveryFailed {
        output_event_id: event_id('2'),
        run_id: run_id('1'),
        chat_id: 42,
        error_code: 400,
        sent_message_ids: vec![8],
        source_root_event_id: event_id('3'),
    }
}

pub fn observation() -> MessageObservation {
    MessageObservation {
        run_id: run_id('1'),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        trigger_event_id: event_id('3'),
        chat_id: 42,
        output_contract: OutputContract::ConversationText1,
        text: BoundedText::new("Hello!").unwrap(),
        origin: TextOrigin::Model,
        thinking: ThinkingMarker::Redacted,
    }
}

pub fn run_completed() -> RunCompleted {
    RunCompleted {
        run_id: run_id('1'),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        declaration_fingerprint: Fingerprint::parse(&hex('4')).unwrap(),
        worker_bundle_sha256: Some(sha('9')),
        provider: Some(proposer().provider),
        trigger_event_id: event_id('3'),
        context_snapshot_id: Some(SnapshotId::parse(&hex('5')).unwrap()),
        output_event_id: event_id('2'),
        proposal_event_ids: vec![event_id('e')],
    }
}

pub fn run_failed() -> RunFailed {
    RunFailed {
        run_id: run_id('1'),
        agent_id: Label::new("telegram-conversation").unwrap(),
        agent_version: 18,
        trigger_event_id: event_id('3'),
        attempt: 2,
        reason: RunFailureReason::ProviderTransient,
        is_final: false,
    }
}

pub fn decision(disposition: Disposition, replacement: Option<&str>) -> ProposalDecision {
    ProposalDecision {
        proposal_event_id: event_id('e'),
        proposal_kind: DecidableKind::SelfCorrection,
        disposition,
        replacement: replacement.map(str::to_owned),
        submission_id: Label::new("sub-1").unwrap(),
        actor: Label::new("owner").unwrap(),
        authority: HumanAuthority,
    }
}

pub fn materialized() -> MemoryChangeMaterialized {
    MemoryChangeMaterialized {
        proposal_event_id: event_id('e'),
        decision_event_id: event_id('f'),
        source: SourceName::fixed(SourceName::CONTEXT),
        document_id: DocumentId::parse(&hex('6')).unwrap(),
        base_version_id: VersionId::parse(&hex('7')).unwrap(),
        base_sha256: sha('8'),
        new_version_id: VersionId::parse(&hex('a')).unwrap(),
        new_sha256: sha('b'),
        byte_count: 120,
        file_event_id: event_id('c'),
    }
}

pub fn materialization_failed() -> MaterializationFailed {
    MaterializationFailed {
        proposal_event_id: event_id('e'),
        decision_event_id: event_id('f'),
        reason: MaterializationFailure::StaleBase,
    }
}

pub fn judgment() -> JudgmentRecorded {
    JudgmentRecorded {
        kind: JudgmentKind::Correct,
        criterion: Criterion::AgentSelfCorrection,
        criterion_version: 1,
        actor: Label::new("owner").unwrap(),
        authority: HumanAuthority,
        target_delivery_receipt_event_id: event_id('c'),
        target_output_event_id: event_id('b'),
        target_run_id: run_id('a'),
        feedback_source_event_id: event_id('f'),
        replacement: correction_proposal().replacement,
        quality_eligible: true,
        external_export_eligible: false,
    }
}

pub fn file_changed() -> FileChanged {
    FileChanged {
        document_id: DocumentId::parse(&hex('6')).unwrap(),
        path: BoundedText::new("memory.md").unwrap(),
        version_id: VersionId::parse(&hex('7')).unwrap(),
        previous_version_id: None,
        sha256: sha('8'),
        size: 64,
        content_type: Label::new("text/markdown").unwrap(),
    }
}

pub fn activation_step() -> ActivationStep {
    ActivationStep {
        activation_id: Label::new("act-1").unwrap(),
        step: ActivationStepKind::FreezeIngress,
        declaration_id: Label::new("telegram-conversation").unwrap(),
        declaration_version: 18,
        declaration_fingerprint: Fingerprint::parse(&hex('4')).unwrap(),
        worker_bundle_sha256: sha('9'),
        frozen_head_seq: Some(12),
    }
}
