//! Issue 43, item 3, end to end: `[provider] timeout_secs` bounds each
//! attempt of the real binaries, and a reply cut at the token limit is
//! delivered, stored and logged as cut.
//!
//! The delays are scaled down: `timeout_secs = 1` gives the HTTP request
//! 750 ms of a 1 s attempt (`stream_broker::AttemptTimeout::of`), the old
//! fixed 90 s of 120 s at 1/120 scale; a reply 1.2 s late is too slow for
//! it and fine for `timeout_secs = 3` (2.25 s).

use std::time::Duration;

use serde_json::Value;
use stream_core::annotation::{CUT, was_cut};
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::stack;

const LATE: Duration = Duration::from_millis(1200);

fn with_timeout_secs(s: &Stack, value: &str) {
    let path = s.path().join("thestream.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("timeout_secs = 120"), "{text}");
    std::fs::write(
        &path,
        text.replace("timeout_secs = 120", &format!("timeout_secs = {value}")),
    )
    .unwrap();
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn drained(s: &Stack) -> stream_testkit::stack::Ran {
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    ran
}

#[test]
fn a_reply_slower_than_timeout_secs_fails_the_attempt_as_a_timeout_and_is_retried() {
    let s = stack(ProviderApi::OpenaiChat);
    with_timeout_secs(&s, "1");
    s.say("Are you there?");
    s.script(Reply::completion(ScriptedCompletion::text("Late.")).delayed(LATE));
    s.script(Reply::completion(ScriptedCompletion::text("Here.")));
    drained(&s);
    assert_eq!(s.sent_texts(), ["Here."]);
    assert_eq!(s.provider.requests().len(), 2, "one request per attempt");
    let events = s.events().unwrap();
    let failed = of_type(&events, "stream.thought.agent.run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["reason"], "provider-transient");
    assert_eq!(failed[0]["payload"]["final"], false);
}

#[test]
fn a_larger_timeout_secs_lets_a_slow_reply_through_with_one_request() {
    let s = stack(ProviderApi::OpenaiChat);
    with_timeout_secs(&s, "3");
    s.say("Take your time.");
    s.script(Reply::completion(ScriptedCompletion::text("Done thinking.")).delayed(LATE));
    drained(&s);
    assert_eq!(s.sent_texts(), ["Done thinking."]);
    assert_eq!(s.provider.requests().len(), 1, "the prompt was sent once");
    let events = s.events().unwrap();
    assert!(of_type(&events, "stream.thought.agent.run.failed").is_empty());
}

#[test]
fn timeout_secs_outside_1_to_3600_is_a_config_error_naming_the_key() {
    let s = stack(ProviderApi::OpenaiChat);
    for bad in ["0", "3601"] {
        with_timeout_secs(&s, bad);
        for args in [&["serve", "--drain"][..], &["doctor"]] {
            let ran = s.run(args).unwrap();
            let said = format!("{}{}", ran.stdout, ran.stderr);
            let want = if args[0] == "doctor" { 1 } else { 2 };
            assert_eq!(ran.code, want, "{bad} {args:?}: {said}");
            assert!(said.contains("provider.timeout_secs"), "{bad}: {said}");
        }
        with_timeout_secs_back(&s, bad);
    }
    assert!(s.provider.requests().is_empty());
}

fn with_timeout_secs_back(s: &Stack, from: &str) {
    let path = s.path().join("thestream.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let line = format!("timeout_secs = {from}");
    assert!(text.contains(&line), "{text}");
    std::fs::write(&path, text.replace(&line, "timeout_secs = 120")).unwrap();
}

/// `finish_reason: "length"` and `stop_reason: "max_tokens"`: the owner
/// gets the text with the marker, the output event stores those same
/// bytes, and the run's log line says `truncated` without the text.
#[test]
fn a_reply_cut_at_the_token_limit_is_delivered_stored_and_logged_as_cut() {
    for api in [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages] {
        let s = stack(api);
        let canary = Canary::new("cut");
        let text = format!("The list goes on: {canary}, two, thr");
        s.say("List everything.");
        s.script(Reply::completion(ScriptedCompletion::text(&text).cut()));
        let cut = drained(&s);
        s.say("And briefly?");
        s.script(Reply::completion(ScriptedCompletion::text(
            "Briefly: done.",
        )));
        let whole = drained(&s);

        let want = format!("{text}{CUT}");
        assert_eq!(s.sent_texts(), [want.as_str(), "Briefly: done."], "{api:?}");
        let events = s.events().unwrap();
        let outputs = of_type(&events, "stream.thought.derived.message.observation");
        let stored: Vec<&str> = outputs
            .iter()
            .map(|o| o["payload"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(stored, [want.as_str(), "Briefly: done."], "{api:?}");
        assert!(was_cut(stored[0]) && !was_cut(stored[1]));
        assert_eq!(outputs[0]["payload"]["origin"], "model");

        let settled = |ran: &stream_testkit::stack::Ran| {
            ran.stderr
                .lines()
                .find(|l| l.contains("run settled"))
                .unwrap_or_else(|| panic!("no run settled line: {}", ran.stderr))
                .to_owned()
        };
        assert!(
            settled(&cut).contains("truncated=true"),
            "{}",
            settled(&cut)
        );
        assert!(
            settled(&whole).contains("truncated=false"),
            "{}",
            settled(&whole)
        );
        assert_no_leak(&[canary], &cut.stderr, "serve logs");
    }
}
