//! The event envelope (docs/design.md §4) and the [`Payload`] trait that ties
//! each strict payload type to its catalog row (section 5).

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canon::{CanonError, sha256, to_canonical_bytes};
use crate::ids::{EventId, Sha256Hex, derive_event_id};

/// Who wrote an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authorship {
    /// Came from outside (a Telegram update).
    External,
    /// Written by trusted machinery.
    System,
    /// Authored by a model run; never authority on its own.
    Agent,
    /// Written on a human's explicit instruction.
    Human,
}

impl Authorship {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::External => "external",
            Self::System => "system",
            Self::Agent => "agent",
            Self::Human => "human",
        }
    }

    /// Parses the stable wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "external" => Some(Self::External),
            "system" => Some(Self::System),
            "agent" => Some(Self::Agent),
            "human" => Some(Self::Human),
            _ => None,
        }
    }
}

/// A named event stream: `telegram:<bot-id>`, `agent:<agent-id>`,
/// `system:proposals`, `filesystem:telegram-agent-context`, …
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceName(String);

/// A source name did not have the form `<kind>:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "source name must be <kind>:<name> with kind in [a-z] and name in [A-Za-z0-9._@-], 1-128 each"
)]
pub struct SourceNameError;

impl SourceName {
    /// Source of human decisions and materialization outcomes.
    pub const PROPOSALS: &'static str = "system:proposals";
    /// Source of judgments.
    pub const JUDGMENTS: &'static str = "system:judgments";
    /// Source of activation steps.
    pub const ACTIVATION: &'static str = "system:activation";
    /// The context-root filesystem source.
    pub const CONTEXT: &'static str = "filesystem:telegram-agent-context";

    /// Checks the form.
    pub fn new(s: impl Into<String>) -> Result<Self, SourceNameError> {
        let s = s.into();
        let Some((kind, name)) = s.split_once(':') else {
            return Err(SourceNameError);
        };
        let part = 1..=crate::bounds::SOURCE_PART_MAX;
        let kind_ok = part.contains(&kind.len()) && kind.bytes().all(|b| b.is_ascii_lowercase());
        let name_ok = part.contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
        if kind_ok && name_ok {
            Ok(Self(s))
        } else {
            Err(SourceNameError)
        }
    }

    /// `telegram:<bot-id>`.
    pub fn telegram(bot_id: i64) -> Self {
        Self(format!("telegram:{bot_id}"))
    }

    /// `agent:<agent-id>`; `None` when the agent id does not fit a source name.
    pub fn agent(agent_id: &str) -> Result<Self, SourceNameError> {
        Self::new(format!("agent:{agent_id}"))
    }

    /// A constant known to be well formed (the `const`s above).
    pub fn fixed(s: &'static str) -> Self {
        Self(s.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceName({})", self.0)
    }
}

impl Serialize for SourceName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SourceName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

/// A strict payload type and its row of the event catalog.
pub trait Payload: Serialize + DeserializeOwned {
    /// The event type without version, e.g. `stream.thought.agent.run.completed`.
    const TYPE: &'static str;
    /// The payload schema version.
    const VERSION: u32;
    /// Who writes events of this type.
    const AUTHORSHIP: Authorship;
    /// Whether payloads of this type are sensitive.
    const SENSITIVE: bool;
    /// The type whose identity space this event shares. Usually [`Self::TYPE`];
    /// two outcome types that must exclude each other share one.
    const IDENTITY_TYPE: &'static str = Self::TYPE;

    /// The identity key of the event catalog.
    fn identity_key(&self) -> serde_json::Value;

    /// Cross-field rules serde cannot express (a length that must match its
    /// text, a replacement allowed only for one disposition). Checked when an
    /// event is built and every time one is decoded.
    fn validate(&self) -> Result<(), PayloadInvalid> {
        Ok(())
    }
}

/// A payload broke a cross-field rule. Names the field, never its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("payload field `{field}` is invalid: {rule}")]
pub struct PayloadInvalid {
    /// The offending field, as it is spelled on the wire.
    pub field: &'static str,
    /// The rule it broke.
    pub rule: &'static str,
}

impl PayloadInvalid {
    /// A refusal naming `field` and `rule`.
    pub fn new(field: &'static str, rule: &'static str) -> Self {
        Self { field, rule }
    }
}

/// Building an event failed before anything touched a store.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The payload could not be canonicalized.
    #[error(transparent)]
    Canon(#[from] CanonError),
    /// The payload broke a cross-field rule.
    #[error(transparent)]
    Invalid(#[from] PayloadInvalid),
    /// A stored payload did not parse as its declared type.
    #[error("payload of event {id} does not match {ty}@{version}")]
    PayloadSchema {
        /// The event.
        id: EventId,
        /// Its type.
        ty: String,
        /// Its version.
        version: u32,
    },
    /// An event was read as a type it does not carry.
    #[error("event {id} is {found}, not {expected}")]
    WrongType {
        /// The event.
        id: EventId,
        /// What it is.
        found: String,
        /// What the caller asked for.
        expected: &'static str,
    },
}

/// An event ready to append: everything but `seq` and `recorded_at`, which
/// the store assigns at commit.
#[derive(Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Deterministic id.
    pub id: EventId,
    /// The source it is appended to.
    pub source: SourceName,
    /// Type without version.
    pub event_type: String,
    /// Payload schema version.
    pub version: u32,
    /// Who wrote it.
    pub authorship: Authorship,
    /// Whether the payload is sensitive.
    pub sensitive: bool,
    /// The source root, if any.
    pub root: Option<EventId>,
    /// The parent, if any.
    pub parent: Option<EventId>,
    /// RFC 8785 canonical payload bytes.
    pub payload: Vec<u8>,
    /// SHA-256 of `payload`.
    pub payload_sha256: Sha256Hex,
}

impl NewEvent {
    /// Builds the event for a typed payload: canonical bytes, hash and the
    /// deterministic id from the catalog's identity key.
    pub fn build<P: Payload>(
        source: &SourceName,
        root: Option<&EventId>,
        parent: Option<&EventId>,
        payload: &P,
    ) -> Result<Self, EventError> {
        payload.validate()?;
        let bytes = to_canonical_bytes(payload)?;
        let id = derive_event_id(source.as_str(), P::IDENTITY_TYPE, &payload.identity_key())?;
        Ok(Self {
            id,
            source: source.clone(),
            event_type: P::TYPE.to_owned(),
            version: P::VERSION,
            authorship: P::AUTHORSHIP,
            sensitive: P::SENSITIVE,
            root: root.cloned(),
            parent: parent.cloned(),
            payload_sha256: sha256(&bytes),
            payload: bytes,
        })
    }
}

impl fmt::Debug for NewEvent {
    // Payload bytes are left out on purpose: they may be sensitive.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewEvent")
            .field("id", &self.id)
            .field("source", &self.source)
            .field(
                "type",
                &format_args!("{}@{}", self.event_type, self.version),
            )
            .field("payload_sha256", &self.payload_sha256)
            .finish_non_exhaustive()
    }
}

/// An event as the store holds it.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event as appended.
    pub event: NewEvent,
    /// Gap-free position in its source, from 1.
    pub seq: u64,
    /// Wall clock at first commit, milliseconds since the Unix epoch. Not
    /// part of identity.
    pub recorded_at_ms: i64,
}

impl StoredEvent {
    /// The id.
    pub fn id(&self) -> &EventId {
        &self.event.id
    }

    /// Parses the payload as `P`, checking type and version first.
    pub fn decode<P: Payload>(&self) -> Result<P, EventError> {
        if self.event.event_type != P::TYPE || self.event.version != P::VERSION {
            return Err(EventError::WrongType {
                id: self.event.id.clone(),
                found: format!("{}@{}", self.event.event_type, self.event.version),
                expected: P::TYPE,
            });
        }
        let schema_error = || EventError::PayloadSchema {
            id: self.event.id.clone(),
            ty: self.event.event_type.clone(),
            version: self.event.version,
        };
        let payload: P = serde_json::from_slice(&self.event.payload).map_err(|_| schema_error())?;
        payload.validate().map_err(|_| schema_error())?;
        Ok(payload)
    }

    /// Whether this event is of type `P`.
    pub fn is<P: Payload>(&self) -> bool {
        self.event.event_type == P::TYPE && self.event.version == P::VERSION
    }
}

impl fmt::Debug for StoredEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredEvent")
            .field("event", &self.event)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}
