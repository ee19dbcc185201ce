//! What an `openai-chat` request carries for each OpenAI-compatible server
//! (`[provider] compat`, see `docs/providers.md`). Every difference between
//! the modes is decided here and nowhere else; the packet names the mode, so
//! the worker builds and the parent rebuilds the same body.
//!
//! Only the request *sent* changes: the worker and the parent validate tool
//! arguments against the packet's full schemas whatever the mode.

use serde_json::{Map, Value};
use stream_protocol::ProviderCompat;

/// The field that carries the output token limit. OpenAI deprecated
/// `max_tokens` (its reasoning models refuse it) and vLLM reads
/// `max_completion_tokens`; Ollama's `/v1` layer reads only `max_tokens`, and
/// llama.cpp read only `max_tokens` until early 2026, so the limit would be
/// silently dropped there.
pub(crate) fn token_limit_field(compat: ProviderCompat) -> &'static str {
    match compat {
        ProviderCompat::Openai | ProviderCompat::Vllm => "max_completion_tokens",
        ProviderCompat::Ollama | ProviderCompat::LlamaCpp => "max_tokens",
    }
}

/// Whether to ask for several tool calls in one completion explicitly.
/// OpenAI, vLLM and Ollama allow them by default; llama.cpp defaults
/// `parallel_tool_calls` to false and its grammar then admits one call, while
/// a completion may carry up to three proposals.
pub(crate) fn asks_parallel_tool_calls(compat: ProviderCompat) -> bool {
    match compat {
        ProviderCompat::LlamaCpp => true,
        ProviderCompat::Openai | ProviderCompat::Ollama | ProviderCompat::Vllm => false,
    }
}

/// Keywords left out of the schemas sent to llama.cpp. It compiles every
/// tool schema of a request into one grammar, where `maxLength: n` and
/// `maxItems: n` become bounded repetitions; bounds from 2,000 up (our
/// `proposed_text` allows 32,768) and nested bounds that multiply make the
/// grammar parser reject the whole request with a 400.
const LLAMA_CPP_STRIPPED: [&str; 2] = ["maxLength", "maxItems"];

/// The tool schema as sent to the server of `compat`.
pub(crate) fn schema_sent(compat: ProviderCompat, schema: &Value) -> Value {
    match compat {
        ProviderCompat::Openai | ProviderCompat::Ollama | ProviderCompat::Vllm => schema.clone(),
        ProviderCompat::LlamaCpp => without_keywords(schema, &LLAMA_CPP_STRIPPED),
    }
}

/// `schema` without `keywords`, removed from every subschema. Property names
/// are data, not keywords: a property called `maxLength` stays.
fn without_keywords(schema: &Value, keywords: &[&str]) -> Value {
    let Value::Object(object) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in object {
        if keywords.contains(&key.as_str()) {
            continue;
        }
        let value = match key.as_str() {
            // Maps from a name to a subschema.
            "properties" | "patternProperties" | "$defs" | "definitions" => match value {
                Value::Object(map) => Value::Object(
                    map.iter()
                        .map(|(name, sub)| (name.clone(), without_keywords(sub, keywords)))
                        .collect(),
                ),
                other => other.clone(),
            },
            // Lists of subschemas.
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => match value {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|sub| without_keywords(sub, keywords))
                        .collect(),
                ),
                other => other.clone(),
            },
            // One subschema.
            "items" | "additionalProperties" | "not" | "contains" | "if" | "then" | "else" => {
                without_keywords(value, keywords)
            }
            _ => value.clone(),
        };
        out.insert(key.clone(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bounds_go_from_every_subschema_but_property_names_stay() {
        let schema = json!({
            "type": "object",
            "properties": {
                "maxLength": {"type": "string", "minLength": 1, "maxLength": 32768},
                "list": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 128}},
                "either": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 9}]},
            },
        });
        assert_eq!(
            without_keywords(&schema, &LLAMA_CPP_STRIPPED),
            json!({
                "type": "object",
                "properties": {
                    "maxLength": {"type": "string", "minLength": 1},
                    "list": {"type": "array", "items": {"type": "string"}},
                    "either": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                },
            })
        );
    }

    #[test]
    fn only_llama_cpp_changes_the_schema() {
        let schema = json!({"type": "string", "maxLength": 32768});
        for compat in ProviderCompat::ALL {
            let sent = schema_sent(compat, &schema);
            assert_eq!(
                sent.get("maxLength").is_none(),
                compat == ProviderCompat::LlamaCpp,
                "{compat:?}"
            );
        }
    }
}
