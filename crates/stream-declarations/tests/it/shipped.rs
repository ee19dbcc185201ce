//! The declarations shipped in `declarations/`.

use stream_core::payload::{BotCommand, ProposalKind};
use stream_declarations::model::{Context, Kind};
use stream_declarations::{LoadedDeclaration, tool_name};

use crate::common::shipped_dir;

fn load(name: &str) -> LoadedDeclaration {
    LoadedDeclaration::load(&shipped_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn commands(d: &LoadedDeclaration) -> Vec<BotCommand> {
    d.declaration.commands.iter().map(|c| c.name).collect()
}

#[test]
fn every_shipped_declaration_validates() {
    let mut count = 0;
    for entry in std::fs::read_dir(shipped_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            LoadedDeclaration::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            count += 1;
        }
    }
    assert_eq!(count, 3);
}

#[test]
fn v17_proposes_memory_changes_and_corrections() {
    let v17 = load("telegram-conversation.v17.yaml");
    assert_eq!((v17.id(), v17.version()), ("telegram-conversation", 17));
    assert_eq!(v17.declaration.kind, Kind::Pi);
    assert_eq!(
        v17.declaration.policy.proposals,
        [ProposalKind::MemoryChange, ProposalKind::SelfCorrection]
    );
    assert_eq!(commands(&v17), [BotCommand::Correct, BotCommand::Help]);
    let docs = &v17.declaration.subscriptions.documents;
    assert_eq!(docs.len(), 1);
    assert!(docs[0].is_exactly("filesystem:telegram-agent-context", "memory.md"));
}

#[test]
fn v18_adds_focus_declarations_and_the_focus_command() {
    let v17 = load("telegram-conversation.v17.yaml");
    let v18 = load("telegram-conversation.v18.yaml");
    assert_eq!((v18.id(), v18.version()), ("telegram-conversation", 18));
    assert_eq!(
        v18.declaration.policy.proposals,
        [
            ProposalKind::MemoryChange,
            ProposalKind::SelfCorrection,
            ProposalKind::FocusDeclaration
        ]
    );
    assert!(commands(&v18).contains(&BotCommand::Focus));
    assert!(!commands(&v17).contains(&BotCommand::Focus));
    assert_eq!(v18.manifest.tools.len(), 3);
    assert_eq!(v17.manifest.tools.len(), 2);
    assert_ne!(v17.fingerprint, v18.fingerprint);
    assert!(docs_exact(&v18));
}

fn docs_exact(d: &LoadedDeclaration) -> bool {
    d.declaration
        .subscriptions
        .documents
        .iter()
        .all(|doc| doc.is_exactly("filesystem:telegram-agent-context", "memory.md"))
}

#[test]
fn the_deterministic_declaration_holds_the_fixed_replies() {
    let replies = load("telegram-replies.v2.yaml");
    assert_eq!(replies.declaration.kind, Kind::Deterministic);
    assert_eq!(replies.declaration.context, Context::TelegramCommand);
    assert!(replies.declaration.policy.proposals.is_empty());
    assert!(replies.prompt.is_none());
    let fixed = replies.declaration.replies.as_ref().unwrap();
    assert!(fixed.focus_usage.as_str().contains("/focus <description>"));
    assert!(fixed.help.as_str().contains("/correct"));
    assert!(!fixed.correct_ack.as_str().is_empty());
    assert_eq!(
        fixed.run_failed.as_str(),
        "I couldn't answer that one, and nothing was saved. Please try again or rephrase."
    );
    assert_eq!(replies.version(), 2);
}

#[test]
fn conversation_prompts_explain_the_tools_and_forbid_claims() {
    for (name, kinds) in [
        ("telegram-conversation.v17.yaml", &ProposalKind::ALL[..2]),
        ("telegram-conversation.v18.yaml", &ProposalKind::ALL[..]),
    ] {
        let d = load(name);
        let prompt = d.prompt.as_ref().unwrap().text.to_lowercase();
        for kind in ProposalKind::ALL {
            assert_eq!(
                prompt.contains(tool_name(kind)),
                kinds.contains(&kind),
                "{name}: {}",
                tool_name(kind)
            );
        }
        for must in [
            "only save a suggestion",
            "review",
            "never say or imply",
            "applied",
            "learned",
            "published",
            "latest",
        ] {
            assert!(prompt.contains(must), "{name}: prompt lacks {must:?}");
        }
    }
}
