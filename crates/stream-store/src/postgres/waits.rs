//! Bounded waits, so that PostgreSQL never stalls the store silently: the
//! writer's sessions wait at most [`LOCK_TIMEOUT`] for a lock per attempt,
//! and a write transaction whose advisory lock another session holds names
//! that session at WARN and tries again; readers' statements end after
//! [`READ_TIMEOUT`] with an error instead of hanging.

use std::time::Instant;

use postgres::error::SqlState;

use super::session::Session;
use super::{BEGIN, WRITER_LOCK, backend};
use crate::StoreError;

/// How long one attempt of the writer waits for a lock (its advisory
/// writer lock, a row another session locked) before it gives up and,
/// for the writer lock, says who holds it and tries again.
const LOCK_TIMEOUT: &str = "5s";

/// How long one statement of a reader may run: a read stuck behind a
/// foreign lock ends with an error instead of hanging the inspector.
const READ_TIMEOUT: &str = "30s";

/// Run at every connection of the writer.
pub(crate) fn writer_setup() -> String {
    format!("SET lock_timeout = '{LOCK_TIMEOUT}'")
}

/// Run at every connection of a reader, before `rest`.
pub(crate) fn reader_setup(rest: &str) -> String {
    format!("SET statement_timeout = '{READ_TIMEOUT}'; {rest}")
}

/// What a failed `BEGIN` (with its lock) calls for.
#[derive(Debug, PartialEq, Eq)]
enum BeginFailure {
    /// The lock wait timed out: another session holds the writer lock.
    LockBusy,
    /// Anything else: the caller gets the error.
    Other,
}

/// Only the server's `lock_not_available` is a wait to retry; every other
/// error, and an error without a code, fails the begin.
fn classify(code: Option<&SqlState>) -> BeginFailure {
    match code {
        Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => BeginFailure::LockBusy,
        Some(_) | None => BeginFailure::Other,
    }
}

/// The sessions holding the writer lock, as `pg_locks` and
/// `pg_stat_activity` show them: never the query text, which may carry
/// content. A role without `pg_read_all_stats` sees another role's
/// session's pid only.
const HOLDERS: &str = concat!(
    "SELECT l.pid, coalesce(a.application_name, ''), ",
    "coalesce(host(a.client_addr), 'local'), coalesce(a.backend_start::text, '') ",
    "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE ",
    advisory_key_held!("l")
);

#[derive(Debug, PartialEq, Eq)]
struct Holder {
    pid: i32,
    application: String,
    client: String,
    started: String,
}

/// Opens a write transaction holding the writer lock on `session`,
/// waiting as long as another session holds it: each timed-out attempt is
/// rolled back (it wrote nothing) and tried again from its start; the
/// holder is logged once per wait (again only when another takes over).
/// Returns the connection generation the transaction began on.
pub(crate) fn begin_writing(session: &Session) -> Result<u64, StoreError> {
    let since = Instant::now();
    let mut named: Option<i32> = None;
    loop {
        let attempt = session.call(|c| {
            c.heads().clear();
            let client = c.client()?;
            match client.batch_execute(BEGIN) {
                Ok(()) => Ok(Ok(c.generation())),
                Err(e) => {
                    // The failed transaction is aborted; end it either way.
                    let _ = client.batch_execute("ROLLBACK");
                    match classify(e.code()) {
                        BeginFailure::LockBusy => {
                            let holders = client
                                .query(HOLDERS, &[&WRITER_LOCK])
                                .map_err(backend)?
                                .iter()
                                .map(|r| Holder {
                                    pid: r.get(0),
                                    application: r.get(1),
                                    client: r.get(2),
                                    started: r.get(3),
                                })
                                .collect::<Vec<_>>();
                            Ok(Err(holders))
                        }
                        BeginFailure::Other => Err(backend(e)),
                    }
                }
            }
        })?;
        match attempt {
            Ok(generation) => {
                if named.is_some() {
                    tracing::info!(
                        waited_s = since.elapsed().as_secs(),
                        "the store's writer lock is free again; writing"
                    );
                }
                return Ok(generation);
            }
            Err(holders) => {
                for h in &holders {
                    if named == Some(h.pid) {
                        continue;
                    }
                    tracing::warn!(
                        pid = h.pid,
                        application_name = %h.application,
                        client_addr = %h.client,
                        backend_start = %h.started,
                        waited_s = since.elapsed().as_secs(),
                        "another database session holds the store's writer lock; waiting for it"
                    );
                    named = Some(h.pid);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "waits_tests.rs"]
mod tests;
