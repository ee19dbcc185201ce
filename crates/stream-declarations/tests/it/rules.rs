//! The declaration rules (docs/design.md §6) as a table: one row per rule (the
//! sentence quoted above its rows), every forbidden combination refused with
//! the field it names, the allowed ones accepted.

use serde_json::{Value, json};
use stream_declarations::Kind;

use crate::common::{check, deterministic, pi, refused_field, with, without};

/// `Ok(())` = accepted; `Err(field)` = refused naming `field`.
type Expect = Result<(), &'static str>;

fn row(label: &str, value: Value, expect: Expect) {
    match expect {
        Ok(()) => {
            if let Err(e) = check(&value) {
                panic!("{label}: refused: {e}");
            }
        }
        Err(field) => assert_eq!(refused_field(&value), field, "{label}"),
    }
}

/// A `kind` other than pi, otherwise runnable: deterministic needs its
/// replies and no prompt/provider; the rest keep the pi-shaped fields.
fn of_kind(kind: Kind) -> Value {
    let base = match kind {
        Kind::Deterministic => {
            let v = with(pi(), "/replies", deterministic()["replies"].clone());
            without(without(v, "/prompt"), "/provider")
        }
        Kind::Pi
        | Kind::Repair
        | Kind::LettaAgentSdk
        | Kind::Atproto
        | Kind::Review
        | Kind::Conceptualizer => pi(),
    };
    with(base, "/kind", json!(kind.as_str()))
}

fn no_proposals(v: Value) -> Value {
    with(v, "/policy/proposals", json!([]))
}

#[test]
fn declaration_section_rules() {
    let memory_doc = json!({"source": "filesystem:telegram-agent-context", "path": "memory.md"});

    // "Only a standard Pi declaration using telegram-conversation context,
    //  conversation-text output, sensitive input, exact subscribed documents,
    //  and stream.thought.derived.message.observation output may declare
    //  proposals."
    row("pi with all three proposals", pi(), Ok(()));
    for kind in ["memory-change", "self-correction", "focus-declaration"] {
        row(kind, with(pi(), "/policy/proposals", json!([kind])), Ok(()));
    }
    row(
        "context telegram-command",
        with(pi(), "/context", json!("telegram-command")),
        Err("context"),
    );
    row(
        "context none",
        without(with(pi(), "/context", json!("none")), "/transcript"),
        Err("context"),
    );
    row(
        "output strict-json",
        with(pi(), "/output", json!("strict-json")),
        Err("output"),
    );
    row(
        "output none",
        with(pi(), "/output", json!("none")),
        Err("output"),
    );
    row(
        "input public",
        with(pi(), "/input", json!("public")),
        Err("input"),
    );
    row(
        "no subscribed documents",
        with(pi(), "/subscriptions/documents", json!([])),
        Err("subscriptions.documents"),
    );
    row(
        "a document by pattern",
        with(
            pi(),
            "/subscriptions/documents",
            json!([{"source": "filesystem:telegram-agent-context", "glob": "*.md"}]),
        ),
        Err("subscriptions.documents[0]"),
    );
    row(
        "an exact document plus one by pattern",
        with(
            pi(),
            "/subscriptions/documents",
            json!([memory_doc, {"source": "filesystem:telegram-agent-context", "glob": "notes/*"}]),
        ),
        Err("subscriptions.documents[1]"),
    );
    row(
        "memory-change without the exact memory.md",
        with(
            pi(),
            "/subscriptions/documents",
            json!([{"source": "filesystem:telegram-agent-context", "path": "notes.md"}]),
        ),
        Err("subscriptions.documents"),
    );
    row(
        "memory.md of another source",
        with(
            pi(),
            "/subscriptions/documents",
            json!([{"source": "filesystem:elsewhere", "path": "memory.md"}]),
        ),
        Err("subscriptions.documents"),
    );
    row(
        "focus only, with another exact document",
        with(
            with(pi(), "/policy/proposals", json!(["focus-declaration"])),
            "/subscriptions/documents",
            json!([{"source": "filesystem:telegram-agent-context", "path": "notes.md"}]),
        ),
        Ok(()),
    );
    row(
        "another output",
        with(pi(), "/outputs", json!(["stream.thought.derived.summary"])),
        Err("outputs"),
    );
    row(
        "a second output",
        with(
            pi(),
            "/outputs",
            json!([
                "stream.thought.derived.message.observation",
                "stream.thought.derived.summary"
            ]),
        ),
        Err("outputs"),
    );

    // "Repair, deterministic, Letta Agent SDK, ATProto, review, and
    //  conceptualizer declarations may not."
    for kind in Kind::ALL {
        match kind {
            Kind::Pi => {}
            Kind::Deterministic
            | Kind::Repair
            | Kind::LettaAgentSdk
            | Kind::Atproto
            | Kind::Review
            | Kind::Conceptualizer => {
                row(kind.as_str(), of_kind(kind), Err("kind"));
                for proposal in ["memory-change", "self-correction", "focus-declaration"] {
                    row(
                        &format!("{} with {proposal}", kind.as_str()),
                        with(of_kind(kind), "/policy/proposals", json!([proposal])),
                        Err("kind"),
                    );
                }
                row(
                    &format!("{} without proposals", kind.as_str()),
                    no_proposals(of_kind(kind)),
                    Ok(()),
                );
            }
        }
    }
    row(
        "the shipped-style deterministic declaration",
        deterministic(),
        Ok(()),
    );

    // "externalActions remains false."
    for kind in Kind::ALL {
        row(
            &format!("{} with externalActions", kind.as_str()),
            with(
                no_proposals(of_kind(kind)),
                "/policy/externalActions",
                json!(true),
            ),
            Err("policy.externalActions"),
        );
    }
    row(
        "pi with proposals and externalActions",
        with(pi(), "/policy/externalActions", json!(true)),
        Err("policy.externalActions"),
    );
    row(
        "externalActions as a string",
        with(pi(), "/policy/externalActions", json!("false")),
        Err("policy.externalActions"),
    );

    // "Proposal tools are separate from read-only evidence acquisition:
    //  policy: tools: []"
    row(
        "pi with a tool",
        with(pi(), "/policy/tools", json!(["web_search"])),
        Err("policy.tools"),
    );
    row(
        "deterministic with a tool",
        with(deterministic(), "/policy/tools", json!(["read_file"])),
        Err("policy.tools"),
    );
    row(
        "a tool named like a proposal tool",
        with(pi(), "/policy/tools", json!(["request_memory_change"])),
        Err("policy.tools"),
    );
}
