//! The exact bytes a decision produces from the frozen base (shared with
//! the review diff, so a reviewer sees what would be written).

use stream_core::payload::MemoryOperation;

/// Normalizes line endings to LF: CRLF and a lone CR each become LF.
/// Copies the runs between CRs whole (a 64 KiB base has none), found with
/// `memchr` (a byte-by-byte search took about 24 us on 64 KiB).
pub fn normalize_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = memchr::memchr(b'\r', rest) {
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
/// `append`: the base with line endings normalized to LF (and a final LF
/// if it had none), one blank line, the text normalized the same way
/// without trailing newlines, one final newline. `replace-document`: the
/// text, exactly.
pub fn compose(operation: MemoryOperation, base: &[u8], text: &str) -> Vec<u8> {
    match operation {
        MemoryOperation::Append => {
            let mut out = normalize_newlines(base);
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.push(b'\n');
            let mut text = normalize_newlines(text.as_bytes());
            while text.ends_with(b"\n") {
                text.pop();
            }
            out.extend_from_slice(&text);
            out.push(b'\n');
            out
        }
        MemoryOperation::ReplaceDocument => text.as_bytes().to_vec(),
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
        let base = b"---\r\nid: m\r\n---\r\n# Memory\r\n";
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
