//! Architecture invariant: nothing `thestream` links (and so no production
//! crate) depends on `stream-testkit`; the demo's loopback fakes come from
//! `stream-loopback`, a crate meant to ship.

use std::collections::BTreeSet;
use std::process::Command;

/// The crate names `cargo tree` prints for `args` (offline, no prefix).
fn tree(args: &[&str]) -> BTreeSet<String> {
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
