//! RFC 8785 (JCS) canonical JSON and SHA-256.
//!
//! Every identity in thestream is a SHA-256 over canonical bytes, so two
//! processes that build the same value always derive the same id.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::hex_id::Sha256Hex;

/// Canonicalization failed: the value cannot be represented as I-JSON
/// (for example a map whose keys are not strings).
#[derive(Debug, thiserror::Error)]
#[error("value cannot be canonicalized as RFC 8785 JSON")]
pub struct CanonError;

mod encoder;

pub(crate) use encoder::member_order;

/// The RFC 8785 canonical bytes of `value`.
///
/// `value` is encoded with the meaning serde_json's data model gives it
/// (`serde_json::to_value`), straight into bytes by one serializer
/// (`encoder`): members sorted by their names' UTF-16 code units, numbers
/// as ECMAScript prints them, strings by [`canonical_string`]. The bytes
/// are serde_jcs's for every JSON value
/// (`canonical_bytes_are_serde_jcs_s_for_any_json_value`) and every typed
/// shape a payload uses (`typed_values_encode_as_serde_jcs_encodes_them`),
/// and no `Value` tree is built on the way: every id, event and snapshot is
/// encoded here. No canonical type holds a Rust float: a non-finite one
/// would become `null`, as serde_json makes it.
pub fn to_canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::new();
    value.serialize(encoder::Encoder { out: &mut out })?;
    Ok(out)
}

/// The RFC 8785 canonical text of `value`.
pub fn to_canonical_string<T: Serialize + ?Sized>(value: &T) -> Result<String, CanonError> {
    String::from_utf8(to_canonical_bytes(value)?).map_err(|_| CanonError)
}

/// The RFC 8785 canonical bytes of one string, the one string encoder
/// [`to_canonical_bytes`] uses. serde_json's escaper follows RFC 8785's
/// rules (section 3.2.2.2: `"` and `\` escaped, U+0000 to U+001F as `\b \t
/// \n \f \r` or `\u00xx` in lowercase, everything else as its UTF-8);
/// the tests below hold it to serde_jcs's bytes.
pub fn canonical_string(text: &str) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::with_capacity(text.len() + 2);
    canonical_string_into(&mut out, text);
    Ok(out)
}

/// [`canonical_string`] appended to `out`.
fn canonical_string_into(out: &mut Vec<u8>, text: &str) {
    // Writing a `str` into a `Vec` cannot fail: serde_json's only errors
    // are the writer's and non-string map keys.
    let _ = serde_json::to_writer(out, text);
}

/// SHA-256 of raw bytes, as a lowercase hex digest.
pub fn sha256(bytes: &[u8]) -> Sha256Hex {
    Sha256Hex::from_bytes(sha256_digest(bytes))
}

/// Bytes with their SHA-256, made only by hashing them ([`Hashed::new`]) or
/// by finding them equal to bytes already hashed ([`Hashed::new_knowing`]):
/// the two cannot disagree, so a store keeps a blob under the digest its
/// reader computed instead of hashing the same bytes again. `Debug` shows
/// the digest and the length, never the bytes (a photo, `memory.md`).
#[derive(Clone, PartialEq, Eq)]
pub struct Hashed<B = Vec<u8>> {
    sha256: Sha256Hex,
    bytes: B,
}

impl<B: AsRef<[u8]>> Hashed<B> {
    /// Hashes `bytes`.
    pub fn new(bytes: B) -> Self {
        Self {
            sha256: sha256(bytes.as_ref()),
            bytes,
        }
    }

    /// `bytes` with the digest of the first of `known` holding the same
    /// bytes, or hashed when none does: equal bytes have equal digests, and
    /// comparing 64 KiB costs a tenth of hashing them. For a reader that
    /// expects bytes it already hashed (the materializer scanning the file
    /// it just wrote).
    pub fn new_knowing(bytes: B, known: &[Hashed<&[u8]>]) -> Self {
        match known.iter().find(|k| k.bytes == bytes.as_ref()) {
            Some(k) => Self {
                sha256: k.sha256.clone(),
                bytes,
            },
            None => Self::new(bytes),
        }
    }

    /// The SHA-256 of [`Hashed::bytes`].
    pub fn sha256(&self) -> &Sha256Hex {
        &self.sha256
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_ref()
    }

    /// The same bytes and digest, borrowed.
    pub fn borrowed(&self) -> Hashed<&[u8]> {
        Hashed {
            sha256: self.sha256.clone(),
            bytes: self.bytes.as_ref(),
        }
    }

    /// The bytes, giving up the digest.
    pub fn into_bytes(self) -> B {
        self.bytes
    }
}

impl<B: AsRef<[u8]>> std::fmt::Debug for Hashed<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hashed")
            .field("sha256", &self.sha256)
            .field("len", &self.bytes.as_ref().len())
            .finish()
    }
}

/// SHA-256 of raw bytes, as its 32 bytes (a part key before it is spelled).
pub(crate) fn sha256_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// SHA-256 of the canonical bytes of `value`.
pub fn canonical_sha256<T: Serialize + ?Sized>(value: &T) -> Result<Sha256Hex, CanonError> {
    Ok(sha256(&to_canonical_bytes(value)?))
}

/// Random JSON values for the crate's property tests: leaves of every kind
/// (integers past 2^53, doubles), strings from `text`, arrays of fewer than
/// `items` and objects of fewer than `members`, nested as
/// `prop_recursive(depth, size, …)` allows.
#[cfg(test)]
pub(crate) fn any_json(
    text: &'static str,
    (depth, size): (u32, u32),
    items: usize,
    members: usize,
) -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-(1i64 << 54)..(1i64 << 54)).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, size, items as u32, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..items).prop_map(Value::Array),
            proptest::collection::btree_map(text, inner, 0..members)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn hashed_bytes_carry_their_own_digest_and_debug_shows_no_bytes() {
        let canary = b"CANARY-hashed-bytes".to_vec();
        let hashed = Hashed::new(canary.clone());
        assert_eq!(hashed.sha256(), &sha256(&canary));
        assert_eq!(hashed.bytes(), canary.as_slice());
        assert_eq!(hashed.borrowed().sha256(), hashed.sha256());
        assert_eq!(hashed.borrowed().bytes(), canary.as_slice());
        let shown = format!("{hashed:?} {:?}", hashed.borrowed());
        assert!(!shown.contains("CANARY"), "{shown}");
        assert!(shown.contains(hashed.sha256().short(12)) && shown.contains("len: 19"));
        assert_eq!(hashed.into_bytes(), canary);
    }

    #[test]
    fn bytes_known_to_a_reader_keep_their_digest_and_others_are_hashed() {
        let (a, b) = (b"memory.md as written".to_vec(), b"edited since".to_vec());
        let known = Hashed::new(a.as_slice());
        for (bytes, known) in [(&a, vec![known.clone()]), (&b, vec![known]), (&a, vec![])] {
            let hashed = Hashed::new_knowing(bytes.clone(), &known);
            assert_eq!(hashed.sha256(), &sha256(bytes));
            assert_eq!(hashed.bytes(), bytes.as_slice());
        }
        // Equal bytes take the known digest as it is, without hashing: a
        // digest only a reader could know shows it was not recomputed.
        let marked = Hashed {
            sha256: sha256(b"a reader's digest"),
            bytes: a.as_slice(),
        };
        let taken = Hashed::new_knowing(a.clone(), &[marked]);
        assert_eq!(taken.sha256(), &sha256(b"a reader's digest"));
    }

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
        fn a_string_encodes_as_serde_jcs_encodes_it(
            text in "[\\x00-\\x7f]{0,40}|\\PC{0,40}|.{0,40}",
        ) {
            proptest::prop_assert_eq!(
                canonical_string(&text).unwrap(),
                serde_jcs::to_vec(&text).unwrap()
            );
        }
    }

    #[test]
    fn every_ascii_character_encodes_as_serde_jcs_encodes_it() {
        let all: String = (0u8..=0x7f).map(char::from).collect();
        for text in [all.as_str(), "", "\u{2028}\u{fffd}\u{1f600}\u{7f}/"] {
            assert_eq!(
                canonical_string(text).unwrap(),
                serde_jcs::to_vec(text).unwrap()
            );
        }
    }

    /// Any JSON value: numbers of every kind (integers past 2^53, doubles),
    /// strings with escapes, and member names that UTF-16 sorts apart
    /// from UTF-8.
    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        any_json(
            "[\\x00-\\x7f]{0,6}|\\PC{0,6}|[a\\u{e000}\\u{ffff}\\u{10000}\\u{1f600}]{0,3}",
            (4, 48),
            6,
            6,
        )
    }

    proptest::proptest! {
        #[test]
        fn canonical_bytes_are_serde_jcs_s_for_any_json_value(value in json()) {
            proptest::prop_assert_eq!(
                to_canonical_bytes(&value).unwrap(),
                serde_jcs::to_vec(&value).unwrap()
            );
        }
    }

    #[test]
    fn integers_past_2_53_print_as_the_double_they_round_to() {
        for (value, text) in [
            (json!(9_007_199_254_740_992u64), "9007199254740992"),
            (json!(9_007_199_254_740_993u64), "9007199254740992"),
            (json!(-9_007_199_254_740_993i64), "-9007199254740992"),
            (json!(u64::MAX), "18446744073709552000"),
            (json!(i64::MIN), "-9223372036854776000"),
        ] {
            assert_eq!(to_canonical_string(&value).unwrap(), text);
            assert_eq!(serde_jcs::to_string(&value).unwrap(), text);
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
