//! Identifiers: 64-hex SHA-256 digests with distinct types per role, and the
//! deterministic derivations of docs/design.md §4 and §11.
//!
//! Deterministic ids are what make replay idempotent: the same run, trigger
//! or document always derives the same id, so a retried settlement converges
//! instead of duplicating.

use serde_json::json;

use crate::canon::{CanonError, canonical_sha256};
use crate::hex_id::hex_id;
pub use crate::hex_id::{IdError, Sha256Hex};

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
        Self(value.into_string())
    }
}

impl From<Sha256Hex> for Fingerprint {
    fn from(value: Sha256Hex) -> Self {
        Self(value.into_string())
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
    Ok(EventId(digest.into_string()))
}

/// `run id = sha256(JCS({"ns":"thestream/run/1","agent":A,"version":V,"trigger":E}))`.
pub fn derive_run_id(agent: &str, version: u32, trigger: &EventId) -> Result<RunId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/run/1",
        "agent": agent,
        "version": version,
        "trigger": trigger,
    }))?;
    Ok(RunId(digest.into_string()))
}

/// A document's stable id: one per (source, normalized path), forever.
pub fn derive_document_id(source: &str, path: &str) -> Result<DocumentId, CanonError> {
    let digest = canonical_sha256(&json!({
        "ns": "thestream/document/1",
        "source": source,
        "path": path,
    }))?;
    Ok(DocumentId(digest.into_string()))
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
    Ok(VersionId(digest.into_string()))
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

    #[test]
    fn debug_shows_only_a_prefix() {
        let id = EventId::parse(&"ab".repeat(32)).unwrap();
        assert_eq!(format!("{id:?}"), "EventId(abababababab)");
    }
}
