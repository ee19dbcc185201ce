//! Issue 7 end to end: the real `thestream` and `thestream-worker` against
//! the loopback Bot API and scripted provider.

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};

use crate::common::stack;

#[test]
fn a_text_only_turn_is_answered_and_receipted() {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("What is the capital of France?");
    s.script(Reply::completion(ScriptedCompletion::text("Paris.")));
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(s.sent_texts(), ["Paris."]);
    assert_eq!(s.provider.requests().len(), 1);
    let events = s.events().unwrap();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(
        types.contains(&"stream.telegram.delivery.receipt"),
        "{types:?}"
    );
    assert!(
        types.contains(&"stream.thought.agent.run.completed"),
        "{types:?}"
    );
    let _ = json!(null);
    let _ = ScriptedCall::json("x", "y", json!({}));
}
