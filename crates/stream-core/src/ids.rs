//! Identifiers: 64-hex SHA-256 digests with distinct types per role, and the
//! deterministic derivations of docs/design.md §4 and §11.
//!
//! Deterministic ids are what make replay idempotent: the same run, trigger
//! or document always derives the same id, so a retried settlement converges
//! instead of duplicating.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::json;

use crate::canon::{CanonError, canonical_sha256};

/// An identifier was not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} must be 64 lowercase hex digits")]
pub struct IdError {
    /// Which identifier type refused the value.
    pub kind: &'static str,
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub(crate) const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The 32 bytes that 64 lowercase hex digits spell. Only for digits already
/// checked (an id's, which `parse` checks and `from_bytes` makes; a packed
/// part's, which its reader checks): another byte decodes to garbage, never
/// a panic. Every id, part key and packed id goes through here, so it is a
/// table, not the `hex` crate's checked loop (a quarter of a snapshot's
/// split was hex conversion).
pub(crate) fn checked_hex_bytes(digits: &[u8]) -> [u8; 32] {
    let nibble = |d: u8| match d {
        b'0'..=b'9' => d - b'0',
        _ => d.wrapping_sub(b'a').wrapping_add(10) & 0x0f,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0]) << 4 | nibble(pair[1]);
    }
    out
}

/// The 64 lowercase hex digits of a digest.
pub(crate) fn hex_digits(bytes: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_DIGITS[usize::from(b >> 4)];
        pair[1] = HEX_DIGITS[usize::from(b & 0x0f)];
    }
    out
}

/// [`hex_digits`] as a string.
fn hex_string(bytes: &[u8; 32]) -> String {
    hex_digits(bytes).into_iter().map(char::from).collect()
}

macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Parses 64 lowercase hex digits.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                if is_hex64(s) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(IdError { kind: stringify!($name) })
                }
            }

            /// Wraps a raw 32-byte digest.
            pub fn from_bytes(bytes: [u8; 32]) -> Self {
                Self(hex_string(&bytes))
            }

            /// The raw 32-byte digest: the inverse of `from_bytes`.
            pub fn to_bytes(&self) -> [u8; 32] {
                checked_hex_bytes(self.0.as_bytes())
            }

            /// The 64 lowercase hex digits.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The first `n` hex digits, for display only.
            pub fn short(&self, n: usize) -> &str {
                &self.0[..n.min(self.0.len())]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.short(12))
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

hex_id!(
    /// A SHA-256 digest of content.
    Sha256Hex
);
hex_id!(
    /// The deterministic id of an event (docs/design.md §4).
    EventId
);
hex_id!(
    /// The deterministic id of a run (docs/design.md §11).
    RunId
);
hex_id!(
    /// The id of a stored context snapshot: SHA-256 of its canonical bytes.
    SnapshotId
);
hex_id!(
    /// A stable document id, derived from source and normalized path.
    DocumentId
);
hex_id!(
    /// An immutable document version id.
    VersionId
);
hex_id!(
    /// A declaration fingerprint (docs/design.md §6).
    Fingerprint
);

impl From<Sha256Hex> for SnapshotId {
    fn from(value: Sha256Hex) -> Self {
        Self(value.0)
    }
}

impl From<Sha256Hex> for Fingerprint {
    fn from(value: Sha256Hex) -> Self {
        Self(value.0)
    }
}

/// `id = sha256(JCS({"ns":"thestream/event/1","source":S,"type":T,"key":K}))`.
///
/// `identity_type` is the event type without its version; `key` is the
/// type's identity key from the event catalog.
pub fn derive_event_id(
    source: &str,
    identity_type: &str,
    key: &serde_json::Value,
) -> Result<EventId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/event/1",
        "source": source,
        "type": identity_type,
        "key": key,
    }))?;
    Ok(EventId(digest.0))
}

/// `run id = sha256(JCS({"ns":"thestream/run/1","agent":A,"version":V,"trigger":E}))`.
pub fn derive_run_id(agent: &str, version: u32, trigger: &EventId) -> Result<RunId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/run/1",
        "agent": agent,
        "version": version,
        "trigger": trigger,
    }))?;
    Ok(RunId(digest.0))
}

/// A document's stable id: one per (source, normalized path), forever.
pub fn derive_document_id(source: &str, path: &str) -> Result<DocumentId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/document/1",
        "source": source,
        "path": path,
    }))?;
    Ok(DocumentId(digest.0))
}

/// An immutable version id: the document, its content and its predecessor,
/// so that a rescan of unchanged bytes derives the same version and an edit
/// followed by a revert derives a new one.
pub fn derive_version_id(
    document: &DocumentId,
    sha256: &Sha256Hex,
    previous: Option<&VersionId>,
) -> Result<VersionId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/version/1",
        "document": document,
        "sha256": sha256,
        "previous": previous,
    }))?;
    Ok(VersionId(digest.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_anything_but_64_lowercase_hex() {
        assert!(EventId::parse(&"a".repeat(64)).is_ok());
        assert!(EventId::parse(&"A".repeat(64)).is_err());
        assert!(EventId::parse(&"a".repeat(63)).is_err());
        assert!(EventId::parse(&"g".repeat(64)).is_err());
        assert!(serde_json::from_str::<RunId>("\"latest\"").is_err());
    }

    #[test]
    fn raw_bytes_and_hex_convert_both_ways() {
        let raw: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37));
        let id = Sha256Hex::from_bytes(raw);
        assert_eq!(id.to_bytes(), raw);
        let parsed = Sha256Hex::parse(&"0f".repeat(32)).unwrap();
        assert_eq!(parsed.to_bytes(), [0x0f; 32]);
        assert_eq!(Sha256Hex::from_bytes(parsed.to_bytes()), parsed);
        let digest = crate::canon::sha256(b"abc");
        assert_eq!(digest.as_str(), hex::encode(digest.to_bytes()));
    }

    proptest::proptest! {
        /// The table conversions are the `hex` crate's, both ways.
        #[test]
        fn hex_conversions_are_the_hex_crates(raw in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let digits = hex::encode(raw);
            proptest::prop_assert_eq!(hex_string(&raw), digits.clone());
            proptest::prop_assert_eq!(checked_hex_bytes(digits.as_bytes()), raw);
        }
    }

    #[test]
    fn debug_shows_only_a_prefix() {
        let id = EventId::parse(&"ab".repeat(32)).unwrap();
        assert_eq!(format!("{id:?}"), "EventId(abababababab)");
    }
}
