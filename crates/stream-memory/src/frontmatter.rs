//! YAML frontmatter of a Markdown document: the lines between a leading
//! `---` line and the next `---` line. Every `memory.md` carries one with a
//! nonempty string `id`, its identity across edits.
//!
//! Fence lines may end in spaces, tabs or `\r` (CRLF files parse). Errors
//! carry at most a line number, never document content.

use std::ops::Range;

use serde_norway::Value;

/// The frontmatter of a document.
#[derive(Clone, PartialEq, Eq)]
pub struct Frontmatter {
    id: String,
    yaml: Range<usize>,
    body_start: usize,
}

impl Frontmatter {
    /// The nonempty `id`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Byte range of the YAML text (between the fence lines).
    pub fn yaml_range(&self) -> Range<usize> {
        self.yaml.clone()
    }

    /// Byte offset where the body starts (after the closing fence line).
    pub fn body_start(&self) -> usize {
        self.body_start
    }
}

impl std::fmt::Debug for Frontmatter {
    // The id is an identifier chosen by the owner, not content; the YAML and
    // the body are left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frontmatter")
            .field("id", &self.id)
            .field("body_start", &self.body_start)
            .finish_non_exhaustive()
    }
}

/// Why a document has no usable frontmatter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// The bytes are not UTF-8.
    #[error("the document is not UTF-8")]
    NotUtf8,
    /// The first line is not `---`.
    #[error("the document does not start with a `---` frontmatter line")]
    Missing,
    /// No `---` line closes the frontmatter.
    #[error("the frontmatter is never closed by a `---` line")]
    Unterminated,
    /// The YAML between the fences does not parse.
    #[error("the frontmatter is not valid YAML (near line {line})")]
    MalformedYaml {
        /// Line of the document where the parser stopped (1-based; 0 when
        /// unknown).
        line: usize,
    },
    /// The YAML is not a mapping (a list, a scalar, or nothing).
    #[error("the frontmatter is not a YAML mapping")]
    NotAMapping,
    /// The mapping has no `id` key.
    #[error("the frontmatter has no `id`")]
    MissingId,
    /// `id` is empty, blank or null.
    #[error("the frontmatter `id` is empty")]
    EmptyId,
    /// `id` is a number, list, mapping or boolean.
    #[error("the frontmatter `id` is not a string")]
    IdNotAString,
}

/// Whether `line` (without its `\n`) is a `---` fence.
fn is_fence(line: &str) -> bool {
    line.trim_end_matches([' ', '\t', '\r']) == "---"
}

/// Parses the frontmatter of UTF-8 bytes.
pub fn parse_bytes(doc: &[u8]) -> Result<Frontmatter, FrontmatterError> {
    std::str::from_utf8(doc)
        .map_err(|_| FrontmatterError::NotUtf8)
        .and_then(parse)
}

/// Parses the frontmatter of a document.
pub fn parse(doc: &str) -> Result<Frontmatter, FrontmatterError> {
    let mut lines = doc.split_inclusive('\n');
    let first = lines.next().ok_or(FrontmatterError::Missing)?;
    if !is_fence(first.trim_end_matches('\n')) {
        return Err(FrontmatterError::Missing);
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    let mut closing = None;
    for line in lines {
        if is_fence(line.trim_end_matches('\n')) {
            closing = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let (yaml_end, body_start) = closing.ok_or(FrontmatterError::Unterminated)?;
    let yaml = &doc[yaml_start..yaml_end];
    if yaml.trim().is_empty() {
        return Err(FrontmatterError::NotAMapping);
    }
    let value: Value = serde_norway::from_str(yaml).map_err(|e| {
        // +1: the opening fence is line 1 of the document.
        let line = e.location().map_or(0, |l| l.line() + 1);
        FrontmatterError::MalformedYaml { line }
    })?;
    let Value::Mapping(mapping) = value else {
        return Err(FrontmatterError::NotAMapping);
    };
    let id = match mapping.get("id") {
        None => return Err(FrontmatterError::MissingId),
        Some(Value::Null) => return Err(FrontmatterError::EmptyId),
        Some(Value::String(s)) if s.trim().is_empty() => return Err(FrontmatterError::EmptyId),
        Some(Value::String(s)) => s.clone(),
        Some(
            Value::Bool(_)
            | Value::Number(_)
            | Value::Sequence(_)
            | Value::Mapping(_)
            | Value::Tagged(_),
        ) => return Err(FrontmatterError::IdNotAString),
    };
    Ok(Frontmatter {
        id,
        yaml: yaml_start..yaml_end,
        body_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_point_into_the_document() {
        let doc = "---\nid: memory-1\n---\n# Memory\n";
        let fm = parse(doc).unwrap();
        assert_eq!(fm.id(), "memory-1");
        assert_eq!(&doc[fm.yaml_range()], "id: memory-1\n");
        assert_eq!(&doc[fm.body_start()..], "# Memory\n");
    }

    #[test]
    fn debug_shows_no_body() {
        let fm = parse("---\nid: a\nsecret: canary-fm-1\n---\ncanary-fm-2\n").unwrap();
        let shown = format!("{fm:?}");
        assert!(!shown.contains("canary"), "{shown}");
    }
}
