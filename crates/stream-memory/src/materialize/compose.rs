//! The exact bytes a decision produces from the frozen base (shared with
//! the review diff, so a reviewer sees what would be written).

use stream_core::payload::MemoryOperation;

/// Normalizes line endings to LF: CRLF and a lone CR each become LF.
/// Copies the runs between CRs whole. (`memchr` found them 22 us faster on
/// 64 KiB: about 1 % of a memory decision, under the 5 % that pays for a
/// dependency, docs/performance.md.)
pub fn normalize_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.iter().position(|&b| b == b'\r') {
        out.extend_from_slice(&rest[..at]);
        out.push(b'\n');
        rest = &rest[at + 1..];
        if let Some(after_lf) = rest.strip_prefix(b"\n") {
            rest = after_lf;
        }
    }
    out.extend_from_slice(rest);
    out
}

/// The exact bytes a decision produces from the frozen base.
///
/// `append`: the base byte for byte, a line ending if it had no final LF,
/// one blank line, the text without trailing newlines, one final line
/// ending. The lines added end as the base's first line does (CRLF or
/// LF), so that a CRLF file stays CRLF. `replace-document`: the text,
/// exactly.
pub fn compose(operation: MemoryOperation, base: &[u8], text: &str) -> Vec<u8> {
    match operation {
        MemoryOperation::Append => {
            let eol = line_ending(base);
            let mut text = normalize_newlines(text.as_bytes());
            while text.ends_with(b"\n") {
                text.pop();
            }
            let mut out = Vec::with_capacity(base.len() + text.len() + 4 * eol.len());
            out.extend_from_slice(base);
            if !base.is_empty() && !base.ends_with(b"\n") {
                out.extend_from_slice(eol);
            }
            out.extend_from_slice(eol);
            for (i, line) in text.split(|&b| b == b'\n').enumerate() {
                if i > 0 {
                    out.extend_from_slice(eol);
                }
                out.extend_from_slice(line);
            }
            out.extend_from_slice(eol);
            out
        }
        MemoryOperation::ReplaceDocument => text.as_bytes().to_vec(),
    }
}

/// The base's line ending: CRLF when its first LF follows a CR, else LF.
fn line_ending(base: &[u8]) -> &'static [u8] {
    match base.iter().position(|&b| b == b'\n') {
        Some(at) if at > 0 && base[at - 1] == b'\r' => b"\r\n",
        Some(_) | None => b"\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_normalize_to_lf() {
        assert_eq!(normalize_newlines(b"a\r\nb\rc\n\r\n"), b"a\nb\nc\n\n");
        assert_eq!(normalize_newlines(b"\r"), b"\n");
        assert_eq!(normalize_newlines(b""), b"");
        assert_eq!(normalize_newlines(b"\r\r\n\n\r"), b"\n\n\n\n");
    }

    /// Every string of up to six of `a`, CR and LF normalizes as a
    /// byte-by-byte reading of the rule does.
    #[test]
    fn newlines_normalize_as_the_rule_reads_byte_by_byte() {
        fn by_byte(bytes: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                out.push(if bytes[i] == b'\r' { b'\n' } else { bytes[i] });
                if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                i += 1;
            }
            out
        }
        let alphabet = [b'a', b'\r', b'\n'];
        let mut strings = vec![Vec::new()];
        for _ in 0..6 {
            let longer: Vec<Vec<u8>> = strings
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&b| {
                        let mut s = s.clone();
                        s.push(b);
                        s
                    })
                })
                .collect();
            for s in &longer {
                assert_eq!(normalize_newlines(s), by_byte(s), "{s:?}");
            }
            strings = longer;
        }
    }

    #[test]
    fn append_is_base_blank_line_text_final_newline() {
        let base = b"---\nid: m\n---\n# Memory\n";
        assert_eq!(
            compose(
                MemoryOperation::Append,
                base,
                "likes tea\r\nand\rscones\n\n"
            ),
            b"---\nid: m\n---\n# Memory\n\nlikes tea\nand\nscones\n"
        );
        // A base without a final newline gets one before the blank line.
        assert_eq!(
            compose(MemoryOperation::Append, b"---\nid: m\n---\nx", "y"),
            b"---\nid: m\n---\nx\n\ny\n"
        );
        assert_eq!(compose(MemoryOperation::Append, b"", "y\n"), b"\ny\n");
    }

    /// The base is kept byte for byte, its CRs included, and a CRLF base
    /// gets CRLF lines.
    #[test]
    fn append_keeps_the_base_byte_for_byte_and_its_line_endings() {
        let base = b"---\r\nid: m\r\n---\r\n# Memory\r\n";
        let out = compose(MemoryOperation::Append, base, "likes tea\nand\r\nscones\n");
        assert!(out.starts_with(base));
        assert_eq!(
            out,
            b"---\r\nid: m\r\n---\r\n# Memory\r\n\r\nlikes tea\r\nand\r\nscones\r\n"
        );
        // Mixed endings in the base stay as they are; the first line's
        // ending is the one added.
        let mixed = b"---\nid: m\r\n---\nx";
        assert_eq!(
            compose(MemoryOperation::Append, mixed, "y"),
            b"---\nid: m\r\n---\nx\n\ny\n"
        );
        let crlf_no_final = b"---\r\nid: m\r\n---\r\nx";
        assert_eq!(
            compose(MemoryOperation::Append, crlf_no_final, "y"),
            b"---\r\nid: m\r\n---\r\nx\r\n\r\ny\r\n"
        );
    }

    #[test]
    fn replace_document_is_the_text_exactly() {
        let text = "---\nid: m\n---\nnew\r\n";
        assert_eq!(
            compose(MemoryOperation::ReplaceDocument, b"old", text),
            text.as_bytes()
        );
    }
}
