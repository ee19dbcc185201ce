//! A running `serve` and the review CLI side by side: a decision made from
//! another process while `serve` runs shapes the very next turn; a running
//! `serve` keeps one spare worker, and stopping it reaps that worker.

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

/// The processes whose parent is `pid` (scanning `/proc/*/stat`).
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if rest.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            found.push(child);
        }
    }
    found
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
    let spare = loop {
        let children = children_of(pid);
        if let [one] = children[..] {
            break one;
        }
        assert!(Instant::now() < deadline, "children: {children:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    serve.stop();
    assert!(
        !std::path::Path::new(&format!("/proc/{spare}")).exists(),
        "serve killed and reaped its spare worker before exiting"
    );
}
