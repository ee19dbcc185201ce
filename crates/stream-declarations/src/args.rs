//! The trusted parent's own validation of proposal tool arguments: typed
//! structs with `deny_unknown_fields` and the bound checks of the tool rules
//! (docs/design.md §9), independent of the JSON Schemas in
//! [`crate::tools`] (the worker's check) and agreeing with them (tested on a
//! corpus in `tests/it/args.rs`).
//!
//! Arguments are model-authored and sensitive: an [`ArgsError`] names the
//! offending field only when it is one of the fields this module knows and
//! says what is wrong with a fixed code. It never echoes a value, and never
//! an unknown key the model made up.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Number, Value};
use stream_core::EventId;
use stream_core::json::StrictJsonError;
use stream_core::payload::{EvidenceIds, FocusDeclaration, MemoryOperation, ProposalKind};
use stream_core::text::{MemoryText, ReasonText, ReplyText};

use crate::tools::{LATEST, tool_name};

pub use stream_core::json::MAX_ARGUMENTS_BYTES;

/// `request_memory_change` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestMemoryChangeArgs {
    /// Append or replace the whole document.
    pub operation: MemoryOperation,
    /// 1–32,768 characters.
    pub proposed_text: MemoryText,
    /// 1–1,000 characters.
    pub reason: ReasonText,
    /// Unique, at most 16.
    pub evidence_event_ids: EvidenceIds,
}

/// `submit_correction.target_output`: an exact output event id, or `latest`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetOutput {
    /// The most recent eligible assistant turn of the snapshot. Resolved by
    /// the trusted parent; never written to an event or receipt.
    Latest,
    /// An exact snapshot-admitted output event id.
    Output(EventId),
}

impl Serialize for TargetOutput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Latest => s.serialize_str(LATEST),
            Self::Output(id) => id.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for TargetOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == LATEST {
            return Ok(Self::Latest);
        }
        EventId::parse(&s).map(Self::Output).map_err(|_| {
            serde::de::Error::custom("target_output must be 64 lowercase hex digits or latest")
        })
    }
}

/// `submit_correction` arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitCorrectionArgs {
    /// The turn to correct.
    pub target_output: TargetOutput,
    /// The full replacement reply, 1–4,096 characters.
    pub replacement: ReplyText,
    /// 1–1,000 characters.
    pub reason: ReasonText,
    /// Unique, at most 16.
    pub evidence_event_ids: EvidenceIds,
}

/// `propose_focus` arguments: one complete strict focus declaration
/// (docs/design.md §18), checked by [`FocusDeclaration::validate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProposeFocusArgs {
    /// The declaration.
    pub declaration: FocusDeclaration,
}

/// Validated arguments of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolArgs {
    /// `request_memory_change`.
    MemoryChange(RequestMemoryChangeArgs),
    /// `submit_correction`.
    SelfCorrection(SubmitCorrectionArgs),
    /// `propose_focus`.
    FocusDeclaration(ProposeFocusArgs),
}

impl ToolArgs {
    /// The proposal kind.
    pub fn kind(&self) -> ProposalKind {
        match self {
            Self::MemoryChange(_) => ProposalKind::MemoryChange,
            Self::SelfCorrection(_) => ProposalKind::SelfCorrection,
            Self::FocusDeclaration(_) => ProposalKind::FocusDeclaration,
        }
    }

    /// The arguments as JSON, for canonicalization.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        match self {
            Self::MemoryChange(a) => serde_json::to_value(a),
            Self::SelfCorrection(a) => serde_json::to_value(a),
            Self::FocusDeclaration(a) => serde_json::to_value(a),
        }
    }
}

/// What is wrong with arguments: a closed set of content-dark codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgsProblem {
    /// The text is not one JSON value.
    NotJson,
    /// The text is larger than [`MAX_ARGUMENTS_BYTES`].
    Oversized,
    /// An object repeats a key.
    DuplicateKey,
    /// A property the schema does not have.
    UnknownField,
    /// A required property is absent.
    MissingField,
    /// A value of the wrong JSON type.
    WrongType,
    /// A string outside its enumeration.
    NotAllowedValue,
    /// A text shorter or longer than its bounds.
    LengthOutOfBounds,
    /// More than 16 evidence ids.
    TooManyEvidenceIds,
    /// An evidence id cited twice.
    DuplicateEvidenceId,
    /// Not 64 lowercase hex digits (or `latest` where allowed).
    NotAnEventId,
    /// A literal field with another value.
    NotTheLiteral,
    /// A list that must be empty was not.
    MustBeEmpty,
    /// Not a source name `<kind>:<name>`.
    NotASourceName,
    /// A number or count outside its range, or a cross-field rule broken.
    OutOfRange,
    /// Anything else the typed parse refused.
    Invalid,
}

impl ArgsProblem {
    /// The stable wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotJson => "not-json",
            Self::Oversized => "oversized",
            Self::DuplicateKey => "duplicate-key",
            Self::UnknownField => "unknown-field",
            Self::MissingField => "missing-field",
            Self::WrongType => "wrong-type",
            Self::NotAllowedValue => "not-allowed-value",
            Self::LengthOutOfBounds => "length-out-of-bounds",
            Self::TooManyEvidenceIds => "too-many-evidence-ids",
            Self::DuplicateEvidenceId => "duplicate-evidence-id",
            Self::NotAnEventId => "not-an-event-id",
            Self::NotTheLiteral => "not-the-literal",
            Self::MustBeEmpty => "must-be-empty",
            Self::NotASourceName => "not-a-source-name",
            Self::OutOfRange => "out-of-range",
            Self::Invalid => "invalid",
        }
    }

    /// Every code, for golden tests.
    pub const ALL: [ArgsProblem; 16] = [
        Self::NotJson,
        Self::Oversized,
        Self::DuplicateKey,
        Self::UnknownField,
        Self::MissingField,
        Self::WrongType,
        Self::NotAllowedValue,
        Self::LengthOutOfBounds,
        Self::TooManyEvidenceIds,
        Self::DuplicateEvidenceId,
        Self::NotAnEventId,
        Self::NotTheLiteral,
        Self::MustBeEmpty,
        Self::NotASourceName,
        Self::OutOfRange,
        Self::Invalid,
    ];
}

impl fmt::Display for ArgsProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Arguments were refused. Names the tool, the field (known names and
/// indices only; `?` for a key the model invented) and a code; never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool} arguments refused at `{field}`: {problem}")]
pub struct ArgsError {
    /// The tool.
    pub tool: &'static str,
    /// The offending field, e.g. `evidence_event_ids[3]`, `budgets.maxDays`,
    /// or `(arguments)` for the whole object.
    pub field: String,
    /// What is wrong.
    pub problem: ArgsProblem,
}

/// Every property name of the three tool schemas, plus the names a focus
/// proposal carries outside its declaration (authority flags, resolution
/// markers). Only these are ever echoed in an [`ArgsError`].
pub const KNOWN_FIELDS: &[&str] = &[
    "operation",
    "proposed_text",
    "reason",
    "evidence_event_ids",
    "target_output",
    "replacement",
    "identity",
    "id",
    "version",
    "lineage",
    "parent",
    "scope",
    "chat",
    "objective",
    "subscriptions",
    "source",
    "types",
    "budgets",
    "maxRunsPerDay",
    "maxOutputTokensPerRun",
    "maxDays",
    "requestedPermissions",
    "tools",
    "proposals",
    "externalActions",
    "retirement",
    "rule",
    "days",
    "authority",
    "activation",
    "dataExpansion",
    "training",
    "adapterPromotion",
    "resolution",
    "events",
    "sources",
    "capabilities",
    "fingerprint",
    "declaration",
    "proposalState",
];

const ROOT: &str = "(arguments)";

fn known(name: &str) -> &'static str {
    KNOWN_FIELDS
        .iter()
        .find(|k| **k == name)
        .copied()
        .unwrap_or("?")
}

/// Parses raw arguments text (as a provider returns it) for `kind`: one
/// JSON value, no repeated keys, at most [`MAX_ARGUMENTS_BYTES`].
pub fn parse_arguments_text(kind: ProposalKind, text: &str) -> Result<ToolArgs, ArgsError> {
    let tool = tool_name(kind);
    let refuse = |problem| ArgsError {
        tool,
        field: ROOT.to_owned(),
        problem,
    };
    if text.len() > MAX_ARGUMENTS_BYTES {
        return Err(refuse(ArgsProblem::Oversized));
    }
    let value = stream_core::json::parse_strict(text).map_err(|e| {
        refuse(match e {
            StrictJsonError::DuplicateKey => ArgsProblem::DuplicateKey,
            StrictJsonError::NotJson => ArgsProblem::NotJson,
        })
    })?;
    parse_arguments(kind, &value)
}

/// Parses already-decoded arguments for `kind`.
///
/// Integral floats (`3.0`) count as integers, as JSON Schema's `integer`
/// does and as RFC 8785 writes them.
pub fn parse_arguments(kind: ProposalKind, value: &Value) -> Result<ToolArgs, ArgsError> {
    let mut value = value.clone();
    normalize_integral_numbers(&mut value);
    match kind {
        ProposalKind::MemoryChange => {
            typed::<RequestMemoryChangeArgs>(kind, value).map(ToolArgs::MemoryChange)
        }
        ProposalKind::SelfCorrection => {
            typed::<SubmitCorrectionArgs>(kind, value).map(ToolArgs::SelfCorrection)
        }
        ProposalKind::FocusDeclaration => {
            let args = typed::<ProposeFocusArgs>(kind, value)?;
            args.declaration.validate().map_err(|e| ArgsError {
                tool: tool_name(kind),
                field: e.field.to_owned(),
                problem: ArgsProblem::OutOfRange,
            })?;
            Ok(ToolArgs::FocusDeclaration(args))
        }
    }
}

impl RequestMemoryChangeArgs {
    /// Parses and checks `request_memory_change` arguments.
    pub fn parse(value: &Value) -> Result<Self, ArgsError> {
        match parse_arguments(ProposalKind::MemoryChange, value)? {
            ToolArgs::MemoryChange(a) => Ok(a),
            ToolArgs::SelfCorrection(_) | ToolArgs::FocusDeclaration(_) => Err(wrong_kind()),
        }
    }
}

impl SubmitCorrectionArgs {
    /// Parses and checks `submit_correction` arguments.
    pub fn parse(value: &Value) -> Result<Self, ArgsError> {
        match parse_arguments(ProposalKind::SelfCorrection, value)? {
            ToolArgs::SelfCorrection(a) => Ok(a),
            ToolArgs::MemoryChange(_) | ToolArgs::FocusDeclaration(_) => Err(wrong_kind()),
        }
    }
}

impl ProposeFocusArgs {
    /// Parses and checks `propose_focus` arguments.
    pub fn parse(value: &Value) -> Result<Self, ArgsError> {
        match parse_arguments(ProposalKind::FocusDeclaration, value)? {
            ToolArgs::FocusDeclaration(a) => Ok(a),
            ToolArgs::MemoryChange(_) | ToolArgs::SelfCorrection(_) => Err(wrong_kind()),
        }
    }
}

// `parse_arguments` returns the variant of the kind it was given; this is
// only reachable if that ever stops being true, and then it fails closed.
fn wrong_kind() -> ArgsError {
    ArgsError {
        tool: "?",
        field: ROOT.to_owned(),
        problem: ArgsProblem::Invalid,
    }
}

fn typed<T: DeserializeOwned>(kind: ProposalKind, value: Value) -> Result<T, ArgsError> {
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let message = e.inner().to_string();
        let problem = classify_message(&message);
        let mut field = render_path(e.path());
        if problem == ArgsProblem::MissingField {
            let name = message.split('`').nth(1).map(known).unwrap_or("?");
            field = if field == ROOT {
                name.to_owned()
            } else {
                format!("{field}.{name}")
            };
        }
        ArgsError {
            tool: tool_name(kind),
            field,
            problem,
        }
    })
}

fn render_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(known(key));
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    if out.is_empty() { ROOT.to_owned() } else { out }
}

/// Maps a serde message to a code by its fixed prefix. The message itself
/// may quote a value and is dropped.
fn classify_message(message: &str) -> ArgsProblem {
    const PREFIXES: &[(&str, ArgsProblem)] = &[
        ("unknown field", ArgsProblem::UnknownField),
        ("missing field", ArgsProblem::MissingField),
        ("duplicate field", ArgsProblem::DuplicateKey),
        ("invalid type", ArgsProblem::WrongType),
        ("unknown variant", ArgsProblem::NotAllowedValue),
        ("text length", ArgsProblem::LengthOutOfBounds),
        ("at most 16 evidence ids", ArgsProblem::TooManyEvidenceIds),
        (
            "evidence ids must be unique",
            ArgsProblem::DuplicateEvidenceId,
        ),
        ("EventId must be", ArgsProblem::NotAnEventId),
        ("target_output must be", ArgsProblem::NotAnEventId),
        ("expected the literal", ArgsProblem::NotTheLiteral),
        ("expected an empty array", ArgsProblem::MustBeEmpty),
        ("source name must be", ArgsProblem::NotASourceName),
        ("invalid value", ArgsProblem::OutOfRange),
    ];
    PREFIXES
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map(|(_, problem)| *problem)
        .unwrap_or(ArgsProblem::Invalid)
}

/// Largest integer a float holds exactly.
const EXACT_FLOAT_INT: f64 = 9_007_199_254_740_992.0;

fn normalize_integral_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64())
                && f.fract() == 0.0
                && f.abs() < EXACT_FLOAT_INT
            {
                // In range and integral: the casts are exact.
                #[allow(clippy::cast_possible_truncation)]
                let int = f as i64;
                *n = Number::from(int);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_integral_numbers),
        Value::Object(map) => map.values_mut().for_each(normalize_integral_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn memory_args() -> Value {
        json!({
            "operation": "append",
            "proposed_text": "Likes tea.",
            "reason": "Asked to remember.",
            "evidence_event_ids": [],
        })
    }

    #[test]
    fn repeated_keys_are_refused() {
        let text = r#"{"operation":"append","operation":"replace-document","proposed_text":"x","reason":"y","evidence_event_ids":[]}"#;
        let err = parse_arguments_text(ProposalKind::MemoryChange, text).unwrap_err();
        assert_eq!(err.problem, ArgsProblem::DuplicateKey);
    }

    #[test]
    fn trailing_text_and_oversize_are_refused() {
        let text = format!("{} {{}}", memory_args());
        let err = parse_arguments_text(ProposalKind::MemoryChange, &text).unwrap_err();
        assert_eq!(err.problem, ArgsProblem::NotJson);
        let big = " ".repeat(MAX_ARGUMENTS_BYTES + 1);
        let err = parse_arguments_text(ProposalKind::MemoryChange, &big).unwrap_err();
        assert_eq!(err.problem, ArgsProblem::Oversized);
    }

    #[test]
    fn invented_keys_are_not_echoed() {
        let mut args = memory_args();
        args["canary-key-91c2"] = json!(1);
        let err = parse_arguments(ProposalKind::MemoryChange, &args).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem),
            ("?", ArgsProblem::UnknownField)
        );
        assert!(!err.to_string().contains("canary"), "{err}");
    }

    #[test]
    fn values_are_never_echoed() {
        let mut args = memory_args();
        args["operation"] = json!("canary-op-5e1a");
        let err = parse_arguments(ProposalKind::MemoryChange, &args).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem),
            ("operation", ArgsProblem::NotAllowedValue)
        );
        assert!(!err.to_string().contains("canary"), "{err}");
    }

    #[test]
    fn missing_fields_are_named() {
        let mut args = memory_args();
        args.as_object_mut().unwrap().remove("reason");
        let err = parse_arguments(ProposalKind::MemoryChange, &args).unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.problem),
            ("reason", ArgsProblem::MissingField)
        );
    }

    #[test]
    fn integral_floats_count_as_integers() {
        let mut v = json!({"a": [3.0, 2.5, -0.0, 1e300]});
        normalize_integral_numbers(&mut v);
        assert_eq!(v, json!({"a": [3, 2.5, 0, 1e300]}));
    }

    #[test]
    fn problem_codes_are_unique() {
        let mut codes: Vec<_> = ArgsProblem::ALL.iter().map(|p| p.as_str()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ArgsProblem::ALL.len());
    }
}
