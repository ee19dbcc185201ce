//! A strict reader of canonical JSON that keeps every value's own bytes,
//! so that the cutter builds parts from slices of the document instead of
//! parsing it into a tree and encoding that tree again. In canonical JSON
//! (RFC 8785) a value's canonical encoding is exactly its slice of the
//! whole. Anything else — whitespace, members out of order or repeated, an
//! escape or a number that canonical JSON writes otherwise, nesting deeper
//! than serde_json reads — is refused, and the cutter keeps such bytes
//! whole, as it did when it re-encoded and compared.

use std::cmp::Ordering;

use crate::canon::{member_order, to_canonical_bytes};

/// One value and its bytes in the document.
pub(super) enum Raw<'a> {
    Array(Vec<Raw<'a>>),
    /// Members in canonical order, each name as its encoded string.
    Object(Vec<(&'a [u8], Raw<'a>)>),
    /// The encoded string, quotes included.
    String(&'a [u8]),
    /// `null`, `true`, `false` or a number.
    Scalar(&'a [u8]),
}

/// serde_json's nesting limit (127 arrays or objects deep): a deeper
/// document did not parse before.
const MAX_NESTING: usize = 127;

/// `bytes` as one canonical JSON value, or `None`.
pub(super) fn parse(bytes: &[u8]) -> Option<Raw<'_>> {
    let mut reader = Reader {
        bytes,
        at: 0,
        depth: 0,
    };
    let value = reader.value()?;
    (reader.at == bytes.len()).then_some(value)
}

/// The decoded text of an encoded string (quotes included): the one
/// decoder of the cutter and of the text an event's payload gives up.
pub(super) fn text(encoded: &[u8]) -> Option<String> {
    serde_json::from_slice(encoded).ok()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn value(&mut self) -> Option<Raw<'a>> {
        match self.peek()? {
            b'{' => self.nested(Self::object),
            b'[' => self.nested(Self::array),
            b'"' => self.string().map(Raw::String),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Option<Raw<'a>>) -> Option<Raw<'a>> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return None;
        }
        let value = read(self);
        self.depth -= 1;
        value
    }

    fn array(&mut self) -> Option<Raw<'a>> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        let mut closed = self.eat(b']').is_some();
        while !closed {
            items.push(self.value()?);
            closed = self.comma_or(b']')?;
        }
        Some(Raw::Array(items))
    }

    /// After an element: `true` at `close`, `false` at a comma.
    fn comma_or(&mut self, close: u8) -> Option<bool> {
        let byte = self.peek()?;
        self.at += 1;
        match byte {
            b',' => Some(false),
            _ if byte == close => Some(true),
            _ => None,
        }
    }

    fn object(&mut self) -> Option<Raw<'a>> {
        self.eat(b'{')?;
        let mut members: Vec<(&'a [u8], Raw<'a>)> = Vec::new();
        let mut closed = self.eat(b'}').is_some();
        while !closed {
            let name = self.string()?;
            // Strictly increasing: out of order or repeated is not canonical.
            if let Some((previous, _)) = members.last()
                && names_order(previous, name)? != Ordering::Less
            {
                return None;
            }
            self.eat(b':')?;
            members.push((name, self.value()?));
            closed = self.comma_or(b'}')?;
        }
        Some(Raw::Object(members))
    }

    /// An encoded string, as serde_json's escaper (the canonical string
    /// encoder) writes it: `"` and `\` escaped, U+0000 to U+001F as `\b \t
    /// \n \f \r` or `\u00xx` in lowercase, everything else as UTF-8.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        self.eat(b'"')?;
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => break,
                b'\\' => {
                    let escape = self.peek()?;
                    self.at += 1;
                    match escape {
                        b'"' | b'\\' | b'b' | b't' | b'n' | b'f' | b'r' => {}
                        b'u' => self.control_escape()?,
                        _ => return None,
                    }
                }
                0x00..=0x1f => return None,
                _ => {}
            }
        }
        let encoded = self.bytes.get(start..self.at)?;
        std::str::from_utf8(encoded).ok()?;
        Some(encoded)
    }

    /// The four digits of `\u00xx`: a control character without a short
    /// escape, in lowercase hex.
    fn control_escape(&mut self) -> Option<()> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        if &digits[..2] != b"00" || !digits[2..].iter().all(lower_hex) {
            return None;
        }
        let code = u8::from_str_radix(std::str::from_utf8(&digits[2..]).ok()?, 16).ok()?;
        match code {
            0x08 | 0x09 | 0x0a | 0x0c | 0x0d | 0x20.. => None,
            _ => Some(()),
        }
    }

    fn word(&mut self, word: &'static [u8]) -> Option<Raw<'a>> {
        let at = self.at;
        let found = self.bytes.get(at..at + word.len())?;
        (found == word).then(|| {
            self.at += word.len();
            Raw::Scalar(found)
        })
    }

    /// A number token, kept only when it is what the canonical encoder
    /// writes for its value.
    fn number(&mut self) -> Option<Raw<'a>> {
        let start = self.at;
        while let Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let token = self.bytes.get(start..self.at)?;
        let value: serde_json::Number = serde_json::from_slice(token).ok()?;
        (to_canonical_bytes(&value).ok()? == token).then_some(Raw::Scalar(token))
    }
}

/// The canonical order of two encoded member names (UTF-16 code units of
/// the text); names with escapes or beyond ASCII are decoded first.
fn names_order(a: &[u8], b: &[u8]) -> Option<Ordering> {
    let plain = |n: &[u8]| n.is_ascii() && !n.contains(&b'\\');
    if plain(a) && plain(b) {
        return Some(a.cmp(b));
    }
    Some(member_order(&text(a)?, &text(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(value: &serde_json::Value) -> Vec<u8> {
        to_canonical_bytes(value).unwrap()
    }

    #[test]
    fn canonical_json_is_read_with_each_value_s_own_bytes() {
        let doc = serde_json::json!({
            "a": [1, -2.5, 1e21, null, true, false, "x\u{1}\n\"\\\u{7f}\u{1F600}"],
            "\u{e000}": {}, "\u{1F600}": [], "b": {"c": "d"},
        });
        let bytes = canonical(&doc);
        let Some(Raw::Object(members)) = parse(&bytes) else {
            panic!("canonical JSON refused");
        };
        let names: Vec<String> = members.iter().map(|(n, _)| text(n).unwrap()).collect();
        assert_eq!(names, ["a", "b", "\u{1F600}", "\u{e000}"]);
        let Raw::Array(items) = &members[0].1 else {
            panic!("not an array");
        };
        let Raw::String(s) = &items[6] else {
            panic!("not a string");
        };
        assert_eq!(*s, canonical(&doc["a"][6]).as_slice());
    }

    #[test]
    fn anything_canonical_json_writes_otherwise_is_refused() {
        for bytes in [
            &b"{\"b\":1, \"a\":2}"[..],
            b"{\"b\":1,\"a\":2}",
            b"{\"a\":1,\"a\":2}",
            b"[1.0]",
            b"[1E3]",
            b"[-0]",
            b"[\"\\/\"]",
            b"[\"\\u0041\"]",
            b"[\"\\u000A\"]",
            b"[\"\\u000a\"]",
            b"[\"\x01\"]",
            b"[\"\xff\"]",
            b"[tru]",
            b"[1,]",
            b"[] ",
            b"",
        ] {
            assert!(
                parse(bytes).is_none(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(parse(deep.as_bytes()).is_none());
        let deepest = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert!(parse(deepest.as_bytes()).is_some());
        // The limit is serde_json's.
        assert!(serde_json::from_str::<serde_json::Value>(&deepest).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
    }

    /// Documents with long strings (text parts), long arrays (runs), ids
    /// (packed), escapes, numbers of every kind and names that UTF-16
    /// sorts apart from UTF-8.
    fn document() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        crate::canon::any_json(
            "[\\x00-\\x7f]{0,6}|\\PC{0,40}|x{150,400}|[a\\u{e000}\\u{1f600}\\n\\u{1}\"\\\\]{0,250}|[0-9a-f]{64}",
            (5, 400),
            40,
            8,
        )
    }

    fn rejoined(split: &super::super::Split) -> Vec<u8> {
        let root = crate::ids::Sha256Hex::from_bytes(split.root);
        let check = super::super::PartCheck::EachPart;
        super::super::join_levels(&root, usize::MAX, check, |level| {
            Ok::<_, ()>(
                level
                    .iter()
                    .map(|sha| Some(split.parts.iter().find(|(s, _)| s == sha)?.1.clone()))
                    .collect(),
            )
        })
        .unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]
        /// Cut from its own slices, a canonical document rejoins byte-exact;
        /// serde_json's compact bytes, where they are not canonical, stay
        /// one whole part (and rejoin byte-exact too).
        #[test]
        fn canonical_documents_rejoin_and_anything_else_stays_whole(value in document()) {
            let bytes = canonical(&value);
            let split = super::super::split(&bytes);
            proptest::prop_assert_eq!(rejoined(&split), bytes.clone());
            let compact = serde_json::to_vec(&value).unwrap();
            let split = super::super::split(&compact);
            proptest::prop_assert_eq!(rejoined(&split), compact.clone());
            if compact != bytes {
                proptest::prop_assert_eq!(split.parts.len(), 1);
            }
        }
    }
}
