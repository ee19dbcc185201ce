//! The repository keeps its own rules: every test an "Architecture
//! invariant" line of ARCHITECTURE.md names exists, no source file grows past
//! 800 lines, and nothing points outside the repository.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every `.rs` file under `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// Backticked names in invariant paragraphs that look like test names (two
/// underscores or more; a `module::` path is dropped).
fn named_tests(architecture: &str) -> Vec<String> {
    let mut names = Vec::new();
    for para in architecture.split("**Architecture invariant").skip(1) {
        let para = para.split("\n\n").next().unwrap_or_default();
        let para = para.split("\n**").next().unwrap_or_default();
        for (i, quoted) in para.split('`').enumerate() {
            let last = quoted.rsplit("::").next().unwrap_or_default();
            let snake = last
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if i % 2 == 1 && snake && last.matches('_').count() >= 2 {
                names.push(last.to_owned());
            }
        }
    }
    names
}

#[test]
fn every_test_an_architecture_invariant_names_exists() {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let names = named_tests(&architecture);
    assert!(names.len() > 50, "found only {} names", names.len());
    let sources = sources();
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| {
            let needle = format!("fn {name}");
            !sources.iter().any(|(_, text)| {
                text.match_indices(&needle).any(|(at, _)| {
                    let next = text[at + needle.len()..].chars().next();
                    matches!(next, Some('(' | '<'))
                })
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "named in ARCHITECTURE.md, not found: {missing:?}"
    );
}

#[test]
fn no_source_file_is_over_800_lines() {
    let long: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| text.lines().count() > 800)
        .map(|(path, text)| format!("{} ({} lines)", path.display(), text.lines().count()))
        .collect();
    assert!(long.is_empty(), "split by concern: {long:?}");
}

#[test]
fn nothing_points_outside_the_repository() {
    let mut texts = sources();
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let path = root().join(doc);
        texts.push((path.clone(), std::fs::read_to_string(path).unwrap()));
    }
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        // docs/inspector holds the screenshots, not text.
        if path.is_dir() {
            continue;
        }
        texts.push((path.clone(), std::fs::read_to_string(path).unwrap()));
    }
    let outside = ["../", "shared/"].concat();
    let pointing: Vec<String> = texts
        .iter()
        .filter(|(_, text)| text.contains(&outside))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(pointing.is_empty(), "{pointing:?}");
}
