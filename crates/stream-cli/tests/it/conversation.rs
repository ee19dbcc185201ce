//! Issue 7 end to end: the real `thestream` and `thestream-worker` against
//! the loopback Bot API and scripted provider, read back through the CLI and
//! the servers' records.

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::stack;

fn memory_call(text: &str) -> ScriptedCall {
    ScriptedCall::json(
        "call_mem",
        "request_memory_change",
        json!({"operation": "append", "proposed_text": text, "reason": "The owner asked.", "evidence_event_ids": []}),
    )
}

fn correction_call(target: &str, text: &str) -> ScriptedCall {
    ScriptedCall::json(
        "call_fix",
        "submit_correction",
        json!({"target_output": target, "replacement": text, "reason": "I was wrong.", "evidence_event_ids": []}),
    )
}

fn focus_declaration() -> Value {
    json!({
        "identity": {"id": "spring-garden", "version": 1},
        "lineage": {"parent": null},
        "scope": {"chat": "origin"},
        "objective": "Help plan the spring garden.",
        "subscriptions": [],
        "budgets": {"maxRunsPerDay": 5, "maxOutputTokensPerRun": 800, "maxDays": 60},
        "requestedPermissions": {"tools": [], "proposals": [], "externalActions": false},
        "retirement": {"rule": "after-days", "days": 60}
    })
}

fn focus_call() -> ScriptedCall {
    ScriptedCall::json("call_focus", "propose_focus", focus_declaration())
}

fn drain(s: &Stack) {
    let ran = s.drain().unwrap();
    assert_eq!(
        ran.code, 0,
        "serve --drain failed:\n{}\n{}",
        ran.stdout, ran.stderr
    );
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// A first turn answered with text, so that later turns have a correction target.
fn with_first_reply(s: &Stack, text: &str) {
    s.say("What is the capital of Australia?");
    s.script(Reply::completion(ScriptedCompletion::text(text)));
    drain(s);
}

#[test]
fn a_text_only_turn_is_answered_and_receipted() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("What is the capital of France?");
    s.script(Reply::completion(ScriptedCompletion::text("Paris.")));
    drain(&s);
    assert_eq!(s.sent_texts(), ["Paris."]);
    assert_eq!(
        s.provider.requests().len(),
        1,
        "one provider request per run"
    );
    let events = s.events().unwrap();
    let output = of_type(&events, "stream.thought.derived.message.observation");
    assert_eq!(output.len(), 1);
    assert_eq!(output[0]["payload"]["origin"], "model");
    let receipt = of_type(&events, "stream.telegram.delivery.receipt");
    assert_eq!(receipt[0]["payload"]["outputEventId"], output[0]["id"]);
    assert_eq!(receipt[0]["parent"], output[0]["id"]);
    let done = of_type(&events, "stream.thought.agent.run.completed");
    assert_eq!(done[0]["payload"]["proposalEventIds"], json!([]));
    assert_eq!(done[0]["payload"]["provider"]["model"], "loopback-model");
    // The credential was added by the parent, never by the worker.
    let request = &s.provider.requests()[0];
    assert_eq!(
        request.header("authorization"),
        Some("Bearer sk-loopback-test-key")
    );
}

/// "If a valid completion is tool-only, the trusted parent constructs one
/// fixed conversational acknowledgment" — every kind and combination.
#[test]
fn tool_only_turns_get_the_exact_acknowledgment() {
    let rows: Vec<(Vec<ScriptedCall>, &str, usize)> = vec![
        (
            vec![memory_call("Prefers tea.")],
            "I saved that as a memory suggestion.",
            1,
        ),
        (
            vec![correction_call("latest", "Canberra.")],
            "I saved that as a proposed correction.",
            1,
        ),
        (vec![focus_call()], "I saved that as a focus proposal.", 1),
        (
            vec![
                memory_call("Prefers tea."),
                correction_call("latest", "Canberra."),
            ],
            "I saved those as memory and correction suggestions.",
            2,
        ),
        (
            vec![memory_call("Prefers tea."), focus_call()],
            "I saved those as memory and focus suggestions.",
            2,
        ),
        (
            vec![correction_call("latest", "Canberra."), focus_call()],
            "I saved those as correction and focus suggestions.",
            2,
        ),
        (
            vec![
                memory_call("Prefers tea."),
                correction_call("latest", "Canberra."),
                focus_call(),
            ],
            "I saved those as memory, correction, and focus suggestions.",
            3,
        ),
    ];
    for (calls, ack, count) in rows {
        let s = stack(ProviderApi::OpenaiChat);
        with_first_reply(&s, "Sydney.");
        s.say("Remember I like tea; also fix that; /focus the garden");
        s.script(Reply::completion(ScriptedCompletion::calls(calls)));
        drain(&s);
        assert_eq!(s.sent_texts(), ["Sydney.", ack]);
        let events = s.events().unwrap();
        let outputs = of_type(&events, "stream.thought.derived.message.observation");
        assert_eq!(outputs[1]["payload"]["origin"], "acknowledgment");
        let done = of_type(&events, "stream.thought.agent.run.completed");
        assert_eq!(
            done[1]["payload"]["proposalEventIds"]
                .as_array()
                .unwrap()
                .len(),
            count,
            "{ack}"
        );
        assert_eq!(s.proposals().unwrap().len(), count);
    }
}

#[test]
fn text_plus_tools_keeps_the_text_and_appends_nothing() {
    let s = stack(ProviderApi::AnthropicMessages);
    with_first_reply(&s, "Sydney.");
    s.say("That was wrong.");
    s.script(Reply::completion(ScriptedCompletion {
        texts: vec!["You're right — Canberra is the capital.".into()],
        thinking: Some("canary-thinking-never-kept".into()),
        calls: vec![correction_call(
            "latest",
            "Canberra is the capital of Australia.",
        )],
        cut: false,
    }));
    drain(&s);
    assert_eq!(s.sent_texts()[1], "You're right — Canberra is the capital.");
    let events = s.events().unwrap();
    let out = of_type(&events, "stream.thought.derived.message.observation")[1];
    assert_eq!(
        (
            out["payload"]["origin"].as_str(),
            out["payload"]["thinking"].as_str()
        ),
        (Some("model"), Some("redacted"))
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("canary-thinking-never-kept"),
        "thinking text is never kept"
    );
}

#[test]
fn latest_is_resolved_and_never_stored() {
    let s = stack(ProviderApi::OpenaiChat);
    with_first_reply(&s, "Sydney.");
    s.say("Correct your last reply please.");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        correction_call("latest", "Canberra."),
    ])));
    drain(&s);
    let events = s.events().unwrap();
    let first_output =
        of_type(&events, "stream.thought.derived.message.observation")[0]["id"].clone();
    let proposal = of_type(&events, "stream.thought.agent.correction.proposed")[0];
    assert_eq!(proposal["payload"]["target"]["outputEventId"], first_output);
    assert_eq!(proposal["parent"], first_output);
    let first_receipt = of_type(&events, "stream.telegram.delivery.receipt")[0]["id"].clone();
    assert_eq!(
        proposal["payload"]["target"]["deliveryReceiptEventId"],
        first_receipt
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("\"latest\""),
        "the literal latest reached a stored event"
    );
    let list: Vec<Value> = s.proposals().unwrap();
    assert_eq!(list[0]["targetOutputEventId"], first_output);
}

#[test]
fn the_next_request_carries_reconstructed_history() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Remember that I like tea.");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        memory_call("Likes tea."),
    ])));
    drain(&s);
    s.say("What do I like?");
    s.script(Reply::completion(ScriptedCompletion::text(
        "Tea, I believe.",
    )));
    drain(&s);
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].json()["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{messages:#}"
    );
    let call = &messages[2]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "request_memory_change");
    // A stable synthetic id, never the provider's `call_mem…`: exactly 9
    // alphanumerics, which every provider (Mistral included) accepts.
    let id = call["id"].as_str().unwrap();
    assert!(
        id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
        "{id}"
    );
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["proposed_text"], "Likes tea.");
    assert_eq!(messages[3]["tool_call_id"], call["id"]);
    assert_eq!(
        messages[3]["content"],
        "Proposal captured as a durable inert proposal; approval and application are pending."
    );
    assert!(
        messages[4]["content"]
            .as_str()
            .unwrap()
            .ends_with("I saved that as a memory suggestion.")
    );
}

#[test]
fn no_tool_history_when_the_receipt_names_no_proposal() {
    let s = stack(ProviderApi::AnthropicMessages);
    s.say("Remember that I like tea.");
    // The model claims to have saved something but calls no tool.
    s.script(Reply::completion(ScriptedCompletion::text(
        "I saved that as a memory suggestion.",
    )));
    drain(&s);
    s.say("Did you save it?");
    s.script(Reply::completion(ScriptedCompletion::text(
        "No tool was called.",
    )));
    drain(&s);
    let body = s.provider.requests()[1].json();
    let text = body.to_string();
    assert!(
        !text.contains("tool_use") && !text.contains("tool_result"),
        "{body:#}"
    );
}

#[test]
fn bare_focus_and_help_are_answered_without_a_provider_request() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("/focus");
    s.say("/help");
    drain(&s);
    assert!(s.provider.requests().is_empty());
    let sent = s.sent_texts();
    assert!(
        sent[0].starts_with("Usage: /focus <description>"),
        "{sent:?}"
    );
    assert!(sent[1].contains("/correct <text>"), "{sent:?}");
    let events = s.events().unwrap();
    let outputs = of_type(&events, "stream.thought.derived.message.observation");
    assert!(
        outputs
            .iter()
            .all(|o| o["payload"]["origin"] == "deterministic"
                && o["source"] == "agent:telegram-replies")
    );
}

#[test]
fn focus_with_a_description_is_a_model_run_proposing_a_focus() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("/focus help me plan the spring garden");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        focus_call(),
    ])));
    drain(&s);
    assert_eq!(s.sent_texts(), ["I saved that as a focus proposal."]);
    let user = s.provider.requests()[0].json()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        user["content"]
            .to_string()
            .contains("/focus help me plan the spring garden")
    );
    let events = s.events().unwrap();
    let proposal = of_type(&events, "stream.thought.focus.declaration.proposed")[0];
    assert_eq!(
        proposal["payload"]["authority"],
        json!({"activation": false, "dataExpansion": false, "externalActions": false, "training": false, "adapterPromotion": false})
    );
    assert_eq!(proposal["payload"]["resolution"]["lineage"], "unchecked");
    assert_eq!(proposal["payload"]["proposalState"], "agent-proposed");
}

#[test]
fn owner_correct_records_a_judgment_and_changes_later_history() {
    let s = stack(ProviderApi::OpenaiChat);
    with_first_reply(&s, "Sydney.");
    s.say("/correct Canberra.");
    drain(&s);
    assert_eq!(s.sent_texts()[1], "Recorded your correction of my reply.");
    let events = s.events().unwrap();
    let judgment = of_type(&events, "stream.thought.judgment.recorded")[0];
    assert_eq!(judgment["payload"]["criterion"], "telegram-correct");
    assert_eq!(judgment["payload"]["replacement"]["text"], "Canberra.");
    assert_eq!(judgment["version"], 2);
    s.say("So what is it?");
    s.script(Reply::completion(ScriptedCompletion::text("Canberra.")));
    drain(&s);
    let messages = s.provider.requests()[1].json()["messages"].clone();
    let assistant = messages[2]["content"].as_str().unwrap();
    assert!(
        assistant.ends_with("Canberra."),
        "the effective text is the judged one: {assistant}"
    );
}

#[test]
fn owner_correct_of_the_replied_to_message() {
    let s = stack(ProviderApi::OpenaiChat);
    with_first_reply(&s, "Sydney.");
    s.say("And of Canada?");
    s.script(Reply::completion(ScriptedCompletion::text("Toronto.")));
    drain(&s);
    // The bot's first message had message_id 1: reply to it.
    s.reply_to(1, "/correct Canberra.");
    drain(&s);
    let events = s.events().unwrap();
    let outputs = of_type(&events, "stream.thought.derived.message.observation");
    let judgment = of_type(&events, "stream.thought.judgment.recorded")[0];
    assert_eq!(judgment["payload"]["targetOutputEventId"], outputs[0]["id"]);
}

#[test]
fn a_photo_turn_reaches_the_provider_as_an_image() {
    let s = stack(ProviderApi::AnthropicMessages);
    let png = vec![0x89, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0, 0, 13];
    s.photo(png, Some("What is this?"));
    s.script(Reply::completion(ScriptedCompletion::text("A tiny image.")));
    drain(&s);
    assert_eq!(s.sent_texts(), ["A tiny image."]);
    let body = s.provider.requests()[0].json();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap();
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "image" && b["source"]["type"] == "base64"),
        "{last:#}"
    );
    assert!(
        blocks
            .iter()
            .any(|b| b["type"] == "text" && b["text"].as_str().unwrap().contains("What is this?"))
    );
}

#[test]
fn a_transient_failure_is_retried_with_the_same_snapshot() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Hello?");
    s.script(Reply::error(503, "overloaded_error"));
    s.script(Reply::completion(ScriptedCompletion::text("Hello!")));
    drain(&s);
    assert_eq!(s.sent_texts(), ["Hello!"]);
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 2, "one request per attempt");
    assert_eq!(
        requests[0].json(),
        requests[1].json(),
        "the retry used the same snapshot"
    );
    let events = s.events().unwrap();
    let failed = of_type(&events, "stream.thought.agent.run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0]["payload"]["reason"].as_str(),
            failed[0]["payload"]["final"].as_bool()
        ),
        (Some("provider-transient"), Some(false))
    );
    assert!(!failed[0]["sensitive"].as_bool().unwrap());
}

/// "Malformed, unknown, duplicate, too-many, oversized, or capability-escaping
/// calls produce no proposal event." Each row: what is wrong, the exact
/// reason code recorded, the completion.
#[test]
fn rejected_completions_produce_no_proposal_and_a_final_reason() {
    // Schema-valid arguments padded past the 512 KiB raw bound: only the
    // size is wrong.
    let oversized = format!(
        r#"{{"operation":"append","proposed_text":"tea","reason":"r","evidence_event_ids":[]{}}}"#,
        " ".repeat(stream_core::json::MAX_ARGUMENTS_BYTES)
    );
    let nested_duplicate = focus_declaration().to_string().replacen(
        "\"identity\":{",
        "\"identity\":{\"version\":1,",
        1,
    );
    assert!(nested_duplicate.contains("\"version\":1,\"id\""));
    let rows: Vec<(&str, &str, ScriptedCompletion)> = vec![
        (
            "arguments not JSON",
            "malformed-call",
            ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                "{not json",
            )]),
        ),
        (
            "a text over its bound",
            "malformed-call",
            ScriptedCompletion::calls(vec![memory_call(&"x".repeat(40_000))]),
        ),
        (
            "a repeated key at the top level",
            "malformed-call",
            ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                r#"{"operation":"append","proposed_text":"A","proposed_text":"B","reason":"r","evidence_event_ids":[]}"#,
            )]),
        ),
        (
            "a repeated key nested",
            "malformed-call",
            ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "propose_focus",
                &nested_duplicate,
            )]),
        ),
        (
            "an unknown tool",
            "unknown-tool",
            ScriptedCompletion::calls(vec![ScriptedCall::json(
                "c1",
                "delete_everything",
                json!({}),
            )]),
        ),
        (
            "two calls of one tool",
            "duplicate-call",
            ScriptedCompletion::calls(vec![
                memory_call("a"),
                ScriptedCall::json(
                    "c2",
                    "request_memory_change",
                    json!({"operation": "append", "proposed_text": "b", "reason": "r", "evidence_event_ids": []}),
                ),
            ]),
        ),
        (
            "four calls",
            "too-many-calls",
            ScriptedCompletion::calls(vec![
                memory_call("a"),
                correction_call("latest", "b"),
                focus_call(),
                ScriptedCall::json("c4", "propose_focus", focus_declaration()),
            ]),
        ),
        (
            "arguments over 512 KiB",
            "oversized-call",
            ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                &oversized,
            )]),
        ),
        (
            "a target the snapshot did not admit",
            "capability-escape",
            ScriptedCompletion::calls(vec![correction_call(&"e".repeat(64), "b")]),
        ),
    ];
    for (row, reason, completion) in rows {
        let s = stack(ProviderApi::OpenaiChat);
        with_first_reply(&s, "Sydney.");
        s.say("Do something odd.");
        s.script(Reply::completion(completion));
        drain(&s);
        assert_eq!(
            s.sent_texts(),
            ["Sydney.", crate::delivery::RUN_FAILED_REPLY],
            "{row}: only the fixed failed-run reply is sent for a rejected completion"
        );
        let events = s.events().unwrap();
        assert!(s.proposals().unwrap().is_empty(), "{row}");
        let failed = of_type(&events, "stream.thought.agent.run.failed");
        assert_eq!(failed.len(), 1, "{row}");
        let payload = &failed[0]["payload"];
        assert_eq!(payload["reason"], reason, "{row}");
        assert!(payload["final"].as_bool().unwrap(), "{row}");
        // Validation failures are final and advance progress: a later turn is served.
        s.say("Hello again.");
        s.script(Reply::completion(ScriptedCompletion::text("Hi.")));
        drain(&s);
        assert_eq!(
            s.sent_texts(),
            ["Sydney.", crate::delivery::RUN_FAILED_REPLY, "Hi."],
            "{row}"
        );
    }
}

/// The controls of the repeated-key rows: the same calls without the repeat
/// are captured as proposals.
#[test]
fn the_repeated_key_rows_without_the_repeat_are_proposals() {
    let s = stack(ProviderApi::OpenaiChat);
    with_first_reply(&s, "Sydney.");
    s.say("Remember this and plan a focus.");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        ScriptedCall::raw(
            "c1",
            "request_memory_change",
            r#"{"operation":"append","proposed_text":"B","reason":"r","evidence_event_ids":[]}"#,
        ),
        ScriptedCall::raw("c2", "propose_focus", &focus_declaration().to_string()),
    ])));
    drain(&s);
    assert_eq!(s.proposals().unwrap().len(), 2);
}

#[test]
fn canaries_never_reach_logs_or_non_sensitive_events() {
    let s = stack(ProviderApi::OpenaiChat);
    let message = Canary::new("msg");
    let argument = Canary::new("arg");
    let reply = Canary::new("reply");
    s.say(&format!("First: {message}"));
    s.script(Reply::completion(ScriptedCompletion::text(&format!(
        "Noted {reply}"
    ))));
    let first = s.drain().unwrap();
    s.say(&format!("Remember {message}"));
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        memory_call(&format!("The owner said {argument}")),
    ])));
    let second = s.drain().unwrap();
    let canaries = [message, argument, reply];
    for ran in [&first, &second] {
        assert_no_leak(&canaries, &ran.stderr, "serve logs");
        assert_no_leak(&canaries, &ran.stdout, "serve output");
    }
    let events = s.events().unwrap();
    for e in events.iter().filter(|e| e["sensitive"] == false) {
        assert_no_leak(&canaries, &e.to_string(), "a non-sensitive event");
    }
    let redacted = s.run(&["events", "--json"]).unwrap();
    assert_no_leak(
        &canaries,
        &redacted.stdout,
        "events without --show-sensitive",
    );
}

/// A `serve` killed (SIGKILL) at any point of a run leaves all or nothing;
/// the next run converges on exactly one output, one completed run and one
/// receipt (delivery is at-least-once, receipts exactly once).
#[test]
fn sigkill_of_serve_mid_run_then_a_rerun_converges() {
    for delay_ms in [0u64, 150, 400, 800] {
        let s = stack(ProviderApi::OpenaiChat);
        s.say("Hello?");
        // The provider answers slowly: the kill lands before, during or after
        // the attempt and its settlement, depending on the delay.
        s.script(
            Reply::completion(ScriptedCompletion::calls(vec![memory_call("Says hello.")]))
                .delayed(std::time::Duration::from_millis(300)),
        );
        let mut child = s
            .command(&["serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while s.provider.requests().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        s.script(Reply::completion(ScriptedCompletion::calls(vec![
            memory_call("Says hello."),
        ])));
        drain(&s);
        let events = s.events().unwrap();
        let count = |ty: &str| of_type(&events, ty).len();
        assert_eq!(
            count("stream.thought.derived.message.observation"),
            1,
            "delay {delay_ms}"
        );
        assert_eq!(
            count("stream.thought.agent.memory-change.proposed"),
            1,
            "delay {delay_ms}"
        );
        assert_eq!(
            count("stream.thought.agent.run.completed"),
            1,
            "delay {delay_ms}"
        );
        assert_eq!(
            count("stream.telegram.delivery.receipt"),
            1,
            "delay {delay_ms}"
        );
        assert!(!s.sent_texts().is_empty());
        // A second drain changes nothing.
        let before = s.events().unwrap().len();
        drain(&s);
        assert_eq!(s.events().unwrap().len(), before);
    }
}

/// `[provider] compat` reaches the provider through the real binaries: a
/// `llama-cpp` config sends `max_tokens`, asks for parallel calls and leaves
/// the upper bounds out of the schemas sent.
#[test]
fn the_configured_compat_mode_shapes_the_request_the_provider_receives() {
    let s = stack(ProviderApi::OpenaiChat);
    let config = s.path().join("thestream.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("compat = \"openai\""), "{text}");
    std::fs::write(
        &config,
        text.replace("compat = \"openai\"", "compat = \"llama-cpp\""),
    )
    .unwrap();
    s.script(Reply::completion(ScriptedCompletion::text("Hello.")));
    s.say("hi");
    drain(&s);
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    assert!(body.get("max_completion_tokens").is_none(), "{body:#}");
    assert!(body["max_tokens"].is_u64(), "{body:#}");
    assert_eq!(body["parallel_tool_calls"], true);
    let tools = body["tools"].to_string();
    assert!(tools.contains("minLength"), "{tools}");
    assert!(
        !tools.contains("maxLength") && !tools.contains("maxItems"),
        "{tools}"
    );
    assert_eq!(s.sent_texts(), ["Hello."]);
}
