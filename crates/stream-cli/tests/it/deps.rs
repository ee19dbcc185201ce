//! Architecture invariant: nothing `thestream` links (and so no production
//! crate) depends on `stream-testkit`; the demo's loopback fakes come from
//! `stream-loopback`, a crate meant to ship.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate names `cargo tree` prints for `args` (offline, no prefix).
pub(crate) fn tree(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("tree")
        .args(args)
        .args(["--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn production_never_links_the_testkit() {
    let crates = tree(&["-p", "stream-cli", "-e", "normal,build"]);
    assert!(crates.contains("stream-loopback"), "{crates:?}");
    assert!(
        !crates.contains("stream-testkit"),
        "thestream links stream-testkit"
    );
}

/// Architecture invariant: canonical JSON is `stream_core::canon`'s own
/// encoder; serde_jcs, the reference it is tested against, is never linked.
#[test]
fn production_never_links_serde_jcs() {
    let crates = tree(&["-p", "stream-cli", "-e", "normal,build"]);
    assert!(crates.contains("stream-core"), "{crates:?}");
    assert!(!crates.contains("serde_jcs"), "thestream links serde_jcs");
}

/// Architecture invariant: the engine orchestrates; the sandbox and the
/// worker's wire protocol are the broker's (and the context's packet
/// builder's) business, so the engine depends on neither directly.
#[test]
fn the_engine_depends_on_neither_the_sandbox_nor_the_protocol() {
    let direct = tree(&["-p", "stream-engine", "-e", "normal", "--depth", "1"]);
    assert!(direct.contains("stream-broker"), "{direct:?}");
    for forbidden in ["stream-sandbox", "stream-protocol"] {
        assert!(
            !direct.contains(forbidden),
            "stream-engine depends on {forbidden} directly: {direct:?}"
        );
    }
}

/// The paths of `text`'s `use` statements, whitespace removed, each with
/// whether it is a `pub use` (a re-export).
fn use_statements(text: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let before = &rest[..at];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let head = before[line_start..].trim();
        let statement_start = head.is_empty() || head == "pub" || head == "pub(crate)";
        let end = rest[at..].find(';').map_or(rest.len(), |e| at + e);
        if statement_start {
            let path = rest[at + 4..end].split_whitespace().collect::<String>();
            out.push((head.starts_with("pub"), path));
        }
        rest = &rest[(at + 4).min(end)..];
    }
    out
}

/// `a::b::{C, D}` → `[("a", "C"), ("a", "D")]`; `a::b::C` → `[("a", "C")]`.
fn imported(path: &str) -> Vec<(String, String)> {
    let krate = path.split("::").next().unwrap_or_default().to_owned();
    let tail = match path.find('{') {
        Some(at) => path[at + 1..].trim_end_matches('}').to_owned(),
        None => path.rsplit("::").next().unwrap_or_default().to_owned(),
    };
    tail.split(',')
        .filter_map(|item| {
            let item = item.rsplit("::").next()?.split("as").next()?.trim();
            (!item.is_empty()).then(|| (krate.clone(), item.to_owned()))
        })
        .collect()
}

/// `crate_ident::…::Item` paths written in code (not in comments).
fn qualified(text: &str, krate: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find(&format!("{krate}::")) {
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let item = path
                .trim_end_matches(':')
                .rsplit("::")
                .next()
                .unwrap_or_default();
            out.push((krate.to_owned(), item.to_owned()));
            rest = &rest[at + path.len().max(1)..];
        }
    }
    out
}

/// Architecture invariant: beyond the Cargo edge, the paths the engine's
/// code names reach the protocol and the sandbox only through the opaque
/// hand-offs it passes along: the packet the context builds for the broker
/// (`Packet`, its `ProviderSpec` and `ProviderCompat`) and the broker's
/// worker-image error (`ImageError`). It names no frame, reader or sandbox
/// type, directly or through any crate's re-export.
#[test]
fn the_engine_names_the_protocol_and_the_sandbox_only_through_the_hand_offs() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut reexported: BTreeSet<(String, String)> = BTreeSet::new();
    let mut engine = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let dir = krate.unwrap().path();
        let ident = dir.file_name().unwrap().to_string_lossy().replace('-', "_");
        for (path, text) in rust_sources(&dir.join("src")) {
            for (public, path) in use_statements(&text) {
                if !public {
                    continue;
                }
                for (from, item) in imported(&path) {
                    if from == "stream_protocol" || from == "stream_sandbox" {
                        reexported.insert((ident.clone(), item));
                    }
                }
            }
            if ident == "stream_engine" {
                engine.push((path, text));
            }
        }
    }
    assert!(
        reexported.contains(&("stream_context".into(), "Packet".into())),
        "{reexported:?}"
    );
    let allowed = [
        ("stream_context", "Packet"),
        ("stream_context", "ProviderSpec"),
        ("stream_context", "ProviderCompat"),
        ("stream_broker", "ImageError"),
    ];
    let mut named = BTreeSet::new();
    for (path, text) in &engine {
        let mut paths: Vec<(String, String)> = use_statements(text)
            .iter()
            .flat_map(|(_, s)| imported(s))
            .collect();
        for krate in [
            "stream_protocol",
            "stream_sandbox",
            "stream_context",
            "stream_broker",
        ] {
            paths.extend(qualified(text, krate));
        }
        for (krate, item) in paths {
            let direct = krate == "stream_protocol" || krate == "stream_sandbox";
            if direct || reexported.contains(&(krate.clone(), item.clone())) {
                named.insert((krate, item, path.display().to_string()));
            }
        }
    }
    let beyond: Vec<_> = named
        .iter()
        .filter(|(k, i, _)| !allowed.contains(&(k.as_str(), i.as_str())))
        .collect();
    assert!(beyond.is_empty(), "the engine names {beyond:?}");
    assert!(
        named.iter().any(|(_, i, _)| i == "Packet"),
        "the scan sees the engine's hand-off of the packet: {named:?}"
    );
}

/// Every `.rs` file under `dir`.
fn rust_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
    out
}

/// `1.89` or `1.89.0` as comparable numbers (a missing part is 0).
fn version(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap());
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// The toolchain the README and `rust-version` state is the real minimum:
/// no locked dependency (for this host) declares a newer `rust-version`.
/// (Our own code's use of newer std APIs is clippy's `incompatible_msrv`.)
#[test]
fn no_locked_dependency_needs_a_newer_rustc_than_declared() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustc = Command::new("rustc").arg("-vV").output().unwrap();
    let host = String::from_utf8(rustc.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap();
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let declared = version(env!("CARGO_PKG_RUST_VERSION"));
    let resolved: BTreeSet<&str> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    let too_new: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| resolved.contains(p["id"].as_str().unwrap()))
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            let name = p["name"].as_str()?;
            let v = p["version"].as_str()?;
            (version(needs) > declared).then(|| format!("{name} {v} needs {needs}"))
        })
        .collect();
    assert!(
        too_new.is_empty(),
        "rust-version {} is below what these need: {too_new:?}",
        env!("CARGO_PKG_RUST_VERSION")
    );
}

/// Architecture invariant: the inspector links nothing that holds a
/// credential, sends to Telegram, runs a worker or orchestrates: it can
/// only read and render.
#[test]
fn the_inspector_links_no_engine_broker_sandbox_or_telegram() {
    let crates = tree(&["-p", "stream-inspect", "-e", "normal,build"]);
    assert!(crates.contains("stream-store"), "{crates:?}");
    for forbidden in [
        "stream-engine",
        "stream-broker",
        "stream-sandbox",
        "stream-telegram",
        "stream-worker",
        "reqwest",
    ] {
        assert!(
            !crates.contains(forbidden),
            "stream-inspect links {forbidden}"
        );
    }
}

/// Architecture invariant: the inspector's code names no way to write: no
/// `Store` or `Tx` of the store (only `Read`), no transaction, no file
/// written or created, no method but GET and HEAD routed.
#[test]
fn the_inspector_names_no_write() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../stream-inspect/src");
    let mut files = vec![src.clone()];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        seen += 1;
        for word in ["Store", "Tx", "begin", "post", "put", "OpenOptions"] {
            assert!(
                !names_word(&text, word),
                "{} names {word:?}",
                path.display()
            );
        }
        for call in [
            "fs::write",
            "File::create",
            "create_dir",
            "remove_file",
            "rename(",
            "delete(",
            "patch(",
        ] {
            assert!(!text.contains(call), "{} names {call:?}", path.display());
        }
    }
    assert!(seen >= 5, "the inspector's sources were not found");
}

/// Whether `word` occurs in `text` as a whole identifier.
fn names_word(text: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(at, _)| {
        !ident(text[..at].chars().next_back()) && !ident(text[at + word.len()..].chars().next())
    })
}
