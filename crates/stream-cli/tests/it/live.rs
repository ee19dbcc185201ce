//! A running `serve` and the review CLI side by side: a decision made from
//! another process while `serve` runs shapes the very next turn; a running
//! `serve` keeps one spare worker, and stopping it reaps that worker.

use std::time::{Duration, Instant};

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_testkit::procs;
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

#[test]
fn serve_keeps_one_spare_worker_and_its_shutdown_reaps_it() {
    let s = stack(ProviderApi::OpenaiChat);
    s.script(Reply::completion(ScriptedCompletion::text("Hello.")));
    let serve = Serve::start(&s);
    let pid = serve.0.id();
    s.say("Hi there.");
    wait_for_sends(&s, 1);
    // After the attempt, the next spare is made and parked.
    let deadline = Instant::now() + Duration::from_secs(60);
    // serve's children: its fork server and the spare the server forked
    // (with CLONE_PARENT, so that serve supervises and reaps it), started
    // after it.
    let (server, spare) = loop {
        let mut children = procs::children_of(pid);
        children.sort_by_key(|child| procs::start_time(*child));
        if let [server, one] = children[..] {
            break (server, one);
        }
        assert!(Instant::now() < deadline, "children: {children:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    serve.stop();
    for (what, pid) in [("spare worker", spare), ("fork server", server)] {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "serve killed and reaped its {what} before exiting"
        );
    }
}
