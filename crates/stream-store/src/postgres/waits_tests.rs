//! The writer's bounded lock waits and the readers' statement timeout, on a
//! real server (skipped without one, `crate::pgtest`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::postgres::PostgresStore;
use crate::postgres::readonly::PostgresReader;
use crate::{Read, Store};

/// Log lines written while `f` runs on this thread.
fn logs_of<R>(f: impl FnOnce() -> R) -> (R, String) {
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let bytes = captured.0.lock().unwrap().clone();
    (out, String::from_utf8(bytes).unwrap())
}

/// A setting as the session shows it.
fn show(
    run: impl FnOnce(
        Box<dyn FnOnce(&mut super::super::session::Conn) -> Result<String, StoreError> + Send>,
    ) -> Result<String, StoreError>,
    setting: &'static str,
) -> String {
    run(Box::new(move |c| {
        let row = c
            .client()?
            .query_one(&format!("SHOW {setting}"), &[])
            .map_err(backend)?;
        Ok(row.get(0))
    }))
    .unwrap()
}

/// A session of another program on the store's database.
fn foreign(url: &str) -> postgres::Client {
    let config: postgres::Config = url.parse().unwrap();
    config.connect(postgres::NoTls).unwrap()
}

/// A foreign session holding the writer lock makes a write wait, not fail:
/// its holder is named once at WARN (pid, application, client, start; no
/// query text) however many times the wait times out, and the write
/// commits once after the holder lets go. The writer's timeout is the
/// named constant; the test shortens it on the session to time out often.
#[test]
fn a_foreign_holder_of_the_writer_lock_is_named_once_and_the_write_waits() {
    let Some(url) = crate::pgtest::fresh_url() else {
        return;
    };
    let store = Arc::new(PostgresStore::open(&url).unwrap());
    assert_eq!(show(|f| store.raw_writer(f), "lock_timeout"), LOCK_TIMEOUT);
    store
        .raw_writer(|c| {
            c.client()?
                .batch_execute("SET lock_timeout = '50ms'")
                .map_err(backend)
        })
        .unwrap();
    let mut holder = foreign(&url);
    holder
        .batch_execute(&format!(
            "SET application_name = 'the-other-program'; SELECT pg_advisory_lock({WRITER_LOCK})"
        ))
        .unwrap();
    let pid: i32 = holder
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);

    let writing = Arc::clone(&store);
    let write = std::thread::spawn(move || {
        logs_of(|| {
            let mut tx = writing.begin()?;
            tx.append(&crate::conformance::event(
                "test:a",
                "1",
                serde_json::json!("canary-written"),
            ))?;
            tx.commit()
        })
    });
    std::thread::sleep(Duration::from_millis(600));
    assert!(!write.is_finished(), "the write waits for the holder");
    holder
        .batch_execute(&format!("SELECT pg_advisory_unlock({WRITER_LOCK})"))
        .unwrap();
    let (written, logs) = write.join().unwrap();
    written.unwrap();

    assert_eq!(logs.matches("WARN").count(), 1, "{logs}");
    assert!(logs.contains(&format!("pid={pid}")), "{logs}");
    assert!(
        logs.contains("application_name=the-other-program"),
        "{logs}"
    );
    assert!(!logs.contains("pg_advisory_lock"), "no query text: {logs}");
    assert!(!logs.contains("canary-"), "{logs}");
    assert_eq!(store.last_position().unwrap(), 1, "written once");
}

/// Both readers carry the named statement timeout, and a read stuck behind
/// a foreign lock on a table it needs ends with the server's timeout error
/// instead of hanging; the session reads again once the lock is gone. The
/// test shortens the timeout on the sessions to end the wait quickly.
#[test]
fn a_read_stuck_behind_a_foreign_lock_ends_with_an_error() {
    let Some(url) = crate::pgtest::fresh_url() else {
        return;
    };
    let store = PostgresStore::open(&url).unwrap();
    let reader = PostgresReader::open(&url).unwrap();
    assert_eq!(
        show(|f| store.raw_reader(f), "statement_timeout"),
        READ_TIMEOUT
    );
    assert_eq!(show(|f| reader.raw(f), "statement_timeout"), READ_TIMEOUT);
    let shorten = |c: &mut super::super::session::Conn| {
        c.client()?
            .batch_execute("SET statement_timeout = '200ms'")
            .map_err(backend)
    };
    store.raw_reader(shorten).unwrap();
    reader.raw(shorten).unwrap();

    let mut holder = foreign(&url);
    holder
        .batch_execute("BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    for stuck in [store.last_position(), reader.last_position()] {
        match stuck {
            Err(StoreError::Backend(why)) => assert!(why.contains("57014"), "{why}"),
            other => panic!("a stuck read must fail: {other:?}"),
        }
    }
    holder.batch_execute("ROLLBACK").unwrap();
    assert_eq!(store.last_position().unwrap(), 0);
    assert_eq!(reader.last_position().unwrap(), 0);
}

#[test]
fn only_lock_not_available_is_a_wait() {
    assert_eq!(
        classify(Some(&SqlState::LOCK_NOT_AVAILABLE)),
        BeginFailure::LockBusy
    );
    for other in [
        SqlState::QUERY_CANCELED,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::ADMIN_SHUTDOWN,
    ] {
        assert_eq!(classify(Some(&other)), BeginFailure::Other);
    }
    assert_eq!(classify(None), BeginFailure::Other);
}

#[test]
fn begin_locks_the_writer_key() {
    assert!(BEGIN.ends_with(&format!("pg_advisory_xact_lock({WRITER_LOCK})")));
}
