//! Issue 43: a tool call the model wrote as text (a server that did not parse
//! it hands it back as `content`) is refused as `malformed-call`, never
//! delivered, logged or stored as a reply. The real binaries against the
//! loopback Bot API and scripted provider.

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::provider::{Reply, ScriptedCompletion};

use crate::common::stack;
use crate::delivery::RUN_FAILED_REPLY;

#[test]
fn a_tool_call_written_as_text_is_refused_and_never_delivered() {
    let s = stack(ProviderApi::OpenaiChat);
    let canary = Canary::new("raw-call");
    // What llama.cpp returns for a Qwen model without a tool-capable template.
    let content = format!(
        "<tool_call>\n{{\"name\": \"request_memory_change\", \"arguments\": {{\"operation\": \"append\", \"proposed_text\": \"{canary}\", \"reason\": \"asked\", \"evidence_event_ids\": []}}}}\n</tool_call>"
    );
    s.say("Remember that I take the 7:40 train.");
    s.script(Reply::completion(ScriptedCompletion::text(&content)));
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);

    assert_eq!(s.sent_texts(), [RUN_FAILED_REPLY], "only the fixed reply");
    let events = s.events().unwrap();
    let of = |ty: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == ty).collect() };
    let failed = of("stream.thought.agent.run.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["reason"], "malformed-call");
    assert_eq!(failed[0]["payload"]["final"], true);
    for done in of("stream.thought.agent.run.completed") {
        assert!(
            done["payload"]["provider"].is_null(),
            "only the fixed reply's run completes"
        );
    }
    assert!(s.proposals().unwrap().is_empty());
    for output in of("stream.thought.derived.message.observation") {
        assert_ne!(
            output["payload"]["origin"], "model",
            "no model reply stored"
        );
    }

    let canaries = [canary];
    assert_no_leak(&canaries, &ran.stderr, "serve logs");
    assert_no_leak(&canaries, &ran.stdout, "serve output");
    for sent in s.sent_texts() {
        assert_no_leak(&canaries, &sent, "a delivered message");
    }
    for e in &events {
        assert_no_leak(&canaries, &e.to_string(), "a stored event");
    }

    // The refusal is final and advances progress: the next turn is answered.
    s.say("Hello again.");
    s.script(Reply::completion(ScriptedCompletion::text("Hi.")));
    assert_eq!(s.drain().unwrap().code, 0);
    assert_eq!(s.sent_texts(), [RUN_FAILED_REPLY, "Hi."]);
}
