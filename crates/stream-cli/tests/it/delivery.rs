//! Issues 12 and 13 end to end: every reply is delivered or answered, never
//! stuck pending — the real `thestream` and `thestream-worker` against the
//! loopback Bot API (which refuses empty and over-long texts as Telegram
//! does) and the scripted provider.

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;
use stream_testkit::telegram::Fault;

use crate::common::stack;

/// The failed-run reply of `declarations/telegram-replies.v2.yaml`.
pub const RUN_FAILED_REPLY: &str =
    "I couldn't answer that one, and nothing was saved. Please try again or rephrase.";

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

/// Outputs without a receipt or a recorded refusal: stuck pending.
fn undelivered(events: &[Value]) -> usize {
    let settled: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"] == "stream.telegram.delivery.receipt"
                || e["type"] == "stream.telegram.delivery.failed"
        })
        .map(|e| &e["payload"]["outputEventId"])
        .collect();
    of_type(events, "stream.thought.derived.message.observation")
        .iter()
        .filter(|o| !settled.contains(&&o["id"]))
        .count()
}

#[test]
fn a_reply_with_a_url_is_sent_without_a_link_preview() {
    let s = stack(ProviderApi::OpenaiChat);
    let leak = "https://attacker.example/c?d=canary-memory-in-a-url";
    s.say("Where can I read more?");
    s.script(Reply::completion(ScriptedCompletion::text(&format!(
        "See {leak}"
    ))));
    drain(&s);
    let sent = s.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].params["text"], json!(format!("See {leak}")));
    assert_eq!(
        sent[0].params["link_preview_options"],
        json!({"is_disabled": true}),
        "Telegram's crawler must not fetch a URL the model wrote"
    );
}

/// Whitespace-only visible text used to become an output Telegram refused
/// ("message text is empty") on every pass, forever.
#[test]
fn a_whitespace_only_reply_gets_the_failed_run_reply() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Say nothing.");
    s.script(Reply::completion(ScriptedCompletion::text(" \n\t \n")));
    drain(&s);
    assert_eq!(s.sent_texts(), [RUN_FAILED_REPLY]);
    let events = s.events().unwrap();
    assert_eq!(undelivered(&events), 0);
    let failed = of_type(&events, "stream.thought.agent.run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["final"], json!(true));
}

/// Whitespace-only text beside a tool call is no text: the fixed acknowledgment.
#[test]
fn whitespace_beside_a_tool_call_gets_the_acknowledgment() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Remember that I like tea.");
    let mut completion = ScriptedCompletion::calls(vec![ScriptedCall::json(
        "call_mem",
        "request_memory_change",
        json!({"operation": "append", "proposed_text": "Likes tea.", "reason": "The owner asked.", "evidence_event_ids": []}),
    )]);
    completion.texts = vec!["   ".to_owned()];
    s.script(Reply::completion(completion));
    drain(&s);
    assert_eq!(s.sent_texts(), ["I saved that as a memory suggestion."]);
}

/// 3,000 emoji: a valid reply (3,000 scalar values) that Telegram refused
/// as too long (6,000 UTF-16 code units) on every pass. Now two messages,
/// the first replying to the owner's, and one receipt naming both.
#[test]
fn a_reply_of_3000_emoji_is_delivered_in_two_messages() {
    let s = stack(ProviderApi::OpenaiChat);
    let asked = s.say("Emoji, please.");
    let text = "😀".repeat(3000);
    s.script(Reply::completion(ScriptedCompletion::text(&text)));
    drain(&s);
    let sent = s.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(s.sent_texts().concat(), text);
    assert_eq!(
        sent[0].params["reply_parameters"]["message_id"],
        json!(asked_message_id(&s, asked))
    );
    assert!(sent[1].params.get("reply_parameters").is_none());
    let events = s.events().unwrap();
    let receipts = of_type(&events, "stream.telegram.delivery.receipt");
    assert_eq!(receipts.len(), 1, "one receipt per output");
    let ids = &receipts[0]["payload"];
    assert_eq!(
        (
            ids["messageId"].as_i64(),
            ids["continuationMessageIds"].clone()
        ),
        (Some(1), json!([2]))
    );
    assert_eq!(undelivered(&events), 0);
    // A second drain sends nothing more.
    drain(&s);
    assert_eq!(s.sent().len(), 2);
}

/// The message id the fake gave the owner's message of update `update_id`.
fn asked_message_id(s: &Stack, update_id: i64) -> i64 {
    let events = s.events().unwrap();
    of_type(&events, "stream.telegram.message.received")
        .iter()
        .find(|e| e["payload"]["updateId"] == json!(update_id))
        .and_then(|e| e["payload"]["messageId"].as_i64())
        .unwrap()
}

/// A permanent 400 from sendMessage used to be retried on every pass.
#[test]
fn a_permanent_400_is_recorded_once_and_the_owner_told() {
    let s = stack(ProviderApi::OpenaiChat);
    let canary = Canary::new("refused");
    s.say("Hello?");
    s.script(Reply::completion(ScriptedCompletion::text(&format!(
        "Hi {canary}"
    ))));
    s.telegram.inject(
        "sendMessage",
        Fault::Refuse {
            code: 400,
            description: format!("Bad Request: can't parse {canary}"),
        },
    );
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_no_leak(std::slice::from_ref(&canary), &ran.stderr, "serve's log");
    let notice = "I couldn't send my reply to that message. Please ask again if you still need it.";
    assert_eq!(s.sent_texts(), [format!("Hi {canary}"), notice.to_owned()]);
    let events = s.events().unwrap();
    let failed = of_type(&events, "stream.telegram.delivery.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["errorCode"], json!(400));
    assert_eq!(failed[0]["sensitive"], json!(false));
    assert_no_leak(
        std::slice::from_ref(&canary),
        &failed[0].to_string(),
        "the refusal event",
    );
    assert!(of_type(&events, "stream.telegram.delivery.receipt").is_empty());
    assert_eq!(undelivered(&events), 0);
    for _ in 0..2 {
        drain(&s);
    }
    assert_eq!(s.sent().len(), 2, "never resent");
}

/// Issue 13: a run that fails for good answers with exactly one fixed,
/// content-dark reply, with its own receipt.
#[test]
fn a_final_failure_gets_exactly_one_fixed_reply() {
    let s = stack(ProviderApi::OpenaiChat);
    let canary = Canary::new("provider-error");
    s.say("Hello?");
    s.script(Reply::raw(
        400,
        json!({"error": {"type": "invalid_request_error", "message": canary.as_str()}}).to_string(),
    ));
    drain(&s);
    drain(&s);
    assert_eq!(s.sent_texts(), [RUN_FAILED_REPLY]);
    assert_eq!(s.provider.requests().len(), 1);
    let events = s.events().unwrap();
    let failed = of_type(&events, "stream.thought.agent.run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["final"], json!(true));
    let outputs = of_type(&events, "stream.thought.derived.message.observation");
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0]["source"], "agent:telegram-replies");
    assert_eq!(outputs[0]["payload"]["origin"], "deterministic");
    assert_eq!(outputs[0]["payload"]["text"], RUN_FAILED_REPLY);
    let receipts = of_type(&events, "stream.telegram.delivery.receipt");
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0]["payload"]["outputEventId"], outputs[0]["id"]);
    assert_no_leak(&[canary], &s.sent_texts().concat(), "the sent replies");
}

/// Transient failures in retry say nothing: only the success is sent.
#[test]
fn a_transient_failure_then_success_sends_only_the_success() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("Hello?");
    s.script(Reply::error(503, "overloaded_error"));
    s.script(Reply::error(500, "api_error"));
    s.script(Reply::completion(ScriptedCompletion::text("Hello!")));
    drain(&s);
    assert_eq!(s.sent_texts(), ["Hello!"]);
    let events = s.events().unwrap();
    assert_eq!(of_type(&events, "stream.thought.agent.run.failed").len(), 2);
    assert_eq!(
        of_type(&events, "stream.thought.derived.message.observation").len(),
        1
    );
}
