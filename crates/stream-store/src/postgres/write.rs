//! Writes inside a transaction.

use stream_core::canon::sha256;
use stream_core::{DocumentId, EventId, NewEvent, Sha256Hex, SnapshotId, SourceName, VersionId};

use super::read::{execute, query_opt, read_blob, read_document, read_event, read_version, to_i64};
use super::session::Conn;
use crate::{AppendOutcome, Progress, RunRow, StoreError, VersionRow};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The identity rule (docs/design.md §4) under the source's head lock: the
/// head row is created or locked (and read) in one statement, once per
/// source and transaction, so appends to one source commit in `seq` order;
/// then the event is inserted unless its id exists and, only when it was,
/// the head moves, in one statement: no gap. An id already present is read
/// back and compared (converge or conflict).
pub(crate) fn append(c: &mut Conn, event: &NewEvent) -> Result<AppendOutcome, StoreError> {
    if sha256(&event.payload) != event.payload_sha256 {
        return Err(StoreError::InvalidRow {
            what: "payload hash".into(),
        });
    }
    let source = event.source.as_str();
    let head = match c.heads().get(source) {
        Some(head) => *head,
        None => {
            let head: i64 = query_opt(
                c,
                "INSERT INTO source_heads (source, head) VALUES ($1, 0) \
                 ON CONFLICT (source) DO UPDATE SET head = source_heads.head RETURNING head",
                &[&source],
            )?
            .ok_or_else(|| StoreError::Backend("source head not returned".into()))?
            .try_get(0)
            .map_err(super::backend)?;
            c.heads().insert(source.to_owned(), head);
            head
        }
    };
    let seq = head + 1;
    let inserted = query_opt(
        c,
        "WITH inserted AS (INSERT INTO events (id, source, seq, type, version, authorship, \
         sensitive, root, parent, payload, payload_sha256, recorded_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (id) DO NOTHING RETURNING seq) \
         UPDATE source_heads SET head = inserted.seq FROM inserted \
         WHERE source_heads.source = $2 RETURNING head",
        &[
            &event.id.as_str(),
            &source,
            &seq,
            &event.event_type,
            &i32::try_from(event.version).unwrap_or(i32::MAX),
            &event.authorship.as_str(),
            &event.sensitive,
            &event.root.as_ref().map(EventId::as_str),
            &event.parent.as_ref().map(EventId::as_str),
            &event.payload,
            &event.payload_sha256.as_str(),
            &now_ms(),
        ],
    )?;
    if inserted.is_some() {
        c.heads().insert(source.to_owned(), seq);
        return Ok(AppendOutcome::Inserted {
            seq: u64::try_from(seq).unwrap_or(0),
        });
    }
    match read_event(c, &event.id)? {
        Some(existing) => Ok(converge(&existing, event)),
        None => Err(StoreError::Backend("event insert lost".into())),
    }
}

fn converge(existing: &stream_core::StoredEvent, new: &NewEvent) -> AppendOutcome {
    if crate::same_content(existing, new) {
        AppendOutcome::Converged { seq: existing.seq }
    } else {
        AppendOutcome::Conflict
    }
}

pub(crate) fn put_hashed(c: &mut Conn, sha: &Sha256Hex, bytes: &[u8]) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO blobs (sha256, bytes) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING",
        &[&sha.as_str(), &bytes],
    )?;
    Ok(())
}

pub(crate) fn put_snapshot(c: &mut Conn, id: &SnapshotId, bytes: &[u8]) -> Result<(), StoreError> {
    crate::parts::check_snapshot(id, bytes)?;
    if query_opt(c, "SELECT 1 FROM snapshots WHERE id = $1", &[&id.as_str()])?.is_some() {
        return Ok(());
    }
    let split = crate::parts::split_snapshot(bytes);
    // Keys are hex text in this schema.
    for (sha, part) in &split.parts {
        execute(
            c,
            "INSERT INTO blobs (sha256, bytes) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING",
            &[&Sha256Hex::from_bytes(*sha).as_str(), part],
        )?;
    }
    execute(
        c,
        "INSERT INTO snapshots (id, root) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
        &[&id.as_str(), &Sha256Hex::from_bytes(split.root).as_str()],
    )?;
    Ok(())
}

pub(crate) fn put_run(c: &mut Conn, run: &RunRow) -> Result<(), StoreError> {
    let version = i32::try_from(run.agent_version).unwrap_or(i32::MAX);
    let attempts = i32::try_from(run.attempts).unwrap_or(i32::MAX);
    execute(
        c,
        "INSERT INTO runs (run_id, agent_id, agent_version, trigger_event, status, attempts, snapshot_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (run_id) DO UPDATE SET agent_id = $2, agent_version = $3, \
         trigger_event = $4, status = $5, attempts = $6, snapshot_id = $7",
        &[
            &run.run_id.as_str(),
            &run.agent_id,
            &version,
            &run.trigger_event_id.as_str(),
            &run.status.as_str(),
            &attempts,
            &run.snapshot_id.as_ref().map(|s| s.as_str()),
        ],
    )?;
    Ok(())
}

pub(crate) fn set_progress(c: &mut Conn, consumer: &str, p: &Progress) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO progress (consumer, source, seq) VALUES ($1, $2, $3) \
         ON CONFLICT (consumer) DO UPDATE SET source = $2, seq = $3",
        &[&consumer, &p.source.as_str(), &to_i64(p.seq)?],
    )?;
    Ok(())
}

pub(crate) fn set_control(
    c: &mut Conn,
    key: &str,
    value: &serde_json::Value,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO controls (key, value) VALUES ($1, $2) \
         ON CONFLICT (key) DO UPDATE SET value = $2",
        &[&key, &value.to_string()],
    )?;
    Ok(())
}

pub(crate) fn ensure_document(
    c: &mut Conn,
    id: &DocumentId,
    source: &SourceName,
    path: &str,
) -> Result<(), StoreError> {
    let conflict = || StoreError::DocumentConflict { id: id.clone() };
    match read_document(c, id)? {
        Some(doc) if doc.source == *source && doc.path == path => Ok(()),
        Some(_) => Err(conflict()),
        None => {
            let inserted = execute(
                c,
                "INSERT INTO documents (doc_id, source, path, current_version) \
                 VALUES ($1, $2, $3, NULL) ON CONFLICT DO NOTHING",
                &[&id.as_str(), &source.as_str(), &path],
            )?;
            if inserted == 1 {
                Ok(())
            } else {
                Err(conflict())
            }
        }
    }
}

pub(crate) fn insert_version(c: &mut Conn, version: &VersionRow) -> Result<(), StoreError> {
    if let Some(existing) = read_version(c, &version.id)? {
        return if existing == *version {
            Ok(())
        } else {
            Err(StoreError::VersionConflict {
                id: version.id.clone(),
            })
        };
    }
    if read_document(c, &version.document_id)?.is_none() {
        return Err(StoreError::Missing {
            what: format!("document {}", version.document_id),
        });
    }
    if read_blob(c, &version.sha256)?.is_none() {
        return Err(StoreError::Missing {
            what: format!("blob {}", version.sha256),
        });
    }
    execute(
        c,
        "INSERT INTO document_versions (version_id, doc_id, sha256, size, content_type, prev_version) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &version.id.as_str(),
            &version.document_id.as_str(),
            &version.sha256.as_str(),
            &to_i64(version.size)?,
            &version.content_type,
            &version.previous_version.as_ref().map(VersionId::as_str),
        ],
    )?;
    Ok(())
}

pub(crate) fn set_current_version(
    c: &mut Conn,
    doc: &DocumentId,
    version: &VersionId,
) -> Result<(), StoreError> {
    match read_version(c, version)? {
        Some(v) if v.document_id == *doc => {}
        Some(_) | None => {
            return Err(StoreError::Missing {
                what: format!("version {version} of document {doc}"),
            });
        }
    }
    execute(
        c,
        "UPDATE documents SET current_version = $2 WHERE doc_id = $1",
        &[&doc.as_str(), &version.as_str()],
    )?;
    Ok(())
}
