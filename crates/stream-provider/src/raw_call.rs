//! A tool call the model wrote as visible text instead of calling.
//!
//! A server that cannot parse a call (a chat template without tool support,
//! llama.cpp without `--jinja`) hands it back as plain `content`. Such text
//! is neither a validated proposal nor a reply: the worker and the parent
//! both refuse it as `malformed-call` through [`carries_raw_tool_call`].

use serde_json::Value;

/// The chat templates' tool-call markers, each with the family that writes
/// it. Any one of them anywhere in visible text is raw call markup. The
/// Qwen tags are matched without their `>`, so that a tag with attributes
/// is caught too.
pub const RAW_CALL_MARKERS: [(&str, &str); 6] = [
    ("<tool_call", "Qwen, Hermes"),
    ("</tool_call", "Qwen, Hermes"),
    ("<|python_tag|>", "Llama 3"),
    ("[TOOL_CALLS]", "Mistral"),
    ("<function=", "Llama 3.1"),
    ("</function>", "Llama 3.1"),
];

/// The members of a JSON object that name the tool it calls.
const NAME_MEMBERS: [&str; 3] = ["name", "function", "tool"];

/// Whether `text` carries a tool call written out instead of made: one of
/// [`RAW_CALL_MARKERS`], or a JSON object anywhere in it whose `name`,
/// `function` or `tool` member is one of `offered` (the tool names of that
/// request). The one home of this rule, for the worker and the parent.
pub fn carries_raw_tool_call(text: &str, offered: &[&str]) -> bool {
    RAW_CALL_MARKERS
        .iter()
        .any(|(marker, _)| text.contains(marker))
        || (!offered.is_empty() && names_an_offered_tool(text, offered))
}

/// Whether a JSON object starts at some `{` of `text` and names a tool of
/// `offered`. Nested objects start at their own `{`, so each is tried.
fn names_an_offered_tool(text: &str, offered: &[&str]) -> bool {
    text.match_indices('{').any(|(at, _)| {
        let rest = text.get(at..).unwrap_or_default();
        let first = serde_json::Deserializer::from_str(rest)
            .into_iter::<Value>()
            .next();
        match first {
            Some(Ok(Value::Object(members))) => NAME_MEMBERS.iter().any(|member| {
                members
                    .get(*member)
                    .and_then(Value::as_str)
                    .is_some_and(|name| offered.contains(&name))
            }),
            Some(Ok(_) | Err(_)) | None => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OFFERED: [&str; 3] = [
        "request_memory_change",
        "submit_correction",
        "propose_focus",
    ];

    /// One row per kind of raw call the issue names, and what is not one.
    #[test]
    fn raw_call_text_is_a_template_marker_or_json_naming_an_offered_tool() {
        let rows: &[(&str, &str, bool)] = &[
            // Each template marker, alone and at any position.
            (
                "Qwen/Hermes block",
                "<tool_call>\n{\"name\": \"request_memory_change\", \"arguments\": {}}\n</tool_call>",
                true,
            ),
            ("Qwen opening tag mid-text", "Sure! <tool_call> here", true),
            ("Qwen closing tag at the end", "done</tool_call>", true),
            (
                "Qwen tag with an attribute",
                "<tool_call id=\"1\">{}</tool_call >",
                true,
            ),
            (
                "Llama 3 python tag",
                "<|python_tag|>{\"name\": \"x\", \"parameters\": {}}",
                true,
            ),
            ("Mistral", "Okay.\n[TOOL_CALLS][{\"name\": \"x\"}]", true),
            (
                "Llama 3.1 function tag",
                "<function=request_memory_change>{\"a\": 1}</function>",
                true,
            ),
            ("closing function tag alone", "text </function> text", true),
            // A JSON object whose name member is an offered tool.
            (
                "bare JSON naming an offered tool",
                "{\"name\": \"propose_focus\", \"arguments\": {}}",
                true,
            ),
            (
                "JSON after prose, by its function member",
                "I will do it: {\"function\": \"submit_correction\"} now",
                true,
            ),
            (
                "JSON by its tool member",
                "{\"tool\": \"request_memory_change\"}",
                true,
            ),
            (
                "OpenAI shape, nested",
                "[{\"type\": \"function\", \"function\": {\"name\": \"request_memory_change\", \"arguments\": \"{}\"}}]",
                true,
            ),
            (
                "in a code fence",
                "```json\n{\"name\":\"request_memory_change\",\"arguments\":{}}\n```",
                true,
            ),
            // The same JSON naming a tool not offered is not flagged.
            (
                "JSON naming a tool not offered",
                "{\"name\": \"delete_everything\", \"arguments\": {}}",
                false,
            ),
            ("JSON naming a person", "{\"name\": \"France\"}", false),
            // Ordinary prose is not flagged.
            (
                "prose about a tool call",
                "I could make a tool call to remember that, if you like.",
                false,
            ),
            (
                "prose naming a tool",
                "I can request_memory_change for you.",
                false,
            ),
            ("an answer", "The capital of France is Paris.", false),
            (
                "braces that are no JSON",
                "{name: request_memory_change}",
                false,
            ),
            ("an unclosed object", "{\"name\": \"propose_focus\"", false),
        ];
        for (row, text, raw) in rows {
            assert_eq!(carries_raw_tool_call(text, &OFFERED), *raw, "{row}");
        }
    }

    /// With no tool offered, only the markers count.
    #[test]
    fn with_no_tool_offered_only_markers_count() {
        assert!(!carries_raw_tool_call("{\"name\": \"propose_focus\"}", &[]));
        assert!(carries_raw_tool_call("<tool_call>", &[]));
    }

    /// Every marker of the table is found wherever it stands.
    #[test]
    fn every_marker_is_found_at_the_start_middle_and_end() {
        for (marker, _) in RAW_CALL_MARKERS {
            for text in [
                format!("{marker} tail"),
                format!("head {marker} tail"),
                format!("head {marker}"),
            ] {
                assert!(carries_raw_tool_call(&text, &[]), "{text}");
            }
        }
    }
}
