//! Strict JSON: the one parser of model-written JSON (tool-call arguments).
//!
//! `serde_json::Value` keeps the last of a repeated key silently, so
//! `{"proposed_text":"A","proposed_text":"B"}` would reach validation as
//! `"B"` while a reader of the raw text sees `"A"`. Both the sandboxed worker
//! and the trusted parent parse arguments here (through `stream-provider`),
//! and the parent's typed argument parser does too, so that a repeated key
//! at any depth is malformed everywhere alike.

use std::fmt;

/// The largest raw tool-call arguments text accepted, in bytes, by the
/// worker and again by the parent (one bound, one home). The biggest
/// legitimate call, 32,768 characters of memory text written entirely as
/// `\uXXXX` surrogate-pair escapes (12 bytes each, 384 KiB), fits.
pub const MAX_ARGUMENTS_BYTES: usize = 512 * 1024;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why text is not strict JSON. Carries no content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// Not one JSON value (syntax, trailing text, a non-finite number).
    #[error("not a JSON value")]
    NotJson,
    /// An object repeats a key, at any depth.
    #[error("an object repeats a key")]
    DuplicateKey,
}

/// A JSON value, and whether any object in it repeated a key (the value then
/// holds the last occurrence, as `serde_json` would). Deserializing it never
/// fails because of a repeated key, so it can sit inside a larger document
/// (an Anthropic `tool_use` block's `input`) whose other parts still parse.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckedValue {
    /// The value.
    pub value: Value,
    /// Some object in it repeated a key.
    pub duplicate_key: bool,
}

impl CheckedValue {
    /// The value, or [`StrictJsonError::DuplicateKey`].
    pub fn into_strict(self) -> Result<Value, StrictJsonError> {
        if self.duplicate_key {
            Err(StrictJsonError::DuplicateKey)
        } else {
            Ok(self.value)
        }
    }
}

/// Parses `text` as exactly one JSON value with no repeated key at any depth.
pub fn parse_strict(text: &str) -> Result<Value, StrictJsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let checked = CheckedValue::deserialize(&mut de).map_err(|_| StrictJsonError::NotJson)?;
    de.end().map_err(|_| StrictJsonError::NotJson)?;
    checked.into_strict()
}

impl<'de> Deserialize<'de> for CheckedValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

fn plain(value: Value) -> CheckedValue {
    CheckedValue {
        value,
        duplicate_key: false,
    }
}

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = CheckedValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<CheckedValue, E> {
        Ok(plain(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<CheckedValue, E> {
        Ok(plain(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<CheckedValue, E> {
        Ok(plain(Value::from(v)))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<CheckedValue, E> {
        Number::from_f64(v)
            .map(|n| plain(Value::Number(n)))
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<CheckedValue, E> {
        Ok(plain(Value::String(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<CheckedValue, E> {
        Ok(plain(Value::String(v)))
    }

    fn visit_unit<E>(self) -> Result<CheckedValue, E> {
        Ok(plain(Value::Null))
    }

    fn visit_none<E>(self) -> Result<CheckedValue, E> {
        Ok(plain(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckedValue, A::Error> {
        let mut items = Vec::new();
        let mut duplicate_key = false;
        while let Some(item) = seq.next_element::<CheckedValue>()? {
            duplicate_key |= item.duplicate_key;
            items.push(item.value);
        }
        Ok(CheckedValue {
            value: Value::Array(items),
            duplicate_key,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CheckedValue, A::Error> {
        let mut object = Map::new();
        let mut duplicate_key = false;
        while let Some(key) = map.next_key::<String>()? {
            let item = map.next_value::<CheckedValue>()?;
            duplicate_key |= item.duplicate_key;
            duplicate_key |= object.insert(key, item.value).is_some();
        }
        Ok(CheckedValue {
            value: Value::Object(object),
            duplicate_key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_keys_are_refused_at_every_depth() {
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"a":{"b":1,"b":2}}"#,
            r#"{"a":[{"b":1},{"c":1,"c":1}]}"#,
            r#"[{"x":1,"x":2}]"#,
        ] {
            assert_eq!(
                parse_strict(text),
                Err(StrictJsonError::DuplicateKey),
                "{text}"
            );
        }
    }

    #[test]
    fn plain_json_parses_as_serde_json_does() {
        for text in [
            r#"{"a":1,"b":[1,2.5,-3,true,null,"s"],"c":{"a":1}}"#,
            "[]",
            "{}",
            "\"x\"",
            "1e300",
            "18446744073709551615",
            "-9223372036854775808",
        ] {
            let ours = parse_strict(text);
            let theirs: Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, Ok(theirs), "{text}");
        }
    }

    #[test]
    fn not_json_and_trailing_text_are_refused() {
        for text in ["{not json", "{} {}", "", "{\"a\":1,}"] {
            assert_eq!(parse_strict(text), Err(StrictJsonError::NotJson), "{text}");
        }
    }

    #[test]
    fn a_repeated_key_inside_a_larger_document_is_reported_not_fatal() {
        #[derive(serde::Deserialize)]
        struct Block {
            input: CheckedValue,
            name: String,
        }
        let block: Block =
            serde_json::from_str(r#"{"input":{"k":"A","k":"B"},"name":"t"}"#).unwrap();
        assert!(block.input.duplicate_key);
        assert_eq!(block.input.value, json!({"k": "B"}));
        assert_eq!(block.name, "t");
    }
}
