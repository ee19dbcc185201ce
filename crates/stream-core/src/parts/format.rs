//! The bytes of one part: its references and its literal.
//!
//! `tsp1` (written until the fourth round, still read): a little-endian
//! `u32` count N, N references (a `u32` offset and the 32 raw bytes of a
//! SHA-256), then the literal. Every reference is to another part.
//!
//! `tsp2` (written until the seventh round, still read, and still written
//! for a literal holding the byte [`MARK`]): a count N as an unsigned LEB128
//! varint, N references, then the literal. A reference is a varint
//! `gap << 1 | kind`, `gap` its offset minus the previous reference's
//! (the first's from 0, so offsets never decrease), then the 32 raw bytes.
//! Kind 0 is a part; kind 1 is a text blob: raw UTF-8, inserted as its
//! canonical JSON string encoding. A new header rather than a spare bit in
//! `tsp1`: an older reader meets an unknown header and refuses the part as
//! malformed instead of misreading it, the store's usage counts parts by
//! header, and the varint offsets save three bytes a reference.
//!
//! `tsp3` (written now): `tsp2` with its literal packed. Every JSON string
//! of exactly 64 lowercase hex digits (an event id, a hash: 25 a turn) is
//! [`MARK`] and its 32 raw bytes, half its size. Canonical JSON never holds
//! a raw control byte, so `MARK` in a packed literal is always a packed id;
//! reference offsets count the unpacked literal. The packing is a
//! bijection checked on read (a literal that packs differently is
//! malformed), so equal values still make equal parts.

use std::borrow::Cow;

use crate::hex_id::{checked_hex_bytes, hex_digits};

/// Every part written now starts with these bytes.
pub const HEADER: &[u8] = b"tsp3";

/// The header of parts written before [`HEADER`] (and of one whose literal
/// holds the reference mark); still read.
pub const HEADER_V2: &[u8] = b"tsp2";

/// The header of the first parts; still read.
pub const HEADER_V1: &[u8] = b"tsp1";

/// Every header a part may start with, newest first: a store recognises its
/// parts by them, with a document version's blob set apart.
pub const HEADERS: [&[u8]; 3] = [HEADER, HEADER_V2, HEADER_V1];

/// In a `tsp3` literal: the next 32 bytes are an id, unpacked to
/// `"` + their 64 lowercase hex digits + `"`.
pub const MARK: u8 = 0x01;

/// An id's quoted hex spelling, and its packed form.
const QUOTED_ID: usize = 66;
const PACKED_ID: usize = 33;

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

/// A part's key as its 32 raw bytes: how a part names another, how a
/// `Split` hands it to a store and how the store is asked for it; spelled
/// in hex only where a backend keys by hex, or an error names it.
pub type Digest = [u8; 32];

/// A reference: at `at` in the literal, insert what `sha` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ref {
    pub at: usize,
    pub sha: Digest,
    pub kind: Kind,
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

/// The length of a part as `tsp2` writes it, its literal unpacked: run
/// bounds are measured on it, so packing ids never moves a run's end.
pub(crate) fn unpacked_len(refs: &[Ref], literal_len: usize) -> usize {
    let mut prev = 0;
    let mut len = HEADER.len() + varint_len(refs.len()) + literal_len;
    for r in refs {
        len += varint_len(tag(r.at - prev, r.kind)) + SHA_BYTES;
        prev = r.at;
    }
    len
}

/// A part's bytes; `refs` are in literal order, at offsets of `literal`.
/// `tsp3`, or `tsp2` for a literal holding [`MARK`] (bytes that are not
/// canonical JSON, kept whole).
pub(crate) fn encode(refs: &[Ref], literal: &[u8]) -> Vec<u8> {
    let packable = !literal.contains(&MARK);
    let mut out = Vec::with_capacity(unpacked_len(refs, literal.len()));
    out.extend_from_slice(if packable { HEADER } else { HEADER_V2 });
    put_varint(&mut out, refs.len());
    let mut prev = 0;
    for r in refs {
        put_varint(&mut out, tag(r.at - prev, r.kind));
        prev = r.at;
        out.extend_from_slice(&r.sha);
    }
    if packable {
        pack(literal, &mut out);
    } else {
        out.extend_from_slice(literal);
    }
    out
}

/// Whether `at` starts a quoted id: `"`, 64 lowercase hex digits, `"`.
fn quoted_id(literal: &[u8], at: usize) -> Option<&[u8]> {
    let quoted = literal.get(at..at + QUOTED_ID)?;
    let digits = &quoted[1..QUOTED_ID - 1];
    let is_id = quoted[0] == b'"'
        && quoted[QUOTED_ID - 1] == b'"'
        && digits
            .iter()
            .all(|d| matches!(d, b'0'..=b'9' | b'a'..=b'f'));
    is_id.then_some(digits)
}

/// Appends `literal` with every quoted id packed, left to right.
fn pack(literal: &[u8], out: &mut Vec<u8>) {
    let mut rest = literal;
    while let Some(quote) = rest.iter().position(|b| *b == b'"') {
        out.extend_from_slice(&rest[..quote]);
        rest = &rest[quote..];
        if let Some(digits) = quoted_id(rest, 0) {
            out.push(MARK);
            // Checked by `quoted_id`: 64 lowercase hex digits.
            out.extend_from_slice(&checked_hex_bytes(digits));
            rest = &rest[QUOTED_ID..];
        } else {
            out.push(b'"');
            rest = &rest[1..];
        }
    }
    out.extend_from_slice(rest);
}

/// The unpacked literal, or `None` when a mark is cut short or the literal
/// is not the one [`pack`] makes of its unpacked form: that is, when a
/// quoted id starts in a run of unpacked bytes (the next id's opening
/// quote may close it), which `pack` would have packed.
fn unpack(packed: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(packed.len() * 2);
    let mut rest = packed;
    loop {
        let mark = rest.iter().position(|b| *b == MARK);
        let run = &rest[..mark.unwrap_or(rest.len())];
        let start = out.len();
        out.extend_from_slice(run);
        if let Some(mark) = mark {
            let id: &Digest = rest.get(mark + 1..mark + PACKED_ID)?.try_into().ok()?;
            out.push(b'"');
            out.extend_from_slice(&hex_digits(id));
            out.push(b'"');
            rest = &rest[mark + PACKED_ID..];
        }
        let unpacked_id_in_run =
            (start..start + run.len()).any(|at| out[at] == b'"' && quoted_id(&out, at).is_some());
        if unpacked_id_in_run {
            return None;
        }
        if mark.is_none() {
            return Some(out);
        }
    }
}

/// A parsed part: its references, and its literal (unpacked). `None` when
/// it does not parse (any header), or a reference falls outside the
/// literal.
pub(crate) fn parse(bytes: &[u8]) -> Option<(Vec<Ref>, Cow<'_, [u8]>)> {
    let (refs, literal) = if let Some(rest) = bytes.strip_prefix(HEADER) {
        let (refs, start) = parse_v2(rest)?;
        (refs, Cow::Owned(unpack(&rest[start..])?))
    } else if let Some(rest) = bytes.strip_prefix(HEADER_V2) {
        let (refs, start) = parse_v2(rest)?;
        (refs, Cow::Borrowed(&rest[start..]))
    } else {
        let rest = bytes.strip_prefix(HEADER_V1)?;
        let (refs, start) = parse_v1(rest)?;
        (refs, Cow::Borrowed(&rest[start..]))
    };
    let ordered = refs.windows(2).all(|w| w[0].at <= w[1].at);
    let inside = refs.last().is_none_or(|r| r.at <= literal.len());
    (ordered && inside).then_some((refs, literal))
}

fn digest(bytes: &[u8]) -> Option<Digest> {
    bytes.try_into().ok()
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

    fn refs_of(sha: Digest) -> Vec<Ref> {
        vec![
            Ref {
                at: 1,
                sha,
                kind: Kind::Text,
            },
            Ref {
                at: 300,
                sha,
                kind: Kind::Part,
            },
        ]
    }

    #[test]
    fn a_part_round_trips_both_kinds_of_reference() {
        let refs = refs_of(crate::canon::sha256_digest(b"x"));
        let literal = vec![b'a'; 300];
        let bytes = encode(&refs, &literal);
        assert!(bytes.starts_with(HEADER));
        assert_eq!(bytes.len(), unpacked_len(&refs, literal.len()));
        let (parsed, got) = parse(&bytes).unwrap();
        assert_eq!((parsed, &got[..]), (refs, &literal[..]));
        // A reference past the literal's end does not parse.
        assert!(parse(&bytes[..bytes.len() - 1]).is_none());
    }

    #[test]
    fn quoted_ids_are_packed_to_half_and_unpack_byte_exact() {
        let id = crate::canon::sha256(b"id").to_string();
        let upper = id.to_uppercase();
        // Ids as values, an id after an escaped quote inside a string, an
        // uppercase one and a 63-digit one (neither is packed).
        let literal = format!(
            r#"{{"a":"{id}","b":["{id}","{id}"],"c":"x"{id}","d":"{upper}","e":"{}"}}"#,
            &id[1..]
        )
        .into_bytes();
        let refs = vec![Ref {
            at: literal.len(),
            sha: crate::canon::sha256_digest(b"x"),
            kind: Kind::Part,
        }];
        let bytes = encode(&refs, &literal);
        assert!(bytes.starts_with(HEADER));
        let saved = (QUOTED_ID - PACKED_ID) * 4;
        assert_eq!(bytes.len(), unpacked_len(&refs, literal.len()) - saved);
        let (parsed, got) = parse(&bytes).unwrap();
        assert_eq!((parsed, got.into_owned()), (refs, literal));
    }

    #[test]
    fn a_literal_holding_the_mark_is_written_as_tsp2() {
        let literal = [b'"', MARK, b'"'];
        let bytes = encode(&[], &literal);
        assert!(bytes.starts_with(HEADER_V2));
        assert_eq!(&parse(&bytes).unwrap().1[..], &literal[..]);
    }

    #[test]
    fn a_packing_that_is_cut_short_or_not_the_canonical_one_is_malformed() {
        let id = crate::canon::sha256(b"id").to_string();
        let packed = encode(&[], format!("[\"{id}\"]").as_bytes());
        assert!(parse(&packed).is_some());
        // The mark's id cut short.
        assert!(parse(&packed[..packed.len() - 2]).is_none());
        // A quoted id closed by the next packed id's opening quote: `pack`
        // would have packed the first, leaving the second unpacked.
        let mut closed = HEADER.to_vec();
        closed.push(0);
        closed.extend_from_slice(format!("\"{id}").as_bytes());
        closed.push(MARK);
        closed.extend_from_slice(&crate::canon::sha256(b"id").to_bytes());
        assert!(parse(&closed).is_none());
        // The same literal stored unpacked under the packed header.
        let mut unpacked = HEADER.to_vec();
        unpacked.push(0);
        unpacked.extend_from_slice(format!("[\"{id}\"]").as_bytes());
        assert!(parse(&unpacked).is_none());
    }

    proptest::proptest! {
        /// Any literal without the mark, built from quotes, hex digits and
        /// a few other bytes (ids, near-ids, ids back to back): packing
        /// round-trips it, and repacking the unpacked form gives the same
        /// bytes, so `parse` accepts exactly what `pack` writes.
        #[test]
        fn packing_round_trips_any_literal(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("\"".to_owned()),
                    "[0-9a-f]{64}",
                    "[0-9a-f]{1,66}",
                    "[A-F\\\\x,:\\[\\]{}]{1,3}",
                ],
                0..12,
            )
        ) {
            let literal = pieces.concat().into_bytes();
            let bytes = encode(&[], &literal);
            proptest::prop_assert!(bytes.starts_with(HEADER));
            let (_, got) = parse(&bytes).unwrap();
            proptest::prop_assert_eq!(&got[..], &literal[..]);
        }
    }
}
