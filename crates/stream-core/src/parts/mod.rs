//! Content-addressed parts of a canonical JSON document.
//!
//! A document's canonical bytes are cut into parts: every value whose
//! canonical encoding is at least [`MIN_PART_BYTES`] long is stored once, as
//! its own part, and its parent holds a reference in its place. A long array
//! is cut into runs of elements whose ends depend on the elements' content,
//! so a list that slides (a transcript window) shares most of its runs. A
//! string at least [`MIN_TEXT_BYTES`] long (`memory.md`, a message, a
//! reply) is stored as its raw UTF-8 under the SHA-256 of that text, which
//! is the key of the document version holding the same text, and of the
//! text a store cut out of the event that holds it ([`cut_text`]): the
//! store keeps it once. A part
//! is a literal with references inserted at offsets, the ids in its literal
//! packed to their raw bytes (`format` has its bytes, `tsp3`, and the older
//! `tsp2` and `tsp1` it still reads). Equal values make
//! equal parts, so documents sharing a value share its part. Parts (text
//! blobs aside) stay small enough (about 1 KiB) to live inside an SQLite
//! page.
//!
//! [`join_levels`] reassembles the exact bytes with one fetch per level of
//! the tree, a text re-encoded by the snapshot's own canonical encoder
//! ([`crate::canon`]); [`join`] is it with a fetch per hash. A caller checks
//! the whole against the document's own id.

mod format;
mod join;
mod raw;
mod text;

pub use format::{Digest, HEADER, HEADER_V1, HEADER_V2, HEADERS};
pub use join::{PartCheck, join, join_levels};
pub use text::{TextCut, cut_text, splice_text, stored_as_text};

use crate::canon::sha256_digest;
use crate::hex_id::{Sha256Hex, hex_digits};
use format::{Kind, Ref, encode, unpacked_len};
use raw::Raw;

/// Values at least this long (canonical bytes) become their own part.
pub const MIN_PART_BYTES: usize = 192;

/// Strings at least this long (canonical bytes) are stored as raw text
/// blobs: a document (`memory.md`), whose version the store already holds
/// as that very blob, and a message or reply, which the store holds as the
/// text cut out of its event ([`stored_as_text`] is the rule). Every string
/// long enough to be a part of its own is one: as a `tsp` part it would
/// be a second copy.
pub const MIN_TEXT_BYTES: usize = MIN_PART_BYTES;

/// References nest at most this deep.
pub const MAX_DEPTH: usize = 32;

/// An array longer than this (canonical bytes) is cut into runs.
const MAX_INLINE_ARRAY: usize = 512;

/// A run ends after an element whose hash says so once it holds this much,
/// and always at [`RUN_MAX_BYTES`].
const RUN_MIN_BYTES: usize = 160;
const RUN_MAX_BYTES: usize = 768;

/// A document cut into parts.
#[derive(Debug)]
pub struct Split {
    /// The part the document starts from.
    pub root: Digest,
    /// Every blob to store, root included, with its hash; a shared value
    /// once. A text blob is its raw UTF-8 (no header).
    pub parts: Vec<(Digest, Vec<u8>)>,
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
    /// The part does not parse (a text blob: is not UTF-8).
    #[error("part {0} is malformed")]
    Malformed(Sha256Hex),
    /// References nest deeper than [`MAX_DEPTH`] or the result exceeds its cap.
    #[error("parts nest too deep or reassemble too large")]
    TooLarge,
    /// Fetching a part failed.
    #[error("fetching a part failed")]
    Fetch(E),
}

/// The parts cut so far, each under its raw key, once.
type Parts = Vec<(Digest, Vec<u8>)>;

fn keep(parts: &mut Parts, sha: Digest, bytes: impl FnOnce() -> Vec<u8>) {
    if !parts.iter().any(|(s, _)| *s == sha) {
        parts.push((sha, bytes()));
    }
}

/// A value's literal bytes with references cut out.
struct Node {
    literal: Vec<u8>,
    refs: Vec<Ref>,
    /// Length of the value's full canonical bytes.
    len: usize,
    /// A lone text reference: always inlined into its parent, never a
    /// part of its own.
    lone_ref: bool,
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
            lone_ref: false,
        }
    }

    /// Whether this node's place in its parent holds a single reference.
    fn becomes_ref(&self) -> bool {
        self.lone_ref || self.len >= MIN_PART_BYTES
    }

    /// Bytes of its literal that this node adds to its parent's (none when
    /// it becomes a part of its own).
    fn inline_len(&self) -> usize {
        if self.becomes_ref() && !self.lone_ref {
            0
        } else {
            self.literal.len()
        }
    }

    /// Bytes of this node's own part, its ids unpacked (what run bounds
    /// measure).
    fn unpacked_len(&self) -> usize {
        unpacked_len(&self.refs, self.literal.len())
    }

    fn child(&mut self, child: Node, parts: &mut Parts) {
        let own_part = child.becomes_ref() && !child.lone_ref;
        self.attach(child, own_part, parts);
    }

    fn attach(&mut self, child: Node, own_part: bool, parts: &mut Parts) {
        self.len += child.len;
        if own_part {
            let bytes = child.encode();
            let sha = sha256_digest(&bytes);
            self.refs.push(Ref {
                at: self.literal.len(),
                sha,
                kind: Kind::Part,
            });
            keep(parts, sha, || bytes);
        } else {
            let base = self.literal.len();
            self.refs.extend(child.refs.into_iter().map(|r| Ref {
                at: base + r.at,
                ..r
            }));
            self.literal.extend_from_slice(&child.literal);
        }
    }

    /// A run is a part of its own, unless it is a lone reference already
    /// (a run of one element that is a part or a text).
    fn attach_run(&mut self, run: Node, parts: &mut Parts) {
        let lone = run.literal.is_empty() && run.refs.len() == 1;
        self.attach(run, !lone, parts);
    }

    fn encode(&self) -> Vec<u8> {
        encode(&self.refs, &self.literal)
    }
}

/// Whether a run may end after `child`: a content-defined choice (an
/// element whose hash starts with one of `ends`' hex digits), so the same
/// elements end runs in every document.
fn ends_run(child: &Node, bounds: &Bounds) -> bool {
    use sha2::Digest;
    // The SHA-256 of the literal followed by each reference's hex digits,
    // hashed in place; its first hex digit decides.
    let mut hasher = sha2::Sha256::new();
    hasher.update(&child.literal);
    for r in &child.refs {
        hasher.update(hex_digits(&r.sha));
    }
    let first = hasher.finalize()[0] >> 4;
    bounds
        .ends
        .contains(&crate::hex_id::HEX_DIGITS[usize::from(first)])
}

/// How long a run grows: it may end (per [`ends_run`]) once its part holds
/// `min` bytes, and always ends at `max`.
struct Bounds {
    min: usize,
    max: usize,
    /// The first hex digits of an element's hash that end a run.
    ends: &'static [u8],
}

/// Runs of literal elements (evidence ids): long runs, a short spine.
const LITERAL_RUNS: Bounds = Bounds {
    min: RUN_MIN_BYTES,
    max: RUN_MAX_BYTES,
    ends: b"0123",
};

/// Runs of references (transcript entries, correction targets): a sliding
/// window rewrites its first and last run every turn, so they are short
/// (about four references; measured against [`LITERAL_RUNS`], fewer bytes
/// and fewer parts a turn).
const REF_RUNS: Bounds = Bounds {
    min: REF_RUN_MIN_BYTES,
    max: REF_RUN_MAX_BYTES,
    ends: b"01234567",
};

/// A run of references may end after two (about 70 bytes)...
const REF_RUN_MIN_BYTES: usize = 64;
/// ...and ends at about eight.
const REF_RUN_MAX_BYTES: usize = 280;

/// The elements cut into runs, each to become a part; a run's elements are
/// joined by commas, as the runs will be in their parent.
fn chunk(children: Vec<Node>, parts: &mut Parts) -> Vec<Node> {
    let bounds = if children.iter().all(Node::becomes_ref) {
        &REF_RUNS
    } else {
        &LITERAL_RUNS
    };
    let mut out = Vec::new();
    let mut run = Node::empty();
    let last = children.len().saturating_sub(1);
    for (i, child) in children.into_iter().enumerate() {
        if !run.literal.is_empty() || !run.refs.is_empty() {
            run.push(b",");
        }
        let end = ends_run(&child, bounds);
        run.child(child, parts);
        let size = run.unpacked_len();
        if i == last || size >= bounds.max || (size >= bounds.min && end) {
            out.push(std::mem::replace(&mut run, Node::empty()));
        }
    }
    out
}

/// The array's elements, cut into runs that become parts. (A spine of
/// many runs cut into runs again, a tree, was measured: fewer bytes but
/// more parts, no gain per turn.)
fn runs(n: &mut Node, children: Vec<Node>, parts: &mut Parts) {
    for (i, run) in chunk(children, parts).into_iter().enumerate() {
        if i > 0 {
            n.push(b",");
        }
        n.attach_run(run, parts);
    }
}

/// `value`'s node: its literal is its own bytes in the document (canonical
/// JSON, so nothing is encoded again), long values cut out as parts.
/// `None`: a long string whose text cannot be decoded.
fn node(value: &Raw<'_>, parts: &mut Parts) -> Option<Node> {
    let mut n = Node::empty();
    match value {
        Raw::Array(items) => {
            let children = items
                .iter()
                .map(|item| node(item, parts))
                .collect::<Option<Vec<_>>>()?;
            let total: usize = children.iter().map(|c| c.len + 1).sum();
            n.push(b"[");
            if total > MAX_INLINE_ARRAY && children.len() > 1 {
                runs(&mut n, children, parts);
            } else {
                n.literal
                    .reserve(children.iter().map(|c| c.inline_len() + 1).sum());
                for (i, child) in children.into_iter().enumerate() {
                    if i > 0 {
                        n.push(b",");
                    }
                    n.child(child, parts);
                }
            }
            n.push(b"]");
        }
        Raw::Object(members) => {
            let members = members
                .iter()
                .map(|(name, item)| Some((*name, node(item, parts)?)))
                .collect::<Option<Vec<_>>>()?;
            n.literal.reserve(
                2 + members
                    .iter()
                    .map(|(name, child)| name.len() + 2 + child.inline_len())
                    .sum::<usize>(),
            );
            n.push(b"{");
            for (i, (name, child)) in members.into_iter().enumerate() {
                if i > 0 {
                    n.push(b",");
                }
                n.push(name);
                n.push(b":");
                n.child(child, parts);
            }
            n.push(b"}");
        }
        Raw::String(encoded) => {
            if stored_as_text(encoded.len()) {
                let text = raw::text(encoded)?;
                let sha = sha256_digest(text.as_bytes());
                n.refs.push(Ref {
                    at: 0,
                    sha,
                    kind: Kind::Text,
                });
                n.len = encoded.len();
                n.lone_ref = true;
                keep(parts, sha, || text.into_bytes());
            } else {
                n.push(encoded);
            }
        }
        Raw::Scalar(encoded) => n.push(encoded),
    }
    Some(n)
}

/// Cuts `bytes` into parts, each built from the document's own slices (in
/// canonical JSON a value's slice is its canonical encoding: nothing is
/// parsed into a tree and encoded again; `raw`). Bytes that are not
/// canonical JSON (or do not reassemble exactly) are kept whole as a single
/// root part, so any bytes round-trip.
pub fn split(bytes: &[u8]) -> Split {
    let whole = || {
        let encoded = encode(&[], bytes);
        let root = sha256_digest(&encoded);
        Split {
            root,
            parts: vec![(root, encoded)],
        }
    };
    let Some(value) = raw::parse(bytes) else {
        return whole();
    };
    let mut parts = Vec::new();
    let Some(root) = node(&value, &mut parts) else {
        return whole();
    };
    let encoded = root.encode();
    let root_sha = sha256_digest(&encoded);
    keep(&mut parts, root_sha, || encoded);
    // Every part was hashed from the bytes at hand, and the result is
    // compared with `bytes` whole: no part needs hashing again.
    let by_key: std::collections::HashMap<&Digest, &Vec<u8>> =
        parts.iter().map(|(sha, part)| (sha, part)).collect();
    let rejoined = join::join_digests(&root_sha, bytes.len(), PartCheck::WholeOnly, |level| {
        Ok::<_, ()>(
            level
                .iter()
                .map(|sha| by_key.get(sha).map(|b| b.to_vec()))
                .collect(),
        )
    });
    match rejoined {
        Ok(again) if again == bytes => Split {
            root: root_sha,
            parts,
        },
        Ok(_) | Err(_) => whole(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::{sha256, to_canonical_bytes};

    fn hex(sha: &Digest) -> Sha256Hex {
        Sha256Hex::from_bytes(*sha)
    }

    fn rejoin(split: &Split) -> Vec<u8> {
        let one = join(&hex(&split.root), usize::MAX, |sha| {
            Ok::<_, ()>(
                split
                    .parts
                    .iter()
                    .find(|(s, _)| hex(s) == *sha)
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
        edit: impl Fn(&Digest, Vec<u8>) -> Option<Vec<u8>>,
    ) -> Result<Vec<u8>, JoinError<()>> {
        join_levels(&hex(&split.root), usize::MAX, check, |level| {
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
        let named = hex(&child.0);
        let missing = join(&hex(&split.root), usize::MAX, |sha| {
            Ok::<_, ()>((*sha != named).then(|| {
                split
                    .parts
                    .iter()
                    .find(|(s, _)| hex(s) == *sha)
                    .unwrap()
                    .1
                    .clone()
            }))
        });
        assert!(matches!(missing, Err(JoinError::Missing(s)) if s == named));
        let altered = join(&hex(&split.root), usize::MAX, |sha| {
            let mut bytes = split
                .parts
                .iter()
                .find(|(s, _)| hex(s) == *sha)
                .unwrap()
                .1
                .clone();
            if *sha == named {
                bytes.push(b' ');
            }
            Ok::<_, ()>(Some(bytes))
        });
        assert!(matches!(altered, Err(JoinError::Altered(s)) if s == named));
        let missing = levels(&split, PartCheck::EachPart, |sha, b| {
            (sha != &child.0).then_some(b)
        });
        assert!(matches!(missing, Err(JoinError::Missing(s)) if s == named));
        let altered = levels(&split, PartCheck::EachPart, |sha, mut b| {
            if sha == &child.0 {
                b.push(b' ');
            }
            Some(b)
        });
        assert!(matches!(altered, Err(JoinError::Altered(s)) if s == named));
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
        let capped = join_levels(
            &hex(&split.root),
            bytes.len() - 1,
            PartCheck::EachPart,
            |level| {
                Ok::<_, ()>(
                    level
                        .iter()
                        .map(|sha| Some(split.parts.iter().find(|(s, _)| s == sha)?.1.clone()))
                        .collect(),
                )
            },
        );
        assert!(matches!(capped, Err(JoinError::TooLarge)));
        // A root that references itself (only unchecked bytes can).
        let root = sha256(b"loop");
        let mut looping = b"tsp1".to_vec();
        looping.extend_from_slice(&1u32.to_le_bytes());
        looping.extend_from_slice(&0u32.to_le_bytes());
        looping.extend_from_slice(&root.to_bytes());
        looping.extend_from_slice(b"x");
        let cycle = join_levels(&root, usize::MAX, PartCheck::WholeOnly, |level| {
            Ok::<_, ()>(level.iter().map(|_| Some(looping.clone())).collect())
        });
        assert!(matches!(cycle, Err(JoinError::TooLarge)));
    }

    /// Parts that hash right but insert nothing, each referencing the next
    /// 64 times: without a bound on insertions, 64^30 calls.
    #[test]
    fn empty_parts_referenced_again_and_again_are_refused_not_walked() {
        let mut parts: Vec<(Sha256Hex, Vec<u8>)> = Vec::new();
        let leaf = v1_part(&[], b"");
        let mut below = sha256(&leaf);
        parts.push((below.clone(), leaf));
        for _ in 0..30 {
            let refs: Vec<(u32, &Sha256Hex)> = (0..64).map(|_| (0, &below)).collect();
            let part = v1_part(&refs, b"");
            let sha = sha256(&part);
            parts.push((sha.clone(), part));
            below = sha;
        }
        let joined = join_levels(&below, 1 << 20, PartCheck::EachPart, |level| {
            Ok::<_, ()>(
                level
                    .iter()
                    .map(|sha| {
                        let sha = Sha256Hex::from_bytes(*sha);
                        Some(parts.iter().find(|(s, _)| *s == sha)?.1.clone())
                    })
                    .collect(),
            )
        });
        assert!(matches!(joined, Err(JoinError::TooLarge)), "{joined:?}");
    }

    fn v1_part(refs: &[(u32, &Sha256Hex)], literal: &[u8]) -> Vec<u8> {
        let mut out = HEADER_V1.to_vec();
        out.extend_from_slice(&(refs.len() as u32).to_le_bytes());
        for (at, sha) in refs {
            out.extend_from_slice(&at.to_le_bytes());
            out.extend_from_slice(&sha.to_bytes());
        }
        out.extend_from_slice(literal);
        out
    }

    #[test]
    fn tsp1_parts_still_join() {
        let child = v1_part(&[], b"\"zz\"");
        let child_sha = sha256(&child);
        let root = v1_part(&[(5, &child_sha)], b"{\"m\":}");
        let root_sha = sha256(&root);
        let parts = vec![(root_sha.to_bytes(), root), (child_sha.to_bytes(), child)];
        let split = Split {
            root: root_sha.to_bytes(),
            parts,
        };
        assert_eq!(rejoin(&split), b"{\"m\":\"zz\"}");
    }

    /// A `tsp2` part as the builds before `tsp3` wrote it: its literal as is.
    fn v2_part(refs: &[(usize, &Sha256Hex)], literal: &[u8]) -> Vec<u8> {
        let mut out = HEADER_V2.to_vec();
        out.push(u8::try_from(refs.len()).unwrap());
        let mut prev = 0;
        for (at, sha) in refs {
            out.push(u8::try_from((at - prev) << 1).unwrap());
            prev = *at;
            out.extend_from_slice(&sha.to_bytes());
        }
        out.extend_from_slice(literal);
        out
    }

    #[test]
    fn tsp2_parts_with_quoted_ids_still_join() {
        let id = sha256(b"id").to_string();
        let child = v2_part(&[], format!("\"{id}\"").as_bytes());
        let child_sha = sha256(&child);
        let root = v2_part(
            &[(5, &child_sha)],
            format!("{{\"m\":,\"n\":\"{id}\"}}").as_bytes(),
        );
        let root_sha = sha256(&root);
        let split = Split {
            root: root_sha.to_bytes(),
            parts: vec![(root_sha.to_bytes(), root), (child_sha.to_bytes(), child)],
        };
        assert_eq!(
            rejoin(&split),
            format!("{{\"m\":\"{id}\",\"n\":\"{id}\"}}").into_bytes()
        );
    }

    #[test]
    fn the_ids_of_a_split_document_are_stored_packed() {
        let ids: Vec<String> = (0..40u8).map(|i| sha256(&[i]).to_string()).collect();
        let bytes = to_canonical_bytes(&serde_json::json!({"ids": ids})).unwrap();
        let split = split(&bytes);
        assert_eq!(rejoin(&split), bytes);
        let stored: usize = split.parts.iter().map(|(_, p)| p.len()).sum();
        assert!(split.parts.iter().all(|(_, p)| p.starts_with(HEADER)));
        // 40 ids of 66 bytes quoted, 33 packed, beside a few references.
        assert!(stored < 40 * 33 + 600, "{stored} bytes stored");
    }

    fn memory_doc(text: &str) -> Vec<u8> {
        to_canonical_bytes(&serde_json::json!({"memory": {"text": text, "v": 1}, "n": [1, 2]}))
            .unwrap()
    }

    #[test]
    fn a_long_string_is_stored_once_as_its_raw_text() {
        // Escapes and non-ASCII: the canonical encoding differs from the raw text.
        let text = "canary-memory \"quoted\"\n\u{1F600}\t\u{7}\n".repeat(200);
        let bytes = memory_doc(&text);
        let split = split(&bytes);
        assert_eq!(rejoin(&split), bytes);
        let raw_text = split
            .parts
            .iter()
            .find(|(_, b)| b == text.as_bytes())
            .expect("the raw text is a blob");
        assert_eq!(
            hex(&raw_text.0),
            sha256(text.as_bytes()),
            "keyed by the text's hash"
        );
        let copies = split
            .parts
            .iter()
            .filter(|(_, b)| b.windows(13).any(|w| w == b"canary-memory"))
            .count();
        assert_eq!(copies, 1, "no part holds a second copy");
        // Under the threshold it stays inside a part.
        let short = memory_doc(&"s".repeat(MIN_TEXT_BYTES - 10));
        let short_split = split_of(&short);
        assert!(short_split.parts.iter().all(|(_, b)| b.starts_with(HEADER)));
    }

    fn split_of(bytes: &[u8]) -> Split {
        split(bytes)
    }

    #[test]
    fn a_missing_altered_or_non_utf8_text_blob_is_refused_by_name() {
        let text = "canary-memory line\n".repeat(400);
        let split = split(&memory_doc(&text));
        let sha = sha256(text.as_bytes());
        let raw = sha.to_bytes();
        let missing = levels(&split, PartCheck::EachPart, |s, b| (s != &raw).then_some(b));
        assert!(matches!(missing, Err(JoinError::Missing(s)) if s == sha));
        let altered = levels(&split, PartCheck::EachPart, |s, mut b| {
            if s == &raw {
                b[0] = b'C';
            }
            Some(b)
        });
        assert!(matches!(altered, Err(JoinError::Altered(s)) if s == sha));
        for check in [PartCheck::EachPart, PartCheck::WholeOnly] {
            let not_text = levels(&split, check, |s, mut b| {
                if s == &raw {
                    b[0] = 0xff;
                }
                Some(b)
            });
            let expected = |s: &Sha256Hex| *s == sha;
            match (check, not_text) {
                (PartCheck::EachPart, Err(JoinError::Altered(s))) => assert!(expected(&s)),
                (PartCheck::WholeOnly, Err(JoinError::Malformed(s))) => assert!(expected(&s)),
                (_, other) => panic!("{check:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_hash_referenced_as_part_and_as_text_is_malformed() {
        // A root whose literal is referenced both ways (only unchecked bytes
        // or a crafted store can).
        let child = b"tsp3\x00\"t\"".to_vec();
        let child_sha = sha256(&child);
        let mut root = b"tsp3\x02".to_vec();
        root.push(0); // at 0, a part
        root.extend_from_slice(&child_sha.to_bytes());
        root.push(3); // at 1, a text
        root.extend_from_slice(&child_sha.to_bytes());
        root.extend_from_slice(b"[,]");
        let root_sha = sha256(&root).to_bytes();
        let split = Split {
            root: root_sha,
            parts: vec![(root_sha, root), (child_sha.to_bytes(), child)],
        };
        let got = levels(&split, PartCheck::EachPart, |_, b| Some(b));
        assert!(matches!(got, Err(JoinError::Malformed(s)) if s == child_sha));
    }

    #[test]
    fn a_sliding_list_of_references_rewrites_short_runs_and_no_lone_reference_part() {
        let entry =
            |i: u32| serde_json::json!({"id": sha256(&i.to_le_bytes()), "text": "t".repeat(200)});
        let window = |from: u32| {
            let entries: Vec<_> = (from..from + 20).map(entry).collect();
            to_canonical_bytes(&serde_json::json!({"transcript": entries})).unwrap()
        };
        let is_entry = |part: &[u8]| part.windows(5).any(|w| w == b"\"id\":" || w == b"ttttt");
        let mut rewritten = 0;
        for turn in 0..20 {
            let (a, b) = (split(&window(turn * 2)), split(&window(turn * 2 + 2)));
            assert_eq!(rejoin(&b), window(turn * 2 + 2));
            // Beside the two new entries (an object part and its text).
            rewritten += b
                .parts
                .iter()
                .filter(|p| !a.parts.contains(p) && !is_entry(&p.1))
                .map(|(_, bytes)| bytes.len())
                .sum::<usize>();
            // The texts are raw text blobs, not parts.
            for (_, part) in b.parts.iter().filter(|(_, p)| p.starts_with(HEADER)) {
                let (refs, literal) = format::parse(part).unwrap();
                assert!(
                    refs.len() != 1 || !literal.is_empty(),
                    "a part of one lone reference"
                );
            }
        }
        // Runs of references bounded like literal runs: about 710 a turn.
        assert!(
            rewritten / 20 < 550,
            "{} bytes of spine a turn",
            rewritten / 20
        );
    }
}
