//! The proposal capability manifest, as code: for each proposal kind its
//! fixed tool name, description and JSON Schema (2020-12) carrying every
//! bound of the tool rules (docs/design.md §9).
//!
//! The schemas are what the worker checks a call against and what the
//! provider sees; [`crate::args`] is the trusted parent's own, independent
//! validation of the same bounds. Both are part of the declaration
//! fingerprint, so a bound changed here changes every fingerprint that lists
//! the tool, and the registry refuses to install it without a version bump.

use serde::Serialize;
use serde_json::{Value, json};
use stream_core::payload::ProposalKind;
use stream_protocol::ToolDef;

/// The packet/result protocol version the manifest is written for.
pub const PACKET_PROTOCOL: &str = "stream.sandbox/1";

/// JSON Schema dialect of every tool schema.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The most evidence ids one call may cite.
pub const MAX_EVIDENCE_IDS: usize = 16;
/// `request_memory_change.proposed_text`: 1–32,768 characters.
pub const MAX_PROPOSED_TEXT: usize = 32_768;
/// `reason`: 1–1,000 characters.
pub const MAX_REASON: usize = 1_000;
/// `submit_correction.replacement`: 1–4,096 characters.
pub const MAX_REPLACEMENT: usize = 4_096;
/// The literal that selects the most recent eligible assistant turn.
pub const LATEST: &str = "latest";

/// One fixed proposal tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The proposal kind it captures.
    pub kind: ProposalKind,
    /// The fixed tool name the model calls.
    pub name: &'static str,
    /// What the model is told the tool does.
    pub description: &'static str,
    /// Its JSON Schema (2020-12, no additional properties).
    pub schema: Value,
}

/// The fixed tool name of a proposal kind.
pub fn tool_name(kind: ProposalKind) -> &'static str {
    // The names live with the kind in stream-core, which the worker links too.
    kind.tool_name()
}

/// The proposal kind of a fixed tool name; `None` for any other name.
pub fn kind_of_tool(name: &str) -> Option<ProposalKind> {
    ProposalKind::from_tool_name(name)
}

/// The tool of one proposal kind.
pub fn tool_spec(kind: ProposalKind) -> ToolSpec {
    match kind {
        ProposalKind::MemoryChange => ToolSpec {
            kind,
            name: tool_name(kind),
            description: "Save a suggested change to the owner's long-term memory for the owner to \
                review. Use it when the owner asks you to remember, forget or update something \
                lasting about them or your work together. It only records a suggestion: nothing \
                changes unless the owner accepts it, so never say that anything was remembered, \
                changed or learned.",
            schema: memory_change_schema(),
        },
        ProposalKind::SelfCorrection => ToolSpec {
            kind,
            name: tool_name(kind),
            description: "Save a proposed correction of one of your own earlier delivered replies \
                for the owner to review. Use it when you notice, or the owner points out, that an \
                earlier reply of yours was wrong. It only records a suggestion: the earlier reply \
                stays as it was unless the owner accepts the correction.",
            schema: correction_schema(),
        },
        ProposalKind::FocusDeclaration => ToolSpec {
            kind,
            name: tool_name(kind),
            description: "Save a proposed focus (a standing objective the owner described with \
                /focus) for the owner to review. It only records a proposal: it activates \
                nothing, requests no permissions and widens no data access.",
            schema: focus_schema(),
        },
    }
}

/// The tool of `kind` as a packet carries it to the worker and the provider
/// (the worker's canned warm-up packet holds these too).
pub fn tool_def(kind: ProposalKind) -> ToolDef {
    let spec = tool_spec(kind);
    ToolDef {
        name: spec.name.to_owned(),
        description: spec.description.to_owned(),
        input_schema: spec.schema,
    }
}

/// The capability manifest of a declaration: the tools of its proposals and
/// the packet protocol they are carried by.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityManifest {
    /// Always [`PACKET_PROTOCOL`].
    pub packet_protocol: &'static str,
    /// One tool per declared proposal kind, in [`ProposalKind::ALL`] order.
    pub tools: Vec<ToolSpec>,
}

impl CapabilityManifest {
    /// The manifest of a proposal set (order and repeats do not matter).
    pub fn for_proposals(proposals: &[ProposalKind]) -> Self {
        Self {
            packet_protocol: PACKET_PROTOCOL,
            tools: ProposalKind::ALL
                .into_iter()
                .filter(|kind| proposals.contains(kind))
                .map(tool_spec)
                .collect(),
        }
    }

    /// The tool of `kind`, if declared.
    pub fn tool(&self, kind: ProposalKind) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.kind == kind)
    }
}

fn text(min: usize, max: usize, description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": min,
        "maxLength": max,
        "description": description,
    })
}

fn evidence_ids() -> Value {
    json!({
        "type": "array",
        "maxItems": MAX_EVIDENCE_IDS,
        "uniqueItems": true,
        "items": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "description": "Ids of the conversation turns that support this, copied exactly as shown \
            beside each turn (64 lowercase hex digits). At most 16, no repeats; may be empty.",
    })
}

fn reason() -> Value {
    text(
        1,
        MAX_REASON,
        "Why this is needed, in one or two sentences (1-1000 characters).",
    )
}

fn memory_change_schema() -> Value {
    json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "additionalProperties": false,
        "required": ["operation", "proposed_text", "reason", "evidence_event_ids"],
        "properties": {
            "operation": {
                "type": "string",
                "enum": ["append", "replace-document"],
                "description": "append adds proposed_text at the end of the memory; \
                    replace-document replaces the whole memory with proposed_text, which must \
                    then be the complete document, frontmatter included.",
            },
            "proposed_text": text(1, MAX_PROPOSED_TEXT,
                "The text to append, or the complete new document (1-32768 characters)."),
            "reason": reason(),
            "evidence_event_ids": evidence_ids(),
        },
    })
}

fn correction_schema() -> Value {
    json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "additionalProperties": false,
        "required": ["target_output", "replacement", "reason", "evidence_event_ids"],
        "properties": {
            "target_output": {
                "type": "string",
                "pattern": "^(latest|[0-9a-f]{64})$",
                "description": "The id shown beside the reply to correct, copied exactly, or the \
                    literal string latest for your most recent correctable reply.",
            },
            "replacement": text(1, MAX_REPLACEMENT,
                "The complete corrected reply that should stand in place of the original \
                (1-4096 characters)."),
            "reason": reason(),
            "evidence_event_ids": evidence_ids(),
        },
    })
}

fn slug(description: &str) -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9-]{3,64}$", "description": description})
}

fn integer(min: u32, max: u32, description: &str) -> Value {
    json!({"type": "integer", "minimum": min, "maximum": max, "description": description})
}

fn focus_schema() -> Value {
    json!({
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "additionalProperties": false,
        "required": [
            "identity", "lineage", "scope", "objective", "subscriptions", "budgets",
            "requestedPermissions", "retirement"
        ],
        "properties": {
            "identity": {
                "type": "object",
                "additionalProperties": false,
                "required": ["id", "version"],
                "properties": {
                    "id": slug("A short slug naming the focus, e.g. spring-garden."),
                    "version": integer(1, u32::MAX, "1 for a new focus."),
                },
            },
            "lineage": {
                "type": "object",
                "additionalProperties": false,
                "required": ["parent"],
                "properties": {
                    "parent": {
                        "description": "null for a new focus, or the focus this one refines.",
                        "anyOf": [
                            {"type": "null"},
                            {
                                "type": "object",
                                "additionalProperties": false,
                                "required": ["id", "version"],
                                "properties": {
                                    "id": slug("The refined focus's slug."),
                                    "version": integer(1, u32::MAX, "The refined focus's version."),
                                },
                            },
                        ],
                    },
                },
            },
            "scope": {
                "type": "object",
                "additionalProperties": false,
                "required": ["chat"],
                "properties": {
                    "chat": {
                        "type": "string",
                        "const": "origin",
                        "description": "Always origin: the chat the focus was proposed in.",
                    },
                },
            },
            "objective": text(1, 2_000,
                "What the focus is for, in the owner's terms (1-2000 characters)."),
            "subscriptions": {
                "type": "array",
                "maxItems": 16,
                "description": "Event sources and types the focus would read; may be empty.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["source", "types"],
                    "properties": {
                        "source": {
                            "type": "string",
                            "pattern": "^[a-z]{1,128}:[A-Za-z0-9._@-]{1,128}$",
                            "description": "A source name <kind>:<name>.",
                        },
                        "types": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 16,
                            "items": {"type": "string", "minLength": 1, "maxLength": 128},
                        },
                    },
                },
            },
            "budgets": {
                "type": "object",
                "additionalProperties": false,
                "required": ["maxRunsPerDay", "maxOutputTokensPerRun", "maxDays"],
                "properties": {
                    "maxRunsPerDay": integer(1, 1_000, "Runs per day, 1-1000."),
                    "maxOutputTokensPerRun": integer(1, 32_000, "Output tokens per run, 1-32000."),
                    "maxDays": integer(1, 365, "Lifetime in days, 1-365."),
                },
            },
            "requestedPermissions": {
                "type": "object",
                "additionalProperties": false,
                "required": ["tools", "proposals", "externalActions"],
                "description": "A focus requests no permissions: empty lists and false.",
                "properties": {
                    "tools": {"type": "array", "maxItems": 0},
                    "proposals": {"type": "array", "maxItems": 0},
                    "externalActions": {"type": "boolean", "const": false},
                },
            },
            "retirement": {
                "description": "after-days with days 1-365, or manual without days.",
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["rule", "days"],
                        "properties": {
                            "rule": {"type": "string", "const": "after-days"},
                            "days": integer(1, 365, "Days until the focus retires."),
                        },
                    },
                    {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["rule"],
                        "properties": {
                            "rule": {"type": "string", "const": "manual"},
                        },
                    },
                ],
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_fixed_and_invertible() {
        let names: Vec<_> = ProposalKind::ALL.into_iter().map(tool_name).collect();
        assert_eq!(
            names,
            [
                "request_memory_change",
                "submit_correction",
                "propose_focus"
            ]
        );
        for kind in ProposalKind::ALL {
            assert_eq!(kind_of_tool(tool_name(kind)), Some(kind));
        }
        assert_eq!(kind_of_tool("edit_file"), None);
    }

    #[test]
    fn manifest_order_ignores_declaration_order_and_repeats() {
        let a = CapabilityManifest::for_proposals(&[
            ProposalKind::SelfCorrection,
            ProposalKind::MemoryChange,
        ]);
        let b = CapabilityManifest::for_proposals(&[
            ProposalKind::MemoryChange,
            ProposalKind::SelfCorrection,
            ProposalKind::MemoryChange,
        ]);
        assert_eq!(a, b);
        assert_eq!(a.tools.len(), 2);
        assert!(a.tool(ProposalKind::FocusDeclaration).is_none());
    }
}
