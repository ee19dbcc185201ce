//! Content-addressed parts of a canonical JSON document.
//!
//! A document's canonical bytes are cut into parts: every value whose
//! canonical encoding is at least [`MIN_PART_BYTES`] long is stored once, as
//! its own part, and its parent holds a reference in its place. A part is
//! `thestream-part/1 N\n`, then N lines `OFFSET SHA256\n`, then its literal
//! bytes; each reference is inserted at its offset into the literal. Equal
//! values make equal parts, so documents sharing a value share its part.
//!
//! [`join`] reassembles the exact bytes, checking every part against its
//! hash; a caller checks the whole against the document's own id.

use serde_json::Value;

use crate::canon::{CanonError, sha256, to_canonical_bytes};
use crate::ids::Sha256Hex;

/// Values at least this long (canonical bytes) become their own part.
pub const MIN_PART_BYTES: usize = 192;

/// References nest at most this deep.
pub const MAX_DEPTH: usize = 32;

const HEADER: &[u8] = b"thestream-part/1 ";

/// A document cut into parts.
#[derive(Debug)]
pub struct Split {
    /// The part the document starts from.
    pub root: Sha256Hex,
    /// Every part, root included, with its hash; a shared value once.
    pub parts: Vec<(Sha256Hex, Vec<u8>)>,
}

/// Why a document could not be reassembled. Carries part hashes only.
#[derive(Debug, thiserror::Error)]
pub enum JoinError<E> {
    /// The part is not stored.
    #[error("part {0} is missing")]
    Missing(Sha256Hex),
    /// The stored bytes do not hash to the part's key.
    #[error("part {0} is altered")]
    Altered(Sha256Hex),
    /// The part does not parse.
    #[error("part {0} is malformed")]
    Malformed(Sha256Hex),
    /// References nest deeper than [`MAX_DEPTH`] or the result exceeds its cap.
    #[error("parts nest too deep or reassemble too large")]
    TooLarge,
    /// Fetching a part failed.
    #[error("fetching a part failed")]
    Fetch(E),
}

/// A value's literal bytes with references cut out.
struct Node {
    literal: Vec<u8>,
    refs: Vec<(usize, Sha256Hex)>,
    /// Length of the value's full canonical bytes.
    len: usize,
}

impl Node {
    fn push(&mut self, bytes: &[u8]) {
        self.literal.extend_from_slice(bytes);
        self.len += bytes.len();
    }

    fn child(&mut self, child: Node, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) {
        self.len += child.len;
        if child.len >= MIN_PART_BYTES {
            let bytes = child.encode();
            let sha = sha256(&bytes);
            self.refs.push((self.literal.len(), sha.clone()));
            if !parts.iter().any(|(s, _)| *s == sha) {
                parts.push((sha, bytes));
            }
        } else {
            let base = self.literal.len();
            self.refs
                .extend(child.refs.into_iter().map(|(at, sha)| (base + at, sha)));
            self.literal.extend_from_slice(&child.literal);
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.literal.len() + 24 + self.refs.len() * 72);
        out.extend_from_slice(HEADER);
        out.extend_from_slice(self.refs.len().to_string().as_bytes());
        out.push(b'\n');
        for (at, sha) in &self.refs {
            out.extend_from_slice(at.to_string().as_bytes());
            out.push(b' ');
            out.extend_from_slice(sha.as_str().as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(&self.literal);
        out
    }
}

fn node(value: &Value, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) -> Result<Node, CanonError> {
    let mut n = Node {
        literal: Vec::new(),
        refs: Vec::new(),
        len: 0,
    };
    match value {
        Value::Array(items) => {
            n.push(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    n.push(b",");
                }
                let child = node(item, parts)?;
                n.child(child, parts);
            }
            n.push(b"]");
        }
        Value::Object(map) => {
            // RFC 8785: members sorted by their names' UTF-16 code units.
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            n.push(b"{");
            for (i, (name, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    n.push(b",");
                }
                n.push(&to_canonical_bytes(name)?);
                n.push(b":");
                let child = node(item, parts)?;
                n.child(child, parts);
            }
            n.push(b"}");
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {
            n.push(&to_canonical_bytes(value)?);
        }
    }
    Ok(n)
}

/// Cuts `bytes` into parts. Bytes that are not canonical JSON (or do not
/// reassemble exactly) are kept whole as a single root part, so any bytes
/// round-trip.
pub fn split(bytes: &[u8]) -> Split {
    let whole = || {
        let node = Node {
            literal: bytes.to_vec(),
            refs: Vec::new(),
            len: bytes.len(),
        };
        let encoded = node.encode();
        let root = sha256(&encoded);
        Split {
            root: root.clone(),
            parts: vec![(root, encoded)],
        }
    };
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return whole();
    };
    let mut parts = Vec::new();
    let Ok(root) = node(&value, &mut parts) else {
        return whole();
    };
    let encoded = root.encode();
    let root_sha = sha256(&encoded);
    parts.push((root_sha.clone(), encoded));
    let rejoined = join(&root_sha, bytes.len(), |sha| {
        Ok::<_, ()>(parts.iter().find(|(s, _)| s == sha).map(|(_, b)| b.clone()))
    });
    match rejoined {
        Ok(again) if again == bytes => Split {
            root: root_sha,
            parts,
        },
        Ok(_) | Err(_) => whole(),
    }
}

/// One parsed part: literal bytes and where each reference goes.
fn parse(bytes: &[u8]) -> Option<(Vec<(usize, Sha256Hex)>, usize)> {
    let rest = bytes.strip_prefix(HEADER)?;
    let line_end = |b: &[u8]| b.iter().position(|c| *c == b'\n');
    let end = line_end(rest)?;
    let count: usize = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let mut at = HEADER.len() + end + 1;
    let mut refs = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let line = &bytes[at..];
        let end = line_end(line)?;
        let text = std::str::from_utf8(&line[..end]).ok()?;
        let (offset, hash) = text.split_once(' ')?;
        refs.push((offset.parse().ok()?, Sha256Hex::parse(hash).ok()?));
        at += end + 1;
    }
    let literal_len = bytes.len() - at;
    let ordered = refs.windows(2).all(|w| w[0].0 <= w[1].0);
    let inside = refs.last().is_none_or(|(o, _)| *o <= literal_len);
    (ordered && inside).then_some((refs, at))
}

/// Reassembles the document rooted at `root`, fetching parts by hash and
/// refusing one whose bytes do not hash to it. `max_bytes` caps the result.
pub fn join<E>(
    root: &Sha256Hex,
    max_bytes: usize,
    mut fetch: impl FnMut(&Sha256Hex) -> Result<Option<Vec<u8>>, E>,
) -> Result<Vec<u8>, JoinError<E>> {
    let mut out = Vec::new();
    append(root, &mut fetch, &mut out, max_bytes, 0)?;
    Ok(out)
}

fn append<E>(
    sha: &Sha256Hex,
    fetch: &mut impl FnMut(&Sha256Hex) -> Result<Option<Vec<u8>>, E>,
    out: &mut Vec<u8>,
    max_bytes: usize,
    depth: usize,
) -> Result<(), JoinError<E>> {
    if depth > MAX_DEPTH {
        return Err(JoinError::TooLarge);
    }
    let bytes = fetch(sha)
        .map_err(JoinError::Fetch)?
        .ok_or_else(|| JoinError::Missing(sha.clone()))?;
    if sha256(&bytes) != *sha {
        return Err(JoinError::Altered(sha.clone()));
    }
    let (refs, start) = parse(&bytes).ok_or_else(|| JoinError::Malformed(sha.clone()))?;
    let literal = &bytes[start..];
    let mut done = 0;
    for (at, child) in &refs {
        out.extend_from_slice(&literal[done..*at]);
        done = *at;
        append(child, fetch, out, max_bytes, depth + 1)?;
    }
    out.extend_from_slice(&literal[done..]);
    if out.len() > max_bytes {
        return Err(JoinError::TooLarge);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejoin(split: &Split) -> Vec<u8> {
        join(&split.root, usize::MAX, |sha| {
            Ok::<_, ()>(
                split
                    .parts
                    .iter()
                    .find(|(s, _)| s == sha)
                    .map(|(_, b)| b.clone()),
            )
        })
        .unwrap()
    }

    #[test]
    fn canonical_documents_split_and_rejoin_byte_exact() {
        let long = "x".repeat(500);
        let doc = serde_json::json!({
            "b": [1, 2.5, {"k": long.clone()}, null, true, "\u{1F600}\u{e000}"],
            "a": {"\u{e000}": long.clone(), "\u{1F600}": long, "z": "short"},
        });
        let bytes = to_canonical_bytes(&doc).unwrap();
        let split = split(&bytes);
        assert!(split.parts.len() > 1, "long values became parts");
        assert_eq!(rejoin(&split), bytes);
    }

    #[test]
    fn equal_values_share_one_part() {
        let long = "y".repeat(400);
        let one = to_canonical_bytes(&serde_json::json!({"m": long, "n": 1})).unwrap();
        let two = to_canonical_bytes(&serde_json::json!({"m": long, "n": 2})).unwrap();
        let (a, b) = (split(&one), split(&two));
        assert_ne!(a.root, b.root);
        let shared = a.parts.iter().filter(|p| b.parts.contains(p)).count();
        assert_eq!(shared, 1);
    }

    #[test]
    fn bytes_that_are_not_canonical_json_stay_whole() {
        for bytes in [&b"not json"[..], b"{\"b\":1, \"a\":2}", b""] {
            let split = split(bytes);
            assert_eq!(split.parts.len(), 1);
            assert_eq!(rejoin(&split), bytes);
        }
    }

    #[test]
    fn a_missing_or_altered_part_is_refused() {
        let bytes = to_canonical_bytes(&serde_json::json!({"m": "z".repeat(400)})).unwrap();
        let split = split(&bytes);
        let child = split.parts.iter().find(|(s, _)| *s != split.root).unwrap();
        let missing = join(&split.root, usize::MAX, |sha| {
            Ok::<_, ()>((sha != &child.0).then(|| {
                split
                    .parts
                    .iter()
                    .find(|(s, _)| s == sha)
                    .unwrap()
                    .1
                    .clone()
            }))
        });
        assert!(matches!(missing, Err(JoinError::Missing(s)) if s == child.0));
        let altered = join(&split.root, usize::MAX, |sha| {
            let mut bytes = split
                .parts
                .iter()
                .find(|(s, _)| s == sha)
                .unwrap()
                .1
                .clone();
            if sha == &child.0 {
                bytes.push(b' ');
            }
            Ok::<_, ()>(Some(bytes))
        });
        assert!(matches!(altered, Err(JoinError::Altered(s)) if s == child.0));
    }
}
