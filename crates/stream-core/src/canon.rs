//! RFC 8785 (JCS) canonical JSON and SHA-256.
//!
//! Every identity in thestream is a SHA-256 over canonical bytes, so two
//! processes that build the same value always derive the same id.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::ids::Sha256Hex;

/// Canonicalization failed: the value cannot be represented as I-JSON
/// (for example a non-finite float or a map with non-string keys).
#[derive(Debug, thiserror::Error)]
#[error("value cannot be canonicalized as RFC 8785 JSON")]
pub struct CanonError;

/// The RFC 8785 canonical bytes of `value`.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonError> {
    serde_jcs::to_vec(value).map_err(|_| CanonError)
}

/// The RFC 8785 canonical text of `value`.
pub fn to_canonical_string<T: Serialize + ?Sized>(value: &T) -> Result<String, CanonError> {
    serde_jcs::to_string(value).map_err(|_| CanonError)
}

/// SHA-256 of raw bytes, as a lowercase hex digest.
pub fn sha256(bytes: &[u8]) -> Sha256Hex {
    let digest: [u8; 32] = Sha256::digest(bytes).into();
    Sha256Hex::from_bytes(digest)
}

/// SHA-256 of the canonical bytes of `value`.
pub fn canonical_sha256<T: Serialize + ?Sized>(value: &T) -> Result<Sha256Hex, CanonError> {
    Ok(sha256(&to_canonical_bytes(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_by_utf16_and_whitespace_removed() {
        // RFC 8785 section 3.2.3 sorts by UTF-16 code units: "\u{e9}" (0x00e9)
        // sorts before "\u{1f600}" (0xd83d ...) even though its scalar is smaller either way,
        // and "b" before "é".
        let value = json!({"é": 1, "b": [true, null, "x"], "a": {"z": 1.0, "y": -0.0}});
        let text = to_canonical_string(&value).unwrap();
        assert_eq!(text, r#"{"a":{"y":0,"z":1},"b":[true,null,"x"],"é":1}"#);
    }

    #[test]
    fn numbers_follow_ecmascript_formatting() {
        let value = json!([1e21, 1.5e-7, 100, 0.1]);
        assert_eq!(
            to_canonical_string(&value).unwrap(),
            "[1e+21,1.5e-7,100,0.1]"
        );
    }

    #[test]
    fn sha256_of_empty_input_is_the_known_digest() {
        assert_eq!(
            sha256(b"").as_str(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
