//! The rules a parsed declaration must satisfy.
//!
//! First the declaration rules (docs/design.md §6), exactly ([`check_policy`] and
//! [`check_proposals_allowed`]); then the structural rules that make a
//! declaration runnable (a `pi` needs a prompt, a `deterministic` one its
//! fixed replies, …). Every refusal names the offending field.

use std::collections::HashSet;

use stream_core::Payload;
use stream_core::payload::{
    ActivationStep, CorrectionProposed, DeliveryFailed, DeliveryReceipt, FileChanged,
    FocusDeclarationProposed, JudgmentRecorded, MaterializationFailed, MemoryChangeMaterialized,
    MemoryChangeProposed, MessageObservation, MessageReceived, ProposalDecision, ProposalKind,
    RunCompleted, RunFailed,
};
use stream_core::{MemoryPath, SourceName};

use crate::error::DeclarationError;
use crate::model::{Context, Declaration, Input, Kind, Output};

/// The one output event a declaration with proposals may emit.
pub const OBSERVATION_TYPE: &str = MessageObservation::TYPE;

/// The largest `provider.maxOutputTokens`.
pub const MAX_OUTPUT_TOKENS: u32 = 32_000;
/// The largest `transcript.maxTurns`.
pub const MAX_TRANSCRIPT_TURNS: u32 = 200;

/// Event types only trusted machinery or a human writes, and the proposal
/// events (declared by `policy.proposals`, never by `outputs`).
const NOT_AN_OUTPUT: [&str; 14] = [
    MessageReceived::TYPE,
    DeliveryReceipt::TYPE,
    DeliveryFailed::TYPE,
    MemoryChangeProposed::TYPE,
    CorrectionProposed::TYPE,
    FocusDeclarationProposed::TYPE,
    RunCompleted::TYPE,
    RunFailed::TYPE,
    ProposalDecision::TYPE,
    MemoryChangeMaterialized::TYPE,
    MaterializationFailed::TYPE,
    JudgmentRecorded::TYPE,
    FileChanged::TYPE,
    ActivationStep::TYPE,
];

/// Checks every rule; the first broken one is returned.
pub fn validate(decl: &Declaration) -> Result<(), DeclarationError> {
    if decl.version < 1 {
        return Err(DeclarationError::invalid("version", "must be at least 1"));
    }
    check_policy(decl)?;
    if !decl.policy.proposals.is_empty() {
        check_proposals_allowed(decl)?;
    }
    check_structure(decl)
}

/// The policy rules of the declaration rules (docs/design.md §6).
pub fn check_policy(decl: &Declaration) -> Result<(), DeclarationError> {
    // "Proposal tools are separate from read-only evidence acquisition:
    //  policy: tools: []"
    if !decl.policy.tools.is_empty() {
        return Err(DeclarationError::invalid(
            "policy.tools",
            format!(
                "must be empty: proposal tools are separate from read-only evidence acquisition ({} listed)",
                decl.policy.tools.len()
            ),
        ));
    }
    // "externalActions remains false."
    if decl.policy.external_actions {
        return Err(DeclarationError::invalid(
            "policy.externalActions",
            "must be false",
        ));
    }
    let mut seen = HashSet::new();
    for (i, kind) in decl.policy.proposals.iter().enumerate() {
        if !seen.insert(kind) {
            return Err(DeclarationError::invalid(
                format!("policy.proposals[{i}]"),
                format!("{} is listed twice", kind.as_str()),
            ));
        }
    }
    Ok(())
}

/// "Only a standard Pi declaration using telegram-conversation context,
/// conversation-text output, sensitive input, exact subscribed documents,
/// and stream.thought.derived.message.observation output may declare
/// proposals. Repair, deterministic, Letta Agent SDK, ATProto, review, and
/// conceptualizer declarations may not."
pub fn check_proposals_allowed(decl: &Declaration) -> Result<(), DeclarationError> {
    match decl.kind {
        Kind::Pi => {}
        Kind::Deterministic
        | Kind::Repair
        | Kind::LettaAgentSdk
        | Kind::Atproto
        | Kind::Review
        | Kind::Conceptualizer => {
            return Err(DeclarationError::invalid(
                "kind",
                format!(
                    "a {} declaration may not declare policy.proposals; only pi may",
                    decl.kind.as_str()
                ),
            ));
        }
    }
    match decl.context {
        Context::TelegramConversation => {}
        Context::TelegramCommand | Context::None => {
            return Err(refuse_for_proposals(
                "context",
                "telegram-conversation",
                decl.context.as_str(),
            ));
        }
    }
    match decl.output {
        Output::ConversationText => {}
        Output::StrictJson | Output::None => {
            return Err(refuse_for_proposals(
                "output",
                "conversation-text",
                decl.output.as_str(),
            ));
        }
    }
    match decl.input {
        Input::Sensitive => {}
        Input::Public => {
            return Err(refuse_for_proposals(
                "input",
                "sensitive",
                decl.input.as_str(),
            ));
        }
    }
    let documents = &decl.subscriptions.documents;
    if documents.is_empty() {
        return Err(DeclarationError::invalid(
            "subscriptions.documents",
            "policy.proposals require exact subscribed documents; none are listed",
        ));
    }
    if let Some(i) = documents.iter().position(|d| !d.is_exact()) {
        return Err(DeclarationError::invalid(
            format!("subscriptions.documents[{i}]"),
            "policy.proposals require exact subscribed documents: give `path`, not `glob`",
        ));
    }
    let outputs_exact = decl.outputs.len() == 1
        && decl
            .outputs
            .first()
            .is_some_and(|o| o.as_str() == OBSERVATION_TYPE);
    if !outputs_exact {
        return Err(DeclarationError::invalid(
            "outputs",
            format!("policy.proposals require exactly the output {OBSERVATION_TYPE}"),
        ));
    }
    // Snapshot capabilities: memory-change is available only for the exact
    // current memory.md of filesystem:telegram-agent-context, so a
    // declaration asking for it subscribes to exactly that document.
    if decl.policy.proposals.contains(&ProposalKind::MemoryChange)
        && !documents
            .iter()
            .any(|d| d.is_exactly(SourceName::CONTEXT, MemoryPath::VALUE))
    {
        return Err(DeclarationError::invalid(
            "subscriptions.documents",
            format!(
                "memory-change requires the exact document {} path {}",
                SourceName::CONTEXT,
                MemoryPath::VALUE
            ),
        ));
    }
    Ok(())
}

fn refuse_for_proposals(field: &str, wanted: &str, found: &str) -> DeclarationError {
    DeclarationError::invalid(
        field,
        format!("policy.proposals require {field} {wanted}, found {found}"),
    )
}

/// What makes a declaration runnable by its kind.
fn check_structure(decl: &Declaration) -> Result<(), DeclarationError> {
    match decl.kind {
        Kind::Pi => {
            if decl.prompt.is_none() {
                return Err(DeclarationError::invalid(
                    "prompt",
                    "a pi declaration needs a prompt file",
                ));
            }
            if decl.provider.is_none() {
                return Err(DeclarationError::invalid(
                    "provider",
                    "a pi declaration needs provider limits",
                ));
            }
        }
        Kind::Deterministic => {
            if decl.provider.is_some() {
                return Err(DeclarationError::invalid(
                    "provider",
                    "a deterministic declaration makes no provider request",
                ));
            }
            if decl.prompt.is_some() {
                return Err(DeclarationError::invalid(
                    "prompt",
                    "a deterministic declaration has no prompt",
                ));
            }
        }
        Kind::Repair
        | Kind::LettaAgentSdk
        | Kind::Atproto
        | Kind::Review
        | Kind::Conceptualizer => {}
    }
    match (decl.kind, &decl.replies) {
        (Kind::Deterministic, None) => {
            return Err(DeclarationError::invalid(
                "replies",
                "a deterministic declaration needs its fixed replies",
            ));
        }
        (Kind::Deterministic, Some(_)) => {}
        (
            Kind::Pi
            | Kind::Repair
            | Kind::LettaAgentSdk
            | Kind::Atproto
            | Kind::Review
            | Kind::Conceptualizer,
            Some(_),
        ) => {
            return Err(DeclarationError::invalid(
                "replies",
                "only a deterministic declaration has fixed replies",
            ));
        }
        (
            Kind::Pi
            | Kind::Repair
            | Kind::LettaAgentSdk
            | Kind::Atproto
            | Kind::Review
            | Kind::Conceptualizer,
            None,
        ) => {}
    }
    match (decl.context, &decl.transcript) {
        (Context::TelegramConversation, None) => {
            return Err(DeclarationError::invalid(
                "transcript",
                "a telegram-conversation context needs transcript.maxTurns",
            ));
        }
        (Context::TelegramCommand | Context::None, Some(_)) => {
            return Err(DeclarationError::invalid(
                "transcript",
                "only a telegram-conversation context has a transcript",
            ));
        }
        (Context::TelegramConversation, Some(t)) => {
            if !(1..=MAX_TRANSCRIPT_TURNS).contains(&t.max_turns) {
                return Err(DeclarationError::invalid(
                    "transcript.maxTurns",
                    format!("must be 1-{MAX_TRANSCRIPT_TURNS}"),
                ));
            }
        }
        (Context::TelegramCommand | Context::None, None) => {}
    }
    if let Some(p) = &decl.provider
        && !(1..=MAX_OUTPUT_TOKENS).contains(&p.max_output_tokens)
    {
        return Err(DeclarationError::invalid(
            "provider.maxOutputTokens",
            format!("must be 1-{MAX_OUTPUT_TOKENS}"),
        ));
    }
    check_lists(decl)
}

fn check_lists(decl: &Declaration) -> Result<(), DeclarationError> {
    if decl.outputs.is_empty() {
        return Err(DeclarationError::invalid(
            "outputs",
            "must name at least one event type",
        ));
    }
    let mut seen = HashSet::new();
    for (i, output) in decl.outputs.iter().enumerate() {
        if !seen.insert(output.as_str()) {
            return Err(DeclarationError::invalid(
                format!("outputs[{i}]"),
                "is listed twice",
            ));
        }
        if NOT_AN_OUTPUT.contains(&output.as_str()) {
            return Err(DeclarationError::invalid(
                format!("outputs[{i}]"),
                format!(
                    "{} is written by trusted machinery, a human, or policy.proposals; never a declared output",
                    output.as_str()
                ),
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, source) in decl.subscriptions.sources.iter().enumerate() {
        if !seen.insert(source) {
            return Err(DeclarationError::invalid(
                format!("subscriptions.sources[{i}]"),
                "is listed twice",
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, doc) in decl.subscriptions.documents.iter().enumerate() {
        let field = || format!("subscriptions.documents[{i}]");
        let key = match (&doc.path, &doc.glob) {
            (Some(path), None) => ("path", path.as_str()),
            (None, Some(glob)) => ("glob", glob.as_str()),
            (Some(_), Some(_)) | (None, None) => {
                return Err(DeclarationError::invalid(
                    field(),
                    "give exactly one of `path` and `glob`",
                ));
            }
        };
        if !seen.insert((doc.source.as_str(), key)) {
            return Err(DeclarationError::invalid(field(), "is listed twice"));
        }
    }
    let mut seen = HashSet::new();
    for (i, command) in decl.commands.iter().enumerate() {
        if !seen.insert(command.name) {
            return Err(DeclarationError::invalid(
                format!("commands[{i}].name"),
                format!("/{} is listed twice", command.name.as_str()),
            ));
        }
    }
    Ok(())
}
