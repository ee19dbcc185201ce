//! Sample `stream.sandbox/1` packets and proposal tool schemas for tests.
//!
//! The schemas are the shipped ones (`stream_protocol::tools`); only the
//! tool descriptions here are shorter than the declarations'.
//! Tests use these so that worker, provider and broker tests agree on one
//! realistic packet.

use serde_json::{Value, json};
use stream_core::payload::{ProposalKind, ProviderApi};
use stream_core::{EventId, RunId};
use stream_protocol::{
    Capability, HistoryMessage, HistoryToolCall, Image, OutputMode, Packet, Protocol,
    ProviderCompat, ProviderSpec, ToolDef, tools,
};

/// A deterministic event id made of one repeated hex digit pair.
pub fn event_id(n: u8) -> EventId {
    EventId::from_bytes([n; 32])
}

/// The admitted evidence ids of [`packet`].
pub fn evidence_ids() -> Vec<EventId> {
    vec![event_id(0xa1), event_id(0xa2), event_id(0xb1)]
}

/// The admitted correction targets of [`packet`] (oldest first).
pub fn correction_targets() -> Vec<EventId> {
    vec![event_id(0xb1)]
}

/// `request_memory_change` arguments: the shipped schema, generated from the
/// one table of bounds (a copy here drifted once).
pub fn memory_schema() -> Value {
    tools::input_schema(ProposalKind::MemoryChange)
}

/// `submit_correction` arguments.
pub fn correction_schema() -> Value {
    tools::input_schema(ProposalKind::SelfCorrection)
}

/// `propose_focus` arguments: one focus declaration (docs/design.md §18).
pub fn focus_schema() -> Value {
    tools::input_schema(ProposalKind::FocusDeclaration)
}

/// The three proposal tools.
pub fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "request_memory_change".into(),
            description: "Ask to preserve a bounded change to memory.md; a human decides.".into(),
            input_schema: memory_schema(),
        },
        ToolDef {
            name: "submit_correction".into(),
            description: "Propose a correction of one of your earlier delivered replies.".into(),
            input_schema: correction_schema(),
        },
        ToolDef {
            name: "propose_focus".into(),
            description: "Propose a focus declaration; it creates proposal evidence only.".into(),
            input_schema: focus_schema(),
        },
    ]
}

/// Valid `request_memory_change` arguments carrying `text`.
pub fn memory_args(text: &str) -> Value {
    json!({
        "operation": "append",
        "proposed_text": text,
        "reason": "The owner asked me to remember this.",
        "evidence_event_ids": [event_id(0xa1)],
    })
}

/// Valid `submit_correction` arguments carrying `replacement`.
pub fn correction_args(replacement: &str) -> Value {
    json!({
        "target_output": "latest",
        "replacement": replacement,
        "reason": "My last reply named the wrong city.",
        "evidence_event_ids": [event_id(0xa2), event_id(0xb1)],
    })
}

/// Valid `propose_focus` arguments carrying `objective`.
pub fn focus_args(objective: &str) -> Value {
    json!({
        "identity": {"id": "morning-review", "version": 1},
        "lineage": {"parent": null},
        "scope": {"chat": "origin"},
        "objective": objective,
        "subscriptions": [{"source": "telegram:1", "types": ["stream.telegram.message.received"]}],
        "budgets": {"maxRunsPerDay": 3, "maxOutputTokensPerRun": 800, "maxDays": 30},
        "requestedPermissions": {"tools": [], "proposals": [], "externalActions": false},
        "retirement": {"rule": "after-days", "days": 30},
    })
}

/// A realistic text-mode packet for `api`: a short history with an earlier
/// captured proposal, an image in the current turn, all three tools exposed,
/// a memory target, one correction target and three admitted evidence ids.
pub fn packet(api: ProviderApi) -> Packet {
    let model = match api {
        ProviderApi::OpenaiChat => "gpt-4.1-mini",
        ProviderApi::AnthropicMessages => "claude-sonnet-4-5",
    };
    Packet {
        protocol: Protocol,
        run_id: RunId::from_bytes([0x11; 32]),
        attempt: 1,
        provider: ProviderSpec {
            api,
            model: model.into(),
            max_output_tokens: 1024,
            compat: ProviderCompat::Openai,
        },
        system: "You are The Stream, a personal assistant. Cite evidence ids beside turns.".into(),
        history: vec![
            HistoryMessage::User {
                text: Some("[a1a1…] Remember that I take the 7:40 train.".into()),
                image: None,
            },
            HistoryMessage::Assistant {
                text: None,
                tool_calls: vec![HistoryToolCall {
                    id: "Tq3xK9bZ2".into(),
                    name: "request_memory_change".into(),
                    arguments: memory_args("Takes the 7:40 train."),
                }],
            },
            HistoryMessage::ToolResult {
                call_id: "Tq3xK9bZ2".into(),
                content: "Proposal captured as a durable inert proposal; approval and application are pending.".into(),
            },
            HistoryMessage::Assistant {
                text: Some("I saved that as a memory suggestion.".into()),
                tool_calls: vec![],
            },
            HistoryMessage::User {
                text: Some("[a2a2…] What is the capital of Australia?".into()),
                image: None,
            },
            HistoryMessage::Assistant {
                text: Some("[b1b1…] Sydney.".into()),
                tool_calls: vec![],
            },
        ],
        user: HistoryMessage::User {
            text: Some("That's wrong, and what is in this picture?".into()),
            image: Some(Image {
                media_type: "image/png".into(),
                data_base64: "iVBORw0KGgoAAAANSUhEUg==".into(),
            }),
        },
        tools: tools(),
        capability: Capability {
            memory_target: true,
            correction_targets: correction_targets(),
            evidence_ids: evidence_ids(),
            max_calls: 3,
        },
        output_mode: OutputMode::Text,
    }
}
