//! The layering invariants of ARCHITECTURE.md that are about what a crate
//! links and names: checked on `cargo tree` and on the crate's own sources.

use std::path::{Path, PathBuf};

use crate::deps::tree;

fn crate_sources(krate: &str) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join("crates")
        .join(krate)
        .join("src");
    walk(&src, &mut out);
    assert!(!out.is_empty(), "{krate} has no sources");
    out
}

/// The production part of a source: what precedes its `#[cfg(test)]`.
fn production(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or_default()
}

/// Files of `krate` whose production code contains any of `needles`.
fn naming(krate: &str, needles: &[&str], skip: &[&str]) -> Vec<String> {
    crate_sources(krate)
        .into_iter()
        .filter(|(path, _)| {
            let name = path.file_name().unwrap().to_string_lossy();
            !skip.iter().any(|s| name.starts_with(s))
        })
        .filter_map(|(path, text)| {
            let hits: Vec<&str> = needles
                .iter()
                .copied()
                .filter(|n| production(&text).contains(n))
                .collect();
            (!hits.is_empty()).then(|| format!("{}: {hits:?}", path.display()))
        })
        .collect()
}

const IO_CRATES: [&str; 7] = [
    "tokio", "reqwest", "hyper", "rusqlite", "postgres", "mio", "socket2",
];
const IO_NAMES: [&str; 6] = [
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "File::",
    "TcpStream",
];

/// Architecture invariant (stream-core): no I/O, no secrets, no paths; the
/// worker links it.
#[test]
fn core_does_no_io_names_no_path_and_the_worker_links_it() {
    let linked = tree(&["-p", "stream-core", "-e", "normal"]);
    for io in IO_CRATES {
        assert!(!linked.contains(io), "stream-core links {io}");
    }
    let mut names = IO_NAMES.to_vec();
    names.extend(["std::path", "PathBuf", "api_key"]);
    let found = naming("stream-core", &names, &[]);
    assert!(found.is_empty(), "{found:?}");
    assert!(tree(&["-p", "stream-worker", "-e", "normal"]).contains("stream-core"));
}

/// Architecture invariant (stream-provider): no I/O, no credentials; the
/// worker links it (the broker adds the key to what it sends).
#[test]
fn provider_does_no_io_holds_no_credential_and_the_worker_links_it() {
    let linked = tree(&["-p", "stream-provider", "-e", "normal"]);
    for io in IO_CRATES {
        assert!(!linked.contains(io), "stream-provider links {io}");
    }
    let mut names = IO_NAMES.to_vec();
    names.extend([
        "api_key",
        "authorization",
        "Authorization",
        "x-api-key",
        "Bearer",
    ]);
    let found = naming("stream-provider", &names, &[]);
    assert!(found.is_empty(), "{found:?}");
    assert!(tree(&["-p", "stream-worker", "-e", "normal"]).contains("stream-provider"));
}

/// Architecture invariant (stream-store): never interprets payloads; knows
/// nothing of Telegram, providers or proposals. Its conformance suite and
/// tests may write real payloads; the store itself names none.
#[test]
fn the_store_interprets_no_payload_and_links_no_telegram_provider_or_proposals() {
    let linked = tree(&["-p", "stream-store", "-e", "normal"]);
    for domain in [
        "stream-telegram",
        "stream-provider",
        "stream-proposals",
        "stream-declarations",
        "stream-context",
    ] {
        assert!(!linked.contains(domain), "stream-store links {domain}");
    }
    let found = naming(
        "stream-store",
        &["payload::", "stream_core::payload"],
        &["conformance", "tests", "faulty", "pgtest"],
    );
    assert!(found.is_empty(), "{found:?}");
}

/// Architecture invariant (stream-telegram): decides nothing about answers
/// (it links no engine, model, provider, context or proposals); the worker
/// never links it.
#[test]
fn telegram_decides_nothing_about_answers_and_the_worker_never_links_it() {
    let linked = tree(&["-p", "stream-telegram", "-e", "normal"]);
    for decider in [
        "stream-engine",
        "stream-broker",
        "stream-provider",
        "stream-context",
        "stream-proposals",
        "stream-declarations",
    ] {
        assert!(!linked.contains(decider), "stream-telegram links {decider}");
    }
    assert!(!tree(&["-p", "stream-worker", "-e", "normal"]).contains("stream-telegram"));
}

/// Architecture invariant (stream-declarations): runs nothing (links no
/// sandbox, broker, provider or worker); its only store writes are the
/// registry's record and an installed version's files (`registry`,
/// `install`); the worker never links it.
#[test]
fn declarations_run_nothing_write_only_the_registry_and_the_worker_never_links_them() {
    let linked = tree(&["-p", "stream-declarations", "-e", "normal"]);
    for runner in [
        "stream-sandbox",
        "stream-broker",
        "stream-provider",
        "stream-worker",
    ] {
        assert!(
            !linked.contains(runner),
            "stream-declarations links {runner}"
        );
    }
    let writing = naming(
        "stream-declarations",
        &["transaction(", "Tx", "dyn Store", "std::process"],
        &["registry", "install"],
    );
    assert!(writing.is_empty(), "{writing:?}");
    assert!(!tree(&["-p", "stream-worker", "-e", "normal"]).contains("stream-declarations"));
}

/// Every object key anywhere in `v`, skipping the tool schemas and the
/// model's own arguments in history.
fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                if k != "inputSchema" && k != "arguments" {
                    keys(v, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| keys(i, out)),
        _ => {}
    }
}

/// Architecture invariant (stream-context): never writes to the store (it
/// names only the store's `Read`); the packet has no field for a path, a
/// document id, a version or a hash.
#[test]
fn the_context_never_writes_and_the_packet_has_no_path_document_version_or_hash() {
    let writing = naming(
        "stream-context",
        &["transaction(", "Tx", "dyn Store", "put_hashed", "std::fs"],
        &[],
    );
    assert!(writing.is_empty(), "{writing:?}");
    for api in [
        stream_core::payload::ProviderApi::OpenaiChat,
        stream_core::payload::ProviderApi::AnthropicMessages,
    ] {
        let packet = serde_json::to_value(stream_testkit::packets::packet(api)).unwrap();
        let mut found = Vec::new();
        keys(&packet, &mut found);
        assert!(found.len() > 10, "{found:?}");
        let leaking: Vec<&String> = found
            .iter()
            .filter(|k| {
                let k = k.to_ascii_lowercase();
                ["path", "document", "version", "hash", "sha256"]
                    .iter()
                    .any(|w| k.contains(w))
            })
            .collect();
        assert!(leaking.is_empty(), "{leaking:?}");
    }
}

/// Architecture invariant (stream-cli): owns no domain rule of its own: it
/// makes no event and opens no transaction; every write is a domain crate's.
#[test]
fn the_cli_makes_no_event_and_opens_no_transaction() {
    let found = naming(
        "stream-cli",
        &["NewEvent", "transaction(", ".append(", "put_hashed"],
        &[],
    );
    assert!(found.is_empty(), "{found:?}");
}
