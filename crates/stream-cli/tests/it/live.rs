//! A running `serve` and the review CLI side by side: a decision made from
//! another process while `serve` runs shapes the very next turn.

use std::time::{Duration, Instant};

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::{Serve, stack};

fn wait_for_sends(s: &Stack, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.sent_texts().len() < n {
        assert!(Instant::now() < deadline, "only {:?}", s.sent_texts());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_decision_made_while_serve_runs_shapes_the_next_turn() {
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text("Sydney.")));
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        ScriptedCall::json(
            "call_fix",
            "submit_correction",
            json!({"target_output": "latest", "replacement": "canary-judged Canberra.", "reason": "I was wrong.", "evidence_event_ids": []}),
        ),
    ])));
    s.script(Reply::completion(ScriptedCompletion::text("Canberra.")));
    let _serve = Serve::start(&s);
    s.say("What is the capital of Australia?");
    wait_for_sends(&s, 1);
    s.say("Are you sure?");
    wait_for_sends(&s, 2);

    let proposals = s.proposals().unwrap();
    let id = proposals[0]["id"].as_str().unwrap().to_owned();
    let decided = s
        .run(&["proposal-decision", "--proposal", &id, "--accept"])
        .unwrap();
    assert_eq!(decided.code, 0, "{}", decided.stderr);

    s.say("Once more: the capital?");
    wait_for_sends(&s, 3);
    let requests = s.provider.requests();
    assert_eq!(requests.len(), 3);
    let history = requests[2].json()["messages"].to_string();
    assert!(history.contains("canary-judged Canberra."), "{history}");
    assert!(!history.contains("Sydney."), "{history}");
}
