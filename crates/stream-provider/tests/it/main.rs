//! Native wire formats: golden requests and responses for both providers,
//! history ordering rules, error bodies, and parsers that never panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod compat;

use proptest::prelude::*;
use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_protocol::{HistoryMessage, HistoryToolCall, OutputMode, Packet};
use stream_provider::*;
use stream_testkit::packets::packet;

const OPENAI: ProviderApi = ProviderApi::OpenaiChat;
const ANTHROPIC: ProviderApi = ProviderApi::AnthropicMessages;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/it/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// A reviewable view of a parsed completion (the type's `Debug` is content-dark).
fn view(c: &ParsedCompletion) -> Value {
    json!({
        "texts": c.texts,
        "thinking": c.thinking,
        "toolCalls": c.tool_calls.iter().map(|t| json!({
            "id": t.id,
            "name": t.name,
            "arguments": match &t.arguments {
                ToolArguments::Json(v) => v.clone(),
                ToolArguments::NotJson => json!("<not json>"),
            },
            "rawLen": t.raw_len,
        })).collect::<Vec<_>>(),
        "usage": c.usage.map(|u| json!([u.input_tokens, u.output_tokens])),
        "finish": c.finish.map(|f| format!("{f:?}")),
    })
}

#[test]
fn openai_request_golden() {
    insta::assert_json_snapshot!(build_request(&packet(OPENAI)).unwrap());
}

#[test]
fn anthropic_request_golden() {
    insta::assert_json_snapshot!(build_request(&packet(ANTHROPIC)).unwrap());
}

#[test]
fn strict_json_requests_offer_no_tools() {
    for api in [OPENAI, ANTHROPIC] {
        let mut p = packet(api);
        p.output_mode = OutputMode::StrictJson;
        let body = build_request(&p).unwrap();
        assert!(body.get("tools").is_none(), "{api:?}");
        assert!(body.get("tool_choice").is_none(), "{api:?}");
    }
    let mut p = packet(OPENAI);
    p.output_mode = OutputMode::StrictJson;
    assert_eq!(
        build_request(&p).unwrap()["response_format"],
        json!({"type": "json_object"})
    );
}

#[test]
fn no_exposed_tools_means_no_tool_choice() {
    for api in [OPENAI, ANTHROPIC] {
        let mut p = packet(api);
        p.tools.clear();
        let body = build_request(&p).unwrap();
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }
}

#[test]
fn tool_choice_is_auto_and_schemas_are_passed_verbatim() {
    let p = packet(OPENAI);
    let body = build_request(&p).unwrap();
    assert_eq!(body["tool_choice"], json!("auto"));
    for (i, tool) in p.tools.iter().enumerate() {
        assert_eq!(
            body["tools"][i]["function"]["parameters"],
            tool.input_schema
        );
        assert!(body["tools"][i]["function"].get("strict").is_none());
    }
    let p = packet(ANTHROPIC);
    let body = build_request(&p).unwrap();
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    for (i, tool) in p.tools.iter().enumerate() {
        assert_eq!(body["tools"][i]["input_schema"], tool.input_schema);
    }
}

#[test]
fn openai_tool_messages_follow_their_assistant_message() {
    let body = build_request(&packet(OPENAI)).unwrap();
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "user"
        ]
    );
    // History arguments are canonical JSON strings.
    let args = body["messages"][2]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    let reparsed: Value = serde_json::from_str(args).unwrap();
    assert_eq!(
        stream_core::canon::to_canonical_string(&reparsed).unwrap(),
        args
    );
}

#[test]
fn anthropic_roles_alternate_and_tool_results_come_first() {
    // Two consecutive user turns and two tool results: merged, results first.
    let mut p = packet(ANTHROPIC);
    p.history = vec![
        HistoryMessage::User {
            text: Some("one".into()),
            image: None,
        },
        HistoryMessage::User {
            text: Some("two".into()),
            image: None,
        },
        HistoryMessage::Assistant {
            text: Some("Saving both.".into()),
            tool_calls: vec![
                HistoryToolCall {
                    id: "p_1".into(),
                    name: "request_memory_change".into(),
                    arguments: json!({}),
                },
                HistoryToolCall {
                    id: "p_2".into(),
                    name: "submit_correction".into(),
                    arguments: json!({}),
                },
            ],
        },
        HistoryMessage::ToolResult {
            call_id: "p_2".into(),
            content: "captured".into(),
        },
        HistoryMessage::ToolResult {
            call_id: "p_1".into(),
            content: "captured".into(),
        },
        HistoryMessage::Assistant {
            text: Some("I saved those.".into()),
            tool_calls: vec![],
        },
        HistoryMessage::Assistant {
            text: Some("Anything else?".into()),
            tool_calls: vec![],
        },
    ];
    let body = build_request(&p).unwrap();
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(messages[0]["content"].as_array().unwrap().len(), 2);
    let after_tool_use: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(after_tool_use, ["tool_result", "tool_result"]);
    assert_eq!(messages[3]["content"].as_array().unwrap().len(), 2);
    // The current turn (image + text) is its own user message after them.
    assert_eq!(messages[4]["content"][0]["type"], "image");
}

#[test]
fn anthropic_tool_results_precede_the_next_user_text() {
    let mut p = packet(ANTHROPIC);
    p.history.truncate(3); // user, assistant tool_use, tool_result
    let body = build_request(&p).unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    let types: Vec<&str> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["tool_result", "image", "text"]);
}

#[test]
fn history_out_of_order_is_refused() {
    let call = |id: &str| HistoryToolCall {
        id: id.into(),
        name: "t".into(),
        arguments: json!({}),
    };
    let user = || HistoryMessage::User {
        text: Some("u".into()),
        image: None,
    };
    let asst_calls = |ids: &[&str]| HistoryMessage::Assistant {
        text: None,
        tool_calls: ids.iter().map(|i| call(i)).collect(),
    };
    let result = |id: &str| HistoryMessage::ToolResult {
        call_id: id.into(),
        content: "c".into(),
    };
    let cases: Vec<(&str, Vec<HistoryMessage>, BuildError)> = vec![
        (
            "opens with a tool result",
            vec![result("x")],
            BuildError::ToolResultWithoutCall { index: 0 },
        ),
        (
            "result without call",
            vec![user(), result("x")],
            BuildError::ToolResultWithoutCall { index: 1 },
        ),
        (
            "unanswered call",
            vec![user(), asst_calls(&["a"]), user()],
            BuildError::UnansweredToolCall { index: 2 },
        ),
        (
            "unanswered at end",
            vec![user(), asst_calls(&["a", "b"]), result("a")],
            BuildError::UnansweredToolCall { index: 3 },
        ),
        (
            "result after a later message",
            vec![
                user(),
                asst_calls(&["a"]),
                result("a"),
                HistoryMessage::Assistant {
                    text: Some("t".into()),
                    tool_calls: vec![],
                },
                result("a"),
            ],
            BuildError::ToolResultWithoutCall { index: 4 },
        ),
        (
            "bad call id",
            vec![user(), asst_calls(&["has space"]), result("has space")],
            BuildError::BadToolCallId { index: 1 },
        ),
        (
            "repeated call id",
            vec![
                user(),
                asst_calls(&["a"]),
                result("a"),
                asst_calls(&["a"]),
                result("a"),
            ],
            BuildError::BadToolCallId { index: 3 },
        ),
        (
            "empty user",
            vec![HistoryMessage::User {
                text: Some(String::new()),
                image: None,
            }],
            BuildError::EmptyUserTurn { index: 0 },
        ),
        (
            "empty assistant",
            vec![
                user(),
                HistoryMessage::Assistant {
                    text: None,
                    tool_calls: vec![],
                },
            ],
            BuildError::EmptyAssistantTurn { index: 1 },
        ),
    ];
    for api in [OPENAI, ANTHROPIC] {
        for (name, history, expected) in &cases {
            let mut p = packet(api);
            p.history = history.clone();
            assert_eq!(build_request(&p).unwrap_err(), *expected, "{api:?}: {name}");
        }
    }
}

#[test]
fn a_history_opening_with_a_reply_is_kept() {
    let opening_reply = vec![
        HistoryMessage::Assistant {
            text: Some("⟨reply⟩ Good morning.".into()),
            tool_calls: vec![],
        },
        HistoryMessage::User {
            text: Some("Hi".into()),
            image: None,
        },
    ];
    let mut p = packet(OPENAI);
    p.history = opening_reply.clone();
    let body = build_request(&p).unwrap();
    assert_eq!(body["messages"][1]["role"], "assistant");
    let mut p = packet(ANTHROPIC);
    p.history = opening_reply;
    let body = build_request(&p).unwrap();
    assert_eq!(
        body["messages"][0],
        json!({"role": "user", "content": [{"type": "text", "text": stream_provider::anthropic::EARLIER_CONVERSATION}]})
    );
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(body["messages"][2]["role"], "user");
}

#[test]
fn current_turn_must_be_a_usable_user_message() {
    for api in [OPENAI, ANTHROPIC] {
        let mut p: Packet = packet(api);
        p.user = HistoryMessage::Assistant {
            text: Some("x".into()),
            tool_calls: vec![],
        };
        assert_eq!(
            build_request(&p).unwrap_err(),
            BuildError::CurrentTurnNotUser
        );
        let mut p = packet(api);
        if let HistoryMessage::User {
            image: Some(image), ..
        } = &mut p.user
        {
            image.media_type = "image/svg+xml".into();
        }
        assert_eq!(
            build_request(&p).unwrap_err(),
            BuildError::BadImage { index: 6 }
        );
        let mut p = packet(api);
        if let HistoryMessage::User {
            image: Some(image), ..
        } = &mut p.user
        {
            image.data_base64 = "not base64!".into();
        }
        assert_eq!(
            build_request(&p).unwrap_err(),
            BuildError::BadImage { index: 6 }
        );
    }
}

#[test]
fn openai_responses_golden() {
    let parsed: Vec<Value> = [
        "openai_text.json",
        "openai_text_and_tools.json",
        "openai_inline_think.json",
    ]
    .iter()
    .map(|f| view(&parse_response(OPENAI, &fixture(f)).unwrap()))
    .collect();
    insta::assert_json_snapshot!(parsed);
}

#[test]
fn anthropic_responses_golden() {
    let parsed: Vec<Value> = ["anthropic_text.json", "anthropic_text_and_tools.json"]
        .iter()
        .map(|f| view(&parse_response(ANTHROPIC, &fixture(f)).unwrap()))
        .collect();
    insta::assert_json_snapshot!(parsed);
}

#[test]
fn thinking_text_is_never_kept() {
    for (api, file, thinking) in [
        (
            OPENAI,
            "openai_text_and_tools.json",
            "I should propose a correction",
        ),
        (OPENAI, "openai_inline_think.json", "The owner greets me"),
        (
            ANTHROPIC,
            "anthropic_text_and_tools.json",
            "I should propose a correction",
        ),
    ] {
        let parsed = parse_response(api, &fixture(file)).unwrap();
        assert!(parsed.thinking);
        assert!(!view(&parsed).to_string().contains(thinking), "{file}");
    }
}

#[test]
fn openai_invalid_argument_strings_stay_distinguishable() {
    let parsed = parse_response(OPENAI, &fixture("openai_text_and_tools.json")).unwrap();
    assert!(matches!(
        parsed.tool_calls[0].arguments,
        ToolArguments::Json(_)
    ));
    assert!(matches!(
        parsed.tool_calls[1].arguments,
        ToolArguments::NotJson
    ));
    assert_eq!(
        parsed.tool_calls[1].raw_len,
        r#"{"operation": "append", "proposed_text": "Capital"#.len()
    );
}

#[test]
fn malformed_responses_are_refused() {
    let cases: Vec<(ProviderApi, String)> = vec![
        (OPENAI, "not json".into()),
        (OPENAI, json!({"choices": []}).to_string()),
        (OPENAI, json!({"choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}]}).to_string()),
        (OPENAI, json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "c", "type": "custom", "function": {"name": "x", "arguments": "{}"}}]}}]}).to_string()),
        (OPENAI, json!({"choices": [{"message": {"content": [{"type": "audio"}]}}]}).to_string()),
        (ANTHROPIC, json!({"type": "error", "error": {"type": "overloaded_error"}}).to_string()),
        (ANTHROPIC, json!({"type": "message", "role": "user", "content": []}).to_string()),
        (ANTHROPIC, json!({"type": "message", "role": "assistant", "content": [{"type": "server_tool_use", "id": "x"}]}).to_string()),
        (ANTHROPIC, json!({"type": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "n"}]}).to_string()),
    ];
    for (api, body) in cases {
        assert!(parse_response(api, &body).is_err(), "{api:?} {body}");
    }
}

#[test]
fn parse_errors_never_quote_the_body() {
    let canary = stream_testkit::canary::Canary::new("body");
    for api in [OPENAI, ANTHROPIC] {
        for body in [
            format!("{{\"choices\": \"{canary}\"}}"),
            format!("{{\"type\": \"{canary}\"}}"),
            format!("{canary}"),
        ] {
            let err = parse_response(api, &body).unwrap_err();
            stream_testkit::canary::assert_no_leak(
                std::slice::from_ref(&canary),
                &format!("{err} {err:?}"),
                "parse error",
            );
        }
    }
}

#[test]
fn error_bodies_yield_codes_only() {
    let openai = json!({"error": {"message": "canary-message", "type": "invalid_request_error", "param": null, "code": "context_length_exceeded"}});
    assert_eq!(
        parse_error_body(OPENAI, &openai.to_string())
            .unwrap()
            .as_str(),
        "context_length_exceeded"
    );
    let openai = json!({"error": {"message": "m", "type": "insufficient_quota", "code": null}});
    assert_eq!(
        parse_error_body(OPENAI, &openai.to_string())
            .unwrap()
            .as_str(),
        "insufficient_quota"
    );
    let anthropic =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert_eq!(
        parse_error_body(ANTHROPIC, &anthropic.to_string())
            .unwrap()
            .as_str(),
        "overloaded_error"
    );
    assert!(parse_error_body(ANTHROPIC, "<html>502</html>").is_none());
    let tricky = json!({"error": {"type": "canary code with spaces"}});
    assert!(parse_error_body(OPENAI, &tricky.to_string()).is_none());
}

#[test]
fn endpoint_paths() {
    assert_eq!(endpoint_path(OPENAI), "/chat/completions");
    assert_eq!(endpoint_path(ANTHROPIC), "/v1/messages");
}

proptest! {
    #[test]
    fn parsers_never_panic(body in "\\PC{0,400}") {
        for api in [OPENAI, ANTHROPIC] {
            let _ = parse_response(api, &body);
            let _ = parse_error_body(api, &body);
        }
    }

    #[test]
    fn parsers_never_panic_on_near_valid_bodies(text in "\\PC{0,40}", args in "\\PC{0,40}", kind in "[a-z_]{0,12}") {
        let openai = json!({"choices": [{"message": {"content": text, "tool_calls": [{"id": "c", "type": "function", "function": {"name": kind, "arguments": args}}]}}]});
        let parsed = parse_response(OPENAI, &openai.to_string()).unwrap();
        prop_assert_eq!(parsed.tool_calls.len(), 1);
        let anthropic = json!({"type": "message", "role": "assistant", "content": [{"type": kind, "text": text}]});
        let _ = parse_response(ANTHROPIC, &anthropic.to_string());
    }
}
