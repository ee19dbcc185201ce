//! Activation's store-side rules: the activation id and the plan's refusals
//! before any step (the installed files a following serve loads are
//! `stream-declarations`' `install::*`).
//! The steps themselves run end to end in `stream-cli`'s `activation::*`.

use std::sync::Arc;

use stream_core::payload::{ActivationStep, ActivationStepKind};
use stream_core::text::Label;
use stream_core::{NewEvent, SourceName};
use stream_engine::activation::{ActivationError, Target, activation_id, plan};
use stream_engine::active::ensure_active;
use stream_store::{SqliteStore, Store};

use crate::common::{copy_declarations, declarations, repo_declarations};

fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap())
}

fn target(name: &str) -> Target {
    Target::load(&repo_declarations().join(name)).unwrap()
}

#[test]
fn the_activation_id_derives_from_the_declaration_and_the_completed_count() {
    let (v17, v18) = (
        declarations("telegram-conversation.v17.yaml"),
        declarations("telegram-conversation.v18.yaml"),
    );
    let id = activation_id(&v18, 0).unwrap();
    assert_eq!(
        id,
        activation_id(&v18, 0).unwrap(),
        "a rerun finds the same id"
    );
    assert_eq!(id.as_str().len(), 64);
    assert_ne!(
        id,
        activation_id(&v18, 1).unwrap(),
        "a later activation is another"
    );
    assert_ne!(id, activation_id(&v17, 0).unwrap());
}

#[test]
fn only_a_pi_conversation_declaration_is_a_target() {
    let err = Target::load(&repo_declarations().join("telegram-replies.v2.yaml")).unwrap_err();
    assert!(
        matches!(err, ActivationError::NotAConversation { .. }),
        "{err}"
    );
}

#[test]
fn plan_refuses_a_changed_capability_and_another_incomplete_activation() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let replies = declarations("telegram-replies.v2.yaml");
    ensure_active(
        store.as_ref(),
        &declarations("telegram-conversation.v18.yaml"),
        &replies,
    )
    .unwrap();
    // The active declaration, nothing pending: nothing to do.
    assert!(
        plan(store.as_ref(), &target("telegram-conversation.v18.yaml"))
            .unwrap()
            .is_none()
    );

    let copy = copy_declarations(dir.path());
    let prompt = copy.join("prompts/telegram-conversation.v18.md");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, format!("{text}\nAnother instruction.\n")).unwrap();
    let changed = Target::load(&copy.join("telegram-conversation.v18.yaml")).unwrap();
    let err = plan(store.as_ref(), &changed).unwrap_err();
    assert!(
        err.to_string()
            .contains("capability changed: bump the declaration version"),
        "{err}"
    );

    // An activation of v17 recorded up to its freeze blocks any other.
    let v17 = target("telegram-conversation.v17.yaml");
    let (id, steps) = plan(store.as_ref(), &v17).unwrap().unwrap();
    assert!(steps.is_empty());
    let step = ActivationStep {
        activation_id: id.clone(),
        step: ActivationStepKind::VerifyBundle,
        declaration_id: Label::new("telegram-conversation").unwrap(),
        declaration_version: 17,
        declaration_fingerprint: v17.declaration().fingerprint.clone(),
        worker_bundle_sha256: stream_core::canon::sha256(b"worker"),
        frozen_head_seq: None,
    };
    let source = SourceName::fixed(SourceName::ACTIVATION);
    store
        .append(&NewEvent::build(&source, None, None, &step).unwrap())
        .unwrap();
    let (resumed, steps) = plan(store.as_ref(), &v17).unwrap().unwrap();
    assert_eq!(resumed, id, "a rerun resumes the same activation");
    assert_eq!(steps.len(), 1);
    let err = plan(store.as_ref(), &target("telegram-conversation.v18.yaml")).unwrap_err();
    assert!(
        matches!(err, ActivationError::OtherActivationIncomplete { ref activation, .. } if activation == id.as_str()),
        "{err}"
    );
}
