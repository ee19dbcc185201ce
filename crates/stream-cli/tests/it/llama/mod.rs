//! Issue 43, item 1: the real binaries against a real llama.cpp server
//! (`scripts/with-llama`: SmolLM2-135M-Instruct, `--jinja`, a template that
//! renders tools) and the loopback Telegram. A recording proxy between them
//! keeps each request and the server's answer.
//!
//! The assertions are on the system, not on the model's wit: every turn
//! delivers one message that carries no raw tool-call text and no
//! annotation delimiter of the model's; every tool call the server parsed
//! became a pending proposal or the run failed with an exact reason code;
//! an accepted memory reaches the next request.
//!
//! Skipped, with the reason printed, when `THESTREAM_TEST_LLAMA_URL` is
//! unset, unless `THESTREAM_REQUIRE_LLAMA` is set (as `.ci/run` sets it),
//! where that fails.

mod bench;
mod proxy;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use stream_core::annotation::{CLOSE, CUT, OPEN};
use stream_core::payload::ProviderApi;
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::stack::Stack;

use crate::common::stack;
use proxy::{Exchange, Proxy};

/// The three proposal tools the model is offered.
const TOOLS: [&str; 3] = [
    "request_memory_change",
    "submit_correction",
    "propose_focus",
];

/// The reason codes a run refused for its tool calls records.
const CALL_REFUSALS: [&str; 6] = [
    "malformed-call",
    "unknown-tool",
    "duplicate-call",
    "too-many-calls",
    "oversized-call",
    "capability-escape",
];

/// A small output limit keeps a CPU turn short.
const MAX_OUTPUT_TOKENS: u32 = 48;

/// The server `scripts/with-llama` started.
struct Llama {
    url: String,
    model: String,
}

fn llama() -> Option<Llama> {
    let url = std::env::var("THESTREAM_TEST_LLAMA_URL").unwrap_or_default();
    if url.is_empty() {
        assert!(
            std::env::var_os("THESTREAM_REQUIRE_LLAMA").is_none(),
            "THESTREAM_REQUIRE_LLAMA is set and THESTREAM_TEST_LLAMA_URL is not (run under scripts/with-llama)"
        );
        eprintln!(
            "skipped: the llama.cpp suite needs THESTREAM_TEST_LLAMA_URL (run under scripts/with-llama)"
        );
        return None;
    }
    let model = std::env::var("THESTREAM_TEST_LLAMA_MODEL").unwrap_or_else(|_| "local".into());
    Some(Llama { url, model })
}

fn edit(path: &std::path::Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// A loopback stack whose provider is the real server at `base_url`, in
/// `llama-cpp` mode, with no credential, a generous attempt limit and a
/// small output limit.
fn real_stack(base_url: &str, model: &str) -> Stack {
    let s = stack(ProviderApi::OpenaiChat);
    let config = s.path().join("thestream.toml");
    edit(
        &config,
        &s.provider.base_url(ProviderApi::OpenaiChat),
        base_url,
    );
    edit(&config, "compat = \"openai\"", "compat = \"llama-cpp\"");
    edit(&config, "timeout_secs = 120", "timeout_secs = 900");
    edit(
        &config,
        "api_key_env = \"OPENAI_API_KEY\"",
        "api_key_env = \"\"",
    );
    edit(
        &config,
        &format!("model = \"{}\"", stream_testkit::stack::MODEL),
        &format!("model = \"{model}\""),
    );
    edit(
        &s.path().join("declarations/telegram-conversation.v18.yaml"),
        "maxOutputTokens: 1024",
        &format!("maxOutputTokens: {MAX_OUTPUT_TOKENS}"),
    );
    s
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// What one owner message led to.
struct Turn {
    sent: Vec<String>,
    completed: Vec<Value>,
    failed: Vec<Value>,
    chats: Vec<Exchange>,
    stderr: String,
    elapsed: Duration,
}

impl Turn {
    /// The tool calls the server parsed out of the last completion.
    fn calls(&self) -> Vec<String> {
        let Some(last) = self.chats.last() else {
            return Vec::new();
        };
        last.response["choices"][0]["message"]["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .map(|c| c["function"]["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn summary(&self) -> String {
        let last = self
            .chats
            .last()
            .map(|e| &e.response["choices"][0]["message"]);
        format!(
            "sent {:?}; completed {}; failed {:?}; model said {}",
            self.sent,
            self.completed.len(),
            self.failed
                .iter()
                .map(|f| f["payload"]["reason"].as_str().unwrap_or("?"))
                .collect::<Vec<_>>(),
            last.map(Value::to_string).unwrap_or_default()
        )
    }
}

/// The owner says `text`; one `serve --drain` answers it.
fn turn(s: &Stack, proxy: &Proxy, text: &str) -> Turn {
    let events_before = s.events().unwrap().len();
    let (sent_before, chats_before) = (s.sent().len(), proxy.chats().len());
    s.say(text);
    let started = Instant::now();
    let ran = s.drain().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    let events = s.events().unwrap().split_off(events_before);
    let turn = Turn {
        sent: s.sent_texts().split_off(sent_before),
        completed: of_type(&events, "stream.thought.agent.run.completed")
            .into_iter()
            .cloned()
            .collect(),
        failed: of_type(&events, "stream.thought.agent.run.failed")
            .into_iter()
            .cloned()
            .collect(),
        chats: proxy.chats().split_off(chats_before),
        stderr: ran.stderr,
        elapsed,
    };
    eprintln!(
        "turn {text:?} ({:.1} s): {}",
        elapsed.as_secs_f64(),
        turn.summary()
    );
    assert_settled(&turn);
    turn
}

/// Raw tool-call text a model may write instead of calling: a chat
/// template's tags, or a tool's name inside JSON. The system's own rule
/// (`stream_provider::carries_raw_tool_call`), its one home.
fn raw_call_text(text: &str) -> bool {
    stream_provider::carries_raw_tool_call(text, &TOOLS)
}

/// The check above, without a server: what it must catch and let through.
#[test]
fn raw_call_text_is_template_tags_or_a_tool_named_in_json() {
    for raw in [
        "<tool_call>\n{\"name\": \"request_memory_change\"}",
        "done</tool_call>",
        "{\"name\": \"propose_focus\", \"arguments\": {}}",
    ] {
        assert!(raw_call_text(raw), "{raw}");
    }
    for fine in [
        "The capital of France is Paris.",
        "{\"name\": \"France\"}",
        "I can propose_focus for you.",
    ] {
        assert!(!raw_call_text(fine), "{fine}");
    }
}

/// The system's rules for one turn, whatever the model did.
fn assert_settled(turn: &Turn) {
    let why = turn.summary();
    assert_eq!(turn.sent.len(), 1, "one delivery per turn: {why}");
    let text = &turn.sent[0];
    assert!(!raw_call_text(text), "raw tool-call text delivered: {why}");
    let body = text.strip_suffix(CUT).unwrap_or(text);
    assert!(
        !body.contains(OPEN) && !body.contains(CLOSE),
        "an annotation delimiter delivered: {why}"
    );
    assert!(
        !turn.chats.is_empty(),
        "no request reached the server: {why}"
    );
    let calls = turn.calls();
    match (turn.completed.as_slice(), turn.failed.last()) {
        ([done], _) => {
            let proposals = done["payload"]["proposalEventIds"].as_array().unwrap();
            assert_eq!(
                proposals.len(),
                calls.len(),
                "each parsed call is a proposal: {why}"
            );
        }
        ([], Some(failed)) => {
            assert_eq!(failed["payload"]["final"], true, "{why}");
            let reason = failed["payload"]["reason"].as_str().unwrap();
            assert!(
                !calls.is_empty() && CALL_REFUSALS.contains(&reason),
                "a run failed for no call of the model's: {why}"
            );
            assert_eq!(text, crate::delivery::RUN_FAILED_REPLY, "{why}");
        }
        _ => panic!("the turn neither completed once nor failed: {why}"),
    }
}

/// Accepts the model's memory proposal if it made one; otherwise (the
/// model made none, or none that validated) the human writes memory.md
/// and records it with `scan`. Returns the memory text now in force.
fn accept_or_write_memory(s: &Stack, fallback: &str) -> String {
    let pending: Vec<Value> = s
        .proposals()
        .unwrap()
        .into_iter()
        .filter(|p| p["kind"] == "memory-change" && p["state"] == "pending")
        .collect();
    let memory = s.path().join("context/memory.md");
    if let Some(p) = pending.first() {
        let id = p["id"].as_str().unwrap();
        let ran = s
            .run(&["proposal-decision", "--proposal", id, "--accept"])
            .unwrap();
        eprintln!("memory: accepted the model's proposal");
        assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
        assert!(
            ran.stdout.contains("memory.md materialized"),
            "{}",
            ran.stdout
        );
    } else {
        eprintln!("memory: the model proposed none; the human wrote memory.md");
        let old = std::fs::read_to_string(&memory).unwrap();
        std::fs::write(&memory, format!("{old}\n{fallback}\n")).unwrap();
        let ran = s.run(&["scan"]).unwrap();
        assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    }
    std::fs::read_to_string(&memory).unwrap()
}

#[test]
fn a_real_model_s_turns_are_delivered_proposed_or_refused_and_memory_reaches_the_next_request() {
    let Some(l) = llama() else { return };
    let proxy = Proxy::start(&l.url);
    let s = real_stack(&proxy.base_url(), &l.model);
    let tea = Canary::new("tea");
    let initial_memory = std::fs::read_to_string(s.path().join("context/memory.md")).unwrap();

    let plain = turn(
        &s,
        &proxy,
        "What is the capital of France? One short sentence.",
    );
    assert_eq!(plain.chats[0].status, 200);
    let request = &plain.chats[0].request;
    assert_eq!(request["max_tokens"], MAX_OUTPUT_TOKENS);
    assert_eq!(request["parallel_tool_calls"], true);
    // No correction tool before there is a reply to correct.
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["request_memory_change", "propose_focus"]);

    let remember = turn(
        &s,
        &proxy,
        &format!("Please remember that my favourite tea is {tea}. Save it to memory."),
    );
    let focus = turn(&s, &proxy, "/focus help me plan the spring garden");
    let correction = turn(
        &s,
        &proxy,
        "Your last reply was wrong. Please submit a correction of it.",
    );

    let memory = accept_or_write_memory(&s, &format!("The owner's favourite tea is {tea}."));
    let added = memory
        .strip_prefix(initial_memory.as_str())
        .unwrap_or(&memory)
        .trim();
    assert!(!added.is_empty(), "memory.md did not change");
    let next = turn(&s, &proxy, "What is my favourite tea?");
    let system = next.chats[0].request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains(added),
        "the next request does not carry the accepted memory"
    );

    // Message and memory text never reach the logs.
    for t in [&plain, &remember, &focus, &correction, &next] {
        assert_no_leak(std::slice::from_ref(&tea), &t.stderr, "serve logs");
    }
}

/// A second server started with `--no-jinja` refuses any request with tools;
/// doctor's provider check fails and names the flag.
#[test]
fn doctor_against_a_server_without_jinja_names_the_flag() {
    let Some(l) = llama() else { return };
    let server = Server::start(&["--no-jinja"]);
    let s = real_stack(&format!("{}/v1", server.url), &l.model);
    let ran = s.run(&["doctor", "--json"]).unwrap();
    let all: Vec<Value> =
        serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout));
    let provider = all.iter().find(|c| c["check"] == "provider").unwrap();
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert_eq!(provider["ok"], false, "{provider}");
    assert!(
        provider["detail"].as_str().unwrap().contains("--jinja"),
        "{provider}"
    );
}

/// Another llama-server, with the flags `scripts/with-llama` used (the
/// file `THESTREAM_TEST_LLAMA_SERVER` names) plus `extra`, on a free port;
/// killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(extra: &[&str]) -> Self {
        let file = std::env::var("THESTREAM_TEST_LLAMA_SERVER")
            .expect("THESTREAM_TEST_LLAMA_SERVER names the server and its flags");
        let args = std::fs::read_to_string(file).unwrap();
        let mut args = args.lines();
        let bin = args.next().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .args(args)
            .args(extra)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !server.healthy() {
            assert!(Instant::now() < deadline, "no /health 200 in 120 s");
            std::thread::sleep(Duration::from_millis(250));
        }
        server
    }

    fn healthy(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(self.url.trim_start_matches("http://")) else {
            return false;
        };
        let _ = c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out.starts_with("HTTP/1.1 200")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
