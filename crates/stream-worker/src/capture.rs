//! The capture rules: one pure function from a packet and a parsed provider
//! response to the worker's result.
//!
//! [`PreparedPacket::new`] checks the packet once (known, unique tool names;
//! schemas that compile as JSON Schema 2020-12 without any remote
//! resolution). [`validate_completion`] then applies the capture rules (docs/design.md §9), in
//! this order, and rejects the whole completion at the first one broken:
//!
//! 1. more than one visible text part, or one over 4,096 characters →
//!    `invalid-output`;
//! 2. in strict-JSON mode, any tool call → `tool-call-in-strict-json`, and
//!    text that is not one JSON document → `invalid-output`;
//! 3. visible text carrying a tool call written out instead of made
//!    ([`stream_provider::carries_raw_tool_call`]) → `malformed-call`;
//! 4. more than `min(maxCalls, 3)` calls → `too-many-calls`;
//! 5. a call naming a tool the packet does not expose → `unknown-tool`;
//! 6. two calls of one tool → `duplicate-call`;
//! 7. raw arguments over [`MAX_ARGUMENT_BYTES`] → `oversized-call`;
//! 8. a call id outside `[A-Za-z0-9_.:-]{1,128}`, arguments that are not
//!    JSON, or arguments that break the tool's schema → `malformed-call`;
//! 9. evidence not admitted, a correction target not admitted, `latest`
//!    with no target, a memory change without a memory target →
//!    `capability-escape`;
//! 10. neither text nor calls → `invalid-output`.
//!
//! Every captured call is answered with the content-dark [`CallResult`]
//! (`terminate: true`): no follow-up request exists.

use std::collections::HashSet;

use serde_json::Value;
use stream_core::payload::{ProposalKind, RunFailureReason, ThinkingMarker};
use stream_protocol::{
    BrokerResponse, CallResult, Capability, CapturedCall, Completion, MAX_CALLS,
    MAX_PROVIDER_BODY_BYTES, OutputMode, Packet, WorkerResult,
};
use stream_provider::{ParsedCompletion, ToolArguments, carries_raw_tool_call, offered_tool_names};

/// The largest raw tool-call arguments accepted, in bytes: the one bound
/// the parent applies too.
pub const MAX_ARGUMENT_BYTES: usize = stream_core::json::MAX_ARGUMENTS_BYTES;

/// The largest visible text, in Unicode scalar values (`conversation-text@1`).
pub const MAX_TEXT_CHARS: usize = stream_core::bounds::REPLY_MAX;

/// The packet cannot be used. Content-dark: positions only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// A tool the worker does not know.
    #[error("packet tool {index} is not a proposal tool")]
    UnknownTool {
        /// Position in `tools`.
        index: usize,
    },
    /// A tool listed twice.
    #[error("packet tool {index} is listed twice")]
    DuplicateTool {
        /// Position in `tools`.
        index: usize,
    },
    /// A schema that does not compile (or needs a remote reference).
    #[error("packet tool {index} has an unusable schema")]
    BadSchema {
        /// Position in `tools`.
        index: usize,
    },
    /// The native request could not be built.
    #[error("packet cannot be built into a request: {0}")]
    Build(#[from] stream_provider::BuildError),
}

struct PreparedTool {
    name: String,
    kind: ProposalKind,
    schema: jsonschema::Validator,
}

/// A packet checked once, with its tool schemas compiled.
pub struct PreparedPacket<'p> {
    packet: &'p Packet,
    tools: Vec<PreparedTool>,
}

impl std::fmt::Debug for PreparedPacket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedPacket")
            .field("run_id", &self.packet.run_id)
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// Tool schemas compiled before the packet arrived (by the warm-up, while a
/// spare worker is parked), each handed out at most once. A packet's schema
/// is taken only when it equals the compiled one exactly, so the validator is
/// the one compiling it now would make.
#[derive(Default)]
pub struct Compiled(Vec<(serde_json::Value, jsonschema::Validator)>);

impl Compiled {
    /// Nothing compiled ahead.
    pub fn none() -> Self {
        Self::default()
    }

    /// How many schemas are held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The validator of `schema`: the one compiled ahead when the schema is
    /// equal, else compiled now. The one place a tool schema is compiled.
    fn validator(
        &mut self,
        schema: &serde_json::Value,
    ) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
        match self.0.iter().position(|(held, _)| held == schema) {
            Some(at) => Ok(self.0.swap_remove(at).1),
            None => jsonschema::draft202012::new(schema),
        }
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Compiled").field(&self.0.len()).finish()
    }
}

impl<'p> PreparedPacket<'p> {
    /// Checks tool names and compiles their schemas.
    pub fn new(packet: &'p Packet) -> Result<Self, PacketError> {
        Self::reusing(packet, &mut Compiled::none())
    }

    /// [`PreparedPacket::new`], taking each schema compiled ahead in
    /// `compiled` that the packet carries.
    pub fn reusing(packet: &'p Packet, compiled: &mut Compiled) -> Result<Self, PacketError> {
        let mut tools: Vec<PreparedTool> = Vec::with_capacity(packet.tools.len());
        for (index, tool) in packet.tools.iter().enumerate() {
            let kind = ProposalKind::from_tool_name(&tool.name)
                .ok_or(PacketError::UnknownTool { index })?;
            if tools.iter().any(|t| t.kind == kind) {
                return Err(PacketError::DuplicateTool { index });
            }
            let schema = compiled
                .validator(&tool.input_schema)
                .map_err(|_| PacketError::BadSchema { index })?;
            tools.push(PreparedTool {
                name: tool.name.clone(),
                kind,
                schema,
            });
        }
        Ok(Self { packet, tools })
    }

    /// The compiled schemas, given back (the warm-up keeps them for the
    /// real packet).
    pub fn into_compiled(self) -> Compiled {
        Compiled(
            self.packet
                .tools
                .iter()
                .zip(self.tools)
                .map(|(tool, prepared)| (tool.input_schema.clone(), prepared.schema))
                .collect(),
        )
    }

    /// The packet.
    pub fn packet(&self) -> &'p Packet {
        self.packet
    }

    fn tool(&self, name: &str) -> Option<&PreparedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    fn max_calls(&self) -> usize {
        usize::try_from(self.packet.capability.max_calls)
            .unwrap_or(MAX_CALLS)
            .min(MAX_CALLS)
    }
}

/// The worker's result for the provider's answer: status, parse, capture rules.
pub fn evaluate_response(prepared: &PreparedPacket<'_>, response: &BrokerResponse) -> WorkerResult {
    if let Some(reason) = stream_provider::response_reason(response.status, &response.body) {
        return WorkerResult::Rejected { reason };
    }
    if response.body.len() > MAX_PROVIDER_BODY_BYTES {
        return WorkerResult::Rejected {
            reason: RunFailureReason::ProviderMalformed,
        };
    }
    match stream_provider::parse_response(prepared.packet.provider.api, &response.body) {
        Ok(parsed) => validate_completion(prepared, &parsed),
        Err(_) => WorkerResult::Rejected {
            reason: RunFailureReason::ProviderMalformed,
        },
    }
}

fn call_id_ok(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// Whether every id of `args.evidence_event_ids` is admitted. An absent field
/// is no evidence (the schema decides whether it is required).
fn evidence_admitted(args: &Value, capability: &Capability) -> bool {
    match args.get("evidence_event_ids") {
        None => true,
        Some(Value::Array(ids)) => ids.iter().all(|id| {
            id.as_str()
                .is_some_and(|id| capability.evidence_ids.iter().any(|e| e.as_str() == id))
        }),
        Some(_) => false,
    }
}

/// Whether a call of `kind` with `args` stays within the capability.
fn within_capability(kind: ProposalKind, args: &Value, capability: &Capability) -> bool {
    match kind {
        ProposalKind::MemoryChange => {
            capability.memory_target && evidence_admitted(args, capability)
        }
        ProposalKind::SelfCorrection => {
            let target_ok = match args.get("target_output").and_then(Value::as_str) {
                Some("latest") => !capability.correction_targets.is_empty(),
                Some(id) => capability
                    .correction_targets
                    .iter()
                    .any(|t| t.as_str() == id),
                None => false,
            };
            target_ok && evidence_admitted(args, capability)
        }
        // A focus proposal cites nothing the snapshot admits; its references
        // stay explicitly unchecked (the parent records that).
        ProposalKind::FocusDeclaration => true,
    }
}

fn reject(reason: RunFailureReason) -> WorkerResult {
    WorkerResult::Rejected { reason }
}

/// Applies the capture rules of the module doc to one parsed completion.
pub fn validate_completion(
    prepared: &PreparedPacket<'_>,
    parsed: &ParsedCompletion,
) -> WorkerResult {
    use RunFailureReason as R;
    let text = match parsed.texts.as_slice() {
        [] => None,
        [one] => Some(one),
        [_, _, ..] => return reject(R::InvalidOutput),
    };
    if text.is_some_and(|t| t.chars().count() > MAX_TEXT_CHARS) {
        return reject(R::InvalidOutput);
    }
    match prepared.packet.output_mode {
        OutputMode::Text => {}
        OutputMode::StrictJson => {
            if !parsed.tool_calls.is_empty() {
                return reject(R::ToolCallInStrictJson);
            }
            if text.is_some_and(|t| serde_json::from_str::<Value>(t).is_err()) {
                return reject(R::InvalidOutput);
            }
        }
    }
    if text.is_some_and(|t| carries_raw_tool_call(t, &offered_tool_names(prepared.packet))) {
        return reject(R::MalformedCall);
    }
    if parsed.tool_calls.len() > prepared.max_calls() {
        return reject(R::TooManyCalls);
    }
    let mut tools = Vec::with_capacity(parsed.tool_calls.len());
    let mut seen = HashSet::new();
    for call in &parsed.tool_calls {
        let Some(tool) = prepared.tool(&call.name) else {
            return reject(R::UnknownTool);
        };
        if !seen.insert(tool.kind) {
            return reject(R::DuplicateCall);
        }
        tools.push(tool);
    }
    let mut calls = Vec::with_capacity(tools.len());
    for (call, tool) in parsed.tool_calls.iter().zip(tools) {
        if call.raw_len > MAX_ARGUMENT_BYTES {
            return reject(R::OversizedCall);
        }
        if !call_id_ok(&call.id) {
            return reject(R::MalformedCall);
        }
        let args = match &call.arguments {
            ToolArguments::Json(args) => args,
            ToolArguments::NotJson => return reject(R::MalformedCall),
        };
        if !tool.schema.is_valid(args) {
            return reject(R::MalformedCall);
        }
        if !within_capability(tool.kind, args, &prepared.packet.capability) {
            return reject(R::CapabilityEscape);
        }
        calls.push(CapturedCall {
            tool: tool.name.clone(),
            call_id: call.id.clone(),
            arguments: args.clone(),
            result: CallResult::default(),
        });
    }
    if text.is_none() && calls.is_empty() {
        return reject(R::InvalidOutput);
    }
    WorkerResult::Completed(Completion {
        text: text.cloned(),
        thinking: if parsed.thinking {
            ThinkingMarker::Redacted
        } else {
            ThinkingMarker::None
        },
        calls,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;
    use stream_core::payload::ProviderApi;

    fn anything() -> jsonschema::Validator {
        jsonschema::draft202012::new(&json!({})).unwrap()
    }

    /// A validator compiled ahead stands in for a packet's schema only when
    /// the schemas are equal; any other schema is compiled from the packet.
    #[test]
    fn a_schema_compiled_ahead_is_taken_only_for_an_equal_schema() {
        let packet = stream_testkit::packets::packet(ProviderApi::OpenaiChat);
        let not_an_object = json!("not an object");

        let mut other = Compiled(vec![(json!({"title": "another schema"}), anything())]);
        let prepared = PreparedPacket::reusing(&packet, &mut other).unwrap();
        assert_eq!(other.len(), 1, "a different schema is not taken");
        assert!(!prepared.tools[0].schema.is_valid(&not_an_object));

        let mut same = Compiled(vec![(packet.tools[0].input_schema.clone(), anything())]);
        let prepared = PreparedPacket::reusing(&packet, &mut same).unwrap();
        assert!(same.is_empty(), "an equal schema is taken, once");
        assert!(prepared.tools[0].schema.is_valid(&not_an_object));
    }
}
