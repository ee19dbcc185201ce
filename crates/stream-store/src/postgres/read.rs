//! Reads shared by the store (reader connection) and a transaction (its
//! own connection, seeing its own writes).

use postgres::Row;
use postgres::types::ToSql;
use stream_core::parts::Digest;
use stream_core::{
    Authorship, DocumentId, EventId, NewEvent, RunId, Sha256Hex, SnapshotId, SourceName,
    StoredEvent, VersionId,
};

use super::backend;
use super::session::Conn;
use crate::{
    DocumentRow, EventQuery, PositionedEvent, Progress, RunRow, RunStatus, StoreError, VersionRow,
};

fn invalid(what: &str) -> StoreError {
    StoreError::InvalidRow {
        what: what.to_owned(),
    }
}

fn parse_id<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, StoreError> {
    s.parse().map_err(|_| invalid(what))
}

pub(crate) fn to_i64(n: u64) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| StoreError::Backend("integer out of range".into()))
}

/// Rows of `sql` with `params`, on a statement prepared once.
pub(crate) fn query(
    c: &mut Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>, StoreError> {
    let (client, stmt) = c.statement(sql)?;
    client.query(&stmt, params).map_err(backend)
}

/// At most one row.
pub(crate) fn query_opt(
    c: &mut Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<Row>, StoreError> {
    let mut rows = query(c, sql, params)?;
    match rows.len() {
        0 | 1 => Ok(rows.pop()),
        _ => Err(invalid("row (more than one)")),
    }
}

/// Rows changed by `sql`.
pub(crate) fn execute(
    c: &mut Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let (client, stmt) = c.statement(sql)?;
    client.execute(&stmt, params).map_err(backend)
}

const EVENT_COLUMNS: &str = "id, source, seq, type, version, authorship, sensitive, root, parent, \
                             payload, payload_sha256, recorded_at";

fn decode_event(r: &Row) -> Result<StoredEvent, StoreError> {
    let what = "event";
    let get = |_: postgres::Error| invalid(what);
    let id: String = r.try_get(0).map_err(get)?;
    let source: String = r.try_get(1).map_err(get)?;
    let seq: i64 = r.try_get(2).map_err(get)?;
    let version: i32 = r.try_get(4).map_err(get)?;
    let authorship: String = r.try_get(5).map_err(get)?;
    let root: Option<String> = r.try_get(7).map_err(get)?;
    let parent: Option<String> = r.try_get(8).map_err(get)?;
    let hash: String = r.try_get(10).map_err(get)?;
    Ok(StoredEvent {
        event: NewEvent {
            id: parse_id(&id, what)?,
            source: SourceName::new(source).map_err(|_| invalid(what))?,
            event_type: r.try_get(3).map_err(get)?,
            version: u32::try_from(version).map_err(|_| invalid(what))?,
            authorship: Authorship::parse(&authorship).ok_or_else(|| invalid(what))?,
            sensitive: r.try_get(6).map_err(get)?,
            root: root.as_deref().map(|s| parse_id(s, what)).transpose()?,
            parent: parent.as_deref().map(|s| parse_id(s, what)).transpose()?,
            payload: r.try_get(9).map_err(get)?,
            payload_sha256: parse_id(&hash, what)?,
        },
        seq: u64::try_from(seq).map_err(|_| invalid(what))?,
        recorded_at_ms: r.try_get(11).map_err(get)?,
    })
}

pub(crate) fn read_event(c: &mut Conn, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
    let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE id = $1");
    query_opt(c, &sql, &[&id.as_str()])?
        .as_ref()
        .map(decode_event)
        .transpose()
}

pub(crate) fn read_events(c: &mut Conn, q: &EventQuery) -> Result<Vec<StoredEvent>, StoreError> {
    let mut sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE true");
    let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let mut arg = |sql: &mut String, clause: &str, value: Box<dyn ToSql + Sync + Send>| {
        args.push(value);
        sql.push_str(&format!(" AND {clause} ${}", args.len()));
    };
    if let Some(source) = &q.source {
        arg(&mut sql, "source =", Box::new(source.as_str().to_owned()));
        arg(&mut sql, "seq >", Box::new(to_i64(q.after_seq)?));
        if let Some(before) = q.before_seq {
            arg(&mut sql, "seq <", Box::new(to_i64(before)?));
        }
    }
    if let Some(ty) = &q.event_type {
        arg(&mut sql, "type =", Box::new(ty.clone()));
    }
    if let Some(roots) = &q.roots {
        let roots: Vec<String> = roots.iter().map(|r| r.as_str().to_owned()).collect();
        args.push(Box::new(roots));
        sql.push_str(&format!(" AND root = ANY(${})", args.len()));
    }
    sql.push_str(if q.source.is_some() {
        " ORDER BY seq"
    } else {
        " ORDER BY pos"
    });
    if q.descending {
        sql.push_str(" DESC");
    }
    if let Some(limit) = q.limit {
        args.push(Box::new(to_i64(limit as u64)?));
        sql.push_str(&format!(" LIMIT ${}", args.len()));
    }
    let params: Vec<&(dyn ToSql + Sync)> = args
        .iter()
        .map(|a| a.as_ref() as &(dyn ToSql + Sync))
        .collect();
    query(c, &sql, &params)?.iter().map(decode_event).collect()
}

pub(crate) fn read_events_after_position(
    c: &mut Conn,
    after: u64,
    limit: usize,
) -> Result<Vec<PositionedEvent>, StoreError> {
    // The position is read after the event's own columns.
    let sql =
        format!("SELECT {EVENT_COLUMNS}, pos FROM events WHERE pos > $1 ORDER BY pos LIMIT $2");
    query(c, &sql, &[&to_i64(after)?, &to_i64(limit as u64)?])?
        .iter()
        .map(|r| {
            let position: i64 = r.try_get(12).map_err(|_| invalid("event position"))?;
            Ok(PositionedEvent {
                position: u64::try_from(position).map_err(|_| invalid("event position"))?,
                event: decode_event(r)?,
            })
        })
        .collect()
}

pub(crate) fn read_last_position(c: &mut Conn) -> Result<u64, StoreError> {
    let rows = query(c, "SELECT COALESCE(MAX(pos), 0) FROM events", &[])?;
    let last: i64 = rows
        .first()
        .ok_or_else(|| invalid("event position"))?
        .try_get(0)
        .map_err(backend)?;
    u64::try_from(last).map_err(|_| invalid("event position"))
}

pub(crate) fn read_head(c: &mut Conn, source: &SourceName) -> Result<u64, StoreError> {
    let row = query_opt(
        c,
        "SELECT head FROM source_heads WHERE source = $1",
        &[&source.as_str()],
    )?;
    let head: i64 = row
        .map(|r| r.try_get(0))
        .transpose()
        .map_err(backend)?
        .unwrap_or(0);
    u64::try_from(head).map_err(|_| invalid("seq"))
}

pub(crate) fn read_sources(c: &mut Conn) -> Result<Vec<SourceName>, StoreError> {
    query(
        c,
        "SELECT source FROM source_heads WHERE head > 0 ORDER BY source",
        &[],
    )?
    .iter()
    .map(|r| {
        let name: String = r.try_get(0).map_err(backend)?;
        SourceName::new(name).map_err(|_| invalid("source"))
    })
    .collect()
}

const RUN_COLUMNS: &str =
    "run_id, agent_id, agent_version, trigger_event, status, attempts, snapshot_id";

fn decode_run(r: &Row) -> Result<RunRow, StoreError> {
    let what = "run";
    let get = |_: postgres::Error| invalid(what);
    let run_id: String = r.try_get(0).map_err(get)?;
    let version: i32 = r.try_get(2).map_err(get)?;
    let trigger: String = r.try_get(3).map_err(get)?;
    let status: String = r.try_get(4).map_err(get)?;
    let attempts: i32 = r.try_get(5).map_err(get)?;
    let snapshot: Option<String> = r.try_get(6).map_err(get)?;
    Ok(RunRow {
        run_id: parse_id(&run_id, what)?,
        agent_id: r.try_get(1).map_err(get)?,
        agent_version: u32::try_from(version).map_err(|_| invalid(what))?,
        trigger_event_id: parse_id(&trigger, what)?,
        status: RunStatus::parse(&status).ok_or_else(|| invalid(what))?,
        attempts: u32::try_from(attempts).map_err(|_| invalid(what))?,
        snapshot_id: snapshot.as_deref().map(|s| parse_id(s, what)).transpose()?,
    })
}

pub(crate) fn read_run(c: &mut Conn, id: &RunId) -> Result<Option<RunRow>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1");
    query_opt(c, &sql, &[&id.as_str()])?
        .as_ref()
        .map(decode_run)
        .transpose()
}

pub(crate) fn read_runs_with_status(
    c: &mut Conn,
    status: RunStatus,
) -> Result<Vec<RunRow>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE status = $1 ORDER BY pos");
    query(c, &sql, &[&status.as_str()])?
        .iter()
        .map(decode_run)
        .collect()
}

pub(crate) fn read_progress(c: &mut Conn, consumer: &str) -> Result<Option<Progress>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT source, seq FROM progress WHERE consumer = $1",
        &[&consumer],
    )?
    else {
        return Ok(None);
    };
    let what = "progress";
    let source: String = row.try_get(0).map_err(|_| invalid(what))?;
    let seq: i64 = row.try_get(1).map_err(|_| invalid(what))?;
    Ok(Some(Progress {
        source: SourceName::new(source).map_err(|_| invalid(what))?,
        seq: u64::try_from(seq).map_err(|_| invalid(what))?,
    }))
}

pub(crate) fn read_control(
    c: &mut Conn,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let Some(row) = query_opt(c, "SELECT value FROM controls WHERE key = $1", &[&key])? else {
        return Ok(None);
    };
    let value: String = row.try_get(0).map_err(|_| invalid("control"))?;
    serde_json::from_str(&value)
        .map(Some)
        .map_err(|_| invalid("control"))
}

fn decode_doc(r: &Row) -> Result<DocumentRow, StoreError> {
    let what = "document";
    let get = |_: postgres::Error| invalid(what);
    let id: String = r.try_get(0).map_err(get)?;
    let source: String = r.try_get(1).map_err(get)?;
    let current: Option<String> = r.try_get(3).map_err(get)?;
    Ok(DocumentRow {
        id: parse_id(&id, what)?,
        source: SourceName::new(source).map_err(|_| invalid(what))?,
        path: r.try_get(2).map_err(get)?,
        current_version: current.as_deref().map(|s| parse_id(s, what)).transpose()?,
    })
}

pub(crate) fn read_document(
    c: &mut Conn,
    id: &DocumentId,
) -> Result<Option<DocumentRow>, StoreError> {
    query_opt(
        c,
        "SELECT doc_id, source, path, current_version FROM documents WHERE doc_id = $1",
        &[&id.as_str()],
    )?
    .as_ref()
    .map(decode_doc)
    .transpose()
}

pub(crate) fn read_documents(
    c: &mut Conn,
    source: &SourceName,
) -> Result<Vec<DocumentRow>, StoreError> {
    query(
        c,
        "SELECT doc_id, source, path, current_version FROM documents \
         WHERE source = $1 ORDER BY path COLLATE \"C\"",
        &[&source.as_str()],
    )?
    .iter()
    .map(decode_doc)
    .collect()
}

pub(crate) fn read_version(c: &mut Conn, id: &VersionId) -> Result<Option<VersionRow>, StoreError> {
    let Some(r) = query_opt(
        c,
        "SELECT version_id, doc_id, sha256, size, content_type, prev_version \
         FROM document_versions WHERE version_id = $1",
        &[&id.as_str()],
    )?
    else {
        return Ok(None);
    };
    let what = "document version";
    let get = |_: postgres::Error| invalid(what);
    let vid: String = r.try_get(0).map_err(get)?;
    let doc: String = r.try_get(1).map_err(get)?;
    let sha: String = r.try_get(2).map_err(get)?;
    let size: i64 = r.try_get(3).map_err(get)?;
    let prev: Option<String> = r.try_get(5).map_err(get)?;
    Ok(Some(VersionRow {
        id: parse_id(&vid, what)?,
        document_id: parse_id(&doc, what)?,
        sha256: parse_id(&sha, what)?,
        size: u64::try_from(size).map_err(|_| invalid(what))?,
        content_type: r.try_get(4).map_err(get)?,
        previous_version: prev.as_deref().map(|s| parse_id(s, what)).transpose()?,
    }))
}

pub(crate) fn read_blob(c: &mut Conn, sha: &Sha256Hex) -> Result<Option<Vec<u8>>, StoreError> {
    query_opt(
        c,
        "SELECT bytes FROM blobs WHERE sha256 = $1",
        &[&sha.as_str()],
    )?
    .map(|r| r.try_get(0).map_err(|_| invalid("blob")))
    .transpose()
}

pub(crate) fn read_snapshot(
    c: &mut Conn,
    id: &SnapshotId,
) -> Result<Option<crate::SnapshotBytes>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT root FROM snapshots WHERE id = $1",
        &[&id.as_str()],
    )?
    else {
        return Ok(None);
    };
    let root: String = row.try_get(0).map_err(|_| invalid("snapshot"))?;
    crate::parts::join_snapshot(id, &root, |level| read_level(c, level)).map(Some)
}

/// The bytes of each of `hashes`, in order (`None` when not stored): one
/// level of a snapshot's part tree in one query.
fn read_level(c: &mut Conn, hashes: &[Digest]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    // Keys are hex text in this schema.
    let keys: Vec<String> = hashes
        .iter()
        .map(|sha| Sha256Hex::from_bytes(*sha).as_str().to_owned())
        .collect();
    let rows = query(
        c,
        "SELECT sha256, bytes FROM blobs WHERE sha256 = ANY($1)",
        &[&keys],
    )?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let sha: String = row.try_get(0).map_err(|_| invalid("blob"))?;
        let bytes: Vec<u8> = row.try_get(1).map_err(|_| invalid("blob"))?;
        found.insert(sha, bytes);
    }
    Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
}
