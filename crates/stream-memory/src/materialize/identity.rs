//! The context root a store materializes into: its identity is the
//! frontmatter `id` of its `memory.md`, recorded in a control row with the
//! first receipt. The store's document id cannot serve: it is derived from
//! the source name and the path alone, so every root of one source shares
//! it. The frontmatter `id` is the document's identity across edits, and
//! the materializer already refuses to change it.

use serde_json::{Value, json};
use stream_core::EventId;
use stream_store::{Read, Tx};

use super::error::MaterializeError;

/// The control row holding the recorded identity.
pub const ROOT_IDENTITY_CONTROL: &str = "memory.context-root";

/// What the identity check allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Admission {
    /// No identity recorded yet: record this one with the receipt.
    First(String),
    /// The recorded identity.
    Same,
}

/// The recorded identity, if any. A row that does not read as one fails
/// closed.
fn recorded(reader: &dyn Read, decision: &EventId) -> Result<Option<String>, MaterializeError> {
    let Some(value) = reader.control(ROOT_IDENTITY_CONTROL)? else {
        return Ok(None);
    };
    match value.get("memoryId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => Ok(Some(id.to_owned())),
        Some(_) | None => Err(MaterializeError::RootIdentityInvalid {
            decision: decision.clone(),
        }),
    }
}

/// The one rule: a store materializes into the root whose `memory.md`
/// carries the identity it recorded first. Another root is refused
/// before anything is written to it.
pub(super) fn admit(
    reader: &dyn Read,
    configured: &str,
    decision: &EventId,
) -> Result<Admission, MaterializeError> {
    match recorded(reader, decision)? {
        None => Ok(Admission::First(configured.to_owned())),
        Some(recorded) if recorded == configured => Ok(Admission::Same),
        Some(recorded) => Err(MaterializeError::RootMismatch {
            recorded,
            configured: configured.to_owned(),
        }),
    }
}

/// Records the identity inside the receipt's transaction, checked again
/// there (a racing first materialization of another root loses).
pub(super) fn record_in(
    tx: &mut dyn Tx,
    configured: &str,
    decision: &EventId,
) -> Result<(), MaterializeError> {
    match admit(&*tx, configured, decision)? {
        Admission::First(id) => {
            Ok(tx.set_control(ROOT_IDENTITY_CONTROL, &json!({ "memoryId": id }))?)
        }
        Admission::Same => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream_store::{SqliteStore, Store};

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        (dir, store)
    }

    fn decision() -> EventId {
        EventId::parse(&"a".repeat(64)).unwrap()
    }

    #[test]
    fn the_first_identity_is_recorded_and_another_is_refused_naming_both() {
        let (_dir, store) = store();
        let d = decision();
        assert_eq!(
            admit(&store, "memory-1", &d).unwrap(),
            Admission::First("memory-1".into())
        );
        let mut tx = store.begin().unwrap();
        record_in(&mut *tx, "memory-1", &d).unwrap();
        tx.commit().unwrap();
        assert_eq!(admit(&store, "memory-1", &d).unwrap(), Admission::Same);
        let err = admit(&store, "memory-2", &d).unwrap_err();
        let shown = err.to_string();
        assert!(matches!(err, MaterializeError::RootMismatch { .. }));
        assert!(
            shown.contains("memory-1") && shown.contains("memory-2"),
            "{shown}"
        );
        // A racing first materialization of another root loses in its
        // transaction.
        let mut tx = store.begin().unwrap();
        assert!(record_in(&mut *tx, "memory-2", &d).is_err());
    }

    #[test]
    fn an_unreadable_identity_row_fails_closed() {
        let (_dir, store) = store();
        for bad in [json!("memory-1"), json!({ "memoryId": "" }), json!({})] {
            let mut tx = store.begin().unwrap();
            tx.set_control(ROOT_IDENTITY_CONTROL, &bad).unwrap();
            tx.commit().unwrap();
            assert!(matches!(
                admit(&store, "memory-1", &decision()),
                Err(MaterializeError::RootIdentityInvalid { .. })
            ));
        }
    }
}
