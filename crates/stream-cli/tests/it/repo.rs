//! The repository keeps its own rules: every name an "Architecture
//! invariant" line of ARCHITECTURE.md gives exists and each line names a
//! test function, no source file grows past
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

/// The invariant paragraphs of ARCHITECTURE.md, each with its backticked
/// snake_case names (a `module::` path kept; `*` a wildcard).
fn invariants(architecture: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for para in architecture.split("**Architecture invariant").skip(1) {
        let para = para.split("\n\n").next().unwrap_or_default();
        let para = para.split("\n**").next().unwrap_or_default();
        let names = para
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| {
                let last = quoted.rsplit("::").next().unwrap_or_default();
                let snake = last
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '*');
                snake && (last.contains('_') || last == "*")
            })
            .map(str::to_owned)
            .collect();
        let head: String = para.chars().take(70).collect();
        out.push((head.replace('\n', " "), names));
    }
    out
}

/// One `fn` of the sources: its name, whether it is a test, and the file's
/// path (for `module::` and `module::*` names).
struct Function {
    name: String,
    test: bool,
    path: String,
}

/// A function is a test when a test attribute (`#[test]`, `#[tokio::test]`,
/// …) is among the attributes right above it, when it sits below a
/// `#[cfg(test)]` of its file, or when it is one of a backend conformance
/// suite's functions, which `conformance_suite!` turns into a test per
/// backend.
fn functions(sources: &[(PathBuf, String)]) -> Vec<Function> {
    let mut out = Vec::new();
    for (path, text) in sources {
        let suite = path
            .file_stem()
            .is_some_and(|s| s.to_string_lossy().starts_with("conformance"));
        let cfg_test = text.find("#[cfg(test)]");
        let lines: Vec<&str> = text.lines().collect();
        let mut offset = 0;
        for (i, line) in lines.iter().enumerate() {
            let at = offset;
            offset += line.len() + 1;
            let trimmed = line.trim_start();
            let rest = [
                "pub fn ",
                "pub(crate) fn ",
                "async fn ",
                "pub async fn ",
                "fn ",
            ]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
            let Some(rest) = rest else { continue };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let mut attributed = false;
            for above in lines[..i].iter().rev() {
                let above = above.trim();
                if above.starts_with("#[") && above.contains("test") && !above.contains("cfg(") {
                    attributed = true;
                    break;
                }
                let part_of_head = above.starts_with("#[")
                    || above.starts_with("//")
                    || above.ends_with(")]")
                    || above.ends_with(',');
                if !part_of_head {
                    break;
                }
            }
            let in_cfg_test = cfg_test.is_some_and(|c| c < at);
            out.push(Function {
                name,
                test: attributed || in_cfg_test || (suite && line.starts_with("pub fn ")),
                path: path.to_string_lossy().into_owned(),
            });
        }
        out.extend(generated(path, text));
    }
    out
}

/// Tests a macro writes: in a file defining a `macro_rules!` that writes
/// `#[test]` functions, each identifier it is given; and in a module that
/// runs `conformance_suite!`, the suite (named by the module's path).
fn generated(path: &Path, text: &str) -> Vec<Function> {
    let mut out = Vec::new();
    let shown = path.to_string_lossy();
    if text.contains("macro_rules!") && text.contains("#[test]") {
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.contains('_') {
                out.push(Function {
                    name: word.to_owned(),
                    test: true,
                    path: shown.clone().into_owned(),
                });
            }
        }
    }
    if text.contains("conformance_suite!(") {
        let module_dir = shown.trim_end_matches(".rs");
        for line in text.lines() {
            if let Some(module) = line.trim().strip_prefix("mod ") {
                let module = module.trim_end_matches(['{', ' ', ';']);
                out.push(Function {
                    name: "conformance_suite".to_owned(),
                    test: true,
                    path: format!("{module_dir}/{module}.rs"),
                });
            }
        }
    }
    out
}

/// Whether `name` (`a_b`, `mod::a_b`, `*_is_strict`, `mod::*`) is `f`.
fn names(name: &str, f: &Function) -> bool {
    let mut segments: Vec<&str> = name.split("::").collect();
    let last = segments.pop().unwrap_or_default();
    let matches_last = match last.split_once('*') {
        None => f.name == last,
        Some((pre, post)) => {
            f.name.len() >= pre.len() + post.len()
                && f.name.starts_with(pre)
                && f.name.ends_with(post)
        }
    };
    // A module path names a file or folder on the way (`tests` is the
    // conventional inline module and names none).
    let in_module = segments
        .iter()
        .filter(|m| **m != "tests")
        .all(|m| f.path.contains(&format!("/{m}/")) || f.path.ends_with(&format!("/{m}.rs")));
    matches_last && (in_module || !last.contains('*'))
}

/// Every name in an invariant resolves to a function, and every invariant
/// names at least one test function (a name of code that is not a test,
/// `ReplyText::marked_cut`, must still exist).
#[test]
fn every_test_an_architecture_invariant_names_exists() {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let invariants = invariants(&architecture);
    assert!(invariants.len() > 50, "found only {}", invariants.len());
    let functions = functions(&sources());
    let mut missing = Vec::new();
    let mut untested = Vec::new();
    for (head, named) in &invariants {
        let mut tested = false;
        for name in named {
            let found: Vec<&Function> = functions.iter().filter(|f| names(name, f)).collect();
            if found.is_empty() {
                missing.push(name.clone());
            }
            tested |= found.iter().any(|f| f.test);
        }
        if !tested {
            untested.push(head.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "named in ARCHITECTURE.md, not found: {missing:?}"
    );
    assert!(
        untested.is_empty(),
        "invariants that name no test function: {untested:?}"
    );
}

/// The check above resolves a name to a test, not to any `fn` of that name.
#[test]
fn a_named_function_that_is_not_a_test_does_not_count_as_one() {
    let sources = vec![
        (
            PathBuf::from("/r/crates/a/src/lib.rs"),
            "pub fn helper_of_the_suite() {}\n\n#[test]\n/// Doc.\nfn the_real_test_here() {}\n"
                .to_owned(),
        ),
        (
            PathBuf::from("/r/crates/a/src/inner.rs"),
            "fn x() {}\n#[cfg(test)]\nmod tests {\n    fn inside_a_test_module() {}\n}\n"
                .to_owned(),
        ),
    ];
    let functions = functions(&sources);
    let test = |name: &str| functions.iter().any(|f| names(name, f) && f.test);
    assert!(!test("helper_of_the_suite"));
    assert!(test("the_real_test_here"));
    assert!(test("inside_a_test_module"));
    assert!(test("inner::tests::inside_a_test_module"));
    assert!(test("*_real_test_here"));
    assert!(!test("other::*_real_test_here"));
    assert!(test("inner::*"));
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
        // The inspector's pictures (docs/inspector/*.png) are not text.
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
