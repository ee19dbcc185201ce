//! The attempt as the parent sees it, end to end: the parent classifies a
//! worker's failure itself, and the worker that runs is the worker hashed.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::{configure_worker, stack};

/// The test worker misbehaving as `mode`, linked into the home.
fn misbehaving(s: &Stack, mode: &str) -> std::path::PathBuf {
    let test_worker = stream_testkit::bin::binary("stream-test-worker").unwrap();
    let link = s.path().join(mode);
    std::os::unix::fs::symlink(test_worker, &link).unwrap();
    link
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// The (reason, final) of every failed attempt recorded.
fn failures(s: &Stack) -> Vec<(String, bool)> {
    let events = s.events().unwrap();
    of_type(&events, "stream.thought.agent.run.failed")
        .iter()
        .map(|e| {
            (
                e["payload"]["reason"].as_str().unwrap().to_owned(),
                e["payload"]["final"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// Three good 200 answers are scripted, so a retry would find one.
fn drain_with_three_answers(s: &Stack) {
    s.say("Hello?");
    for _ in 0..3 {
        s.script(Reply::completion(ScriptedCompletion::text("Hello!")));
    }
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
}

/// A compromised worker cannot make the engine retry after a 200 by
/// claiming the provider failed: one request, the parent's own reason, final.
#[test]
fn a_worker_reporting_provider_transient_after_a_200_causes_one_provider_request() {
    let s = stack(ProviderApi::OpenaiChat);
    configure_worker(&s, &misbehaving(&s, "transient-after-response"));
    drain_with_three_answers(&s);
    assert_eq!(
        s.provider.requests().len(),
        1,
        "exactly one provider request"
    );
    assert_eq!(failures(&s), [("result-mismatch".to_owned(), true)]);
    assert!(s.sent_texts().iter().all(|t| t != "Hello!"));
}

/// A worker that exits non-zero after a valid result cannot buy a retry.
#[test]
fn a_worker_exiting_non_zero_after_a_valid_result_is_final() {
    let s = stack(ProviderApi::OpenaiChat);
    configure_worker(&s, &misbehaving(&s, "exit-1-after-result"));
    drain_with_three_answers(&s);
    assert_eq!(
        s.provider.requests().len(),
        1,
        "exactly one provider request"
    );
    assert_eq!(failures(&s), [("worker-failed".to_owned(), true)]);
}

/// A running `serve` keeps executing the worker it hashed at start: the file
/// overwritten in place between two turns changes nothing, and both
/// receipts name the hash of the worker that ran.
#[test]
fn a_worker_file_replaced_between_two_turns_changes_nothing_until_restart() {
    let s = stack(ProviderApi::OpenaiChat);
    let real = stream_testkit::bin::binary("thestream-worker").unwrap();
    let worker = s.path().join("thestream-worker");
    std::fs::copy(&real, &worker).unwrap();
    configure_worker(&s, &worker);
    let hashed = stream_core::canon::sha256(&std::fs::read(&worker).unwrap());

    let log = std::fs::File::create(s.path().join("serve.stderr")).unwrap();
    let mut serve = s
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let wait_for_replies = |n: usize| {
        let start = Instant::now();
        while s.sent_texts().len() < n {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no reply {n}: {:?}\n{}",
                failures(&s),
                std::fs::read_to_string(s.path().join("serve.stderr")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    s.script(Reply::completion(ScriptedCompletion::text("First.")));
    s.say("One?");
    wait_for_replies(1);

    // Overwritten in place (same inode, as `cp` does): a worker executed by
    // path would now be a script that fails every attempt.
    std::fs::write(&worker, b"#!/bin/sh\nexit 1\n").unwrap();
    s.script(Reply::completion(ScriptedCompletion::text("Second.")));
    s.say("Two?");
    wait_for_replies(2);

    // A working worker of another hash on disk: doctor says the running
    // serve executes the one it loaded, and names the restart.
    let mut changed = std::fs::read(&real).unwrap();
    changed.push(0);
    std::fs::write(&worker, &changed).unwrap();
    let doctor = s.run(&["doctor", "--json"]).unwrap();
    let checks: serde_json::Value = serde_json::from_str(&doctor.stdout).unwrap();
    let check = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "worker")
        .unwrap()
        .clone();
    assert_eq!(check["ok"], false, "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("the running serve executes {hashed}")),
        "{detail}"
    );
    assert_eq!(doctor.code, 1);
    let _ = serve.kill();
    let _ = serve.wait();

    assert_eq!(s.sent_texts(), ["First.", "Second."]);
    assert_eq!(failures(&s), []);
    let events = s.events().unwrap();
    let receipts = of_type(&events, "stream.thought.agent.run.completed");
    assert_eq!(receipts.len(), 2);
    for receipt in receipts {
        assert_eq!(
            receipt["payload"]["workerBundleSha256"].as_str(),
            Some(hashed.as_str())
        );
    }
}
