//! Step 6's verification: what the scan recorded after the write is
//! exactly what was written.

use serde_json::json;
use stream_core::canon::Hashed;
use stream_core::ids::derive_event_id;
use stream_core::payload::{FileChanged, MaterializationFailure};
use stream_core::{EventId, MemoryPath, NewEvent, Payload, SourceName, VersionId};
use stream_store::{Read, VersionRow};

use super::error::Stop;

/// After the scan: the pointer is at the expected new version, whose row
/// holds the hash, size, predecessor and content type of what was written,
/// whose blob is exactly those bytes, and whose `file.changed@1` event is exactly the
/// one the scan builds. Returns that event's id.
pub(super) fn verify_new_version(
    store: &dyn Read,
    source: &SourceName,
    base: &VersionRow,
    new: &Hashed,
    new_version: &VersionId,
) -> Result<EventId, Stop> {
    let (new, new_sha) = (new.bytes(), new.sha256());
    let receipt = || Stop::Fail(MaterializationFailure::Receipt);
    let doc = store.document(&base.document_id)?.ok_or_else(receipt)?;
    if doc.current_version.as_ref() != Some(new_version) {
        return Err(receipt());
    }
    let row = store.version(new_version)?.ok_or_else(receipt)?;
    let expected_previous = if row.id == base.id {
        base.previous_version.as_ref()
    } else {
        Some(&base.id)
    };
    if row.id != *new_version
        || row.document_id != base.document_id
        || row.sha256 != *new_sha
        || row.size != new.len() as u64
        || row.content_type != base.content_type
        || row.previous_version.as_ref() != expected_previous
    {
        return Err(receipt());
    }
    // The blob is exactly the bytes written, whose hash is `new_sha`: a
    // comparison, not a second hash of the same bytes.
    let blob = store.blob(&row.sha256)?.ok_or_else(receipt)?;
    if blob != new {
        return Err(receipt());
    }
    let event_id = derive_event_id(
        source.as_str(),
        FileChanged::TYPE,
        &json!([row.document_id, row.id]),
    )
    .map_err(|_| receipt())?;
    let event = store.event(&event_id)?.ok_or_else(receipt)?;
    let changed: FileChanged = event.decode().map_err(|_| receipt())?;
    let rebuilt = NewEvent::build(source, None, None, &changed).map_err(|_| receipt())?;
    if rebuilt != event.event
        || changed.document_id != row.document_id
        || changed.path.as_str() != MemoryPath::VALUE
        || changed.version_id != row.id
        || changed.previous_version_id != row.previous_version
        || changed.sha256 != *new_sha
        || changed.size != row.size
        || changed.content_type.as_str() != row.content_type
    {
        return Err(receipt());
    }
    Ok(event_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stream_core::ids::derive_version_id;

    fn is_receipt_failure<T>(r: Result<T, Stop>) -> bool {
        matches!(r, Err(Stop::Fail(MaterializationFailure::Receipt)))
    }

    /// The `receipt` reason cannot be caused from outside without a race
    /// (something must change between the write and the scan), so the
    /// verification is exercised here against each thing it checks.
    #[test]
    fn verification_refuses_anything_the_scan_did_not_record_exactly() {
        use stream_core::ids::derive_document_id;
        use stream_store::SqliteStore;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("context");
        std::fs::create_dir(&root).unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let source = SourceName::fixed(SourceName::CONTEXT);
        let base_bytes = b"---\nid: m\n---\nbase\n";
        std::fs::write(root.join("memory.md"), base_bytes).unwrap();
        crate::scan::scan(&store, &source, &root).unwrap();
        let doc = derive_document_id(source.as_str(), "memory.md").unwrap();
        let base_id = store
            .document(&doc)
            .unwrap()
            .unwrap()
            .current_version
            .unwrap();
        let base = store.version(&base_id).unwrap().unwrap();
        let new = b"---\nid: m\n---\nbase\n\nnew\n";
        let written = &Hashed::new(new.to_vec());
        let new_version = derive_version_id(&doc, written.sha256(), Some(&base_id)).unwrap();

        // Not scanned: the pointer is still at the base.
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            written,
            &new_version
        )));
        // Something else was written and scanned.
        std::fs::write(root.join("memory.md"), b"---\nid: m\n---\nother\n").unwrap();
        crate::scan::scan(&store, &source, &root).unwrap();
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            written,
            &new_version
        )));

        // The real thing verifies, and each tampered fact is refused.
        let scanned_pair = || {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("context");
            std::fs::create_dir(&root).unwrap();
            let path = dir.path().join("store.db");
            let store = SqliteStore::open(&path).unwrap();
            std::fs::write(root.join("memory.md"), base_bytes).unwrap();
            crate::scan::scan(&store, &source, &root).unwrap();
            std::fs::write(root.join("memory.md"), new).unwrap();
            crate::scan::scan(&store, &source, &root).unwrap();
            (dir, store, path)
        };
        let (_dir, store, _) = scanned_pair();
        let event = verify_new_version(&store, &source, &base, written, &new_version).unwrap();
        assert!(store.event(&event).unwrap().is_some());
        let tampering = [
            "UPDATE document_versions SET size = size + 1 WHERE version_id = ?1",
            "UPDATE document_versions SET content_type = 'text/plain' WHERE version_id = ?1",
            "UPDATE document_versions SET prev_version = NULL WHERE version_id = ?1",
            "UPDATE blobs SET bytes = x'00' WHERE sha256 = (SELECT sha256 FROM document_versions WHERE version_id = ?1)",
            "DELETE FROM events WHERE type = (SELECT code FROM names WHERE name = 'stream.filesystem.file.changed') \
             AND json_extract(payload, '$.versionId') = ?1",
        ];
        for sql in tampering {
            let (_dir, store, path) = scanned_pair();
            let conn = rusqlite::Connection::open(&path).unwrap();
            assert_eq!(
                conn.execute(sql, [new_version.as_str()]).unwrap(),
                1,
                "{sql}"
            );
            assert!(
                is_receipt_failure(verify_new_version(
                    &store,
                    &source,
                    &base,
                    written,
                    &new_version
                )),
                "{sql}"
            );
        }
        // Bytes other than what was written.
        let other = b"---\nid: m\n---\nbase\n\nnew!\n";
        assert!(is_receipt_failure(verify_new_version(
            &store,
            &source,
            &base,
            &Hashed::new(other.to_vec()),
            &new_version
        )));
    }
}
