//! `thestream demo`: the whole chain in a temporary folder against the
//! built-in loopback fakes (a Telegram Bot API and an OpenAI-shaped
//! provider), narrated step by step. Every step runs this very binary as a
//! user would: `serve --drain`, `proposal-list`, `events`.

use std::path::PathBuf;

use anyhow::anyhow;
use serde_json::{Value, json};
use stream_core::payload::ProviderApi;
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion};
use stream_testkit::stack::{Ran, Stack};

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
        println!("   owner › {text}");
        self.stack.say(text);
    }

    fn drain(&self) -> Result<(), Failure> {
        let before = self.stack.sent().len();
        let ran = self.stack.drain().map_err(runtime)?;
        if ran.code != 0 {
            return Err(runtime(format!("serve --drain failed:\n{}", ran.stderr)));
        }
        for text in self.stack.sent_texts().iter().skip(before) {
            for (i, line) in text.lines().enumerate() {
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
    let ran = demo.thestream(&["proposal-list"])?;
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
        "   {} provider requests for {} model turns; the literal \"latest\" stored: {}",
        demo.stack.provider.requests().len(),
        4,
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

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}
