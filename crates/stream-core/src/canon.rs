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

/// The RFC 8785 canonical bytes of one string, as [`to_canonical_bytes`]
/// gives them. serde_json's string escaper follows RFC 8785's rules
/// (section 3.2.2.2: `"` and `\` escaped, U+0000 to U+001F as `\b \t \n
/// \f \r` or `\u00xx` in lowercase, everything else as its UTF-8; the
/// proptest below holds them equal). Strings are most of the bytes encoded
/// (`memory.md`, messages), and serde_jcs writes each fragment through a
/// boxed writer: this is about twice as fast on a 64 KiB `memory.md`.
pub fn canonical_string(text: &str) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::with_capacity(text.len() + 2);
    serde_json::to_writer(&mut out, text).map_err(|_| CanonError)?;
    Ok(out)
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

    proptest::proptest! {
        #[test]
        fn a_string_encodes_as_the_canonical_encoder_encodes_it(
            text in "[\\x00-\\x7f]{0,40}|\\PC{0,40}|.{0,40}",
        ) {
            proptest::prop_assert_eq!(
                canonical_string(&text).unwrap(),
                to_canonical_bytes(&text).unwrap()
            );
        }
    }

    #[test]
    fn every_ascii_character_encodes_as_the_canonical_encoder_encodes_it() {
        let all: String = (0u8..=0x7f).map(char::from).collect();
        for text in [all.as_str(), "", "\u{2028}\u{fffd}\u{1f600}\u{7f}/"] {
            assert_eq!(
                canonical_string(text).unwrap(),
                to_canonical_bytes(text).unwrap()
            );
        }
    }

    #[test]
    fn sha256_of_empty_input_is_the_known_digest() {
        assert_eq!(
            sha256(b"").as_str(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
