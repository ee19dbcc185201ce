//! `stream.thought.agent.proposal.decision@2`: a human decision signed with
//! the deciding place's Ed25519 key, and [`RecordedDecision`], which reads
//! either version of the decision event.
//!
//! What is signed is [`SignedProposalDecision::signed_message`]: a domain
//! prefix and the RFC 8785 bytes of the payload without its `signature`
//! member. The payload names the key and the SHA-256 of the proposal's
//! payload, so a signature covers the key that made it and the exact text
//! decided. This crate only carries the bytes; `stream-proposals` signs and
//! verifies.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::json;

use crate::HumanAuthority;
use crate::canon::{CanonError, to_canonical_bytes};
use crate::event::{
    Authorship, EventError, NewEvent, Payload, PayloadInvalid, SourceName, StoredEvent,
};
use crate::ids::{EventId, Sha256Hex};
use crate::payload::{DecidableKind, Disposition, ProposalDecision};
use crate::text::Label;

/// The prefix of every signed decision message: a signature made for a
/// decision is never valid for anything else.
pub const DECISION_SIGNATURE_DOMAIN: &[u8] = b"thestream/decision/1\n";

/// The one prefix of a key id.
const KEY_PREFIX: &str = "ed25519:";

/// An Ed25519 public key as it is written in configs and payloads:
/// `ed25519:` and the standard base64 of its 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId([u8; 32]);

/// A key id did not have the form `ed25519:BASE64` of 32 bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a key must be `ed25519:` and the standard base64 of 32 bytes")]
pub struct KeyIdError;

impl KeyId {
    /// Parses `ed25519:BASE64`.
    pub fn parse(s: &str) -> Result<Self, KeyIdError> {
        let b64 = s.strip_prefix(KEY_PREFIX).ok_or(KeyIdError)?;
        let bytes = STANDARD.decode(b64).map_err(|_| KeyIdError)?;
        bytes.try_into().map(Self).map_err(|_| KeyIdError)
    }

    /// The key id of these public-key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The public-key bytes.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{KEY_PREFIX}{}", STANDARD.encode(self.0))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// An Ed25519 signature, standard base64 of its 64 bytes on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SignatureBytes([u8; 64]);

impl SignatureBytes {
    /// Wraps the signature's bytes.
    pub fn from_bytes(bytes: [u8; 64]) -> Self {
        Self(bytes)
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8; 64] {
        &self.0
    }
}

impl fmt::Debug for SignatureBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignatureBytes({})", STANDARD.encode(self.0))
    }
}

impl Serialize for SignatureBytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(self.0))
    }
}

impl<'de> Deserialize<'de> for SignatureBytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = STANDARD
            .decode(s.as_bytes())
            .map_err(serde::de::Error::custom)?;
        bytes
            .try_into()
            .map(Self)
            .map_err(|_| serde::de::Error::custom("a signature is 64 bytes"))
    }
}

/// `stream.thought.agent.proposal.decision@2`: the fields of
/// [`ProposalDecision`] (@1), the SHA-256 of the decided proposal's payload,
/// the deciding key and its signature. Same identity (the proposal id) and
/// identity space as @1: one decision per proposal, whatever its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SignedProposalDecision {
    /// The proposal decided: the identity key.
    pub proposal_event_id: EventId,
    /// Its kind.
    pub proposal_kind: DecidableKind,
    /// The disposition.
    pub disposition: Disposition,
    /// Edit only: the operator's exact replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    /// Operator/idempotency provenance; not the uniqueness boundary.
    pub submission_id: Label,
    /// Who decided.
    pub actor: Label,
    /// Literal `human`.
    pub authority: HumanAuthority,
    /// The SHA-256 of the decided proposal's payload: the text the human saw.
    pub proposal_sha256: Sha256Hex,
    /// The public key that signed.
    pub key_id: KeyId,
    /// Ed25519 over [`Self::signed_message`].
    pub signature: SignatureBytes,
}

impl SignedProposalDecision {
    /// The @1 fields: what every consumer of a decision reads.
    pub fn decision(&self) -> ProposalDecision {
        ProposalDecision {
            proposal_event_id: self.proposal_event_id.clone(),
            proposal_kind: self.proposal_kind,
            disposition: self.disposition,
            replacement: self.replacement.clone(),
            submission_id: self.submission_id.clone(),
            actor: self.actor.clone(),
            authority: HumanAuthority,
        }
    }

    /// The bytes the signature covers: [`DECISION_SIGNATURE_DOMAIN`], then
    /// the canonical payload without its `signature` member.
    pub fn signed_message(&self) -> Result<Vec<u8>, CanonError> {
        let mut value = serde_json::to_value(self).map_err(|_| CanonError)?;
        if let Some(members) = value.as_object_mut() {
            members.remove("signature");
        }
        let mut message = DECISION_SIGNATURE_DOMAIN.to_vec();
        message.extend(to_canonical_bytes(&value)?);
        Ok(message)
    }
}

impl Payload for SignedProposalDecision {
    const TYPE: &'static str = ProposalDecision::TYPE;
    const VERSION: u32 = 2;
    const AUTHORSHIP: Authorship = Authorship::Human;
    const SENSITIVE: bool = true;

    fn identity_key(&self) -> serde_json::Value {
        json!(self.proposal_event_id)
    }

    fn validate(&self) -> Result<(), PayloadInvalid> {
        self.decision().validate()
    }
}

/// A decision event of either version, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedDecision {
    /// @1, made before decisions were signed.
    Unsigned(ProposalDecision),
    /// @2.
    Signed(SignedProposalDecision),
}

impl RecordedDecision {
    /// Reads a decision event of either version (strictly, like
    /// [`StoredEvent::decode`]).
    pub fn decode(event: &StoredEvent) -> Result<Self, EventError> {
        if event.is::<SignedProposalDecision>() {
            event.decode().map(Self::Signed)
        } else {
            event.decode().map(Self::Unsigned)
        }
    }

    /// The @1 fields.
    pub fn decision(&self) -> ProposalDecision {
        match self {
            Self::Unsigned(d) => d.clone(),
            Self::Signed(d) => d.decision(),
        }
    }

    /// The key that signed it, if any.
    pub fn key_id(&self) -> Option<&KeyId> {
        match self {
            Self::Unsigned(_) => None,
            Self::Signed(d) => Some(&d.key_id),
        }
    }

    /// The event this payload builds under `root` and `parent`: what a
    /// stored decision's envelope must be exactly.
    pub fn build(
        &self,
        source: &SourceName,
        root: Option<&EventId>,
        parent: Option<&EventId>,
    ) -> Result<NewEvent, EventError> {
        match self {
            Self::Unsigned(d) => NewEvent::build(source, root, parent, d),
            Self::Signed(d) => NewEvent::build(source, root, parent, d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed() -> SignedProposalDecision {
        SignedProposalDecision {
            proposal_event_id: EventId::from_bytes([7; 32]),
            proposal_kind: DecidableKind::MemoryChange,
            disposition: Disposition::Edit,
            replacement: Some("canary-edit".into()),
            submission_id: Label::new("sub-1").unwrap(),
            actor: Label::new("alice").unwrap(),
            authority: HumanAuthority,
            proposal_sha256: Sha256Hex::from_bytes([9; 32]),
            key_id: KeyId::from_bytes([1; 32]),
            signature: SignatureBytes::from_bytes([2; 64]),
        }
    }

    #[test]
    fn a_key_id_round_trips_and_refuses_other_shapes() {
        let key = KeyId::from_bytes([1; 32]);
        let text = key.to_string();
        assert_eq!(text, "ed25519:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=");
        assert_eq!(KeyId::parse(&text), Ok(key));
        for bad in [
            "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
            "ed448:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
            "ed25519:AQEB",
            "ed25519:not base64!",
            "ed25519:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ==",
        ] {
            assert_eq!(KeyId::parse(bad), Err(KeyIdError), "{bad}");
        }
    }

    #[test]
    fn the_signed_message_is_the_domain_and_the_payload_without_its_signature() {
        let d = signed();
        let message = String::from_utf8(d.signed_message().unwrap()).unwrap();
        insta::assert_snapshot!(message);
        let mut other = d.clone();
        other.signature = SignatureBytes::from_bytes([3; 64]);
        assert_eq!(other.signed_message().unwrap(), d.signed_message().unwrap());
        other.proposal_sha256 = Sha256Hex::from_bytes([8; 32]);
        assert_ne!(other.signed_message().unwrap(), d.signed_message().unwrap());
    }

    #[test]
    fn the_signed_payload_golden() {
        let event = NewEvent::build(
            &SourceName::fixed(SourceName::PROPOSALS),
            None,
            None,
            &signed(),
        )
        .unwrap();
        assert_eq!(
            (event.event_type.as_str(), event.version),
            ("stream.thought.agent.proposal.decision", 2)
        );
        insta::assert_snapshot!(String::from_utf8(event.payload).unwrap());
    }

    #[test]
    fn both_versions_share_one_identity() {
        let source = SourceName::fixed(SourceName::PROPOSALS);
        let v2 = NewEvent::build(&source, None, None, &signed()).unwrap();
        let v1 = NewEvent::build(&source, None, None, &signed().decision()).unwrap();
        assert_eq!(v1.id, v2.id);
    }

    #[test]
    fn a_signed_payload_refuses_unknown_fields_and_short_signatures() {
        let mut value = serde_json::to_value(signed()).unwrap();
        value["extra"] = json!(1);
        assert!(serde_json::from_value::<SignedProposalDecision>(value).is_err());
        let mut value = serde_json::to_value(signed()).unwrap();
        value["signature"] = json!(STANDARD.encode([2u8; 63]));
        assert!(serde_json::from_value::<SignedProposalDecision>(value).is_err());
    }
}
