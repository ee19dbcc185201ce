//! "Changing proposal capability requires a declaration-version bump. The
//! proposal set and exact capability manifest are included in the
//! declaration fingerprint."

use std::collections::HashSet;

use serde_json::{Value, json};
use stream_core::payload::ProposalKind;
use stream_declarations::registry::{self, Installed, RegistryError};
use stream_declarations::{CapabilityManifest, fingerprint};
use stream_store::{Read, SqliteStore};

use crate::common::{check, pi, prompt, with};

/// JSON Schema keywords that carry a bound or shape.
const BOUND_KEYWORDS: &[&str] = &[
    "type",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "pattern",
    "const",
    "enum",
    "required",
    "uniqueItems",
    "additionalProperties",
];

/// Pointers to every bound keyword in a schema (property names are skipped).
fn bound_pointers(schema: &Value, at: &str, in_properties: bool, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{at}/{key}");
                if !in_properties && BOUND_KEYWORDS.contains(&key.as_str()) {
                    out.push(here.clone());
                }
                bound_pointers(child, &here, !in_properties && key == "properties", out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                bound_pointers(child, &format!("{at}/{i}"), false, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

fn mutate(value: &mut Value) {
    *value = match value.take() {
        Value::Number(n) => json!(n.as_u64().unwrap() + 1),
        Value::String(s) => json!(format!("{s}x")),
        Value::Bool(b) => json!(!b),
        Value::Array(mut items) => {
            items.push(json!("extra"));
            Value::Array(items)
        }
        other => panic!("unexpected bound value {other}"),
    };
}

#[test]
fn every_single_bound_of_every_tool_schema_is_in_the_fingerprint() {
    let loaded = check(&pi()).unwrap();
    let prompt_hash = loaded.prompt.as_ref().map(|p| p.sha256.clone());
    let original =
        fingerprint(&loaded.declaration, &loaded.manifest, prompt_hash.as_ref()).unwrap();
    assert_eq!(original, loaded.fingerprint);

    let mut seen = HashSet::from([original.clone()]);
    let mut keywords = HashSet::new();
    for (t, tool) in loaded.manifest.tools.iter().enumerate() {
        let mut pointers = Vec::new();
        bound_pointers(&tool.schema, "", false, &mut pointers);
        assert!(
            pointers.len() >= 10,
            "{}: only {} bounds",
            tool.name,
            pointers.len()
        );
        for pointer in pointers {
            keywords.insert(pointer.rsplit('/').next().unwrap().to_owned());
            let mut manifest = loaded.manifest.clone();
            mutate(manifest.tools[t].schema.pointer_mut(&pointer).unwrap());
            let changed =
                fingerprint(&loaded.declaration, &manifest, prompt_hash.as_ref()).unwrap();
            assert!(
                seen.insert(changed),
                "{}{pointer}: fingerprint did not change (or collided)",
                tool.name
            );
        }
        // Descriptions, name and the protocol version are part of it too.
        let mut manifest = loaded.manifest.clone();
        manifest.tools[t].description = "Different words.";
        assert!(
            seen.insert(fingerprint(&loaded.declaration, &manifest, prompt_hash.as_ref()).unwrap())
        );
        let mut manifest = loaded.manifest.clone();
        manifest.tools[t].name = "renamed_tool";
        assert!(
            seen.insert(fingerprint(&loaded.declaration, &manifest, prompt_hash.as_ref()).unwrap())
        );
    }
    let mut manifest = loaded.manifest.clone();
    manifest.packet_protocol = "stream.sandbox/2";
    assert!(
        seen.insert(fingerprint(&loaded.declaration, &manifest, prompt_hash.as_ref()).unwrap())
    );
    // The walk found the bounds the specification names.
    for keyword in [
        "minLength",
        "maxLength",
        "maxItems",
        "uniqueItems",
        "pattern",
        "enum",
        "const",
        "minimum",
        "maximum",
        "additionalProperties",
    ] {
        assert!(
            keywords.contains(keyword),
            "no {keyword} in any tool schema"
        );
    }
}

#[test]
fn the_proposal_set_is_in_the_fingerprint() {
    let sets: [&[&str]; 7] = [
        &[],
        &["memory-change"],
        &["self-correction"],
        &["focus-declaration"],
        &["memory-change", "self-correction"],
        &["memory-change", "focus-declaration"],
        &["memory-change", "self-correction", "focus-declaration"],
    ];
    let mut seen = HashSet::new();
    for set in sets {
        let loaded = check(&with(pi(), "/policy/proposals", json!(set))).unwrap();
        let kinds: Vec<_> = loaded.manifest.tools.iter().map(|t| t.kind).collect();
        assert_eq!(kinds.len(), set.len());
        assert!(seen.insert(loaded.fingerprint), "{set:?} collided");
    }
    // The manifest alone differs with the set, whatever the declaration.
    let loaded = check(&pi()).unwrap();
    let prompt_hash = loaded.prompt.as_ref().map(|p| p.sha256.clone());
    let fewer = CapabilityManifest::for_proposals(&[ProposalKind::MemoryChange]);
    assert_ne!(
        fingerprint(&loaded.declaration, &fewer, prompt_hash.as_ref()).unwrap(),
        loaded.fingerprint
    );
}

#[test]
fn the_prompt_and_every_declaration_field_are_in_the_fingerprint() {
    let base = check(&pi()).unwrap().fingerprint;
    let other_prompt = stream_declarations::LoadedDeclaration::from_parts(
        &crate::common::yaml(&pi()),
        Some(prompt("You are terse.")),
    )
    .unwrap();
    assert_ne!(other_prompt.fingerprint, base);
    for (pointer, value) in [
        ("/provider/maxOutputTokens", json!(1025)),
        ("/transcript/maxTurns", json!(41)),
        ("/commands/0/description", json!("Another")),
        ("/prompt", json!("prompts/other.md")),
        ("/version", json!(19)),
    ] {
        assert_ne!(
            check(&with(pi(), pointer, value)).unwrap().fingerprint,
            base,
            "{pointer}"
        );
    }
}

#[test]
fn the_fingerprint_ignores_yaml_formatting() {
    let compact = crate::common::yaml(&pi());
    let commented = format!("# a comment\n\n{}", compact.replace(": ", ":   "));
    let a = stream_declarations::LoadedDeclaration::from_parts(
        &compact,
        Some(prompt("You are helpful.")),
    )
    .unwrap();
    let b = stream_declarations::LoadedDeclaration::from_parts(
        &commented,
        Some(prompt("You are helpful.")),
    )
    .unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);
}

#[test]
fn a_changed_capability_under_the_same_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
    let v18 = check(&pi()).unwrap();
    assert_eq!(v18.install(&store).unwrap(), Installed::New);
    assert_eq!(v18.install(&store).unwrap(), Installed::Converged);
    v18.verify(&store).unwrap();
    let key = registry::registry_key("telegram-conversation", 18);
    let recorded = store.control(&key).unwrap().unwrap();
    assert_eq!(recorded, json!({"fingerprint": v18.fingerprint}));

    // One bound changed in code, same (id, version): installing and loading
    // are refused, and nothing is written.
    let mut manifest = v18.manifest.clone();
    *manifest.tools[0]
        .schema
        .pointer_mut("/properties/reason/maxLength")
        .unwrap() = json!(1001);
    let changed = fingerprint(
        &v18.declaration,
        &manifest,
        v18.prompt.as_ref().map(|p| &p.sha256),
    )
    .unwrap();
    let err = registry::install(&store, "telegram-conversation", 18, &changed).unwrap_err();
    assert!(
        matches!(&err, RegistryError::FingerprintChanged { id, version: 18 } if id == "telegram-conversation"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("capability changed: bump the declaration version"),
        "{err}"
    );
    let err = registry::verify(&store, "telegram-conversation", 18, &changed).unwrap_err();
    assert!(
        matches!(err, RegistryError::FingerprintChanged { .. }),
        "{err}"
    );
    assert_eq!(store.control(&key).unwrap().unwrap(), recorded);

    // A changed proposal set under the same version: refused too.
    let fewer = check(&with(pi(), "/policy/proposals", json!(["memory-change"]))).unwrap();
    assert!(matches!(
        fewer.install(&store),
        Err(RegistryError::FingerprintChanged { .. })
    ));

    // The bump: a new version installs beside the old one.
    let v19 = check(&with(
        with(pi(), "/version", json!(19)),
        "/policy/proposals",
        json!(["memory-change"]),
    ))
    .unwrap();
    assert_eq!(v19.install(&store).unwrap(), Installed::New);
    v18.verify(&store).unwrap();
    v19.verify(&store).unwrap();
}

#[test]
fn loading_an_uninstalled_or_malformed_entry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
    let v18 = check(&pi()).unwrap();
    assert!(matches!(
        v18.verify(&store),
        Err(RegistryError::NotInstalled { version: 18, .. })
    ));
    let mut tx = stream_store::Store::begin(&store).unwrap();
    tx.set_control(
        &registry::registry_key("telegram-conversation", 18),
        &json!({"fingerprint": "not-hex"}),
    )
    .unwrap();
    tx.commit().unwrap();
    assert!(matches!(
        v18.install(&store),
        Err(RegistryError::Malformed { .. })
    ));
}

/// The protocol value in every fingerprint is the wire's own constant (the
/// literal the frames carry), so bumping the protocol changes every
/// fingerprint and the registry refuses it under the same version.
#[test]
fn a_protocol_bump_changes_the_fingerprint_and_needs_a_version_bump() {
    assert_eq!(
        stream_declarations::PACKET_PROTOCOL,
        stream_protocol::Protocol::VALUE
    );
    assert_eq!(stream_protocol::PROTOCOL, stream_protocol::Protocol::VALUE);
    let v18 = check(&pi()).unwrap();
    let carried = serde_json::to_value(&v18.manifest).unwrap();
    assert_eq!(carried["packetProtocol"], stream_protocol::Protocol::VALUE);
    let hello = serde_json::to_value(stream_protocol::Protocol).unwrap();
    assert_eq!(carried["packetProtocol"], hello);

    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
    assert_eq!(v18.install(&store).unwrap(), Installed::New);
    let mut bumped = v18.manifest.clone();
    bumped.packet_protocol = "stream.sandbox/2";
    let changed = fingerprint(
        &v18.declaration,
        &bumped,
        v18.prompt.as_ref().map(|p| &p.sha256),
    )
    .unwrap();
    assert_ne!(changed, v18.fingerprint);
    let err = registry::install(&store, "telegram-conversation", 18, &changed).unwrap_err();
    assert!(
        matches!(err, RegistryError::FingerprintChanged { version: 18, .. }),
        "{err}"
    );
}
