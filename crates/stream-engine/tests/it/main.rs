//! stream-engine: the active-declaration rule of `serve`, activation's
//! store-side rules (`docs/design.md §17`), and the consumer's routing and
//! retries in process through the attempter seam (`attempts`).
//! The conversation itself is proven end to end with the real binaries in
//! `stream-cli`'s tests (`conversation::*`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod activation;
mod attempts;
mod common;
mod serve;

use stream_declarations::LoadedDeclaration;
use stream_engine::active::{ActiveError, active, ensure_active};
use stream_store::SqliteStore;

use common::{copy_declarations, declarations};

#[test]
fn a_fresh_store_installs_and_activates_the_configured_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let (v18, replies) = (
        declarations("telegram-conversation.v18.yaml"),
        declarations("telegram-replies.v2.yaml"),
    );
    assert!(active(&store).unwrap().is_none());
    let got = ensure_active(&store, &v18, &replies).unwrap();
    assert_eq!(
        (got.id.as_str(), got.version, got.consumer()),
        (
            "telegram-conversation",
            18,
            "telegram-conversation@18".into()
        )
    );
    let commands: Vec<&str> = got.commands.iter().map(|c| c.command.as_str()).collect();
    assert_eq!(commands, ["focus", "correct", "help"]);
    assert_eq!(active(&store).unwrap(), Some(got.clone()));
    // Serving the same declaration again converges.
    assert_eq!(ensure_active(&store, &v18, &replies).unwrap(), got);
}

#[test]
fn another_active_version_is_refused_naming_activate() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let replies = declarations("telegram-replies.v2.yaml");
    ensure_active(
        &store,
        &declarations("telegram-conversation.v17.yaml"),
        &replies,
    )
    .unwrap();
    let err = ensure_active(
        &store,
        &declarations("telegram-conversation.v18.yaml"),
        &replies,
    )
    .unwrap_err();
    assert!(matches!(err, ActiveError::OtherActive { .. }), "{err}");
    assert!(err.to_string().contains("thestream activate"), "{err}");
    assert_eq!(active(&store).unwrap().unwrap().version, 17);
}

#[test]
fn a_changed_capability_under_the_same_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let replies = declarations("telegram-replies.v2.yaml");
    ensure_active(
        &store,
        &declarations("telegram-conversation.v18.yaml"),
        &replies,
    )
    .unwrap();
    // The same id and version with another prompt: another fingerprint.
    let copy = copy_declarations(dir.path());
    let prompt = copy.join("prompts/telegram-conversation.v18.md");
    let mut text = std::fs::read_to_string(&prompt).unwrap();
    text.push_str("\nA new instruction.\n");
    std::fs::write(&prompt, text).unwrap();
    let changed = LoadedDeclaration::load(&copy.join("telegram-conversation.v18.yaml")).unwrap();
    let err = ensure_active(&store, &changed, &replies).unwrap_err();
    assert!(
        err.to_string()
            .contains("capability changed: bump the declaration version"),
        "{err}"
    );
}
