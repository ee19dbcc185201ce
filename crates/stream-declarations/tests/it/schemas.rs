//! Golden files of the wire formats this crate owns: the three tool specs
//! (name, description, JSON Schema), a manifest, and the argument refusal
//! codes.

use stream_core::payload::ProposalKind;
use stream_declarations::{ArgsProblem, CapabilityManifest, PACKET_PROTOCOL, tool_spec};

#[test]
fn request_memory_change_schema_golden() {
    insta::assert_json_snapshot!(tool_spec(ProposalKind::MemoryChange));
}

#[test]
fn submit_correction_schema_golden() {
    insta::assert_json_snapshot!(tool_spec(ProposalKind::SelfCorrection));
}

#[test]
fn propose_focus_schema_golden() {
    insta::assert_json_snapshot!(tool_spec(ProposalKind::FocusDeclaration));
}

#[test]
fn manifest_shape_golden() {
    let manifest = CapabilityManifest::for_proposals(&[
        ProposalKind::SelfCorrection,
        ProposalKind::MemoryChange,
    ]);
    assert_eq!(manifest.packet_protocol, PACKET_PROTOCOL);
    let mut value = serde_json::to_value(&manifest).unwrap();
    // The schemas have their own goldens; this one pins the envelope.
    for tool in value["tools"].as_array_mut().unwrap() {
        tool["schema"] = serde_json::json!("…");
        tool["description"] = serde_json::json!("…");
    }
    insta::assert_json_snapshot!(value);
}

#[test]
fn every_tool_schema_is_a_valid_2020_12_schema() {
    for kind in ProposalKind::ALL {
        let spec = tool_spec(kind);
        assert_eq!(spec.schema["additionalProperties"], false, "{}", spec.name);
        jsonschema::draft202012::new(&spec.schema).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
        jsonschema::meta::validate(&spec.schema).unwrap_or_else(|e| panic!("{}: {e}", spec.name));
    }
}

#[test]
fn args_refusal_codes_golden() {
    let codes: Vec<_> = ArgsProblem::ALL.iter().map(|p| p.as_str()).collect();
    insta::assert_snapshot!(codes.join("\n"));
}

#[test]
fn every_object_in_every_schema_forbids_additional_properties() {
    fn walk(name: &str, at: &str, v: &serde_json::Value) {
        if let Some(map) = v.as_object() {
            if map.get("type").and_then(|t| t.as_str()) == Some("object") {
                assert_eq!(
                    map.get("additionalProperties"),
                    Some(&serde_json::json!(false)),
                    "{name}{at}"
                );
            }
            for (k, child) in map {
                walk(name, &format!("{at}/{k}"), child);
            }
        } else if let Some(items) = v.as_array() {
            for (i, child) in items.iter().enumerate() {
                walk(name, &format!("{at}/{i}"), child);
            }
        }
    }
    for kind in ProposalKind::ALL {
        let spec = tool_spec(kind);
        walk(spec.name, "", &spec.schema);
    }
}

#[test]
fn every_schema_property_name_is_a_known_field() {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(map) = v.as_object() {
            if let Some(props) = map.get("properties").and_then(|p| p.as_object()) {
                out.extend(props.keys().cloned());
            }
            map.values().for_each(|c| walk(c, out));
        } else if let Some(items) = v.as_array() {
            items.iter().for_each(|c| walk(c, out));
        }
    }
    let mut names = Vec::new();
    for kind in ProposalKind::ALL {
        walk(&tool_spec(kind).schema, &mut names);
    }
    for name in names {
        assert!(
            stream_declarations::args::KNOWN_FIELDS.contains(&name.as_str()),
            "{name} missing from KNOWN_FIELDS"
        );
    }
}

/// The test kit's packets carry the shipped schemas, not a copy: a copy
/// there once drifted (`target_output`, `source` patterns).
#[test]
fn the_test_kit_s_tool_schemas_are_the_shipped_ones() {
    let kit = stream_testkit::packets::tools();
    assert_eq!(kit.len(), ProposalKind::ALL.len());
    for kind in ProposalKind::ALL {
        let shipped = tool_spec(kind);
        let tool = kit.iter().find(|t| t.name == shipped.name).unwrap();
        assert_eq!(
            tool.input_schema, shipped.schema,
            "{} drifted",
            shipped.name
        );
    }
}
