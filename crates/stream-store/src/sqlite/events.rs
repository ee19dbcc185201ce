//! Event rows in SQLite: the columns read, a row decoded, an event
//! inserted. An event's longest text is stored out of its payload as the
//! blob its snapshots name too (schema 11), and spliced back on read; its
//! source and type are codes into `names` (schema 12).

use std::rc::Rc;
use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::vtab::array::Array;
use rusqlite::{Connection, OptionalExtension, ToSql, params};
use stream_core::{
    Authorship, EventId, NewEvent, Sha256Hex, SourceName, StoredEvent, canon::sha256, parts,
};

use crate::sqlite::{backend, blob_key, cached_row, insert_blob, invalid, now_ms, raw_key, to_i64};
use crate::{EventQuery, PositionedEvent, StoreError};

/// An event's columns, its source and type named from their codes
/// (schema 12) and the text cut out of its payload (schema 11) joined from
/// its blob ([`SELECT_EVENTS`]). The joins are outer, so that
/// a row whose name or text is missing is refused, not skipped.
const EVENT_COLUMNS: &str = "e.id, s.name, e.seq, y.name, e.version, e.authorship, e.sensitive, \
                             e.root, e.parent, e.payload, e.payload_sha256, e.recorded_at, \
                             e.text_at, t.bytes";
/// `SELECT {EVENT_COLUMNS} FROM` the events with their joins, to which a
/// read adds its conditions: written once, not on every read.
static SELECT_EVENTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {EVENT_COLUMNS} FROM events e \
         LEFT JOIN names s ON s.code = e.source LEFT JOIN names y ON y.code = e.type \
         LEFT JOIN blobs t ON {} WHERE 1=1",
        blob_key("t.sha256", "e.text_sha")
    )
});

/// One event by id.
pub(crate) static READ_EVENT: LazyLock<String> =
    LazyLock::new(|| format!("{} AND e.id = ?1", *SELECT_EVENTS));

/// The code of the name bound as parameter `n`, inside a query: a name
/// never stored has none, and matches no event.
fn code_of(n: usize) -> String {
    format!("(SELECT code FROM names WHERE name = ?{n})")
}

/// The code of `name`, given to it now if it has none. Codes are never
/// reassigned, so a code read once stays right.
fn name_code(c: &Connection, name: &str) -> Result<i64, StoreError> {
    let code = |c: &Connection| {
        cached_row(c, "SELECT code FROM names WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .optional()
        .map_err(backend)
    };
    if let Some(code) = code(c)? {
        return Ok(code);
    }
    c.prepare_cached("INSERT INTO names (name) VALUES (?1)")
        .and_then(|mut s| s.execute([name]))
        .map_err(backend)?;
    code(c)?.ok_or_else(|| invalid("name"))
}

// Ids and the payload hash as their 32 raw bytes (schema 10).
type RawEvent = (
    Vec<u8>,
    Option<String>,
    i64,
    Option<String>,
    i64,
    String,
    bool,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<u8>,
    i64,
    Option<i64>,
    Option<Vec<u8>>,
);

// rusqlite converts a row into a tuple of its columns, each checked.
fn raw_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
    RawEvent::try_from(r)
}

/// The payload as appended: the stored bytes, with the text cut out at
/// `text_at` spliced back from its blob, which must be there and must make
/// the bytes hash to the event's payload hash.
fn whole_payload(
    stored: Vec<u8>,
    text_at: Option<i64>,
    text: Option<Vec<u8>>,
    hash: &Sha256Hex,
) -> Result<Vec<u8>, StoreError> {
    let (at, text) = match (text_at, text) {
        (None, None) => return Ok(stored),
        (Some(at), Some(text)) => (at, text),
        (Some(_), None) => return Err(invalid("event text: missing")),
        (None, Some(_)) => return Err(invalid("event text")),
    };
    let at = usize::try_from(at).map_err(|_| invalid("event text"))?;
    let text = std::str::from_utf8(&text).map_err(|_| invalid("event text"))?;
    let payload = parts::splice_text(&stored, at, text).ok_or_else(|| invalid("event text"))?;
    if sha256(&payload) != *hash {
        return Err(invalid("event text: altered"));
    }
    Ok(payload)
}

fn decode_event(raw: RawEvent) -> Result<StoredEvent, StoreError> {
    let (
        id,
        source,
        seq,
        ty,
        version,
        authorship,
        sensitive,
        root,
        parent,
        payload,
        hash,
        at,
        text_at,
        text,
    ) = raw;
    let what = "event";
    let (Some(source), Some(ty)) = (source, ty) else {
        return Err(invalid("event name: missing"));
    };
    let payload_sha256 = Sha256Hex::from_bytes(raw_key(&hash, what)?);
    let payload = whole_payload(payload, text_at, text, &payload_sha256)?;
    Ok(StoredEvent {
        event: NewEvent {
            id: EventId::from_bytes(raw_key(&id, what)?),
            source: SourceName::new(source).map_err(|_| invalid(what))?,
            event_type: ty,
            version: u32::try_from(version).map_err(|_| invalid(what))?,
            authorship: Authorship::parse(&authorship).ok_or_else(|| invalid(what))?,
            sensitive,
            root: root
                .as_deref()
                .map(|r| raw_key(r, what).map(EventId::from_bytes))
                .transpose()?,
            parent: parent
                .as_deref()
                .map(|p| raw_key(p, what).map(EventId::from_bytes))
                .transpose()?,
            payload,
            payload_sha256,
        },
        seq: u64::try_from(seq).map_err(|_| invalid(what))?,
        recorded_at_ms: at,
    })
}

pub(crate) fn read_event(c: &Connection, id: &EventId) -> Result<Option<StoredEvent>, StoreError> {
    cached_row(c, &READ_EVENT, [id.to_bytes()], raw_event)
        .optional()
        .map_err(backend)?
        .map(decode_event)
        .transpose()
}

pub(crate) fn read_events(c: &Connection, q: &EventQuery) -> Result<Vec<StoredEvent>, StoreError> {
    let (sql, args) = query_sql(q)?;
    let mut stmt = c.prepare_cached(&sql).map_err(backend)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args), raw_event)
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    rows.into_iter().map(decode_event).collect()
}

/// Events after a position, in position order, each with its position
/// (read after the event's own columns).
pub(crate) static EVENTS_AFTER_POSITION: LazyLock<String> = LazyLock::new(|| {
    let select = SELECT_EVENTS.replacen(EVENT_COLUMNS, &format!("{EVENT_COLUMNS}, e.pos"), 1);
    format!("{select} AND e.pos > ?1 ORDER BY e.pos LIMIT ?2")
});

pub(crate) fn read_events_after_position(
    c: &Connection,
    after: u64,
    limit: usize,
) -> Result<Vec<PositionedEvent>, StoreError> {
    let mut stmt = c.prepare_cached(&EVENTS_AFTER_POSITION).map_err(backend)?;
    let rows = stmt
        .query_map(params![to_i64(after)?, to_i64(limit as u64)?], |r| {
            Ok((r.get::<_, i64>(14)?, raw_event(r)?))
        })
        .map_err(backend)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(backend)?;
    rows.into_iter()
        .map(|(position, raw)| {
            Ok(PositionedEvent {
                position: u64::try_from(position).map_err(|_| invalid("event position"))?,
                event: decode_event(raw)?,
            })
        })
        .collect()
}

/// The highest position: the last row of the `pos` b-tree, one seek.
pub(crate) fn read_last_position(c: &Connection) -> Result<u64, StoreError> {
    let last: i64 = cached_row(c, "SELECT COALESCE(MAX(pos), 0) FROM events", [], |r| {
        r.get(0)
    })
    .map_err(backend)?;
    u64::try_from(last).map_err(|_| invalid("event position"))
}

/// The query `read_events` runs for `q`, and its parameters.
pub(crate) fn query_sql(q: &EventQuery) -> Result<(String, Vec<Box<dyn ToSql>>), StoreError> {
    let mut sql = SELECT_EVENTS.clone();
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    if let Some(source) = &q.source {
        args.push(Box::new(source.as_str().to_owned()));
        sql.push_str(&format!(" AND e.source = {}", code_of(args.len())));
        args.push(Box::new(to_i64(q.after_seq)?));
        sql.push_str(&format!(" AND e.seq > ?{}", args.len()));
        if let Some(before) = q.before_seq {
            args.push(Box::new(to_i64(before)?));
            sql.push_str(&format!(" AND e.seq < ?{}", args.len()));
        }
    }
    if let Some(ty) = &q.event_type {
        args.push(Box::new(ty.clone()));
        sql.push_str(&format!(" AND e.type = {}", code_of(args.len())));
    }
    if let Some(roots) = &q.roots {
        let keys: Array = Rc::new(
            roots
                .iter()
                .map(|root| Value::Blob(root.to_bytes().to_vec()))
                .collect(),
        );
        args.push(Box::new(keys));
        sql.push_str(&format!(" AND e.root IN rarray(?{})", args.len()));
    }
    sql.push_str(if q.source.is_some() {
        " ORDER BY e.seq"
    } else {
        " ORDER BY e.pos"
    });
    if q.descending {
        sql.push_str(" DESC");
    }
    if let Some(limit) = q.limit {
        args.push(Box::new(to_i64(limit as u64)?));
        sql.push_str(&format!(" LIMIT ?{}", args.len()));
    }
    Ok((sql, args))
}

/// Inserts `event` at `seq`, its source and type as codes and its text cut
/// out into a blob.
pub(crate) fn insert_event(c: &Connection, event: &NewEvent, seq: u64) -> Result<(), StoreError> {
    // A message or reply is stored once: as the text blob a snapshot's
    // transcript names too (schema 11).
    let cut = parts::cut_text(&event.payload);
    let text_sha = cut
        .as_ref()
        .map(|cut| insert_blob(c, cut.text.as_bytes()))
        .transpose()?;
    let source = name_code(c, event.source.as_str())?;
    let event_type = name_code(c, &event.event_type)?;
    let (payload, text_at) = match &cut {
        Some(cut) => (cut.stored.as_slice(), Some(to_i64(cut.at as u64)?)),
        None => (event.payload.as_slice(), None),
    };
    c.prepare_cached(
        "INSERT INTO events (id, source, seq, type, version, authorship, sensitive, root, \
         parent, payload, payload_sha256, recorded_at, text_at, text_sha) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )
    .and_then(|mut stmt| {
        stmt.execute(params![
            event.id.to_bytes(),
            source,
            to_i64(seq).unwrap_or(i64::MAX),
            event_type,
            event.version,
            event.authorship.as_str(),
            event.sensitive,
            event.root.as_ref().map(EventId::to_bytes),
            event.parent.as_ref().map(EventId::to_bytes),
            payload,
            event.payload_sha256.to_bytes(),
            now_ms(),
            text_at,
            text_sha.as_ref().map(Sha256Hex::to_bytes),
        ])
    })
    .map_err(backend)?;
    Ok(())
}
