//! Bad declarations: each refused with a message naming the field.

use serde_json::json;
use stream_declarations::{DeclarationError, LoadedDeclaration, Prompt};

use crate::common::{check, deterministic, pi, prompt, refused_field, with, without};

#[test]
fn unknown_fields_are_refused_by_name_at_every_level() {
    assert_eq!(refused_field(&with(pi(), "/extra", json!(1))), "extra");
    assert_eq!(
        refused_field(&with(pi(), "/policy/shell", json!(true))),
        "policy.shell"
    );
    assert_eq!(
        refused_field(&with(pi(), "/subscriptions/everything", json!(true))),
        "subscriptions.everything"
    );
    assert_eq!(
        refused_field(&with(pi(), "/provider/model", json!("gpt-x"))),
        "provider.model"
    );
    assert_eq!(
        refused_field(&with(pi(), "/commands/0/hidden", json!(true))),
        "commands[0].hidden"
    );
    assert_eq!(
        refused_field(&with(deterministic(), "/replies/start", json!("Hi"))),
        "replies.start"
    );
}

#[test]
fn unknown_vocabulary_is_refused_by_field() {
    assert_eq!(refused_field(&with(pi(), "/kind", json!("shell"))), "kind");
    assert_eq!(
        refused_field(&with(pi(), "/context", json!("everything"))),
        "context"
    );
    assert_eq!(
        refused_field(&with(pi(), "/input", json!("secret"))),
        "input"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/policy/proposals",
            json!(["memory-change", "publish"])
        )),
        "policy.proposals[1]"
    );
    assert_eq!(
        refused_field(&with(pi(), "/commands/1/name", json!("start"))),
        "commands[1].name"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/subscriptions/sources",
            json!(["telegram", "nope"])
        )),
        "subscriptions.sources[1]"
    );
}

#[test]
fn wrong_types_and_shapes_are_refused_by_field() {
    assert_eq!(
        refused_field(&with(pi(), "/version", json!("18"))),
        "version"
    );
    assert_eq!(refused_field(&with(pi(), "/version", json!(0))), "version");
    assert_eq!(refused_field(&with(pi(), "/id", json!("Telegram"))), "id");
    assert_eq!(refused_field(&without(pi(), "/policy")), "policy");
    assert_eq!(
        refused_field(&without(pi(), "/policy/externalActions")),
        "policy.externalActions"
    );
    assert_eq!(
        refused_field(&with(pi(), "/prompt", json!("../secrets.md"))),
        "prompt"
    );
    assert_eq!(
        refused_field(&with(pi(), "/prompt", json!("/etc/passwd"))),
        "prompt"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/subscriptions/documents/0/path",
            json!("../memory.md")
        )),
        "subscriptions.documents[0].path"
    );
    assert_eq!(
        refused_field(&with(pi(), "/outputs", json!(["Observation"]))),
        "outputs[0]"
    );
}

#[test]
fn policy_refusals_name_their_field() {
    assert_eq!(
        refused_field(&with(pi(), "/policy/externalActions", json!(true))),
        "policy.externalActions"
    );
    assert_eq!(
        refused_field(&with(pi(), "/policy/tools", json!(["fetch"]))),
        "policy.tools"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/policy/proposals",
            json!(["memory-change", "memory-change"])
        )),
        "policy.proposals[1]"
    );
    assert_eq!(
        refused_field(&with(
            deterministic(),
            "/policy/proposals",
            json!(["focus-declaration"])
        )),
        "kind"
    );
    assert_eq!(
        refused_field(&with(
            with(pi(), "/context", json!("telegram-command")),
            "/policy/proposals",
            json!(["self-correction"])
        )),
        "context"
    );
}

#[test]
fn structural_refusals_name_their_field() {
    assert_eq!(refused_field(&without(pi(), "/prompt")), "prompt");
    assert_eq!(refused_field(&without(pi(), "/provider")), "provider");
    assert_eq!(refused_field(&without(pi(), "/transcript")), "transcript");
    assert_eq!(
        refused_field(&with(pi(), "/provider/maxOutputTokens", json!(0))),
        "provider.maxOutputTokens"
    );
    assert_eq!(
        refused_field(&with(pi(), "/provider/maxOutputTokens", json!(32_001))),
        "provider.maxOutputTokens"
    );
    assert_eq!(
        refused_field(&with(pi(), "/transcript/maxTurns", json!(201))),
        "transcript.maxTurns"
    );
    assert_eq!(
        refused_field(&with(pi(), "/replies", deterministic()["replies"].clone())),
        "replies"
    );
    assert_eq!(
        refused_field(&without(deterministic(), "/replies")),
        "replies"
    );
    assert_eq!(
        refused_field(&with(
            deterministic(),
            "/provider",
            json!({"maxOutputTokens": 10})
        )),
        "provider"
    );
    assert_eq!(
        refused_field(&with(deterministic(), "/replies/help", json!(""))),
        "replies.help"
    );
    assert_eq!(
        refused_field(&with(pi(), "/commands/1/name", json!("focus"))),
        "commands[1].name"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/commands/0/description",
            json!("x".repeat(257))
        )),
        "commands[0].description"
    );
    assert_eq!(
        refused_field(&with(
            pi(),
            "/subscriptions/documents/0/glob",
            json!("*.md")
        )),
        "subscriptions.documents[0]"
    );
    assert_eq!(
        refused_field(&with(
            deterministic(),
            "/outputs",
            json!(["stream.thought.agent.memory-change.proposed"])
        )),
        "outputs[0]"
    );
    assert_eq!(
        refused_field(&with(
            deterministic(),
            "/outputs",
            json!(["stream.thought.judgment.recorded"])
        )),
        "outputs[0]"
    );
}

#[test]
fn malformed_yaml_is_refused() {
    let err = LoadedDeclaration::from_parts("id: [unclosed", None).unwrap_err();
    assert!(matches!(err, DeclarationError::Invalid { .. }), "{err}");
    let err = LoadedDeclaration::from_parts("", None).unwrap_err();
    assert!(matches!(err, DeclarationError::Invalid { .. }), "{err}");
}

#[test]
fn duplicate_keys_are_refused() {
    let text = format!("{}\nversion: 19\n", crate::common::yaml(&pi()));
    let err = LoadedDeclaration::from_parts(&text, Some(prompt("p"))).unwrap_err();
    assert!(err.to_string().contains("version"), "{err}");
}

#[test]
fn a_prompt_must_be_supplied_exactly_when_named() {
    let err = LoadedDeclaration::from_parts(&crate::common::yaml(&pi()), None).unwrap_err();
    assert_eq!(err.field(), Some("prompt"));
    let err =
        LoadedDeclaration::from_parts(&crate::common::yaml(&deterministic()), Some(prompt("p")))
            .unwrap_err();
    assert_eq!(err.field(), Some("prompt"));
    assert!(Prompt::from_bytes("p.md".as_ref(), vec![]).is_err());
    assert!(Prompt::from_bytes("p.md".as_ref(), vec![0xff, 0xfe]).is_err());
    assert!(check(&deterministic()).is_ok());
}

#[test]
fn prompt_files_are_read_relative_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let decl = dir.path().join("d.yaml");
    std::fs::write(&decl, crate::common::yaml(&pi())).unwrap();
    // Missing prompt file.
    let err = LoadedDeclaration::load(&decl).unwrap_err();
    assert_eq!(err.field(), Some("prompt"), "{err}");
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    // A directory where the prompt should be.
    std::fs::create_dir(dir.path().join("prompts/conversation.md")).unwrap();
    let err = LoadedDeclaration::load(&decl).unwrap_err();
    assert_eq!(err.field(), Some("prompt"), "{err}");
    std::fs::remove_dir(dir.path().join("prompts/conversation.md")).unwrap();
    // Too large.
    std::fs::write(
        dir.path().join("prompts/conversation.md"),
        "x".repeat(64 * 1024 + 1),
    )
    .unwrap();
    let err = LoadedDeclaration::load(&decl).unwrap_err();
    assert_eq!(err.field(), Some("prompt"), "{err}");
    std::fs::write(dir.path().join("prompts/conversation.md"), "Be brief.").unwrap();
    let loaded = LoadedDeclaration::load(&decl).unwrap();
    assert_eq!(loaded.prompt.unwrap().text, "Be brief.");
}
