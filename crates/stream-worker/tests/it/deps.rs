//! Architecture invariant: the worker links only stream-core,
//! stream-protocol, stream-provider and stream-sandbox — never the store,
//! Telegram, the broker, an HTTP stack, or anything holding credentials or paths.

use std::collections::BTreeSet;
use std::process::Command;

#[test]
fn worker_links_only_core_protocol_provider_and_sandbox() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "stream-worker",
            "-e",
            "normal",
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
    let ours: BTreeSet<&str> = crates
        .iter()
        .map(String::as_str)
        .filter(|c| c.starts_with("stream-"))
        .collect();
    assert_eq!(
        ours,
        BTreeSet::from([
            "stream-core",
            "stream-protocol",
            "stream-provider",
            "stream-sandbox",
            "stream-worker"
        ])
    );
    for forbidden in [
        "reqwest", "hyper", "axum", "tokio", "rustls", "rusqlite", "h2",
    ] {
        assert!(!crates.contains(forbidden), "the worker links {forbidden}");
    }
}
