//! Canaries in tool arguments, texts and the API key never reach a log line,
//! an error or a `Debug` rendering.

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_protocol::WorkerResult;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::packets::{memory_args, packet};
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion, ScriptedProvider};

use crate::common::*;

#[test]
fn canaries_in_arguments_never_reach_logs_or_errors() {
    let args_canary = Canary::new("tool-args");
    let text_canary = Canary::new("visible-text");
    let thinking_canary = Canary::new("thinking");
    // A provider that echoes the request in its error: the accepted
    // residual risk (docs/providers.md), bounded to the refusal's log line.
    let echo_canary = Canary::new("echoed");
    let mut rendered = String::new();
    for api in [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages] {
        let mut with_extra = memory_args(args_canary.as_str());
        with_extra["note"] = json!(args_canary.as_str());
        let replies = vec![
            // Captured: the canary is in the result (where it belongs) only.
            Reply::completion(ScriptedCompletion {
                texts: vec![text_canary.to_string()],
                thinking: Some(thinking_canary.to_string()),
                calls: vec![ScriptedCall::json(
                    "c1",
                    "request_memory_change",
                    memory_args(args_canary.as_str()),
                )],
                cut: false,
            }),
            // Rejected: malformed, invalid JSON, oversized.
            Reply::completion(ScriptedCompletion::calls(vec![ScriptedCall::json(
                "c1",
                "request_memory_change",
                with_extra,
            )])),
            Reply::completion(ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                &format!("{{\"x\": \"{args_canary}"),
            )])),
            Reply::completion(ScriptedCompletion::calls(vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                &args_canary.as_str().repeat(20_000),
            )])),
            Reply::raw(
                400,
                format!(
                    "{{\"error\": {{\"message\": \"{echo_canary}\", \"type\": \"invalid_request_error\"}}}}"
                ),
            ),
        ];
        for reply in replies {
            let provider = ScriptedProvider::start(vec![reply]).unwrap();
            match attempt(config(worker(), &provider, api), &packet(api)) {
                Ok(report) => {
                    rendered.push_str(&format!("{report:?}\n"));
                    if let WorkerResult::Completed(c) = &report.result {
                        // The thinking canary never crosses the worker boundary.
                        assert!(!thinking_canary.found_in(&serde_json::to_string(c).unwrap()));
                    }
                }
                Err(e) => rendered.push_str(&format!("{e} {e:?}\n")),
            }
        }
    }
    // Errors of failed attempts, too (second request, timeout).
    let provider =
        ScriptedProvider::start(vec![Reply::raw(200, args_canary.as_str().repeat(10))]).unwrap();
    let err = attempt(
        config(
            misbehaving("second-request"),
            &provider,
            ProviderApi::OpenaiChat,
        ),
        &packet(ProviderApi::OpenaiChat),
    )
    .unwrap_err();
    rendered.push_str(&format!("{err} {err:?}\n"));

    let canaries = [args_canary, text_canary, thinking_canary, key().clone()];
    assert_no_leak(&canaries, &rendered, "attempt reports and errors");
    assert_no_leak(&canaries, &logs(), "logs");
    assert!(
        logs().contains("provider attempt"),
        "the attempts were logged"
    );
    assert_no_leak(
        std::slice::from_ref(&echo_canary),
        &rendered,
        "attempt reports and errors",
    );
    let echoed: Vec<String> = logs()
        .lines()
        .filter(|l| echo_canary.found_in(l))
        .map(str::to_owned)
        .collect();
    assert!(!echoed.is_empty(), "the refusal's words were logged");
    for line in echoed {
        assert!(line.contains("provider refused the request"), "{line}");
    }
}

#[test]
fn the_key_never_shows_in_debug_output() {
    let provider = ScriptedProvider::start(vec![]).unwrap();
    let broker =
        stream_broker::Broker::new(config(worker(), &provider, ProviderApi::OpenaiChat)).unwrap();
    assert_no_leak(
        std::slice::from_ref(key()),
        &format!("{broker:?}"),
        "broker debug",
    );
}
