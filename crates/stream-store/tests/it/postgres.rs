//! The PostgreSQL backend: the conformance suite on a fresh database each,
//! and what only a server can answer (two processes racing one id, a
//! connection dropped mid-transaction, a foreign or newer schema, commits
//! noticed from another connection). Skipped, saying why, where no server
//! can be had (`stream_store::pgtest`).

use std::time::Duration;

use serde_json::json;
use stream_core::SourceName;
use stream_store::conformance::event;
use stream_store::pgtest::{fresh_url, server};
use stream_store::{AppendOutcome, EventQuery, PostgresStore, Read, Store, StoreError};

use crate::common::{child_role, race, spawn_child};

fn fresh() -> Option<PostgresStore> {
    fresh_url().map(|url| PostgresStore::open(&url).unwrap())
}

mod conformance {
    stream_store::conformance_suite!(optional: super::fresh());
}

const ENTRY: &str = "postgres::child_process_entry";

/// Not a test of its own: the body a child process runs, chosen by env var.
#[test]
fn child_process_entry() {
    let Some((role, url_file, arg)) = child_role() else {
        return;
    };
    let url = std::fs::read_to_string(&url_file).unwrap();
    let store = PostgresStore::open(&url).unwrap();
    match role.as_str() {
        "race" => race(&store, &url_file.with_extension("go"), &arg),
        other => panic!("unknown role {other}"),
    }
}

/// Two processes, one id: identical payloads converge (one inserts), and
/// different payloads conflict (one wins); seq stays gap-free.
#[test]
fn two_processes_racing_one_id_leave_one_event() {
    let Some(url) = fresh_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    std::fs::write(&url_file, &url).unwrap();
    for (round, payloads) in [("same", ["p", "p"]), ("differ", ["a", "b"])] {
        let _ = std::fs::remove_file(url_file.with_extension("go"));
        let children: Vec<_> = payloads
            .iter()
            .map(|p| spawn_child(ENTRY, "race", &url_file, &format!("{round}/{p}")))
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        std::fs::write(url_file.with_extension("go"), "").unwrap();
        let mut outcomes: Vec<String> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(out.status.success(), "child failed");
                let text = String::from_utf8(out.stdout).unwrap();
                text.lines()
                    .find_map(|l| l.split_once("OUTCOME ").map(|(_, o)| o.trim().to_owned()))
                    .unwrap_or_else(|| panic!("no outcome in {text}"))
            })
            .collect();
        outcomes.sort();
        let expected = match round {
            "same" => ["converged", "inserted"],
            _ => ["conflict", "inserted"],
        };
        assert_eq!(outcomes, expected, "round {round}");
    }
    let store = PostgresStore::open(&url).unwrap();
    let source = SourceName::new("test:race").unwrap();
    let events = store.events(&EventQuery::source_after(&source, 0)).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
}

/// The server ends the writer's session in the middle of a transaction:
/// nothing of it is left, the transaction refuses to go on outside itself,
/// and the next transaction reconnects and commits.
#[test]
fn a_connection_dropped_mid_transaction_leaves_nothing() {
    let Some(url) = fresh_url() else { return };
    let store = PostgresStore::open(&url).unwrap();
    let mut tx = store.begin().unwrap();
    tx.append(&event("test:drop", "1", json!(1))).unwrap();
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let ended: i64 = server()
        .unwrap()
        .admin()
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND state LIKE 'idle in transaction%') t",
            &[&db],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "the writer's session was ended");
    std::thread::sleep(Duration::from_millis(100));
    let after = tx.append(&event("test:drop", "2", json!(2)));
    assert!(matches!(after, Err(StoreError::Backend(_))), "{after:?}");
    assert!(tx.commit().is_err());
    let source = SourceName::new("test:drop").unwrap();
    assert_eq!(store.source_head(&source).unwrap(), 0);
    assert!(
        store
            .events(&EventQuery::source_after(&source, 0))
            .unwrap()
            .is_empty()
    );
    let outcome = store.append(&event("test:drop", "3", json!(3))).unwrap();
    assert_eq!(outcome, AppendOutcome::Inserted { seq: 1 });
}

/// A database holding another application's tables is refused untouched;
/// so is a thestream schema newer than this build.
#[test]
fn a_foreign_database_or_newer_schema_is_refused_untouched() {
    let Some(url) = fresh_url() else { return };
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    client
        .batch_execute("CREATE TABLE customers (id int); INSERT INTO customers VALUES (7)")
        .unwrap();
    let refused = PostgresStore::open(&url);
    assert!(
        matches!(refused, Err(StoreError::ForeignDatabase { .. })),
        "{refused:?}"
    );
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was created");

    let Some(url) = fresh_url() else { return };
    drop(PostgresStore::open(&url).unwrap());
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    client
        .batch_execute("UPDATE thestream_schema SET version = version + 1")
        .unwrap();
    let refused = PostgresStore::open(&url);
    assert!(
        matches!(refused, Err(StoreError::NewerSchema { .. })),
        "{refused:?}"
    );
}

/// Another application's table in a schema of its own, off the search
/// path, is seen too: the database is refused untouched, by the writing
/// open and the read-only one. An empty schema holds no table.
#[test]
fn a_table_in_another_schema_makes_the_database_foreign() {
    let Some(url) = fresh_url() else { return };
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    client.batch_execute("CREATE SCHEMA empty_one").unwrap();
    drop(PostgresStore::open(&url).unwrap());

    let Some(url) = fresh_url() else { return };
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    client
        .batch_execute("CREATE SCHEMA billing; CREATE TABLE billing.invoices (id int)")
        .unwrap();
    let refused = PostgresStore::open(&url);
    assert!(
        matches!(refused, Err(StoreError::ForeignDatabase { .. })),
        "{refused:?}"
    );
    let refused = stream_store::ReadOnlyStore::open_postgres(&url);
    assert!(
        matches!(refused, Err(StoreError::ForeignDatabase { .. })),
        "{refused:?}"
    );
    let ours: bool = client
        .query_one("SELECT to_regclass('public.thestream_schema') IS NULL", &[])
        .unwrap()
        .get(0);
    assert!(ours, "nothing was created");
}

/// An empty database is migrated at open, once, however many processes
/// open it; a second open finds it current.
#[test]
fn an_empty_database_is_migrated_at_open() {
    let Some(url) = fresh_url() else { return };
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PostgresStore::open(&url).map(drop))
        })
        .collect();
    for open in opens {
        open.join().unwrap().unwrap();
    }
    let store = PostgresStore::open(&url).unwrap();
    assert!(store.sources().unwrap().is_empty());
    let config: postgres::Config = url.parse().unwrap();
    let version: i32 = config
        .connect(postgres::NoTls)
        .unwrap()
        .query_one("SELECT version FROM thestream_schema", &[])
        .unwrap()
        .get(0);
    assert_eq!(version as u32, stream_store::PG_SCHEMA_VERSION);
}

/// A commit made through another connection changes `data_version`.
#[test]
fn data_version_notices_another_connections_commit() {
    let Some(url) = fresh_url() else { return };
    let watcher = PostgresStore::open(&url).unwrap();
    let writer = PostgresStore::open(&url).unwrap();
    let before = watcher.data_version().unwrap();
    assert_eq!(watcher.data_version().unwrap(), before, "nothing committed");
    writer.append(&event("test:dv", "1", json!(1))).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while watcher.data_version().unwrap() == before {
        assert!(std::time::Instant::now() < deadline, "commit not noticed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// No error repeats the URL's password: a failed connection, a URL that
/// does not parse, and every TLS refusal.
#[test]
fn errors_never_repeat_the_password() {
    let canary = "canary-pw-5f3a";
    for url in [
        format!("postgres://someone:{canary}@127.0.0.1:1/nowhere"),
        format!("postgres://someone:{canary}@127.0.0.1:1/nowhere?sslmode=disable"),
        format!("postgres://someone:{canary}@127.0.0.1:1/nowhere?sslmode=bogus"),
        format!("postgres://someone:{canary}@127.0.0.1:1/nowhere?sslmode=prefer"),
        format!("postgres://someone:{canary}@db.example:1/nowhere?sslmode=allow"),
        format!("postgres://someone:{canary}@db.example:1/nowhere?sslmode=disable"),
        format!("postgres://someone:{canary}@db.example:1/x?sslrootcert=/nowhere/ca.pem"),
        format!("host=127.0.0.1 port=1 password={canary} user=someone"),
        format!("host=10.0.0.1 port=1 password='{canary}' sslmode=disable"),
        format!("host=127.0.0.1 port=1 password={canary} sslmode=prefer"),
        format!("host=127.0.0.1 port=1 password='{canary} with space"),
    ] {
        let error = PostgresStore::open(&url).unwrap_err();
        assert!(!format!("{error} {error:?}").contains(canary), "{error}");
    }
}

/// The reader's connection ended by the server: the next `data_version`
/// reconnects (listening again) and reports a change, since commits made
/// meanwhile sent notifications nobody heard.
#[test]
fn data_version_changes_when_the_reader_reconnects() {
    let Some(url) = fresh_url() else { return };
    let watcher = PostgresStore::open(&url).unwrap();
    let before = watcher.data_version().unwrap();
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let mut admin = server().unwrap().admin();
    let ended: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = 'thestream-listener') t",
            &[&db],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "the reader's session was ended");
    std::thread::sleep(Duration::from_millis(100));
    // The first call may meet the dead connection; the next reconnects.
    let after = watcher
        .data_version()
        .or_else(|_| watcher.data_version())
        .unwrap();
    assert_ne!(after, before);
    PostgresStore::open(&url)
        .unwrap()
        .append(&event("test:dv", "1", json!(1)))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while watcher.data_version().unwrap() == after {
        assert!(std::time::Instant::now() < deadline, "listening again");
        std::thread::sleep(Duration::from_millis(10));
    }
}
