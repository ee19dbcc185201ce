//! What this crate may link: the worker links it, so it must stay free of
//! the store, Telegram, the broker and anything holding credentials or paths.

/// The `[dependencies]` of this crate's manifest, by name.
fn direct_dependencies() -> Vec<String> {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .expect("read Cargo.toml");
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
            names.push(name.to_owned());
        }
    }
    names.sort();
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
