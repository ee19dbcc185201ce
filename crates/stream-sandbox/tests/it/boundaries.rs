//! What this crate may link: the worker links it, so it must stay free of
//! the store, Telegram, the broker and anything holding credentials or paths.

/// Every non-dev dependency of this crate, by name: `[dependencies]`,
/// `[build-dependencies]` and every `[target.'cfg(…)'.dependencies]`, as
/// cargo itself resolves the manifest.
fn direct_dependencies() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let package = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == env!("CARGO_PKG_NAME"))
        .expect("this package");
    let mut names: Vec<String> = package["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .filter(|d| d["kind"] != "dev")
        .map(|d| {
            let name = d["rename"].as_str().or(d["name"].as_str());
            name.expect("dependency name").to_owned()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn never_depends_on_the_store_or_anything_with_credentials() {
    // An allowlist: adding a dependency is a decision this test makes visible.
    assert_eq!(
        direct_dependencies(),
        [
            "landlock",
            "libc",
            "seccompiler",
            "serde",
            "serde_json",
            "thiserror",
            "tracing"
        ]
    );
}
