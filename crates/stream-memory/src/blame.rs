//! Why a line is in `memory.md`: for each line of the current version, the
//! version that introduced it, and — when the materializer wrote that
//! version — the proposal, decision and actor behind it.
//!
//! Computed from the stored versions only (never from the file on disk):
//! the versions are walked oldest first, each diffed by lines from its
//! predecessor with `similar`, and a line keeps the version it came from
//! for as long as the diffs keep it equal.

use similar::{DiffOp, TextDiff};
use stream_core::{SourceName, VersionId};
use stream_store::{Read, StoreError};

use crate::review::{LogEntry, memory_log};

/// One line of the current `memory.md` and where it came from.
#[derive(Clone)]
pub struct BlameLine {
    /// 1-based line number in the current version.
    pub number: usize,
    /// The line's text, without its line ending.
    pub text: String,
    /// The version that introduced it, as `memory-log` lists it.
    pub origin: LogEntry,
}

// The line is memory text: never in `Debug`.
impl std::fmt::Debug for BlameLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlameLine")
            .field("number", &self.number)
            .field("version_id", &self.origin.version_id)
            .finish_non_exhaustive()
    }
}

/// The current version's lines, each with the version that introduced it;
/// empty when `memory.md` was never scanned. `log` is `memory_log`'s answer
/// (newest first) when the caller has it already.
pub fn blame(
    store: &dyn Read,
    source: &SourceName,
    log: Option<Vec<LogEntry>>,
) -> Result<Vec<BlameLine>, StoreError> {
    let log = match log {
        Some(log) => log,
        None => memory_log(store, source, false)?,
    };
    // Index into `log` of the version each line of the previous text came from.
    let mut owners: Vec<usize> = Vec::new();
    let mut previous = String::new();
    for index in (0..log.len()).rev() {
        let text = version_text(store, &log[index].version_id)?;
        let diff = TextDiff::from_lines(&previous, &text);
        let mut next = Vec::with_capacity(owners.len());
        for op in diff.ops() {
            match *op {
                DiffOp::Equal { old_index, len, .. } => {
                    next.extend_from_slice(&owners[old_index..old_index + len]);
                }
                DiffOp::Insert { new_len, .. } | DiffOp::Replace { new_len, .. } => {
                    next.extend(std::iter::repeat_n(index, new_len));
                }
                DiffOp::Delete { .. } => {}
            }
        }
        owners = next;
        previous = text;
    }
    Ok(lines(&previous)
        .zip(owners)
        .enumerate()
        .map(|(i, (text, owner))| BlameLine {
            number: i + 1,
            text: text.to_owned(),
            origin: log[owner].clone(),
        })
        .collect())
}

/// Lines as `similar` counts them: split after each `\n`, the ending dropped
/// (with a `\r` before it).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive('\n').map(|line| {
        let line = line.strip_suffix('\n').unwrap_or(line);
        line.strip_suffix('\r').unwrap_or(line)
    })
}

fn version_text(store: &dyn Read, id: &VersionId) -> Result<String, StoreError> {
    let row = store.version(id)?.ok_or_else(|| StoreError::Missing {
        what: format!("version {id}"),
    })?;
    let bytes = store
        .blob(&row.sha256)?
        .ok_or_else(|| StoreError::Missing {
            what: format!("blob {}", row.sha256),
        })?;
    // A version that is not UTF-8 is shown with replacement characters:
    // the blame names lines, the bytes stay in the store.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::lines;

    #[test]
    fn lines_are_counted_as_the_diff_counts_them() {
        assert_eq!(lines("a\r\nb\nc").collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(lines("a\n").collect::<Vec<_>>(), ["a"]);
        assert_eq!(lines("").count(), 0);
    }
}
