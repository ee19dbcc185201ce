//! docs/postgres.md's three least-privilege roles, made by that page's own
//! statements on a fresh database: each does what its machine needs and
//! nothing more. Skipped, saying why, without a server.

use serde_json::json;
use stream_store::conformance::event;
use stream_store::pgtest::{fresh_url, server};
use stream_store::{AppendOutcome, PostgresStore, Read, ReadOnlyStore, Store};

/// The SQLSTATE of `sql` run as the role of `url`, `None` when it succeeds.
fn refusal(url: &str, sql: &str) -> Option<String> {
    let config: postgres::Config = url.parse().unwrap();
    let mut client = config.connect(postgres::NoTls).unwrap();
    client
        .batch_execute(sql)
        .err()
        .map(|e| e.code().map(|c| c.code().to_owned()).unwrap_or_default())
}

/// `thestream_serve` creates the schema and writes; `thestream_review`
/// opens the current schema, appends (a new source and an existing one)
/// and can neither change the schema nor delete or rewrite a row;
/// `thestream_inspect` opens read-only and reads, and writes nothing even
/// in a transaction that asks to.
#[test]
fn roles_have_the_least_privilege_they_need() {
    let Some(url) = fresh_url() else { return };
    let server = server().unwrap();
    let roles = server.least_privilege_roles(&url);

    let serve = PostgresStore::open(&roles.serve).unwrap();
    serve.append(&event("test:a", "0", json!(0))).unwrap();
    server.grant_after_first_serve(&roles);

    let review = PostgresStore::open(&roles.review).unwrap();
    assert_eq!(
        review
            .append(&event("test:decisions", "1", json!(1)))
            .unwrap(),
        AppendOutcome::Inserted { seq: 1 }
    );
    assert_eq!(
        review.append(&event("test:a", "2", json!(2))).unwrap(),
        AppendOutcome::Inserted { seq: 2 }
    );
    assert_eq!(serve.last_position().unwrap(), 3);
    for sql in [
        "CREATE TABLE notes (x int)",
        "ALTER TABLE events ADD COLUMN x int",
        "DROP TABLE controls",
        "TRUNCATE events",
        "DELETE FROM events",
        "UPDATE events SET type = 'x'",
        "INSERT INTO controls (key, value) VALUES ('k', '1')",
    ] {
        assert_eq!(
            refusal(&roles.review, sql).as_deref(),
            Some("42501"),
            "review: {sql}"
        );
    }

    let inspect = ReadOnlyStore::open_postgres(&roles.inspect).unwrap();
    assert_eq!(inspect.last_position().unwrap(), 3);
    assert!(inspect.usage().unwrap().events >= 3);
    for sql in [
        "BEGIN READ WRITE; INSERT INTO controls (key, value) VALUES ('k', '1')",
        "BEGIN READ WRITE; UPDATE source_heads SET head = 0",
        "CREATE TABLE notes (x int)",
    ] {
        assert_eq!(
            refusal(&roles.inspect, sql).as_deref(),
            Some("42501"),
            "inspect: {sql}"
        );
    }
    assert!(
        PostgresStore::open(&roles.inspect)
            .and_then(|s| s.append(&event("test:a", "3", json!(3))))
            .is_err(),
        "the inspect role appends nothing"
    );
    assert_eq!(serve.last_position().unwrap(), 3);
}
