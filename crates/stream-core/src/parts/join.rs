//! Reassembly: one fetch per level of the tree, then one assembly loop.

use std::collections::HashMap;

use super::format::{Digest, Kind, Ref, parse};
use super::{JoinError, MAX_DEPTH};
use crate::canon::{canonical_string, sha256_digest};
use crate::ids::Sha256Hex;

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

/// A fetched blob, as the references to it read it.
enum Entry {
    /// A part: its references and its literal, unpacked.
    Part { refs: Vec<Ref>, literal: Vec<u8> },
    /// A text blob, already encoded as its canonical JSON string.
    Text(Vec<u8>),
}

/// Reassembles the document rooted at `root`, fetching parts by hash one
/// at a time and refusing one whose bytes do not hash to it. `max_bytes`
/// caps the result. [`join_levels`] with a level fetched hash by hash.
pub fn join<E>(
    root: &Sha256Hex,
    max_bytes: usize,
    mut fetch: impl FnMut(&Sha256Hex) -> Result<Option<Vec<u8>>, E>,
) -> Result<Vec<u8>, JoinError<E>> {
    join_levels(root, max_bytes, PartCheck::EachPart, |level| {
        level
            .iter()
            .map(|sha| fetch(&Sha256Hex::from_bytes(*sha)))
            .collect()
    })
}

/// [`join`] with one fetch per level of the tree rather than one per part:
/// `fetch_level` gets the distinct keys one level references, as raw
/// digests, and returns their bytes in the same order (`None` for one not
/// stored). A backend answers a level with one query, so a document costs
/// a round trip per level (a handful) instead of one per part (about a
/// hundred).
pub fn join_levels<E>(
    root: &Sha256Hex,
    max_bytes: usize,
    check: PartCheck,
    fetch_level: impl FnMut(&[Digest]) -> Result<Vec<Option<Vec<u8>>>, E>,
) -> Result<Vec<u8>, JoinError<E>> {
    join_digests(&root.to_bytes(), max_bytes, check, fetch_level)
}

/// [`join_levels`] from a raw root. Keys stay raw from the parts to the
/// fetch: a reference is 32 bytes in its part, and a store looks it up as
/// those bytes, so none is spelled in hex unless an error names it.
pub(crate) fn join_digests<E>(
    root: &Digest,
    max_bytes: usize,
    check: PartCheck,
    mut fetch_level: impl FnMut(&[Digest]) -> Result<Vec<Option<Vec<u8>>>, E>,
) -> Result<Vec<u8>, JoinError<E>> {
    let named = |sha: &Digest| Sha256Hex::from_bytes(*sha);
    let mut fetched: HashMap<Digest, Entry> = HashMap::new();
    // How each hash is referenced: a blob is a part or a text, never both.
    let mut wanted: HashMap<Digest, Kind> = HashMap::from([(*root, Kind::Part)]);
    let mut level = vec![*root];
    // Every fetched blob appears in the result at least once, so their sum
    // is bounded like the result.
    let mut literal_bytes = 0usize;
    for depth in 0.. {
        if level.is_empty() {
            break;
        }
        if depth > MAX_DEPTH {
            return Err(JoinError::TooLarge);
        }
        let mut blobs = fetch_level(&level).map_err(JoinError::Fetch)?.into_iter();
        let mut next = Vec::new();
        for sha in level {
            let bytes = blobs
                .next()
                .flatten()
                .ok_or_else(|| JoinError::Missing(named(&sha)))?;
            if check == PartCheck::EachPart && sha256_digest(&bytes) != sha {
                return Err(JoinError::Altered(named(&sha)));
            }
            let malformed = || JoinError::Malformed(named(&sha));
            let entry = match wanted.get(&sha) {
                Some(Kind::Part) | None => {
                    let (refs, literal) = parse(&bytes).ok_or_else(malformed)?;
                    for r in &refs {
                        match wanted.get(&r.sha) {
                            Some(kind) if *kind == r.kind => {}
                            Some(_) => return Err(JoinError::Malformed(named(&r.sha))),
                            None => {
                                wanted.insert(r.sha, r.kind);
                                next.push(r.sha);
                            }
                        }
                    }
                    Entry::Part {
                        refs,
                        literal: literal.into_owned(),
                    }
                }
                Some(Kind::Text) => {
                    let text = std::str::from_utf8(&bytes).map_err(|_| malformed())?;
                    Entry::Text(canonical_string(text).map_err(|_| malformed())?)
                }
            };
            literal_bytes = literal_bytes.saturating_add(match &entry {
                Entry::Part { literal, .. } => literal.len(),
                Entry::Text(encoded) => encoded.len(),
            });
            if literal_bytes > max_bytes {
                return Err(JoinError::TooLarge);
            }
            fetched.insert(sha, entry);
        }
        level = next;
    }
    let mut out = Vec::new();
    // A split document has far fewer insertions than bytes (a part is a
    // value of at least `MIN_PART_BYTES`, or a run of them), so `max_bytes`
    // bounds them; a tampered store's empty parts referenced again and
    // again would otherwise cost time exponential in the depth while the
    // result stayed small.
    let mut insertions = max_bytes;
    assemble(root, &fetched, &mut out, &mut insertions, max_bytes, 0)?;
    Ok(out)
}

/// The one assembly loop: `sha`'s literal with each reference inserted.
fn assemble<E>(
    sha: &Digest,
    fetched: &HashMap<Digest, Entry>,
    out: &mut Vec<u8>,
    insertions: &mut usize,
    max_bytes: usize,
    depth: usize,
) -> Result<(), JoinError<E>> {
    if depth > MAX_DEPTH {
        return Err(JoinError::TooLarge);
    }
    *insertions = insertions.checked_sub(1).ok_or(JoinError::TooLarge)?;
    match fetched
        .get(sha)
        .ok_or_else(|| JoinError::Missing(Sha256Hex::from_bytes(*sha)))?
    {
        Entry::Text(encoded) => out.extend_from_slice(encoded),
        Entry::Part { refs, literal } => {
            let mut done = 0;
            for r in refs {
                out.extend_from_slice(&literal[done..r.at]);
                done = r.at;
                assemble(&r.sha, fetched, out, insertions, max_bytes, depth + 1)?;
            }
            out.extend_from_slice(&literal[done..]);
        }
    }
    if out.len() > max_bytes {
        return Err(JoinError::TooLarge);
    }
    Ok(())
}
