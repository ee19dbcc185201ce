//! Trusted validation of a completion, in the parent, after the worker.
//!
//! The worker's word is not trusted: the parent re-parses the brokered
//! response itself, requires the worker's captured calls to match it one to
//! one (name, call id, canonical arguments), re-validates every argument with
//! its own typed validation, checks every cited id and target against the
//! snapshot, resolves `latest` to the snapshot's most recent correction
//! target, refuses visible text that is a tool call written out, and
//! canonicalizes. Any doubt rejects the whole completion with a
//! content-dark reason: no proposal comes of it.

use std::collections::BTreeSet;

use stream_context::Snapshot;
use stream_core::canon::to_canonical_bytes;
use stream_core::payload::{
    EvidenceIds, ProposalKind, ProviderApi, RunFailureReason, ThinkingMarker,
};
use stream_core::text::ReplyText;
use stream_declarations::args::{
    ArgsProblem, MAX_ARGUMENTS_BYTES, TargetOutput, ToolArgs, parse_arguments,
};
use stream_protocol::{Completion, MAX_CALLS, WorkerResult};
use stream_provider::{
    FinishReason, ParsedCompletion, ToolArguments, carries_raw_tool_call, parse_response,
};

use crate::settle::{ValidatedCompletion, ValidatedProposal};

type Reason = RunFailureReason;

/// What the parent saw of one attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEvidence<'a> {
    /// The provider wire format.
    pub api: ProviderApi,
    /// The HTTP status the parent received.
    pub status: u16,
    /// The body the parent received and relayed.
    pub body: &'a str,
    /// What the worker concluded.
    pub worker: &'a WorkerResult,
}

fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    matches!((to_canonical_bytes(a), to_canonical_bytes(b)), (Ok(x), Ok(y)) if x == y)
}

/// The worker's completion must say exactly what the response says.
fn matches_response(parsed: &ParsedCompletion, worker: &Completion) -> Result<(), Reason> {
    let text_matches = match (parsed.texts.as_slice(), &worker.text) {
        ([], None) => true,
        ([one], Some(w)) => one == w,
        _ => false,
    };
    let thinking = if parsed.thinking {
        ThinkingMarker::Redacted
    } else {
        ThinkingMarker::None
    };
    if !text_matches || thinking != worker.thinking || parsed.tool_calls.len() != worker.calls.len()
    {
        return Err(Reason::ResultMismatch);
    }
    for (p, w) in parsed.tool_calls.iter().zip(&worker.calls) {
        let args_match = match &p.arguments {
            ToolArguments::Json(v) => same_json(v, &w.arguments),
            ToolArguments::NotJson => false,
        };
        if p.id != w.call_id || p.name != w.tool || !args_match {
            return Err(Reason::ResultMismatch);
        }
    }
    Ok(())
}

fn evidence_admitted(snapshot: &Snapshot, evidence: &EvidenceIds) -> Result<(), Reason> {
    if evidence
        .as_slice()
        .iter()
        .all(|id| snapshot.admits_evidence(id))
    {
        Ok(())
    } else {
        Err(Reason::CapabilityEscape)
    }
}

/// The tool names the run's request offered: its packet's tools are the
/// snapshot's exposed kinds (`stream_context::packet`).
fn offered_tool_names(snapshot: &Snapshot) -> Vec<&'static str> {
    snapshot
        .capabilities
        .tools
        .iter()
        .map(|kind| kind.tool_name())
        .collect()
}

/// Binds one typed call to the snapshot's capability.
fn bind(snapshot: &Snapshot, args: ToolArgs) -> Result<ValidatedProposal, Reason> {
    match args {
        ToolArgs::MemoryChange(a) => {
            evidence_admitted(snapshot, &a.evidence_event_ids)?;
            let target = snapshot
                .capabilities
                .memory_target
                .clone()
                .ok_or(Reason::CapabilityEscape)?;
            Ok(ValidatedProposal::Memory {
                target,
                operation: a.operation,
                text: a.proposed_text,
                reason: a.reason,
                evidence: a.evidence_event_ids,
            })
        }
        ToolArgs::SelfCorrection(a) => {
            evidence_admitted(snapshot, &a.evidence_event_ids)?;
            // `latest` resolves here, before any validation downstream; the
            // literal never leaves this function.
            let target = match &a.target_output {
                TargetOutput::Latest => snapshot.latest_correction_target(),
                TargetOutput::Output(id) => snapshot.correction_target(id),
            }
            .cloned()
            .ok_or(Reason::CapabilityEscape)?;
            Ok(ValidatedProposal::Correction {
                target,
                replacement: a.replacement,
                reason: a.reason,
                evidence: a.evidence_event_ids,
            })
        }
        ToolArgs::FocusDeclaration(a) => Ok(ValidatedProposal::Focus {
            declaration: a.declaration,
        }),
    }
}

/// Every problem is named, so that a new one is classified here on purpose.
fn args_reason(problem: ArgsProblem) -> Reason {
    match problem {
        ArgsProblem::Oversized => Reason::OversizedCall,
        ArgsProblem::NotJson
        | ArgsProblem::DuplicateKey
        | ArgsProblem::UnknownField
        | ArgsProblem::MissingField
        | ArgsProblem::WrongType
        | ArgsProblem::NotAllowedValue
        | ArgsProblem::LengthOutOfBounds
        | ArgsProblem::TooManyEvidenceIds
        | ArgsProblem::DuplicateEvidenceId
        | ArgsProblem::NotAnEventId
        | ArgsProblem::NotTheLiteral
        | ArgsProblem::MustBeEmpty
        | ArgsProblem::NotASourceName
        | ArgsProblem::OutOfRange
        | ArgsProblem::Invalid => Reason::MalformedCall,
    }
}

/// Validates one attempt's completion against its snapshot.
///
/// A worker that rejected the completion does not choose the reason: the
/// parent judges the body itself and records its own reason, or
/// `result-mismatch` when it finds nothing wrong with the body. Every reason
/// this returns for a 2xx answer is final (none is transient), so a worker
/// can never make the engine ask the provider again.
pub fn validate_completion(
    snapshot: &Snapshot,
    seen: AttemptEvidence<'_>,
) -> Result<ValidatedCompletion, Reason> {
    match seen.worker {
        WorkerResult::Completed(c) => judge(snapshot, seen, Some(c)),
        WorkerResult::Rejected { .. } => match judge(snapshot, seen, None) {
            Ok(_) => Err(Reason::ResultMismatch),
            Err(own) => Err(own),
        },
    }
}

/// The parent's own judgment of the body; with the worker's completion,
/// also that the two say the same.
fn judge(
    snapshot: &Snapshot,
    seen: AttemptEvidence<'_>,
    worker: Option<&Completion>,
) -> Result<ValidatedCompletion, Reason> {
    if !(200..300).contains(&seen.status) {
        return Err(Reason::ResultMismatch);
    }
    let parsed = parse_response(seen.api, seen.body).map_err(|_| Reason::ProviderMalformed)?;
    if parsed.texts.len() > 1 {
        return Err(Reason::InvalidOutput);
    }
    if parsed.tool_calls.len() > MAX_CALLS {
        return Err(Reason::TooManyCalls);
    }
    // Arguments that are not strict JSON (a repeated key included) are
    // malformed whatever the worker claims to have captured.
    if parsed
        .tool_calls
        .iter()
        .any(|call| matches!(call.arguments, ToolArguments::NotJson))
    {
        return Err(Reason::MalformedCall);
    }
    if let Some(worker) = worker {
        matches_response(&parsed, worker)?;
    }
    // Whitespace-only visible text is no text: Telegram refuses it as
    // empty, so it must not become a reply.
    let text = match parsed.texts.first().filter(|t| !t.trim().is_empty()) {
        Some(t) => Some(ReplyText::new(t.clone()).map_err(|_| Reason::InvalidOutput)?),
        None => None,
    };
    // A tool call written out as text is no reply (the worker's rule 3).
    if parsed
        .texts
        .first()
        .is_some_and(|t| carries_raw_tool_call(t, &offered_tool_names(snapshot)))
    {
        return Err(Reason::MalformedCall);
    }
    let mut kinds = BTreeSet::new();
    let mut proposals = Vec::new();
    for call in &parsed.tool_calls {
        let kind = ProposalKind::from_tool_name(&call.name).ok_or(Reason::UnknownTool)?;
        if !snapshot.exposes(kind) {
            return Err(Reason::UnknownTool);
        }
        if !kinds.insert(kind) {
            return Err(Reason::DuplicateCall);
        }
        if call.raw_len > MAX_ARGUMENTS_BYTES {
            return Err(Reason::OversizedCall);
        }
        let ToolArguments::Json(value) = &call.arguments else {
            return Err(Reason::MalformedCall);
        };
        let args = parse_arguments(kind, value).map_err(|e| args_reason(e.problem))?;
        proposals.push(bind(snapshot, args)?);
    }
    if text.is_none() && proposals.is_empty() {
        return Err(Reason::InvalidOutput);
    }
    let thinking = if parsed.thinking {
        ThinkingMarker::Redacted
    } else {
        ThinkingMarker::None
    };
    // The parent's own reading of why generation stopped, never the worker's.
    let cut = match parsed.finish {
        Some(FinishReason::Length) => true,
        Some(
            FinishReason::Stop
            | FinishReason::ToolCalls
            | FinishReason::ContentFilter
            | FinishReason::Other,
        )
        | None => false,
    };
    Ok(ValidatedCompletion {
        text,
        thinking,
        proposals,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call over the size bound is `oversized-call`; every other refused
    /// argument text is `malformed-call`.
    #[test]
    fn each_argument_problem_has_its_reason() {
        for problem in ArgsProblem::ALL {
            let want = match problem {
                ArgsProblem::Oversized => Reason::OversizedCall,
                _ => Reason::MalformedCall,
            };
            assert_eq!(args_reason(problem), want, "{}", problem.as_str());
        }
    }
}
