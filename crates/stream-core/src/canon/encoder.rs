//! The canonical encoder: a serde serializer that writes RFC 8785 bytes
//! straight from a value, with the meaning `serde_json::to_value` gives it
//! (that data model is the contract: the tests hold the bytes to serde_jcs's
//! for every JSON value and typed payload). An object's members are written
//! as they come, then put in order once, when it closes; no intermediate
//! `Value` tree is built.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::ops::Range;

use serde::ser::{self, Serialize};
use serde_json::Value;

use super::{CanonError, canonical_string_into};

impl ser::Error for CanonError {
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        CanonError
    }
}

/// Integers up to this magnitude are exact as ECMAScript numbers and print
/// as their digits; larger ones print as the double they round to.
const EXACT_INTEGER: u64 = 1 << 53;

/// serde_json's name for a `RawValue` written as a struct.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// The order of an object's members: by their names' UTF-16 code units
/// (RFC 8785 section 3.2.3), not their UTF-8 bytes. The two differ only
/// where a name holds a character past U+FFFF; ASCII names (every field
/// name) compare as bytes.
pub(crate) fn member_order(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.cmp(b)
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

/// Writes one value's canonical bytes onto the end of `out`.
pub(super) struct Encoder<'a> {
    pub(super) out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    fn unsigned(self, negative: bool, magnitude: u64) {
        if magnitude <= EXACT_INTEGER {
            if negative && magnitude != 0 {
                self.out.push(b'-');
            }
            self.out
                .extend_from_slice(itoa::Buffer::new().format(magnitude).as_bytes());
        } else {
            let double = magnitude as f64;
            self.float(if negative { -double } else { double });
        }
    }

    /// A double as ECMAScript's `Number.prototype.toString` prints it; a
    /// non-finite one is `null`, as serde_json makes it.
    fn float(self, double: f64) {
        if double.is_finite() {
            self.out
                .extend_from_slice(ryu_js::Buffer::new().format_finite(double).as_bytes());
        } else {
            self.out.extend_from_slice(b"null");
        }
    }

    fn seq(self, close: &'static [u8]) -> Seq<'a> {
        self.out.push(b'[');
        Seq {
            out: self.out,
            first: true,
            close,
        }
    }

    /// `{"variant":` opening an enum variant's one-member object.
    fn variant(self, variant: &'static str) -> Self {
        self.out.push(b'{');
        canonical_string_into(self.out, variant);
        self.out.push(b':');
        self
    }

    fn object(self, close: &'static [u8]) -> Object<'a> {
        let start = self.out.len();
        Object {
            out: self.out,
            start,
            members: Vec::new(),
            key: None,
            close,
        }
    }
}

impl<'a> ser::Serializer for Encoder<'a> {
    type Ok = ();
    type Error = CanonError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), CanonError> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), CanonError> {
        self.serialize_i64(v.into())
    }

    fn serialize_i16(self, v: i16) -> Result<(), CanonError> {
        self.serialize_i64(v.into())
    }

    fn serialize_i32(self, v: i32) -> Result<(), CanonError> {
        self.serialize_i64(v.into())
    }

    fn serialize_i64(self, v: i64) -> Result<(), CanonError> {
        self.unsigned(v < 0, v.unsigned_abs());
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Result<(), CanonError> {
        // serde_json's data model holds 64-bit integers only.
        match (u64::try_from(v), i64::try_from(v)) {
            (Ok(u), _) => self.serialize_u64(u),
            (Err(_), Ok(i)) => self.serialize_i64(i),
            (Err(_), Err(_)) => Err(CanonError),
        }
    }

    fn serialize_u8(self, v: u8) -> Result<(), CanonError> {
        self.serialize_u64(v.into())
    }

    fn serialize_u16(self, v: u16) -> Result<(), CanonError> {
        self.serialize_u64(v.into())
    }

    fn serialize_u32(self, v: u32) -> Result<(), CanonError> {
        self.serialize_u64(v.into())
    }

    fn serialize_u64(self, v: u64) -> Result<(), CanonError> {
        self.unsigned(false, v);
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Result<(), CanonError> {
        self.serialize_u64(u64::try_from(v).map_err(|_| CanonError)?)
    }

    fn serialize_f32(self, v: f32) -> Result<(), CanonError> {
        self.float(v.into());
        Ok(())
    }

    fn serialize_f64(self, v: f64) -> Result<(), CanonError> {
        self.float(v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), CanonError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result<(), CanonError> {
        canonical_string_into(self.out, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), CanonError> {
        // As serde_json: an array of numbers.
        use ser::SerializeSeq as _;
        let mut seq = self.seq(b"]");
        for byte in v {
            seq.serialize_element(byte)?;
        }
        seq.end()
    }

    fn serialize_none(self) -> Result<(), CanonError> {
        self.serialize_unit()
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), CanonError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), CanonError> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), CanonError> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), CanonError> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        let this = self.variant(variant);
        value.serialize(Encoder {
            out: &mut *this.out,
        })?;
        this.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, CanonError> {
        Ok(self.seq(b"]"))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Seq<'a>, CanonError> {
        Ok(self.seq(b"]"))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, CanonError> {
        Ok(self.seq(b"]"))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, CanonError> {
        Ok(self.variant(variant).seq(b"]}"))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Object<'a>, CanonError> {
        Ok(self.object(b"}"))
    }

    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Object<'a>, CanonError> {
        if name == RAW_VALUE {
            // Its one field is JSON text: written as the value it parses to.
            return Ok(self.object(b""));
        }
        Ok(self.object(b"}"))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Object<'a>, CanonError> {
        Ok(self.variant(variant).object(b"}}"))
    }
}

/// An array being written.
pub(super) struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// `]`, or `]}` closing a tuple variant too.
    close: &'static [u8],
}

impl Seq<'_> {
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), CanonError> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Encoder {
            out: &mut *self.out,
        })
    }

    fn close(self) -> Result<(), CanonError> {
        self.out.extend_from_slice(self.close);
        Ok(())
    }
}

/// serde's four array traits, each an element at a time and a close.
macro_rules! array_trait {
    ($trait:ident, $method:ident) => {
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = CanonError;

            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), CanonError> {
                self.element(value)
            }

            fn end(self) -> Result<(), CanonError> {
                self.close()
            }
        }
    };
}

array_trait!(SerializeSeq, serialize_element);
array_trait!(SerializeTuple, serialize_element);
array_trait!(SerializeTupleStruct, serialize_field);
array_trait!(SerializeTupleVariant, serialize_field);

/// An object being written: each member's value is written after `start`
/// as it comes, and [`Object::close`] rewrites them in canonical order.
pub(super) struct Object<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    members: Vec<(Cow<'static, str>, Range<usize>)>,
    /// A map's key waiting for its value.
    key: Option<Cow<'static, str>>,
    /// `}`, `}}` closing a struct variant too, or nothing for a `RawValue`.
    close: &'static [u8],
}

impl Object<'_> {
    fn member<T: ?Sized + Serialize>(
        &mut self,
        name: Cow<'static, str>,
        value: &T,
    ) -> Result<(), CanonError> {
        let at = self.out.len();
        value.serialize(Encoder {
            out: &mut *self.out,
        })?;
        self.members.push((name, at..self.out.len()));
        Ok(())
    }

    fn close(mut self) -> Result<(), CanonError> {
        if self.close.is_empty() {
            return Ok(()); // a RawValue, written whole by `raw`
        }
        let values = self.out.split_off(self.start);
        // Stable: of members with one name, the last written is kept, as
        // a map keeps the last insertion.
        self.members.sort_by(|(a, _), (b, _)| member_order(a, b));
        self.out.push(b'{');
        let mut first = true;
        for (i, (name, range)) in self.members.iter().enumerate() {
            if self
                .members
                .get(i + 1)
                .is_some_and(|(next, _)| next == name)
            {
                continue;
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            canonical_string_into(self.out, name);
            self.out.push(b':');
            let value = values
                .get(range.start - self.start..range.end - self.start)
                .ok_or(CanonError)?;
            self.out.extend_from_slice(value);
        }
        self.out.extend_from_slice(self.close);
        Ok(())
    }

    /// A struct's field; a `RawValue`'s one field is its JSON text.
    fn field<T: ?Sized + Serialize>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), CanonError> {
        if self.close.is_empty() {
            return match name {
                RAW_VALUE => self.raw(value),
                _ => Err(CanonError),
            };
        }
        self.member(Cow::Borrowed(name), value)
    }

    /// A `RawValue`'s JSON text, written as the value it parses to.
    fn raw<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), CanonError> {
        let Value::String(text) = serde_json::to_value(value).map_err(|_| CanonError)? else {
            return Err(CanonError);
        };
        let parsed: Value = serde_json::from_str(&text).map_err(|_| CanonError)?;
        parsed.serialize(Encoder {
            out: &mut *self.out,
        })
    }
}

/// A map key as serde_json names it: a string, or an integer's digits.
fn key_name<T: ?Sized + Serialize>(key: &T) -> Result<String, CanonError> {
    match serde_json::to_value(key).map_err(|_| CanonError)? {
        Value::String(name) => Ok(name),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null | Value::Number(_) | Value::Array(_) | Value::Object(_) => Err(CanonError),
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = CanonError;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), CanonError> {
        self.key = Some(Cow::Owned(key_name(key)?));
        Ok(())
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), CanonError> {
        let name = self.key.take().ok_or(CanonError)?;
        self.member(name, value)
    }

    fn end(self) -> Result<(), CanonError> {
        self.close()
    }
}

/// serde's two struct traits: a named field at a time, and a close.
macro_rules! struct_trait {
    ($trait:ident) => {
        impl ser::$trait for Object<'_> {
            type Ok = ();
            type Error = CanonError;

            fn serialize_field<T: ?Sized + Serialize>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), CanonError> {
                self.field(name, value)
            }

            fn end(self) -> Result<(), CanonError> {
                self.close()
            }
        }
    };
}

struct_trait!(SerializeStruct);
struct_trait!(SerializeStructVariant);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::value::RawValue;

    use crate::canon::to_canonical_bytes;

    #[derive(Debug, Clone, Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        Newtype(u32),
        Tuple(i64, String),
        Struct { z: bool, a: Option<String> },
    }

    #[derive(Debug, Clone, Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        One { value: i32 },
        Two { text: String, n: u8 },
    }

    #[derive(Debug, Clone, Serialize)]
    struct Inner {
        #[serde(skip_serializing_if = "Option::is_none")]
        maybe: Option<u64>,
        list: Vec<i8>,
    }

    /// Every serde shape a payload may take, with member names that sort
    /// differently by UTF-16 and by declaration.
    #[derive(Debug, Clone, Serialize)]
    struct Typed {
        zeta: String,
        #[serde(rename = "\u{e000}")]
        private_use: u16,
        #[serde(rename = "\u{1f600}")]
        astral: i128,
        alpha: Option<Inner>,
        shape: Shape,
        tagged: Tagged,
        map: BTreeMap<String, Vec<Shape>>,
        numbered: BTreeMap<u32, bool>,
        pair: (char, u128),
        #[serde(flatten)]
        flattened: BTreeMap<String, i64>,
        unit: (),
        big: u64,
    }

    fn text() -> impl Strategy<Value = String> {
        "[\\x00-\\x7f]{0,6}|\\PC{0,4}|[a\\u{e000}\\u{ffff}\\u{10000}\\u{1f600}]{0,3}"
    }

    fn shape() -> impl Strategy<Value = Shape> {
        prop_oneof![
            Just(Shape::Unit),
            any::<u32>().prop_map(Shape::Newtype),
            (any::<i64>(), text()).prop_map(|(n, t)| Shape::Tuple(n, t)),
            (any::<bool>(), proptest::option::of(text())).prop_map(|(z, a)| Shape::Struct { z, a }),
        ]
    }

    fn typed() -> impl Strategy<Value = Typed> {
        let tagged = prop_oneof![
            any::<i32>().prop_map(|value| Tagged::One { value }),
            (text(), any::<u8>()).prop_map(|(text, n)| Tagged::Two { text, n }),
        ];
        let inner = proptest::option::of(
            (
                proptest::option::of(any::<u64>()),
                proptest::collection::vec(any::<i8>(), 0..4),
            )
                .prop_map(|(maybe, list)| Inner { maybe, list }),
        );
        (
            (text(), any::<u16>(), any::<i64>(), inner, shape(), tagged),
            (
                proptest::collection::btree_map(
                    text(),
                    proptest::collection::vec(shape(), 0..3),
                    0..4,
                ),
                proptest::collection::btree_map(any::<u32>(), any::<bool>(), 0..4),
                (any::<char>(), any::<u64>()),
                // Flattened names may repeat a field's: the map's value wins.
                proptest::collection::btree_map("[a-z]{1,5}|zeta|big", any::<i64>(), 0..4),
                any::<u64>(),
            ),
        )
            .prop_map(
                |(
                    (zeta, private_use, astral, alpha, shape, tagged),
                    (map, numbered, pair, flattened, big),
                )| {
                    Typed {
                        zeta,
                        private_use,
                        astral: astral.into(),
                        alpha,
                        shape,
                        tagged,
                        map,
                        numbered,
                        pair: (pair.0, pair.1.into()),
                        flattened,
                        unit: (),
                        big,
                    }
                },
            )
    }

    proptest! {
        /// The encoder gives a typed value the bytes of the `Value`
        /// serde_json makes of it, which the JSON-value proptest holds to
        /// serde_jcs, and serde_jcs's own bytes for the typed value.
        #[test]
        fn typed_values_encode_as_serde_jcs_encodes_them(value in typed()) {
            let direct = to_canonical_bytes(&value).unwrap();
            let as_value = serde_json::to_value(&value).unwrap();
            prop_assert_eq!(&direct, &to_canonical_bytes(&as_value).unwrap());
            prop_assert_eq!(&direct, &serde_jcs::to_vec(&as_value).unwrap());
        }
    }

    #[test]
    fn a_raw_value_is_encoded_as_the_json_it_holds() {
        let raw = RawValue::from_string(r#"{ "b": [1.0, "x"], "a": null }"#.to_owned()).unwrap();
        assert_eq!(
            to_canonical_bytes(&raw).unwrap(),
            br#"{"a":null,"b":[1,"x"]}"#
        );
    }

    #[test]
    fn what_serde_json_refuses_is_refused() {
        assert!(to_canonical_bytes(&(1u128 << 64)).is_err());
        assert!(to_canonical_bytes(&(i128::MIN)).is_err());
        let array_keys = BTreeMap::from([(vec![1u8], 1)]);
        assert!(to_canonical_bytes(&array_keys).is_err());
        assert!(serde_json::to_value(&array_keys).is_err());
        assert_eq!(to_canonical_bytes(&f64::NAN).unwrap(), b"null");
    }
}
