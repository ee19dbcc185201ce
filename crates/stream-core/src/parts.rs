//! Content-addressed parts of a canonical JSON document.
//!
//! A document's canonical bytes are cut into parts: every value whose
//! canonical encoding is at least [`MIN_PART_BYTES`] long is stored once, as
//! its own part, and its parent holds a reference in its place. A long array
//! is cut into runs of elements whose ends depend on the elements' content,
//! so a list that slides (a transcript window) shares most of its runs. A
//! part is `tsp1`, a little-endian `u32` count N, N references (a `u32`
//! offset and the 32 raw bytes of a SHA-256), then its literal bytes; each
//! reference is inserted at its offset into the literal. Equal values make
//! equal parts, so documents sharing a value share its part. Parts stay
//! small enough (about 1 KiB) to live inside an SQLite page.
//!
//! [`join`] reassembles the exact bytes, checking every part against its
//! hash; a caller checks the whole against the document's own id.
//! [`join_levels`] does the same with one fetch per level of the tree.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::canon::{CanonError, sha256, to_canonical_bytes};
use crate::ids::Sha256Hex;

/// Values at least this long (canonical bytes) become their own part.
pub const MIN_PART_BYTES: usize = 192;

/// References nest at most this deep.
pub const MAX_DEPTH: usize = 32;

/// An array longer than this (canonical bytes) is cut into runs.
const MAX_INLINE_ARRAY: usize = 512;

/// A run ends after an element whose hash says so once it holds this much,
/// and always at [`RUN_MAX_BYTES`].
const RUN_MIN_BYTES: usize = 160;
const RUN_MAX_BYTES: usize = 768;

/// Every part starts with these bytes (a store recognises its parts by
/// them, with a document version's blob set apart).
pub const HEADER: &[u8] = b"tsp1";
const REF_BYTES: usize = 4 + 32;

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

    fn empty() -> Self {
        Self {
            literal: Vec::new(),
            refs: Vec::new(),
            len: 0,
        }
    }

    /// Bytes of this node's own part encoding.
    fn encoded_len(&self) -> usize {
        HEADER.len() + 4 + self.refs.len() * REF_BYTES + self.literal.len()
    }

    fn child(&mut self, child: Node, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) {
        let own_part = child.len >= MIN_PART_BYTES;
        self.attach(child, own_part, parts);
    }

    fn attach(&mut self, child: Node, own_part: bool, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) {
        self.len += child.len;
        if own_part {
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
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(HEADER);
        out.extend_from_slice(&u32_le(self.refs.len()));
        for (at, sha) in &self.refs {
            out.extend_from_slice(&u32_le(*at));
            out.extend_from_slice(&raw(sha));
        }
        out.extend_from_slice(&self.literal);
        out
    }
}

/// The 32 bytes a hex digest spells.
fn raw(sha: &Sha256Hex) -> [u8; 32] {
    let mut out = [0u8; 32];
    // A `Sha256Hex` is 64 lowercase hex digits by construction.
    let _ = hex::decode_to_slice(sha.as_str(), &mut out);
    out
}

/// Offsets and counts are bounded by the document cap, far below 4 GiB.
fn u32_le(n: usize) -> [u8; 4] {
    u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes()
}

/// Whether a run may end after `child`: a content-defined choice (about one
/// element in four), so the same elements end runs in every document.
fn ends_run(child: &Node) -> bool {
    let mut bytes = child.literal.clone();
    for (_, sha) in &child.refs {
        bytes.extend_from_slice(sha.as_str().as_bytes());
    }
    matches!(
        sha256(&bytes).as_str().as_bytes().first(),
        Some(b'0'..=b'3')
    )
}

/// The array's elements, cut into runs that become parts.
fn runs(n: &mut Node, children: Vec<Node>, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) {
    let mut run = Node::empty();
    let last = children.len().saturating_sub(1);
    for (i, child) in children.into_iter().enumerate() {
        if !run.literal.is_empty() || !run.refs.is_empty() {
            run.push(b",");
        }
        let end = ends_run(&child);
        run.child(child, parts);
        let size = run.encoded_len();
        if i == last || size >= RUN_MAX_BYTES || (size >= RUN_MIN_BYTES && end) {
            let done = std::mem::replace(&mut run, Node::empty());
            n.attach(done, true, parts);
            if i != last {
                n.push(b",");
            }
        }
    }
}

fn node(value: &Value, parts: &mut Vec<(Sha256Hex, Vec<u8>)>) -> Result<Node, CanonError> {
    let mut n = Node::empty();
    match value {
        Value::Array(items) => {
            let children = items
                .iter()
                .map(|item| node(item, parts))
                .collect::<Result<Vec<_>, _>>()?;
            let total: usize = children.iter().map(|c| c.len + 1).sum();
            n.push(b"[");
            if total > MAX_INLINE_ARRAY && children.len() > 1 {
                runs(&mut n, children, parts);
            } else {
                for (i, child) in children.into_iter().enumerate() {
                    if i > 0 {
                        n.push(b",");
                    }
                    n.child(child, parts);
                }
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

/// One parsed part: where each reference goes, and where the literal starts.
fn parse(bytes: &[u8]) -> Option<(Vec<(usize, Sha256Hex)>, usize)> {
    let rest = bytes.strip_prefix(HEADER)?;
    let word = |b: &[u8]| -> Option<usize> {
        let w: [u8; 4] = b.get(..4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(w)).ok()
    };
    let count = word(rest)?;
    let table = rest.get(4..4 + count.checked_mul(REF_BYTES)?)?;
    let start = HEADER.len() + 4 + table.len();
    let literal_len = bytes.len() - start;
    let mut refs = Vec::with_capacity(count);
    for entry in table.chunks_exact(REF_BYTES) {
        let digest: [u8; 32] = entry.get(4..)?.try_into().ok()?;
        refs.push((word(entry)?, Sha256Hex::from_bytes(digest)));
    }
    let ordered = refs.windows(2).all(|w| w[0].0 <= w[1].0);
    let inside = refs.last().is_none_or(|(o, _)| *o <= literal_len);
    (ordered && inside).then_some((refs, start))
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

/// Whether [`join_levels`] hashes each part as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartCheck {
    /// Every part against its hash (a refusal names the bad part).
    EachPart,
    /// None: for a caller that checks the whole result against its own
    /// hash, which no altered part can match, and joins again with
    /// [`PartCheck::EachPart`] only to name the altered part.
    WholeOnly,
}

/// [`join`] with one fetch per level of the tree rather than one per part:
/// `fetch_level` gets the distinct hashes one level references and returns
/// their bytes in the same order (`None` for one not stored). A backend
/// answers a level with one query, so a document costs a round trip per
/// level (a handful) instead of one per part (about a hundred).
pub fn join_levels<E>(
    root: &Sha256Hex,
    max_bytes: usize,
    check: PartCheck,
    mut fetch_level: impl FnMut(&[Sha256Hex]) -> Result<Vec<Option<Vec<u8>>>, E>,
) -> Result<Vec<u8>, JoinError<E>> {
    let mut parts = Fetched::new();
    let mut level = vec![root.clone()];
    // Every fetched part's literal appears in the result at least once, so
    // their sum is bounded like the result.
    let mut literal_bytes = 0usize;
    for depth in 0.. {
        if level.is_empty() {
            break;
        }
        if depth > MAX_DEPTH {
            return Err(JoinError::TooLarge);
        }
        let mut fetched = fetch_level(&level).map_err(JoinError::Fetch)?.into_iter();
        let mut next = Vec::new();
        let mut queued = HashSet::new();
        for sha in level {
            let bytes = fetched
                .next()
                .flatten()
                .ok_or_else(|| JoinError::Missing(sha.clone()))?;
            if check == PartCheck::EachPart && sha256(&bytes) != sha {
                return Err(JoinError::Altered(sha));
            }
            let (refs, start) = parse(&bytes).ok_or_else(|| JoinError::Malformed(sha.clone()))?;
            literal_bytes = literal_bytes.saturating_add(bytes.len() - start);
            if literal_bytes > max_bytes {
                return Err(JoinError::TooLarge);
            }
            for (_, child) in &refs {
                if !parts.contains_key(child) && queued.insert(child.clone()) {
                    next.push(child.clone());
                }
            }
            parts.insert(sha, (refs, bytes, start));
        }
        // A part fetched on this level and referenced again by it is done.
        next.retain(|sha| !parts.contains_key(sha));
        level = next;
    }
    let mut out = Vec::new();
    assemble(root, &parts, &mut out, max_bytes, 0)?;
    Ok(out)
}

type Fetched = HashMap<Sha256Hex, (Vec<(usize, Sha256Hex)>, Vec<u8>, usize)>;

fn assemble<E>(
    sha: &Sha256Hex,
    parts: &Fetched,
    out: &mut Vec<u8>,
    max_bytes: usize,
    depth: usize,
) -> Result<(), JoinError<E>> {
    if depth > MAX_DEPTH {
        return Err(JoinError::TooLarge);
    }
    let (refs, bytes, start) = parts
        .get(sha)
        .ok_or_else(|| JoinError::Missing(sha.clone()))?;
    let literal = &bytes[*start..];
    let mut done = 0;
    for (at, child) in refs {
        out.extend_from_slice(&literal[done..*at]);
        done = *at;
        assemble(child, parts, out, max_bytes, depth + 1)?;
    }
    out.extend_from_slice(&literal[done..]);
    if out.len() > max_bytes {
        return Err(JoinError::TooLarge);
    }
    Ok(())
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
        let one = join(&split.root, usize::MAX, |sha| {
            Ok::<_, ()>(
                split
                    .parts
                    .iter()
                    .find(|(s, _)| s == sha)
                    .map(|(_, b)| b.clone()),
            )
        })
        .unwrap();
        for check in [PartCheck::EachPart, PartCheck::WholeOnly] {
            assert_eq!(levels(split, check, |_, b| Some(b)).unwrap(), one);
        }
        one
    }

    /// [`join_levels`] over `split`'s parts, each passed through `edit`
    /// (`None`: not stored); every level fetches each hash once.
    fn levels(
        split: &Split,
        check: PartCheck,
        edit: impl Fn(&Sha256Hex, Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<Vec<u8>, JoinError<()>> {
        join_levels(&split.root, usize::MAX, check, |level| {
            let distinct: std::collections::HashSet<_> = level.iter().collect();
            assert_eq!(
                distinct.len(),
                level.len(),
                "a hash fetched twice in a level"
            );
            Ok(level
                .iter()
                .map(|sha| {
                    let bytes = split.parts.iter().find(|(s, _)| s == sha)?.1.clone();
                    edit(sha, bytes)
                })
                .collect())
        })
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
    fn a_sliding_list_shares_most_of_its_runs_and_parts_stay_small() {
        let ids: Vec<String> = (0..80).map(|i| sha256(&[i]).to_string()).collect();
        let one = to_canonical_bytes(&serde_json::json!({"ids": ids[..60]})).unwrap();
        let two = to_canonical_bytes(&serde_json::json!({"ids": ids[2..62]})).unwrap();
        let (a, b) = (split(&one), split(&two));
        assert_eq!(rejoin(&a), one);
        assert_eq!(rejoin(&b), two);
        let new: usize = b
            .parts
            .iter()
            .filter(|p| !a.parts.contains(p))
            .map(|(_, bytes)| bytes.len())
            .sum();
        assert!(new * 2 < two.len(), "{new} new bytes of {}", two.len());
        assert!(b.parts.iter().all(|(_, p)| p.len() <= 1024));
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
        let missing = levels(&split, PartCheck::EachPart, |sha, b| {
            (sha != &child.0).then_some(b)
        });
        assert!(matches!(missing, Err(JoinError::Missing(s)) if s == child.0));
        let altered = levels(&split, PartCheck::EachPart, |sha, mut b| {
            if sha == &child.0 {
                b.push(b' ');
            }
            Some(b)
        });
        assert!(matches!(altered, Err(JoinError::Altered(s)) if s == child.0));
        // Unchecked, the altered bytes come back for the caller's whole hash
        // to refuse.
        let unchecked = levels(&split, PartCheck::WholeOnly, |sha, mut b| {
            if sha == &child.0 {
                b.push(b' ');
            }
            Some(b)
        });
        assert_ne!(unchecked.unwrap(), bytes);
    }

    #[test]
    fn join_levels_refuses_a_cycle_and_a_result_over_its_cap() {
        let bytes = to_canonical_bytes(&serde_json::json!({"m": "z".repeat(400)})).unwrap();
        let split = split(&bytes);
        let capped = join_levels(&split.root, bytes.len() - 1, PartCheck::EachPart, |level| {
            Ok::<_, ()>(
                level
                    .iter()
                    .map(|sha| Some(split.parts.iter().find(|(s, _)| s == sha)?.1.clone()))
                    .collect(),
            )
        });
        assert!(matches!(capped, Err(JoinError::TooLarge)));
        // A root that references itself (only unchecked bytes can).
        let root = sha256(b"loop");
        let mut looping = b"tsp1".to_vec();
        looping.extend_from_slice(&1u32.to_le_bytes());
        looping.extend_from_slice(&0u32.to_le_bytes());
        looping.extend_from_slice(&raw(&root));
        looping.extend_from_slice(b"x");
        let cycle = join_levels(&root, usize::MAX, PartCheck::WholeOnly, |level| {
            Ok::<_, ()>(level.iter().map(|_| Some(looping.clone())).collect())
        });
        assert!(matches!(cycle, Err(JoinError::TooLarge)));
    }
}
