//! The proposal tools' argument schemas (JSON Schema 2020-12), generated
//! from the one table of bounds, [`stream_core::bounds`]: what the worker
//! checks a call against, what the provider sees, and (through the
//! declarations) part of every declaration fingerprint. The parent's typed
//! parse declares the same bounds from the same table.

use serde_json::{Value, json};
use stream_core::bounds;
use stream_core::payload::ProposalKind;

/// JSON Schema dialect of every tool schema.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// An event id: 64 lowercase hex digits.
pub const HEX_ID_PATTERN: &str = "^[0-9a-f]{64}$";

/// The argument schema of the tool of `kind`.
pub fn input_schema(kind: ProposalKind) -> Value {
    match kind {
        ProposalKind::MemoryChange => memory_change_schema(),
        ProposalKind::SelfCorrection => correction_schema(),
        ProposalKind::FocusDeclaration => focus_schema(),
    }
}

fn target_output_pattern() -> String {
    format!("^({}|[0-9a-f]{{64}})$", bounds::LATEST)
}

fn slug_pattern() -> String {
    format!("^[a-z0-9-]{{{},{}}}$", bounds::SLUG_MIN, bounds::SLUG_MAX)
}

fn source_pattern() -> String {
    let max = bounds::SOURCE_PART_MAX;
    format!("^[a-z]{{1,{max}}}:[A-Za-z0-9._@-]{{1,{max}}}$")
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
        "maxItems": bounds::EVIDENCE_IDS_MAX,
        "uniqueItems": true,
        "items": {"type": "string", "pattern": HEX_ID_PATTERN},
        "description": "Ids of the conversation turns that support this, copied exactly as shown \
            beside each turn (64 lowercase hex digits). At most 16, no repeats; may be empty.",
    })
}

fn reason() -> Value {
    text(
        1,
        bounds::REASON_MAX,
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
            "proposed_text": text(1, bounds::PROPOSED_TEXT_MAX,
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
                "pattern": target_output_pattern(),
                "description": "The id shown beside the reply to correct, copied exactly, or the \
                    literal string latest for your most recent correctable reply.",
            },
            "replacement": text(1, bounds::REPLY_MAX,
                "The complete corrected reply that should stand in place of the original \
                (1-4096 characters)."),
            "reason": reason(),
            "evidence_event_ids": evidence_ids(),
        },
    })
}

fn slug(description: &str) -> Value {
    json!({"type": "string", "pattern": slug_pattern(), "description": description})
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
            "objective": text(1, bounds::OBJECTIVE_MAX,
                "What the focus is for, in the owner's terms (1-2000 characters)."),
            "subscriptions": {
                "type": "array",
                "maxItems": bounds::SUBSCRIPTIONS_MAX,
                "description": "Event sources and types the focus would read; may be empty.",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["source", "types"],
                    "properties": {
                        "source": {
                            "type": "string",
                            "pattern": source_pattern(),
                            "description": "A source name <kind>:<name>.",
                        },
                        "types": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": bounds::SUBSCRIPTION_TYPES_MAX,
                            "items": {"type": "string", "minLength": 1, "maxLength": bounds::EVENT_TYPE_MAX},
                        },
                    },
                },
            },
            "budgets": {
                "type": "object",
                "additionalProperties": false,
                "required": ["maxRunsPerDay", "maxOutputTokensPerRun", "maxDays"],
                "properties": {
                    "maxRunsPerDay": integer(1, bounds::RUNS_PER_DAY_MAX, "Runs per day, 1-1000."),
                    "maxOutputTokensPerRun": integer(1, bounds::OUTPUT_TOKENS_PER_RUN_MAX, "Output tokens per run, 1-32000."),
                    "maxDays": integer(1, bounds::DAYS_MAX, "Lifetime in days, 1-365."),
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
                            "days": integer(1, bounds::DAYS_MAX, "Days until the focus retires."),
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
    fn generated_patterns_read_as_they_did_when_written_by_hand() {
        assert_eq!(target_output_pattern(), "^(latest|[0-9a-f]{64})$");
        assert_eq!(slug_pattern(), "^[a-z0-9-]{3,64}$");
        assert_eq!(source_pattern(), "^[a-z]{1,128}:[A-Za-z0-9._@-]{1,128}$");
    }
}
