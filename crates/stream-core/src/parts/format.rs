//! The bytes of one part: its references and its literal.
//!
//! `tsp1` (written until the fourth round, still read): a little-endian
//! `u32` count N, N references (a `u32` offset and the 32 raw bytes of a
//! SHA-256), then the literal. Every reference is to another part.
//!
//! `tsp2` (written now): a count N as an unsigned LEB128 varint, N
//! references, then the literal. A reference is a varint
//! `gap << 1 | kind`, `gap` its offset minus the previous reference's
//! (the first's from 0, so offsets never decrease), then the 32 raw bytes.
//! Kind 0 is a part; kind 1 is a text blob: raw UTF-8, inserted as its
//! canonical JSON string encoding. A new header rather than a spare bit in
//! `tsp1`: an older reader meets an unknown header and refuses the part as
//! malformed instead of misreading it, the store's usage counts parts by
//! header, and the varint offsets save three bytes a reference.

use crate::ids::Sha256Hex;

/// Every part written now starts with these bytes (a store recognises its
/// parts by them, with a document version's blob set apart).
pub const HEADER: &[u8] = b"tsp2";

/// The header of parts written before [`HEADER`]; still read.
pub const HEADER_V1: &[u8] = b"tsp1";

const SHA_BYTES: usize = 32;
const V1_REF_BYTES: usize = 4 + SHA_BYTES;

/// What a reference inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Another part's reassembled bytes.
    Part,
    /// A text blob's raw UTF-8, encoded as a canonical JSON string.
    Text,
}

/// A reference: at `at` in the literal, insert what `sha` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ref {
    pub at: usize,
    pub sha: Sha256Hex,
    pub kind: Kind,
}

/// The 32 bytes a hex digest spells.
pub(crate) fn raw(sha: &Sha256Hex) -> [u8; 32] {
    let mut out = [0u8; 32];
    // A `Sha256Hex` is 64 lowercase hex digits by construction.
    let _ = hex::decode_to_slice(sha.as_str(), &mut out);
    out
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n & 0x7f) as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A varint of at most 5 bytes (offsets and counts fit in 32 bits).
fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<usize> {
    let mut n: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return usize::try_from(n).ok();
        }
    }
    None
}

fn tag(gap: usize, kind: Kind) -> usize {
    gap << 1
        | match kind {
            Kind::Part => 0,
            Kind::Text => 1,
        }
}

/// The length of [`encode`]'s output.
pub(crate) fn encoded_len(refs: &[Ref], literal_len: usize) -> usize {
    let mut prev = 0;
    let mut len = HEADER.len() + varint_len(refs.len()) + literal_len;
    for r in refs {
        len += varint_len(tag(r.at - prev, r.kind)) + SHA_BYTES;
        prev = r.at;
    }
    len
}

/// A part's bytes; `refs` are in literal order.
pub(crate) fn encode(refs: &[Ref], literal: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(refs, literal.len()));
    out.extend_from_slice(HEADER);
    put_varint(&mut out, refs.len());
    let mut prev = 0;
    for r in refs {
        put_varint(&mut out, tag(r.at - prev, r.kind));
        prev = r.at;
        out.extend_from_slice(&raw(&r.sha));
    }
    out.extend_from_slice(literal);
    out
}

/// A parsed part: its references, and where its literal starts. `None`
/// when it does not parse (either header), or a reference falls outside
/// the literal.
pub(crate) fn parse(bytes: &[u8]) -> Option<(Vec<Ref>, usize)> {
    let (refs, start) = if let Some(rest) = bytes.strip_prefix(HEADER) {
        parse_v2(rest)?
    } else {
        parse_v1(bytes.strip_prefix(HEADER_V1)?)?
    };
    let start = start + HEADER.len();
    let literal_len = bytes.len() - start;
    let ordered = refs.windows(2).all(|w| w[0].at <= w[1].at);
    let inside = refs.last().is_none_or(|r| r.at <= literal_len);
    (ordered && inside).then_some((refs, start))
}

fn digest(bytes: &[u8]) -> Option<Sha256Hex> {
    let digest: [u8; 32] = bytes.try_into().ok()?;
    Some(Sha256Hex::from_bytes(digest))
}

fn parse_v1(rest: &[u8]) -> Option<(Vec<Ref>, usize)> {
    let word = |b: &[u8]| -> Option<usize> {
        let w: [u8; 4] = b.get(..4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(w)).ok()
    };
    let count = word(rest)?;
    let table = rest.get(4..4 + count.checked_mul(V1_REF_BYTES)?)?;
    let mut refs = Vec::with_capacity(count);
    for entry in table.chunks_exact(V1_REF_BYTES) {
        refs.push(Ref {
            at: word(entry)?,
            sha: digest(entry.get(4..)?)?,
            kind: Kind::Part,
        });
    }
    Some((refs, 4 + table.len()))
}

fn parse_v2(rest: &[u8]) -> Option<(Vec<Ref>, usize)> {
    let mut pos = 0;
    let count = get_varint(rest, &mut pos)?;
    // Each reference takes at least 33 bytes: a count beyond that is false.
    if count > rest.len() / (SHA_BYTES + 1) {
        return None;
    }
    let mut refs = Vec::with_capacity(count);
    let mut at = 0usize;
    for _ in 0..count {
        let tag = get_varint(rest, &mut pos)?;
        at = at.checked_add(tag >> 1)?;
        let kind = if tag & 1 == 0 { Kind::Part } else { Kind::Text };
        let sha = digest(rest.get(pos..pos + SHA_BYTES)?)?;
        pos += SHA_BYTES;
        refs.push(Ref { at, sha, kind });
    }
    Some((refs, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_an_overlong_one_is_refused() {
        for n in [0, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as usize] {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(out.len(), varint_len(n));
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(n));
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80; 6], &mut pos), None);
    }

    #[test]
    fn a_tsp2_part_round_trips_both_kinds() {
        let sha = crate::canon::sha256(b"x");
        let refs = vec![
            Ref {
                at: 1,
                sha: sha.clone(),
                kind: Kind::Text,
            },
            Ref {
                at: 300,
                sha,
                kind: Kind::Part,
            },
        ];
        let literal = vec![b'a'; 300];
        let bytes = encode(&refs, &literal);
        assert_eq!(bytes.len(), encoded_len(&refs, literal.len()));
        let (parsed, start) = parse(&bytes).unwrap();
        assert_eq!((parsed, &bytes[start..]), (refs, &literal[..]));
        // A reference past the literal's end does not parse.
        assert!(parse(&bytes[..bytes.len() - 1]).is_none());
    }
}
