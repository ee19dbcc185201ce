//! An event payload's longest text, cut out to be stored once.
//!
//! A message or a reply is a string inside its event's payload, and the
//! same string inside the transcript of every snapshot that shows it. A
//! snapshot stores such a string as a text blob under the SHA-256 of its
//! raw UTF-8 ([`stored_as_text`] decides which). A store that cuts the same
//! string out of the payload and keeps it as that very blob holds the text
//! once. The cut payload keeps `""` where the string was, so it is still
//! JSON (with an empty string in that place); [`splice_text`] puts the
//! canonical encoding back byte for byte.

use crate::canon::canonical_string;

use super::MIN_TEXT_BYTES;

/// Whether a string whose canonical JSON encoding is `encoded_len` bytes
/// long is stored as a text blob: the one rule for snapshot parts and for
/// event payloads, so that both name the same blob.
pub fn stored_as_text(encoded_len: usize) -> bool {
    encoded_len >= MIN_TEXT_BYTES
}

/// A payload with its longest text cut out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCut {
    /// The payload with the string's encoding replaced by `""`.
    pub stored: Vec<u8>,
    /// Where the `""` stands in `stored`.
    pub at: usize,
    /// The string's raw text (the blob to store under its SHA-256).
    pub text: String,
}

/// The empty string left in a cut payload.
const EMPTY: &[u8] = b"\"\"";

/// The byte span (quotes included) of every JSON string in `bytes`. A
/// quote outside a string always opens one, so this holds for any JSON;
/// for other bytes the caller's round-trip check decides.
fn strings(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        match open {
            None if b == b'"' => open = Some(i),
            None => {}
            Some(_) if escaped => escaped = false,
            Some(_) if b == b'\\' => escaped = true,
            Some(start) if b == b'"' => {
                spans.push((start, i + 1));
                open = None;
            }
            Some(_) => {}
        }
    }
    spans
}

/// Cuts the longest string that [`stored_as_text`] (the first of equals),
/// when its bytes are exactly its canonical encoding. `None`: nothing to
/// cut, and the payload is stored whole.
pub fn cut_text(payload: &[u8]) -> Option<TextCut> {
    let (start, end) = strings(payload)
        .into_iter()
        .filter(|(s, e)| stored_as_text(e - s))
        .fold(None, |best: Option<(usize, usize)>, (s, e)| match best {
            Some((bs, be)) if be - bs >= e - s => Some((bs, be)),
            _ => Some((s, e)),
        })?;
    let token = payload.get(start..end)?;
    let text = super::raw::text(token)?;
    if canonical_string(&text).ok()?.as_slice() != token {
        return None;
    }
    let mut stored = Vec::with_capacity(payload.len() - token.len() + EMPTY.len());
    stored.extend_from_slice(&payload[..start]);
    stored.extend_from_slice(EMPTY);
    stored.extend_from_slice(&payload[end..]);
    let cut = TextCut {
        stored,
        at: start,
        text,
    };
    // Byte-exact or not at all.
    (splice_text(&cut.stored, cut.at, &cut.text).as_deref() == Some(payload)).then_some(cut)
}

/// The payload `cut_text` was given: `text`'s canonical encoding in place
/// of the `""` at `at`. `None` when no `""` stands there.
pub fn splice_text(stored: &[u8], at: usize, text: &str) -> Option<Vec<u8>> {
    if stored.get(at..at.checked_add(EMPTY.len())?)? != EMPTY {
        return None;
    }
    let encoded = canonical_string(text).ok()?;
    let mut out = Vec::with_capacity(stored.len() + encoded.len());
    out.extend_from_slice(&stored[..at]);
    out.extend_from_slice(&encoded);
    out.extend_from_slice(&stored[at + EMPTY.len()..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::to_canonical_bytes;
    use proptest::prelude::*;

    fn payload(text: &str) -> Vec<u8> {
        to_canonical_bytes(&serde_json::json!({
            "chatId": 42,
            "note": "short \"quoted\" text",
            "text": text,
        }))
        .unwrap()
    }

    #[test]
    fn the_longest_text_is_cut_and_spliced_back_byte_exact() {
        let text = "canary-text \"quoted\" \\ \n\u{1F600}\u{7}".repeat(20);
        let bytes = payload(&text);
        let cut = cut_text(&bytes).expect("a long text is cut");
        assert_eq!(cut.text, text);
        assert_eq!(
            cut.stored,
            br#"{"chatId":42,"note":"short \"quoted\" text","text":""}"#
        );
        assert_eq!(&cut.stored[cut.at..cut.at + 2], b"\"\"");
        assert_eq!(splice_text(&cut.stored, cut.at, &cut.text).unwrap(), bytes);
        let stored: serde_json::Value = serde_json::from_slice(&cut.stored).unwrap();
        assert_eq!(stored["chatId"], 42, "the cut payload is still JSON");
    }

    #[test]
    fn a_short_text_or_a_non_canonical_one_is_not_cut() {
        let short = "s".repeat(MIN_TEXT_BYTES - 3);
        assert!(!stored_as_text(short.len() + 2));
        assert_eq!(cut_text(&payload(&short)), None);
        let long = "s".repeat(MIN_TEXT_BYTES - 2);
        assert!(cut_text(&payload(&long)).is_some(), "at the threshold");
        // `\/` decodes to `/`, whose canonical encoding is `/`.
        let loose = format!(r#"{{"text":"{}\/"}}"#, "s".repeat(MIN_TEXT_BYTES));
        assert_eq!(cut_text(loose.as_bytes()), None);
        assert_eq!(cut_text(b"not json \"unterminated"), None);
    }

    #[test]
    fn the_longest_of_two_texts_is_cut() {
        let (a, b) = ("a".repeat(300), "b".repeat(400));
        let bytes = to_canonical_bytes(&serde_json::json!({"new": b, "old": a})).unwrap();
        let cut = cut_text(&bytes).unwrap();
        assert_eq!(cut.text, b);
        assert_eq!(splice_text(&cut.stored, cut.at, &cut.text).unwrap(), bytes);
    }

    #[test]
    fn a_splice_where_no_empty_string_stands_is_refused() {
        let bytes = payload(&"t".repeat(400));
        let cut = cut_text(&bytes).unwrap();
        assert_eq!(splice_text(&cut.stored, cut.at + 1, "x"), None);
        assert_eq!(splice_text(&cut.stored, usize::MAX, "x"), None);
        assert_eq!(splice_text(b"", 0, "x"), None);
    }

    proptest! {
        #[test]
        fn any_payload_round_trips(text in "\\PC{0,400}", other in "\\PC{0,300}") {
            let bytes = to_canonical_bytes(&serde_json::json!({"a": other, "t": [text, 1]})).unwrap();
            if let Some(cut) = cut_text(&bytes) {
                prop_assert!(stored_as_text(to_canonical_bytes(&cut.text).unwrap().len()));
                prop_assert_eq!(splice_text(&cut.stored, cut.at, &cut.text).unwrap(), bytes);
            }
        }
    }
}
