//! The authority of a human decision: this place's Ed25519 signing key, the
//! keys a config trusts, and [`authorize`], the one function that decides
//! whether a recorded decision may be applied.
//!
//! A decision is authorized when it is `decision@2`, signed by a key the
//! config lists, over [`SignedProposalDecision::signed_message`], naming
//! the SHA-256 of exactly the proposal it decides. A `decision@1` (made
//! before decisions were signed) keeps what was already recorded of it:
//! its judgment or its materialization outcome, or a rejection, which
//! applies nothing; an unsigned accept or edit without a recorded outcome
//! is never applied (docs/design.md, "Signed decisions").

use std::collections::BTreeSet;
use std::fmt;

use ed25519_dalek::{Signature, Signer as _, VerifyingKey};
use stream_core::payload::{
    DecidableKind, Disposition, KeyId, MaterializationFailed, MaterializationFailure,
    MemoryChangeMaterialized, RecordedDecision, SignatureBytes, SignedProposalDecision,
};
use stream_core::{EventId, Sha256Hex};
use stream_store::{Read, StoreError};

use crate::project::{judgment_id, memory_outcome_id};

/// This place's Ed25519 signing key. Its `Debug` shows the public key only.
#[derive(Clone)]
pub struct SigningKey(ed25519_dalek::SigningKey);

/// No randomness for a new key.
#[derive(Debug, thiserror::Error)]
#[error("no randomness for a signing key: {0}")]
pub struct NoRandomness(getrandom::Error);

impl SigningKey {
    /// A new key from 32 bytes of the operating system's CSPRNG.
    pub fn generate() -> Result<Self, NoRandomness> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(NoRandomness)?;
        let key = Self::from_bytes(&secret);
        secret.fill(0);
        Ok(key)
    }

    /// The key of these 32 secret bytes.
    pub fn from_bytes(secret: &[u8; 32]) -> Self {
        Self(ed25519_dalek::SigningKey::from_bytes(secret))
    }

    /// The 32 secret bytes, to be written owner-only.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Its public key, as configs and payloads name it.
    pub fn key_id(&self) -> KeyId {
        KeyId::from_bytes(self.0.verifying_key().to_bytes())
    }

    /// Signs `decision`: its key id is set to this key, then its signature
    /// to Ed25519 over its signed message.
    pub fn sign(&self, decision: &mut SignedProposalDecision) -> Result<(), SignError> {
        decision.key_id = self.key_id();
        let message = decision.signed_message().map_err(|_| SignError)?;
        decision.signature = SignatureBytes::from_bytes(self.0.sign(&message).to_bytes());
        Ok(())
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(public {})", self.key_id())
    }
}

/// A decision could not be canonicalized for signing.
#[derive(Debug, thiserror::Error)]
#[error("the decision cannot be canonicalized for signing")]
pub struct SignError;

/// The keys whose decisions a config applies (`[authority] keys`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedKeys(BTreeSet<KeyId>);

impl TrustedKeys {
    /// These keys.
    pub fn new(keys: impl IntoIterator<Item = KeyId>) -> Self {
        Self(keys.into_iter().collect())
    }

    /// Whether `key` is one of them.
    pub fn contains(&self, key: &KeyId) -> bool {
        self.0.contains(key)
    }
}

/// Why a recorded decision may be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// Signed by this trusted key.
    Signed(KeyId),
    /// An unsigned `decision@1` from before signing, kept for what was
    /// already recorded of it.
    Legacy,
}

impl Authority {
    /// The signing key, if any (`null` in export provenance otherwise).
    pub fn key_id(&self) -> Option<&KeyId> {
        match self {
            Self::Signed(key) => Some(key),
            Self::Legacy => None,
        }
    }
}

/// Why a recorded decision may not be applied. Content-dark codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unauthorized {
    /// An unsigned accept or edit without a recorded outcome.
    Unsigned,
    /// Signed by a key this config does not list.
    UnknownKey,
    /// The signature does not verify over the payload.
    BadSignature,
    /// Validly signed, but over another proposal text than the one stored.
    OtherProposal,
}

impl Unauthorized {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unsigned => "unsigned",
            Self::UnknownKey => "unknown-key",
            Self::BadSignature => "bad-signature",
            Self::OtherProposal => "other-proposal",
        }
    }
}

/// A decision whose envelope and proposal chain verified but which is not
/// authorized here: the ids a refusal is recorded under, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The decision.
    pub decision: EventId,
    /// The proposal it decides (its chain verified).
    pub proposal: EventId,
    /// The proposal's root.
    pub root: Option<EventId>,
    /// Its kind.
    pub kind: DecidableKind,
    /// Why.
    pub reason: Unauthorized,
}

/// Decides whether `decision`, on a proposal whose payload hashes to
/// `proposal_sha256`, may be applied by a config trusting `trusted`.
/// `legacy_outcome` says whether an unsigned decision's outcome was
/// recorded before; it is asked only for an unsigned accept or edit.
/// Fails closed: anything but a verified signature by a listed key over
/// this very proposal, or a legacy decision as above, is refused.
pub fn authorize(
    decision: &RecordedDecision,
    proposal_sha256: &Sha256Hex,
    trusted: &TrustedKeys,
    legacy_outcome: impl FnOnce() -> Result<bool, StoreError>,
) -> Result<Result<Authority, Unauthorized>, StoreError> {
    Ok(match decision {
        RecordedDecision::Signed(signed) => {
            // The signature is checked only for a listed key: an unknown
            // key costs no verification.
            let listed = trusted.contains(&signed.key_id);
            match (listed, listed && signature_verifies(signed)) {
                (false, _) => Err(Unauthorized::UnknownKey),
                (true, false) => Err(Unauthorized::BadSignature),
                (true, true) if signed.proposal_sha256 != *proposal_sha256 => {
                    Err(Unauthorized::OtherProposal)
                }
                (true, true) => Ok(Authority::Signed(signed.key_id)),
            }
        }
        RecordedDecision::Unsigned(unsigned) => match unsigned.disposition {
            Disposition::Reject => Ok(Authority::Legacy),
            Disposition::Accept | Disposition::Edit => {
                if legacy_outcome()? {
                    Ok(Authority::Legacy)
                } else {
                    Err(Unauthorized::Unsigned)
                }
            }
        },
    })
}

/// Ed25519 (strict: no malleable or small-order forms) over the signed
/// message, by the key the payload names.
fn signature_verifies(signed: &SignedProposalDecision) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(signed.key_id.bytes()) else {
        return false;
    };
    let Ok(message) = signed.signed_message() else {
        return false;
    };
    let signature = Signature::from_bytes(signed.signature.bytes());
    key.verify_strict(&message, &signature).is_ok()
}

/// Whether an unsigned decision's outcome was recorded: a correction's
/// judgment, or a memory change's receipt or failure — but not a failure
/// recorded for being unauthorized, which is a refusal, not an outcome.
pub fn legacy_outcome(
    store: &dyn Read,
    decision: &EventId,
    kind: DecidableKind,
) -> Result<bool, StoreError> {
    let Ok(outcome_id) = (match kind {
        DecidableKind::SelfCorrection => judgment_id(decision),
        DecidableKind::MemoryChange => memory_outcome_id(decision),
    }) else {
        return Ok(false);
    };
    let Some(event) = store.event(&outcome_id)? else {
        return Ok(false);
    };
    Ok(match kind {
        DecidableKind::SelfCorrection => true,
        DecidableKind::MemoryChange => {
            if event.is::<MemoryChangeMaterialized>() {
                true
            } else {
                match event.decode::<MaterializationFailed>().map(|f| f.reason) {
                    Ok(MaterializationFailure::Unauthorized) | Err(_) => false,
                    Ok(
                        MaterializationFailure::StaleBase
                        | MaterializationFailure::Path
                        | MaterializationFailure::Symlink
                        | MaterializationFailure::Frontmatter
                        | MaterializationFailure::Size
                        | MaterializationFailure::Write
                        | MaterializationFailure::Scan
                        | MaterializationFailure::Receipt
                        | MaterializationFailure::Content,
                    ) => true,
                }
            }
        }
    })
}

#[cfg(test)]
mod tests;
