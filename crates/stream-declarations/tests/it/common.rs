//! Helpers: a valid v18-shaped declaration as JSON, turned into YAML and
//! checked the way `LoadedDeclaration::load` does.

use std::path::PathBuf;

use serde_json::{Value, json};
use stream_declarations::{DeclarationError, LoadedDeclaration, Prompt};

/// The repository's `declarations/` folder.
pub fn shipped_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../declarations")
}

/// A valid `pi` declaration with all three proposals.
pub fn pi() -> Value {
    json!({
        "id": "telegram-conversation",
        "version": 18,
        "kind": "pi",
        "context": "telegram-conversation",
        "output": "conversation-text",
        "input": "sensitive",
        "subscriptions": {
            "sources": ["telegram"],
            "documents": [{"source": "filesystem:telegram-agent-context", "path": "memory.md"}],
        },
        "outputs": ["stream.thought.derived.message.observation"],
        "provider": {"maxOutputTokens": 1024},
        "prompt": "prompts/conversation.md",
        "transcript": {"maxTurns": 40},
        "policy": {
            "tools": [],
            "proposals": ["memory-change", "self-correction", "focus-declaration"],
            "externalActions": false,
        },
        "commands": [
            {"name": "focus", "description": "Describe a focus"},
            {"name": "correct", "description": "Replace my last reply"},
        ],
    })
}

/// A valid `deterministic` declaration.
pub fn deterministic() -> Value {
    json!({
        "id": "telegram-replies",
        "version": 1,
        "kind": "deterministic",
        "context": "telegram-command",
        "output": "conversation-text",
        "input": "sensitive",
        "subscriptions": {"sources": ["telegram"], "documents": []},
        "outputs": ["stream.thought.derived.message.observation"],
        "policy": {"tools": [], "proposals": [], "externalActions": false},
        "commands": [],
        "replies": {"focusUsage": "Usage: /focus <description>", "help": "Help.", "correctAck": "Recorded.", "runFailed": "Sorry."},
    })
}

/// `value` with the JSON pointer `pointer` set to `new` (created if the
/// parent object exists and the key does not).
pub fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = value
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no {parent}"));
    match target {
        Value::Object(map) => {
            map.insert(key.to_owned(), new);
        }
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = new,
        _ => panic!("{parent} is not a container"),
    }
    value
}

/// `value` without the key at `pointer`.
pub fn without(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    value
        .pointer_mut(parent)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove(key)
        .unwrap_or_else(|| panic!("no {pointer}"));
    value
}

pub fn yaml(value: &Value) -> String {
    serde_norway::to_string(value).unwrap()
}

pub fn prompt(text: &str) -> Prompt {
    Prompt::from_bytes(&PathBuf::from("prompt.md"), text.as_bytes().to_vec()).unwrap()
}

/// Checks a declaration given as JSON, supplying a prompt when it names one.
pub fn check(value: &Value) -> Result<LoadedDeclaration, DeclarationError> {
    let prompt = value.get("prompt").map(|_| prompt("You are helpful."));
    LoadedDeclaration::from_parts(&yaml(value), prompt)
}

/// The field a refusal names; panics when the declaration was accepted.
pub fn refused_field(value: &Value) -> String {
    match check(value) {
        Ok(_) => panic!("accepted: {value}"),
        Err(e) => {
            let field = e
                .field()
                .unwrap_or_else(|| panic!("no field in {e}"))
                .to_owned();
            assert!(
                e.to_string().contains(&format!("`{field}`")),
                "message does not name {field}: {e}"
            );
            field
        }
    }
}
