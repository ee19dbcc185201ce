//! The PostgreSQL store opened for reading only: one session whose every
//! statement runs in a read-only transaction (`default_transaction_read_only`
//! set at each connection), which creates nothing, migrates nothing, and
//! `LISTEN`s for commits as the writing store's reader does.

use std::sync::Mutex;

use super::connect::Connector;
use super::session::{Conn, Session};
use super::{Exec, commits_seen, schema};
use crate::{StoreError, StoreUsage};

/// Run at every (re)connection, read-only first: the `LISTEN` after it is
/// allowed in a read-only transaction, and needs no privilege. The
/// statement timeout comes before all of it ([`super::waits`]).
const SETUP: &str = "SET default_transaction_read_only = on; LISTEN thestream_commit; \
                     SET application_name = 'thestream-read-only'";

/// A read-only session on a store's database.
pub(crate) struct PostgresReader {
    label: String,
    session: Session,
    /// Commit notifications seen so far.
    commits: Mutex<u64>,
}

impl std::fmt::Debug for PostgresReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresReader")
            .field("database", &self.label)
            .finish_non_exhaustive()
    }
}

impl PostgresReader {
    /// Connects read-only to the database at `url` (TLS as
    /// [`super::PostgresStore::open`] decides) and checks its schema: an
    /// empty database is [`StoreError::NoStore`], an older schema
    /// [`StoreError::OlderSchema`], a newer one [`StoreError::NewerSchema`].
    /// No error repeats the URL.
    pub(crate) fn open(url: &str) -> Result<Self, StoreError> {
        let connector = Connector::parse(url)?;
        let label = connector.label().to_owned();
        let session = Session::open(connector.with_setup(super::waits::reader_setup(SETUP)))?;
        let schema_label = label.clone();
        session.call(move |c| schema::check_readable(c.client()?, &schema_label))?;
        Ok(Self {
            label,
            session,
            commits: Mutex::new(0),
        })
    }

    /// Moves at every commit on the database, as the writing store's.
    pub(crate) fn data_version(&self) -> Result<u64, StoreError> {
        commits_seen(&self.session, &self.commits)
    }

    /// The database's size and its bytes by kind.
    pub(crate) fn usage(&self) -> Result<StoreUsage, StoreError> {
        super::usage::usage_on(&self.session)
    }

    /// Runs `f` on the session's connection, for tests that try to write
    /// through it.
    #[cfg(test)]
    pub(crate) fn raw<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.session.call(f)
    }
}

impl Exec for PostgresReader {
    fn exec<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        self.session.call(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PostgresStore, Read, Store};

    /// Each statement a writer could send is refused by the server as a
    /// write in a read-only transaction (SQLSTATE 25006), and changes
    /// nothing. (PostgreSQL allows `NOTIFY` in one; this session never
    /// sends it, and one would only make a `serve` look again.)
    #[test]
    fn the_session_refuses_every_write() {
        let Some(url) = crate::pgtest::fresh_url() else {
            return;
        };
        let writer = PostgresStore::open(&url).unwrap();
        writer
            .append(&crate::conformance::event(
                "test:a",
                "1",
                serde_json::json!(1),
            ))
            .unwrap();
        let reader = PostgresReader::open(&url).unwrap();
        for sql in [
            "INSERT INTO controls (key, value) VALUES ('k', '1')",
            "DELETE FROM events",
            "UPDATE thestream_schema SET version = 99",
            "CREATE TABLE t (x int)",
            "SELECT nextval(pg_get_serial_sequence('events', 'pos'))",
        ] {
            let code = reader
                .raw(move |c| {
                    let err = c.client()?.batch_execute(sql).err();
                    Ok(err.and_then(|e| e.code().map(|code| code.code().to_owned())))
                })
                .unwrap();
            assert_eq!(code.as_deref(), Some("25006"), "{sql}");
        }
        assert_eq!(reader.last_position().unwrap(), 1);
        assert!(reader.control("k").unwrap().is_none());
    }

    /// The server ends the session: the reconnected one is read-only
    /// again (the setup runs at every connection), and `data_version`
    /// reports the change.
    #[test]
    fn a_reconnected_session_is_read_only_again() {
        let Some(url) = crate::pgtest::fresh_url() else {
            return;
        };
        drop(PostgresStore::open(&url).unwrap());
        let reader = PostgresReader::open(&url).unwrap();
        let before = reader.data_version().unwrap();
        let db = url.rsplit("dbname=").next().unwrap().to_owned();
        let ended: i64 = crate::pgtest::server()
            .unwrap()
            .admin()
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND application_name = 'thestream-read-only') t",
                &[&db],
            )
            .unwrap()
            .get(0);
        assert_eq!(ended, 1);
        std::thread::sleep(std::time::Duration::from_millis(100));
        // The first call may meet the dead connection; the next reconnects.
        let after = reader
            .data_version()
            .or_else(|_| reader.data_version())
            .unwrap();
        assert_ne!(after, before);
        let code = reader
            .raw(|c| {
                let err = c.client()?.batch_execute("DELETE FROM events").err();
                Ok(err.and_then(|e| e.code().map(|code| code.code().to_owned())))
            })
            .unwrap();
        assert_eq!(code.as_deref(), Some("25006"));
    }
}
