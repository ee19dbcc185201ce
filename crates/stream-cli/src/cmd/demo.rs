//! `thestream demo`: the whole chain in a temporary folder against the
//! built-in loopback fakes (a Telegram Bot API and an OpenAI-shaped
//! provider), narrated step by step. Every step runs this very binary as a
//! user would: `serve --drain`, `proposal-list`, `proposal-show`,
//! `proposal-decision`, `memory-log`, `events`.

use std::path::PathBuf;

use anyhow::anyhow;
use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_core::terminal::render;
use stream_loopback::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_loopback::stack::{Ran, Stack};

use crate::exit::{CmdResult, Failure};

/// `demo` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the demo folder instead of deleting it at the end.
    #[arg(long)]
    keep: bool,
}

fn runtime(e: impl std::fmt::Display) -> Failure {
    Failure::runtime(anyhow!("demo: {e}"))
}

struct Demo {
    stack: Stack,
    step: usize,
}

impl Demo {
    fn title(&mut self, text: &str) {
        self.step += 1;
        println!("\n── {}. {text}", self.step);
    }

    fn owner(&self, text: &str) {
        println!("   owner › {}", render(text).text);
        self.stack.say(text);
    }

    fn drain(&self) -> Result<(), Failure> {
        let before = self.stack.sent().len();
        let ran = self.stack.drain().map_err(runtime)?;
        if ran.code != 0 {
            return Err(runtime(format!("serve --drain failed:\n{}", ran.stderr)));
        }
        for text in self.stack.sent_texts().iter().skip(before) {
            // What the bot sent is model-written: escaped like every review view.
            for (i, line) in render(text).text.lines().enumerate() {
                println!("   {} {line}", if i == 0 { "bot   ›" } else { "        " });
            }
        }
        Ok(())
    }

    fn thestream(&self, args: &[&str]) -> Result<Ran, Failure> {
        println!("   $ thestream {}", args.join(" "));
        let ran = self.stack.run(args).map_err(runtime)?;
        Ok(ran)
    }

    fn events(&self) -> Result<Vec<Value>, Failure> {
        self.stack.events().map_err(runtime)
    }
}

fn call(id: &str, name: &str, args: Value) -> ScriptedCall {
    ScriptedCall::json(id, name, args)
}

/// Runs the demo.
pub fn run(args: Args) -> CmdResult {
    let thestream = std::env::current_exe().map_err(runtime)?;
    let worker = super::serve::default_worker()?;
    if !worker.is_file() {
        return Err(Failure::usage(anyhow!(
            "{} is missing; build both binaries with `cargo build --release --bins`",
            worker.display()
        )));
    }
    let stack = Stack::start(&thestream, &worker, ProviderApi::OpenaiChat).map_err(runtime)?;
    println!("thestream demo — a whole conversation, decided and exported, against loopback fakes");
    println!("   folder:            {}", stack.path().display());
    println!("   Telegram Bot API:  {} (fake)", stack.telegram.base_url());
    println!(
        "   LLM provider:      {} (scripted, OpenAI-shaped)",
        stack.provider.base_url(ProviderApi::OpenaiChat)
    );
    println!("   The model runs in thestream-worker: no filesystem, no network, no credentials.");
    let mut demo = Demo { stack, step: 0 };

    demo.title("A plain reply: text only");
    demo.owner("What is the capital of Australia?");
    demo.stack
        .script(Reply::completion(ScriptedCompletion::text("Sydney.")));
    demo.drain()?;

    demo.title("The model corrects its previous reply (target_output: \"latest\"), with text");
    demo.owner("Hm, are you sure about that?");
    demo.stack.script(Reply::completion(ScriptedCompletion {
        texts: vec!["You're right to ask — it is Canberra. I saved a proposed correction of my last reply for you to review.".into()],
        thinking: None,
        calls: vec![call(
            "call_1",
            "submit_correction",
            json!({"target_output": "latest", "replacement": "The capital of Australia is Canberra.", "reason": "Sydney is the largest city, not the capital.", "evidence_event_ids": []}),
        )],
        cut: false,
    }));
    demo.drain()?;

    demo.title("A memory suggestion: tool only, so the parent answers with a fixed acknowledgment");
    demo.owner("Please remember that I prefer short answers.");
    demo.stack.script(Reply::completion(ScriptedCompletion::calls(vec![call(
        "call_2",
        "request_memory_change",
        json!({"operation": "append", "proposed_text": "- The owner prefers short answers.", "reason": "The owner asked me to remember this.", "evidence_event_ids": []}),
    )])));
    demo.drain()?;

    demo.title("/focus with a description: the model proposes a focus declaration");
    demo.owner("/focus help me plan the spring garden");
    demo.stack
        .script(Reply::completion(ScriptedCompletion::calls(vec![call(
            "call_3",
            "propose_focus",
            json!({
                "identity": {"id": "spring-garden", "version": 1},
                "lineage": {"parent": null},
                "scope": {"chat": "origin"},
                "objective": "Help the owner plan the spring garden.",
                "subscriptions": [],
                "budgets": {"maxRunsPerDay": 3, "maxOutputTokensPerRun": 800, "maxDays": 60},
                "requestedPermissions": {"tools": [], "proposals": [], "externalActions": false},
                "retirement": {"rule": "after-days", "days": 60}
            }),
        )])));
    demo.drain()?;

    demo.title("Bare /focus: a fixed reply, no provider request");
    let requests_before = demo.stack.provider.requests().len();
    demo.owner("/focus");
    demo.drain()?;
    println!(
        "   (provider requests: {requests_before} before, {} after)",
        demo.stack.provider.requests().len()
    );

    demo.title("The proposals, as the store holds them: inert until a human decides");
    let ran = demo.thestream(&["proposal-list", "--show-sensitive"])?;
    print!("{}", indent(&ran.stdout));

    let proposals = demo.stack.proposals().map_err(runtime)?;
    let id_of = |kind: &str| -> Result<String, Failure> {
        proposals
            .iter()
            .find(|p| p["kind"] == kind)
            .and_then(|p| p["id"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| runtime(format!("no {kind} proposal")))
    };
    let (correction, memory, focus) = (
        id_of("self-correction")?,
        id_of("memory-change")?,
        id_of("focus-declaration")?,
    );

    demo.title("Review the memory change: the diff is computed with the materializer's own bytes");
    let ran = demo.thestream(&["proposal-show", &memory[..12], "--show-sensitive"])?;
    print!("{}", indent(&ran.stdout));

    demo.title("Review the correction: the reply as delivered, the replacement, a word diff");
    let ran = demo.thestream(&["proposal-show", &correction[..12], "--show-sensitive"])?;
    print!("{}", indent(&ran.stdout));

    demo.title("A human accepts the correction: it becomes a judgment");
    let ran = demo.thestream(&[
        "proposal-decision",
        "--proposal",
        &correction[..12],
        "--accept",
        "--actor",
        "owner",
    ])?;
    print!("{}", indent(&ran.stdout));

    demo.title(
        "A human accepts the memory change: memory.md is written after the whole chain revalidates",
    );
    let memory_path = demo.stack.path().join("context/memory.md");
    let before = std::fs::read_to_string(&memory_path).map_err(runtime)?;
    let ran = demo.thestream(&[
        "proposal-decision",
        "--proposal",
        &memory,
        "--accept",
        "--actor",
        "owner",
    ])?;
    print!("{}", indent(&ran.stdout));
    let after = std::fs::read_to_string(&memory_path).map_err(runtime)?;
    println!(
        "   memory.md grew from {} to {} bytes; its new last line:",
        before.len(),
        after.len()
    );
    println!("   │ {}", after.lines().last().unwrap_or_default());

    demo.title("Focus proposals are listed but cannot be decided yet");
    let ran = demo.thestream(&["proposal-decision", "--proposal", &focus, "--accept"])?;
    println!(
        "   exit {}: {}",
        ran.code,
        ran.stderr
            .lines()
            .last()
            .unwrap_or_default()
            .trim_start_matches("error: ")
    );

    demo.title("The next turn: history carries the corrected reply and the memory");
    demo.owner("What is the capital of Australia, once more?");
    demo.stack
        .script(Reply::completion(ScriptedCompletion::text("Canberra.")));
    demo.drain()?;
    let request = demo
        .stack
        .provider
        .requests()
        .last()
        .map(|r| r.json())
        .unwrap_or_default();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let corrected = messages.iter().any(|m| {
        m["role"] == "assistant"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.ends_with("The capital of Australia is Canberra."))
    });
    println!("   the provider saw the judged text in place of \"Sydney.\": {corrected}");
    println!(
        "   the provider saw the approved memory line: {}",
        system.contains("The owner prefers short answers.")
    );

    demo.title("Another memory suggestion, then the owner edits memory.md by hand: it turns stale");
    demo.owner("Remember that I water the garden on Sundays.");
    demo.stack.script(Reply::completion(ScriptedCompletion::calls(vec![call(
        "call_4",
        "request_memory_change",
        json!({"operation": "append", "proposed_text": "- The owner waters the garden on Sundays.", "reason": "The owner asked me to remember this.", "evidence_event_ids": []}),
    )])));
    demo.drain()?;
    let mut edited = std::fs::read_to_string(&memory_path).map_err(runtime)?;
    edited.push_str("- (added by hand) The owner lives in Canberra.\n");
    std::fs::write(&memory_path, edited).map_err(runtime)?;
    println!("   (the owner appends a line to memory.md in an editor)");
    let ran = demo.thestream(&["proposal-list", "--show-sensitive"])?;
    print!("{}", indent(&ran.stdout));
    let pending = demo.stack.proposals().map_err(runtime)?;
    let second = pending
        .iter()
        .find(|p| p["kind"] == "memory-change" && p["state"] == "pending")
        .and_then(|p| p["shortId"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| runtime("no second memory proposal"))?;

    demo.title("The owner rejects the stale suggestion");
    let ran = demo.thestream(&[
        "proposal-decision",
        "--proposal",
        &second,
        "--reject",
        "--actor",
        "owner",
    ])?;
    print!("{}", indent(&ran.stdout));

    demo.title("memory-log --patch: who put each line in memory.md, and when");
    let ran = demo.thestream(&["memory-log", "--patch", "--show-sensitive"])?;
    print!("{}", indent(&ran.stdout));

    demo.title("Exports: the accepted self-correction is private training data, never external");
    let exports = demo.stack.path().join("exports");
    std::fs::create_dir_all(&exports).map_err(runtime)?;
    set_private(&exports)?;
    let private = exports.join("private.jsonl");
    let external = exports.join("external.jsonl");
    let private = private.to_string_lossy().into_owned();
    let external = external.to_string_lossy().into_owned();
    let ran = demo.thestream(&[
        "private-training-export",
        "--output",
        &private,
        "--acknowledge-sensitive-private-training",
    ])?;
    print!("{}", indent(&ran.stdout));
    let ran = demo.thestream(&["training-export", "--output", &external])?;
    print!("{}", indent(&ran.stdout));

    demo.title("What the store holds");
    let events = demo.events()?;
    let mut counts: Vec<(String, usize)> = Vec::new();
    for e in &events {
        let ty = format!(
            "{}@{}",
            e["type"].as_str().unwrap_or_default(),
            e["version"]
        );
        match counts.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, n)) => *n += 1,
            None => counts.push((ty, 1)),
        }
    }
    for (ty, n) in &counts {
        println!("   {n:>3}  {ty}");
    }
    println!(
        "   {} provider requests for 6 model turns; the literal \"latest\" stored: {}",
        demo.stack.provider.requests().len(),
        serde_json::to_string(&events)
            .map_err(runtime)?
            .contains("\"latest\"")
    );

    let path: PathBuf = demo.stack.path().to_owned();
    if args.keep {
        let kept = demo.stack.home.keep();
        println!(
            "\nkept the demo folder: {} (try: thestream --config {}/thestream.toml events)",
            kept.display(),
            kept.display()
        );
    } else {
        println!(
            "\ndone; the demo folder {} is removed (run with --keep to look around)",
            path.display()
        );
    }
    Ok(())
}

fn set_private(dir: &std::path::Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(runtime)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}
