//! `thestream inspect` through the real binary: the gate (token, cookie,
//! Host, cross-site, methods), the headers of every response, read-only by
//! construction (the store's bytes unchanged by a session of page loads),
//! the exact request of a turn, the live tail's resume, and hostile text
//! rendered inert. `browser` drives the same pages in headless Chromium.

mod browser;
mod client;
mod http;

use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::Stack;

use crate::common::stack;

/// A proposal that tries everything a page could be tricked by.
pub const HOSTILE: &str = "<script>window.__pwned=1</script>\"><img src=x onerror=\"window.__pwned=2\">\n[click](javascript:window.__pwned=3) <a href=\"javascript:window.__pwned=4\">x</a>\r\u{1b}[8mcanary-inspect-concealed\u{1b}[0m \u{202e}desrever canary-inspect-hostile";

pub fn memory_call(id: &str, text: &str) -> ScriptedCall {
    ScriptedCall::json(
        id,
        "request_memory_change",
        json!({"operation": "append", "proposed_text": text, "reason": "The owner asked.", "evidence_event_ids": []}),
    )
}

fn drain(s: &Stack) {
    let ran = s.drain().unwrap();
    assert_eq!(
        ran.code, 0,
        "serve --drain failed:\n{}\n{}",
        ran.stdout, ran.stderr
    );
}

fn proposal_ids(s: &Stack) -> Vec<String> {
    s.proposals()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect()
}

/// What a scripted conversation leaves in a store.
pub struct Scripted {
    pub s: Stack,
    /// The accepted (materialized) memory proposal.
    pub accepted: String,
    /// The hostile pending one, stale after a hand edit.
    pub hostile: String,
    /// The line the accepted proposal added.
    pub accepted_line: &'static str,
}

/// Three turns: a plain answer; a memory request accepted and materialized;
/// a hostile memory proposal left pending and made stale by a hand edit.
pub fn scripted() -> Scripted {
    let s = stack(ProviderApi::OpenaiChat);
    s.say("What is the capital of Australia?");
    s.script(Reply::completion(ScriptedCompletion::text("Canberra.")));
    drain(&s);
    s.say("Please remember that I like tea.");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        memory_call("call_tea", "canary-inspect-tea: the owner likes tea."),
    ])));
    drain(&s);
    let accepted = proposal_ids(&s)[0].clone();
    let run = s
        .run(&["proposal-decision", "--proposal", &accepted, "--accept"])
        .unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    s.say("And remember this.");
    s.script(Reply::completion(ScriptedCompletion::calls(vec![
        memory_call("call_hostile", HOSTILE),
    ])));
    drain(&s);
    let hostile = proposal_ids(&s)
        .into_iter()
        .find(|id| *id != accepted)
        .unwrap();
    // A hand edit after the proposal: it is now stale.
    let memory = s.path().join("context/memory.md");
    let mut text = std::fs::read_to_string(&memory).unwrap();
    text.push_str("\nEdited by hand.\n");
    std::fs::write(&memory, text).unwrap();
    let run = s.run(&["scan"]).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    Scripted {
        s,
        accepted,
        hostile,
        accepted_line: "canary-inspect-tea: the owner likes tea.",
    }
}

/// The run ids of the completed turns, oldest first.
pub fn runs(s: &Stack) -> Vec<String> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "stream.thought.agent.run.completed")
        .map(|e: &Value| e["payload"]["runId"].as_str().unwrap().to_owned())
        .collect()
}
