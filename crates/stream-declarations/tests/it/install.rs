//! A declaration version's installed files: written beside the registry
//! row, rebuilt and checked by a following serve; tampering fails closed.

use std::sync::Arc;

use serde_json::json;
use stream_core::SourceName;
use stream_declarations::LoadedDeclaration;
use stream_declarations::install::{
    Expected, InstallError, InstalledDeclaration, install_files, install_key, load_installed,
};
use stream_store::{SqliteStore, Store};

use crate::common::shipped_dir;

fn store(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap())
}

fn declarations(name: &str) -> LoadedDeclaration {
    LoadedDeclaration::load(&shipped_dir().join(name)).unwrap()
}

fn store_control(store: &Arc<dyn Store>, key: &str) -> serde_json::Value {
    store.control(key).unwrap().unwrap()
}

#[test]
fn installed_files_rebuild_the_declaration_and_tampering_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let v18 = declarations("telegram-conversation.v18.yaml");
    let yaml =
        std::fs::read_to_string(shipped_dir().join("telegram-conversation.v18.yaml")).unwrap();
    let telegram = SourceName::telegram(4242);
    let active = Expected {
        id: v18.id(),
        version: v18.version(),
        fingerprint: &v18.fingerprint,
    };

    // Not installed yet.
    let err = load_installed(store.as_ref(), &active).unwrap_err();
    assert!(matches!(err, InstallError::NotInstalled { .. }), "{err}");

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
    let v17 = declarations("telegram-conversation.v17.yaml");
    let forged = Expected {
        fingerprint: &v17.fingerprint,
        ..active
    };
    let err = load_installed(store.as_ref(), &forged).unwrap_err();
    assert!(
        matches!(err, InstallError::FingerprintMismatch { .. }),
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
    assert!(matches!(err, InstallError::FileAltered { .. }), "{err}");

    // A malformed row fails closed.
    let mut tx = store.begin().unwrap();
    tx.set_control(&install_key("telegram-conversation", 18), &json!({"x": 1}))
        .unwrap();
    tx.commit().unwrap();
    let err = load_installed(store.as_ref(), &active).unwrap_err();
    assert!(matches!(err, InstallError::Malformed { .. }), "{err}");
}
