//! Activation's store-side rules: the activation id, the plan's refusals
//! before any step, and the installed files a following serve loads.
//! The steps themselves run end to end in `stream-cli`'s `activation::*`.

use std::sync::Arc;

use serde_json::json;
use stream_core::payload::{ActivationStep, ActivationStepKind};
use stream_core::text::Label;
use stream_core::{NewEvent, SourceName};
use stream_engine::activation::{ActivationError, Target, activation_id, plan};
use stream_engine::active::{ActiveDeclaration, ensure_active};
use stream_engine::cooperation::{
    CooperationError, InstalledDeclaration, install_files, install_key, load_installed,
};
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

#[test]
fn installed_files_rebuild_the_declaration_and_tampering_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let v18 = declarations("telegram-conversation.v18.yaml");
    let yaml = std::fs::read_to_string(repo_declarations().join("telegram-conversation.v18.yaml"))
        .unwrap();
    let telegram = SourceName::telegram(4242);
    let active = ActiveDeclaration::of(&v18);

    // Not installed yet.
    let err = load_installed(store.as_ref(), &active).unwrap_err();
    assert!(
        matches!(err, CooperationError::NotInstalled { .. }),
        "{err}"
    );

    v18.install(store.as_ref()).unwrap();
    let mut tx = store.begin().unwrap();
    let row = install_files(&mut *tx, &v18, &yaml, &telegram).unwrap();
    tx.commit().unwrap();
    assert_eq!(row.context.telegram_source, telegram);
    assert_eq!(row.context.context, "telegram-conversation");
    assert_eq!(row.context.documents.len(), 1);
    assert_eq!(row.context.documents[0].path, "memory.md");
    let (loaded, _) = load_installed(store.as_ref(), &active).unwrap();
    assert_eq!(loaded.fingerprint, v18.fingerprint);

    // Another text for the same declaration is refused at install.
    let mut tx = store.begin().unwrap();
    let other = yaml.replace("maxTurns: 40", "maxTurns: 41");
    assert!(install_files(&mut *tx, &v18, &other, &telegram).is_err());
    drop(tx);

    // An active row naming another fingerprint is not followed.
    let mut forged = active.clone();
    forged.fingerprint = declarations("telegram-conversation.v17.yaml").fingerprint;
    let err = load_installed(store.as_ref(), &forged).unwrap_err();
    assert!(
        matches!(err, CooperationError::FingerprintMismatch { .. }),
        "{err}"
    );

    // A row naming a blob that is not there is refused.
    let mut tampered: InstalledDeclaration = serde_json::from_value(store_control(
        &store,
        &install_key("telegram-conversation", 18),
    ))
    .unwrap();
    tampered.declaration_sha256 = stream_core::canon::sha256(b"not stored");
    let mut tx = store.begin().unwrap();
    tx.set_control(
        &install_key("telegram-conversation", 18),
        &serde_json::to_value(&tampered).unwrap(),
    )
    .unwrap();
    tx.commit().unwrap();
    let err = load_installed(store.as_ref(), &active).unwrap_err();
    assert!(matches!(err, CooperationError::FileAltered { .. }), "{err}");

    // A malformed row fails closed.
    let mut tx = store.begin().unwrap();
    tx.set_control(&install_key("telegram-conversation", 18), &json!({"x": 1}))
        .unwrap();
    tx.commit().unwrap();
    let err = load_installed(store.as_ref(), &active).unwrap_err();
    assert!(matches!(err, CooperationError::Malformed { .. }), "{err}");
}

fn store_control(store: &Arc<dyn Store>, key: &str) -> serde_json::Value {
    store.control(key).unwrap().unwrap()
}
