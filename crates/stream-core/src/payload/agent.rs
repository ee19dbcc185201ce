//! Agent run events: the canonical output, the completed-run receipt and the
//! failed-attempt record.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::event::{Authorship, Payload, PayloadInvalid};
use crate::ids::{EventId, Fingerprint, RunId, Sha256Hex, SnapshotId};
use crate::payload::common::{OutputContract, ProviderRef};
use crate::text::{Label, ReplyText};

/// Where the visible text of an output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TextOrigin {
    /// The model wrote it.
    Model,
    /// The trusted parent's fixed acknowledgment of a tool-only completion.
    Acknowledgment,
    /// A deterministic declaration's fixed reply (no provider request).
    Deterministic,
}

/// Whether the completion had thinking. Its text is never kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThinkingMarker {
    /// Thinking existed and was dropped.
    Redacted,
    /// There was none.
    None,
}

/// `stream.thought.derived.message.observation@1`: a run's canonical output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MessageObservation {
    /// The run that produced it.
    pub run_id: RunId,
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// The inbound event the run answered.
    pub trigger_event_id: EventId,
    /// Chat the reply is for.
    pub chat_id: i64,
    /// The contract the output satisfies.
    pub output_contract: OutputContract,
    /// The reply.
    pub text: ReplyText,
    /// Who wrote the text.
    pub origin: TextOrigin,
    /// Thinking marker.
    pub thinking: ThinkingMarker,
}

impl Payload for MessageObservation {
    const TYPE: &'static str = "stream.thought.derived.message.observation";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::Agent;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.run_id, "output"])
    }
}

/// `stream.thought.agent.run.completed@1`: the atomic completed-run receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunCompleted {
    /// The run.
    pub run_id: RunId,
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// Declaration fingerprint.
    pub declaration_fingerprint: Fingerprint,
    /// SHA-256 of the worker binary; null for deterministic runs.
    pub worker_bundle_sha256: Option<Sha256Hex>,
    /// Provider and model; null for deterministic runs.
    pub provider: Option<ProviderRef>,
    /// The trigger.
    pub trigger_event_id: EventId,
    /// The retry-stable snapshot; null for deterministic runs.
    pub context_snapshot_id: Option<SnapshotId>,
    /// The canonical output.
    pub output_event_id: EventId,
    /// The proposals settled with the run, in order.
    pub proposal_event_ids: Vec<EventId>,
}

impl Payload for RunCompleted {
    const TYPE: &'static str = "stream.thought.agent.run.completed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = false;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.run_id)
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        if self.proposal_event_ids.len() > 3 {
            return Err(PayloadInvalid::new(
                "proposalEventIds",
                "at most three proposals",
            ));
        }
        Ok(())
    }
}

/// Why a run attempt failed: a closed set of content-dark codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunFailureReason {
    /// The provider timed out, was unreachable, rate-limited us or answered 5xx.
    ProviderTransient,
    /// The provider refused the request (4xx other than 429).
    ProviderRejected,
    /// The provider's body was not a parseable completion, or too large.
    ProviderMalformed,
    /// The worker did not start, crashed, or broke the frame protocol.
    WorkerFailed,
    /// The worker exceeded its wall-clock limit.
    WorkerTimeout,
    /// The worker did not report Landlock and seccomp enforced.
    SandboxNotEnforced,
    /// The worker asked for a second provider request.
    SecondRequest,
    /// The worker's request did not match the packet (model, tools, tool choice).
    RequestMismatch,
    /// A tool call's arguments were not valid JSON or broke the schema.
    MalformedCall,
    /// A call named a tool that was not exposed.
    UnknownTool,
    /// Two calls of one kind.
    DuplicateCall,
    /// More than three calls.
    TooManyCalls,
    /// Arguments over a size bound.
    OversizedCall,
    /// A call cited evidence or a target the snapshot did not admit.
    CapabilityEscape,
    /// A tool call in strict-JSON mode.
    ToolCallInStrictJson,
    /// The worker's result disagreed with the brokered response.
    ResultMismatch,
    /// Visible text missing, over 4,096 characters, or in more than one part.
    InvalidOutput,
    /// The stored snapshot could not be loaded or verified.
    SnapshotInvalid,
}

impl RunFailureReason {
    /// The stable wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProviderTransient => "provider-transient",
            Self::ProviderRejected => "provider-rejected",
            Self::ProviderMalformed => "provider-malformed",
            Self::WorkerFailed => "worker-failed",
            Self::WorkerTimeout => "worker-timeout",
            Self::SandboxNotEnforced => "sandbox-not-enforced",
            Self::SecondRequest => "second-request",
            Self::RequestMismatch => "request-mismatch",
            Self::MalformedCall => "malformed-call",
            Self::UnknownTool => "unknown-tool",
            Self::DuplicateCall => "duplicate-call",
            Self::TooManyCalls => "too-many-calls",
            Self::OversizedCall => "oversized-call",
            Self::CapabilityEscape => "capability-escape",
            Self::ToolCallInStrictJson => "tool-call-in-strict-json",
            Self::ResultMismatch => "result-mismatch",
            Self::InvalidOutput => "invalid-output",
            Self::SnapshotInvalid => "snapshot-invalid",
        }
    }

    /// Whether a retry with the same snapshot may succeed. Everything the
    /// model or our validation decided is final.
    pub fn is_transient(self) -> bool {
        match self {
            Self::ProviderTransient | Self::WorkerTimeout | Self::WorkerFailed => true,
            Self::ProviderRejected
            | Self::ProviderMalformed
            | Self::SandboxNotEnforced
            | Self::SecondRequest
            | Self::RequestMismatch
            | Self::MalformedCall
            | Self::UnknownTool
            | Self::DuplicateCall
            | Self::TooManyCalls
            | Self::OversizedCall
            | Self::CapabilityEscape
            | Self::ToolCallInStrictJson
            | Self::ResultMismatch
            | Self::InvalidOutput
            | Self::SnapshotInvalid => false,
        }
    }

    /// Every code, for golden tests.
    pub const ALL: [RunFailureReason; 18] = [
        Self::ProviderTransient,
        Self::ProviderRejected,
        Self::ProviderMalformed,
        Self::WorkerFailed,
        Self::WorkerTimeout,
        Self::SandboxNotEnforced,
        Self::SecondRequest,
        Self::RequestMismatch,
        Self::MalformedCall,
        Self::UnknownTool,
        Self::DuplicateCall,
        Self::TooManyCalls,
        Self::OversizedCall,
        Self::CapabilityEscape,
        Self::ToolCallInStrictJson,
        Self::ResultMismatch,
        Self::InvalidOutput,
        Self::SnapshotInvalid,
    ];
}

/// `stream.thought.agent.run.failed@1`: one failed attempt, reason code only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunFailed {
    /// The run.
    pub run_id: RunId,
    /// Declaration id.
    pub agent_id: Label,
    /// Declaration version.
    pub agent_version: u32,
    /// The trigger.
    pub trigger_event_id: EventId,
    /// Attempt number, from 1.
    pub attempt: u32,
    /// Content-dark reason.
    pub reason: RunFailureReason,
    /// Whether the run is given up (no more attempts).
    #[serde(rename = "final")]
    pub is_final: bool,
}

impl Payload for RunFailed {
    const TYPE: &'static str = "stream.thought.agent.run.failed";
    const VERSION: u32 = 1;
    const AUTHORSHIP: Authorship = Authorship::System;
    const SENSITIVE: bool = false;

    fn identity_key(&self) -> serde_json::Value {
        json!([self.run_id, self.attempt])
    }
}
