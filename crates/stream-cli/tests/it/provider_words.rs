//! Issue 43, item 2, end to end: the provider's own words about a refused
//! request reach serve's log (bounded, escaped) and doctor's provider line;
//! a known "request unsupported" 5xx is final after one request.

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::stack;

const JINJA: &str =
    r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#;

fn with_compat(s: &Stack, compat: &str) {
    let path = s.path().join("thestream.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("compat = \"openai\""), "{text}");
    std::fs::write(
        &path,
        text.replace("compat = \"openai\"", &format!("compat = \"{compat}\"")),
    )
    .unwrap();
}

fn provider_check(s: &Stack) -> (i32, bool, String) {
    let ran = s.run(&["doctor", "--json"]).unwrap();
    let all: Vec<Value> =
        serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout));
    let c = all.iter().find(|c| c["check"] == "provider").unwrap();
    (
        ran.code,
        c["ok"].as_bool().unwrap(),
        c["detail"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_jinja_500_is_final_after_one_request_and_its_words_are_logged_bounded_and_escaped() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Hello?");
    // The known message, then control characters and a long tail.
    let body = format!("{JINJA}\n\u{1b}[31mforged line{}", "x".repeat(1000));
    s.script(Reply::raw(500, body));
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(s.provider.requests().len(), 1, "not retried");
    let events = s.events().unwrap();
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "stream.thought.agent.run.failed")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["reason"], "provider-rejected");
    assert_eq!(failed[0]["payload"]["final"], true);
    let line = ran
        .stderr
        .lines()
        .find(|l| l.contains("provider refused the request"))
        .unwrap_or_else(|| panic!("no provider line: {}", ran.stderr));
    assert!(
        line.contains("requires --jinja flag") && line.contains("500"),
        "{line}"
    );
    assert!(!line.contains('\u{1b}') && line.contains("\\n"), "{line}");
    assert!(!line.contains(&"x".repeat(300)), "unbounded: {line}");
    assert!(!ran.stderr.lines().any(|l| l.starts_with("forged line")));
}

#[test]
fn model_text_never_reaches_the_log() {
    let s = stack(ProviderApi::OpenaiChat);
    let canary = Canary::new("reply");
    s.say("Hi.");
    s.script(Reply::completion(ScriptedCompletion::text(&format!(
        "Hello {canary}."
    ))));
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_no_leak(&[canary], &ran.stderr, "serve logs");
}

#[test]
fn doctor_in_llama_cpp_mode_sends_the_tools_and_names_jinja_when_refused() {
    let s = stack(ProviderApi::OpenaiChat);
    with_compat(&s, "llama-cpp");
    s.script(Reply::raw(500, JINJA));
    let (code, ok, detail) = provider_check(&s);
    assert_eq!(code, 1);
    assert!(!ok, "{detail}");
    assert!(detail.contains("requires --jinja flag"), "{detail}");
    assert!(
        detail.contains("start llama-server with --jinja"),
        "{detail}"
    );
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 1);

    s.script(Reply::completion(ScriptedCompletion::text("ok")));
    let (code, ok, detail) = provider_check(&s);
    assert!(ok && code == 0, "{detail}");
    assert!(detail.contains("three tools answered 200"), "{detail}");
}

#[test]
fn doctor_in_openai_mode_sends_no_chat_request() {
    let s = stack(ProviderApi::OpenaiChat);
    let (code, ok, detail) = provider_check(&s);
    assert!(ok && code == 0, "{detail}");
    assert!(s.provider.requests().is_empty());
}
