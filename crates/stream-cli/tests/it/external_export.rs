//! Issue 12 item 3: an external example carries only externally eligible
//! text; the private export keeps the snapshot's text (memory, private
//! corrections) without its id annotations (issue 43).

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::canary::Canary;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::stack;

fn drain(s: &Stack) {
    let ran = s.drain().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
}

fn accept(s: &Stack, kind: &str) {
    let proposals = s.proposals().unwrap();
    let id = proposals.iter().find(|p| p["kind"] == kind).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ran = s
        .run(&["proposal-decision", "--proposal", &id, "--accept"])
        .unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
}

/// Runs an export command and returns its examples.
fn export(s: &Stack, args: &[&str], file: &str) -> Vec<Value> {
    let out = s.path().join(file);
    let mut full = args.to_vec();
    full.extend(["--output", out.to_str().unwrap()]);
    let ran = s.run(&full).unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// After an accepted self-correction, an accepted memory change and an
/// owner `/correct`, the external export holds no memory content, no
/// self-correction text and no internal id annotation; the private export
/// still holds all of them.
#[test]
fn external_examples_hold_no_memory_no_private_correction_and_no_internal_ids() {
    let memory = Canary::new("memory-content");
    let self_fix = Canary::new("self-correction");
    let owner_fix = Canary::new("owner-correct");
    let s = stack(ProviderApi::OpenaiChat);

    // Run A: the reply a self-correction will replace.
    s.say("What is the capital of Australia?");
    s.script(Reply::completion(ScriptedCompletion::text("Sydney.")));
    drain(&s);
    // Run B: a memory change and a self-correction of A, both accepted.
    s.say("Remember my tea, and fix your answer.");
    s.script(Reply::completion(ScriptedCompletion {
        texts: vec!["Noted.".into()],
        ..ScriptedCompletion::calls(vec![
            ScriptedCall::json(
                "c1",
                "request_memory_change",
                json!({"operation": "append", "proposed_text": memory.as_str(), "reason": "asked", "evidence_event_ids": []}),
            ),
            ScriptedCall::json(
                "c2",
                "submit_correction",
                json!({"target_output": "latest", "replacement": self_fix.as_str(), "reason": "wrong", "evidence_event_ids": []}),
            ),
        ])
    }));
    drain(&s);
    accept(&s, "memory-change");
    accept(&s, "self-correction");
    // The owner corrects B: externally eligible, so later examples may show it.
    s.say(&format!("/correct {owner_fix}"));
    drain(&s);
    // Run C sees all of it (memory, A as self-corrected, B as owner-corrected);
    // the owner corrects C, which makes C's snapshot an external example.
    s.say("And of Canada?");
    s.script(Reply::completion(ScriptedCompletion::text("Toronto.")));
    drain(&s);
    s.say("/correct Ottawa.");
    drain(&s);
    let requests = s.provider.requests();
    let seen = String::from_utf8_lossy(&requests.last().unwrap().body).into_owned();
    for canary in [&memory, &self_fix, &owner_fix] {
        assert!(seen.contains(canary.as_str()), "run C saw {canary}");
    }

    let private = export(
        &s,
        &[
            "private-training-export",
            "--acknowledge-sensitive-private-training",
        ],
        "private.jsonl",
    );
    let private_text = serde_json::to_string(&private).unwrap();
    for needle in [memory.as_str(), self_fix.as_str()] {
        assert!(
            private_text.contains(needle),
            "the private export keeps the snapshot's text: {needle}"
        );
    }
    // Issue 43: ids only in provenance, in the private export too.
    for needle in ["⟨message ", "⟨reply output "] {
        assert!(!private_text.contains(needle), "{needle}");
    }

    let external = export(&s, &["training-export"], "external.jsonl");
    assert_eq!(external.len(), 2, "the two owner corrections");
    let c = external
        .iter()
        .find(|e| e["messages"].as_array().unwrap().last().unwrap()["content"] == "Ottawa.")
        .unwrap();
    let messages: Vec<(&str, &str)> = c["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    let prompt = std::fs::read_to_string(
        s.path()
            .join("declarations/prompts/telegram-conversation.v18.md"),
    )
    .ok()
    .map(|p| p.trim_end().to_owned());
    if let Some(prompt) = prompt {
        assert_eq!(messages[0], ("system", prompt.as_str()), "the prompt alone");
    }
    let turns = &messages[1..];
    assert!(
        turns.contains(&("assistant", "Sydney.")),
        "A as delivered: {turns:?}"
    );
    assert!(
        turns.contains(&("assistant", owner_fix.as_str())),
        "B as the owner corrected it: {turns:?}"
    );
    assert!(turns.contains(&("user", "And of Canada?")), "{turns:?}");
    assert_eq!(messages.last().unwrap(), &("assistant", "Ottawa."));
    let messages_text = serde_json::to_string(&c["messages"]).unwrap();
    let events = s.events().unwrap();
    let file = std::fs::read_to_string(s.path().join("external.jsonl")).unwrap();
    for (what, text) in [("the file", &file), ("the messages", &messages_text)] {
        assert!(!text.contains(memory.as_str()), "{what}: memory content");
        assert!(
            !text.contains(self_fix.as_str()),
            "{what}: private correction"
        );
        assert!(!text.contains("⟨message"), "{what}: message annotations");
        assert!(!text.contains("⟨reply"), "{what}: reply annotations");
    }
    for event in &events {
        let id = event["id"].as_str().unwrap();
        assert!(
            !messages_text.contains(id),
            "an event id in the messages: {id}"
        );
    }
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(s.path().join("external.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    assert!(
        manifest["exampleContents"]
            .as_str()
            .unwrap()
            .contains("no memory.md"),
        "{manifest:#}"
    );
}
