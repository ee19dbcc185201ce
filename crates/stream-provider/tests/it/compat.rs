//! `[provider] compat`: one golden request per mode, for a fresh turn and for
//! a turn replaying tool history; what each mode changes, and that the
//! Anthropic wire format ignores the mode.

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_protocol::{Packet, ProviderCompat};
use stream_provider::build_request;
use stream_testkit::packets::packet;

fn packet_for(api: ProviderApi, compat: ProviderCompat, replayed_history: bool) -> Packet {
    let mut p = packet(api);
    p.provider.compat = compat;
    if !replayed_history {
        p.history.clear();
    }
    p
}

/// Every `maxLength` / `maxItems` anywhere in `v`, as JSON pointers.
fn upper_bounds(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, sub) in map {
                if k == "maxLength" || k == "maxItems" {
                    out.push(format!("{at}/{k}"));
                }
                upper_bounds(sub, format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, sub) in items.iter().enumerate() {
                upper_bounds(sub, format!("{at}/{i}"), out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

#[test]
fn compat_request_goldens() {
    for compat in ProviderCompat::ALL {
        for (turn, replayed) in [("fresh", false), ("replayed", true)] {
            let body =
                build_request(&packet_for(ProviderApi::OpenaiChat, compat, replayed)).unwrap();
            insta::assert_json_snapshot!(format!("compat_{}_{turn}", compat.as_str()), body);
        }
    }
}

#[test]
fn ollama_and_llama_cpp_get_max_tokens_the_others_max_completion_tokens() {
    for compat in ProviderCompat::ALL {
        let body = build_request(&packet_for(ProviderApi::OpenaiChat, compat, true)).unwrap();
        let (sent, absent) = match compat {
            ProviderCompat::Ollama | ProviderCompat::LlamaCpp => {
                ("max_tokens", "max_completion_tokens")
            }
            ProviderCompat::Openai | ProviderCompat::Vllm => {
                ("max_completion_tokens", "max_tokens")
            }
        };
        assert_eq!(body[sent], 1024, "{compat:?}");
        assert!(body.get(absent).is_none(), "{compat:?}");
        // vLLM defaults to "auto" whenever tools are present, so leaving it
        // out would not avoid its 400: every mode asks for "auto".
        assert_eq!(body["tool_choice"], "auto", "{compat:?}");
    }
}

#[test]
fn llama_cpp_schemas_lose_upper_bounds_only_in_the_request() {
    let p = packet_for(ProviderApi::OpenaiChat, ProviderCompat::LlamaCpp, true);
    let body = build_request(&p).unwrap();
    let mut sent = Vec::new();
    upper_bounds(&body["tools"], String::new(), &mut sent);
    assert_eq!(sent, Vec::<String>::new());
    assert_eq!(body["parallel_tool_calls"], true);
    // The packet, which the worker and the parent validate against, keeps
    // the full strict schema.
    let mut kept = Vec::new();
    for tool in &p.tools {
        upper_bounds(&tool.input_schema, String::new(), &mut kept);
    }
    assert!(
        kept.iter()
            .any(|k| k == "/properties/proposed_text/maxLength"),
        "{kept:?}"
    );
    for compat in [
        ProviderCompat::Openai,
        ProviderCompat::Ollama,
        ProviderCompat::Vllm,
    ] {
        let p = packet_for(ProviderApi::OpenaiChat, compat, true);
        let body = build_request(&p).unwrap();
        for (i, tool) in p.tools.iter().enumerate() {
            assert_eq!(
                body["tools"][i]["function"]["parameters"],
                tool.input_schema
            );
        }
        assert!(body.get("parallel_tool_calls").is_none(), "{compat:?}");
    }
}

#[test]
fn anthropic_requests_ignore_the_compat_mode() {
    let expected = build_request(&packet_for(
        ProviderApi::AnthropicMessages,
        ProviderCompat::Openai,
        true,
    ))
    .unwrap();
    for compat in ProviderCompat::ALL {
        let body =
            build_request(&packet_for(ProviderApi::AnthropicMessages, compat, true)).unwrap();
        assert_eq!(body, expected, "{compat:?}");
    }
}
