//! Architecture invariant: nothing `thestream` links (and so no production
//! crate) depends on `stream-testkit`; the demo's loopback fakes come from
//! `stream-loopback`, a crate meant to ship.

use std::collections::BTreeSet;
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
