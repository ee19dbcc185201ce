//! Architecture invariant: nothing `thestream` links (and so no production
//! crate) depends on `stream-testkit`; the demo's loopback fakes come from
//! `stream-loopback`, a crate meant to ship.

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn production_never_links_the_testkit() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "stream-cli",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let crates: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(crates.contains("stream-loopback"), "{crates:?}");
    assert!(
        !crates.contains("stream-testkit"),
        "thestream links stream-testkit"
    );
}

