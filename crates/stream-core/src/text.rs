//! Text with length bounds counted in Unicode scalar values, the unit JSON
//! Schema's `minLength`/`maxLength` count (RFC 8259 strings, not UTF-16).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A text length was outside its bounds. Carries counts, never content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("text length {len} is outside {min}..={max} characters")]
pub struct TextBoundsError {
    /// The length found, in Unicode scalar values.
    pub len: usize,
    /// The smallest allowed length.
    pub min: usize,
    /// The largest allowed length.
    pub max: usize,
}

/// The length of `s` in Unicode scalar values.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// A string of `MIN..=MAX` Unicode scalar values.
///
/// Its `Debug` shows the length only: bounded texts carry message, proposal
/// and memory content, which must never reach a log.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BoundedText<const MIN: usize, const MAX: usize>(String);

impl<const MIN: usize, const MAX: usize> BoundedText<MIN, MAX> {
    /// Checks the bounds.
    pub fn new(s: impl Into<String>) -> Result<Self, TextBoundsError> {
        let s = s.into();
        let len = char_len(&s);
        if (MIN..=MAX).contains(&len) {
            Ok(Self(s))
        } else {
            Err(TextBoundsError {
                len,
                min: MIN,
                max: MAX,
            })
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }

    /// The length in Unicode scalar values.
    pub fn char_len(&self) -> usize {
        char_len(&self.0)
    }

    /// The text with its annotation delimiters neutralized
    /// ([`crate::annotation::neutralize`]): one character for one, so the
    /// bounds still hold.
    pub fn with_annotations_neutralized(self) -> Self {
        match crate::annotation::neutralize(&self.0) {
            std::borrow::Cow::Owned(text) => Self(text),
            std::borrow::Cow::Borrowed(_) => self,
        }
    }
}

impl ReplyText {
    /// The reply with [`crate::annotation::CUT`] appended: the one way a
    /// reply cut at the token limit says so. A reply too long to take the
    /// marker loses its last characters to it; the cut stays announced.
    pub fn marked_cut(self) -> Self {
        let marker = char_len(crate::annotation::CUT);
        let keep = REPLY_MAX.saturating_sub(marker);
        let mut text: String = self.0.chars().take(keep).collect();
        text.push_str(crate::annotation::CUT);
        Self(text)
    }
}

impl<const MIN: usize, const MAX: usize> fmt::Debug for BoundedText<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BoundedText<{MIN},{MAX}>(len={})", self.char_len())
    }
}

impl<const MIN: usize, const MAX: usize> Serialize for BoundedText<MIN, MAX> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de, const MIN: usize, const MAX: usize> Deserialize<'de> for BoundedText<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

/// A conversation reply: `conversation-text@1` allows 1–4,096 characters.
pub type ReplyText = BoundedText<1, REPLY_MAX>;

/// The longest reply, in Unicode scalar values.
pub use crate::bounds::REPLY_MAX;
/// `request_memory_change.proposed_text`: 1–32,768 characters.
pub type MemoryText = BoundedText<1, { crate::bounds::PROPOSED_TEXT_MAX }>;
/// A proposal's `reason`: 1–1,000 characters.
pub type ReasonText = BoundedText<1, { crate::bounds::REASON_MAX }>;

/// A short identifier-like label (agent ids, actors, submission ids):
/// 1–128 characters of `[A-Za-z0-9._:@/+-]`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(String);

/// A label was empty, too long, or had a character outside its alphabet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label must be 1-128 characters of [A-Za-z0-9._:@/+-]")]
pub struct LabelError;

impl Label {
    /// Checks the alphabet and length.
    pub fn new(s: impl Into<String>) -> Result<Self, LabelError> {
        let s = s.into();
        let ok = (1..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:@/+-".contains(&b));
        if ok { Ok(Self(s)) } else { Err(LabelError) }
    }

    /// The label.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Label({})", self.0)
    }
}

impl Serialize for Label {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Label {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bounds_count_scalar_values_not_bytes_or_utf16() {
        // Four emoji: 16 UTF-8 bytes, 8 UTF-16 units, 4 scalar values.
        let text = "😀😀😀😀";
        assert!(BoundedText::<1, 4>::new(text).is_ok());
        assert_eq!(
            BoundedText::<1, 3>::new(text).unwrap_err(),
            TextBoundsError {
                len: 4,
                min: 1,
                max: 3
            }
        );
        assert!(BoundedText::<1, 4>::new("").is_err());
    }

    #[test]
    fn debug_never_shows_content() {
        let text = ReasonText::new("canary-debug-7f3a").unwrap();
        assert_eq!(format!("{text:?}"), "BoundedText<1,1000>(len=17)");
    }

    #[test]
    fn a_cut_reply_ends_with_the_marker_and_stays_within_its_bound() {
        use crate::annotation::{CUT, was_cut};
        let short = ReplyText::new("The list goes on: one, two").unwrap();
        let out = short.marked_cut();
        assert_eq!(out.as_str(), format!("The list goes on: one, two{CUT}"));
        assert!(was_cut(out.as_str()));
        let room = REPLY_MAX - char_len(CUT);
        for len in [room, room + 1, REPLY_MAX] {
            let out = ReplyText::new("é".repeat(len)).unwrap().marked_cut();
            assert!(
                out.char_len() <= REPLY_MAX && was_cut(out.as_str()),
                "{len}"
            );
            assert_eq!(
                out.as_str().strip_suffix(CUT),
                Some("é".repeat(room).as_str())
            );
            assert!(ReplyText::new(out.into_string()).is_ok());
        }
    }

    #[test]
    fn a_reply_at_its_bound_stays_within_it_once_neutralized() {
        let full = ReplyText::new("⟨⟩".repeat(2048)).unwrap();
        let out = full.with_annotations_neutralized();
        assert_eq!(out.as_str(), "‹›".repeat(2048));
        assert_eq!(out.char_len(), 4096);
        let plain = ReplyText::new("Canberra.").unwrap();
        assert_eq!(plain.with_annotations_neutralized().as_str(), "Canberra.");
    }

    #[test]
    fn deserialization_enforces_bounds() {
        assert!(serde_json::from_str::<ReasonText>("\"\"").is_err());
        let long = format!("\"{}\"", "x".repeat(1001));
        assert!(serde_json::from_str::<ReasonText>(&long).is_err());
    }

    proptest! {
        #[test]
        fn accepted_exactly_when_char_count_is_in_bounds(s in "\\PC{0,12}") {
            let n = s.chars().count();
            prop_assert_eq!(BoundedText::<2, 8>::new(s).is_ok(), (2..=8).contains(&n));
        }
    }
}
