//! `ReadOnlyStore` on PostgreSQL: an empty database is no store and stays
//! empty, an older or newer schema is refused, a role granted only
//! `SELECT` follows a writer's commits (docs/postgres.md's inspector role),
//! and no error repeats the URL. Skipped, saying why, without a server.

use std::time::{Duration, Instant};

use serde_json::json;
use stream_store::conformance::event;
use stream_store::pgtest::{fresh_url, server};
use stream_store::{PG_SCHEMA_VERSION, PostgresStore, Read, ReadOnlyStore, Store, StoreError};

fn tables(url: &str) -> i64 {
    let config: postgres::Config = url.parse().unwrap();
    config
        .connect(postgres::NoTls)
        .unwrap()
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0)
}

fn set_version(url: &str, version: u32) {
    let config: postgres::Config = url.parse().unwrap();
    config
        .connect(postgres::NoTls)
        .unwrap()
        .execute(
            "UPDATE thestream_schema SET version = $1",
            &[&(version as i32)],
        )
        .unwrap();
}

#[test]
fn an_empty_database_is_no_store_and_stays_empty() {
    let Some(url) = fresh_url() else { return };
    let err = ReadOnlyStore::open_postgres(&url).unwrap_err();
    assert!(matches!(err, StoreError::NoStore { .. }), "{err:?}");
    assert!(err.to_string().contains("serve"), "{err}");
    assert_eq!(tables(&url), 0, "no DDL");
}

#[test]
fn an_older_or_newer_schema_is_refused_read_only() {
    let Some(url) = fresh_url() else { return };
    drop(PostgresStore::open(&url).unwrap());
    set_version(&url, PG_SCHEMA_VERSION - 1);
    let err = ReadOnlyStore::open_postgres(&url).unwrap_err();
    assert!(
        matches!(err, StoreError::OlderSchema { found, supported }
            if found == PG_SCHEMA_VERSION - 1 && supported == PG_SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(err.to_string().contains("serve"), "{err}");
    set_version(&url, PG_SCHEMA_VERSION + 1);
    let err = ReadOnlyStore::open_postgres(&url).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err:?}");
    set_version(&url, PG_SCHEMA_VERSION);
    ReadOnlyStore::open_postgres(&url).unwrap();
}

/// The role docs/postgres.md gives the inspector: `SELECT` on the store's
/// tables and nothing else. Opened as it, the read-only store sees each
/// commit of a writer (`data_version`, then `events_after_position`) and
/// reports usage; the role itself cannot write, even in a transaction
/// that asks to.
#[test]
fn a_select_only_role_follows_each_commit() {
    let Some(url) = fresh_url() else { return };
    let writer = PostgresStore::open(&url).unwrap();
    writer.append(&event("test:a", "0", json!(0))).unwrap();
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let role = format!("{db}_inspector");
    let config: postgres::Config = url.parse().unwrap();
    let mut owner = config.connect(postgres::NoTls).unwrap();
    owner
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; \
             GRANT USAGE ON SCHEMA public TO {role}; \
             GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};"
        ))
        .unwrap();
    let user = server()
        .unwrap()
        .admin()
        .query_one("SELECT current_user::text", &[])
        .unwrap()
        .get::<_, String>(0);
    let role_url = url.replace(&format!("user={user}"), &format!("user={role}"));
    assert_ne!(role_url, url);
    let ro = ReadOnlyStore::open_postgres(&role_url).unwrap();
    assert!(ro.usage().unwrap().events >= 1);
    let mut seen = ro.last_position().unwrap();
    let mut version = ro.data_version().unwrap();
    for i in 1..=5 {
        let e = event("test:b", &i.to_string(), json!(i));
        writer.append(&e).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while ro.data_version().unwrap() == version {
            assert!(Instant::now() < deadline, "commit {i} not noticed");
            std::thread::sleep(Duration::from_millis(5));
        }
        version = ro.data_version().unwrap();
        let page = ro.events_after_position(seen, 100).unwrap();
        assert_eq!(page.len(), 1, "commit {i}");
        assert_eq!(page[0].event.event, e);
        seen = page[0].position;
    }
    let role_config: postgres::Config = role_url.parse().unwrap();
    let mut as_role = role_config.connect(postgres::NoTls).unwrap();
    let denied = as_role
        .batch_execute("BEGIN READ WRITE; INSERT INTO controls (key, value) VALUES ('k', '1')")
        .unwrap_err();
    assert_eq!(denied.code().map(|c| c.code()), Some("42501"), "{denied}");
}

/// No error of a read-only open repeats the URL's password.
#[test]
fn read_only_errors_never_repeat_the_password() {
    let canary = "canary-pw-ro-31c8";
    for url in [
        format!("postgres://someone:{canary}@127.0.0.1:1/nowhere"),
        format!("host=127.0.0.1 port=1 password={canary} user=someone"),
        format!("postgres://someone:{canary}@[bad"),
    ] {
        let error = ReadOnlyStore::open_postgres(&url).unwrap_err();
        assert!(!format!("{error} {error:?}").contains(canary), "{error}");
    }
    let Some(url) = fresh_url() else { return };
    let url = format!("{url} password={canary}");
    let error = ReadOnlyStore::open_postgres(&url).unwrap_err();
    assert!(matches!(error, StoreError::NoStore { .. }), "{error:?}");
    assert!(!format!("{error} {error:?}").contains(canary), "{error}");
    drop(PostgresStore::open(&url).unwrap());
    let store = ReadOnlyStore::open_postgres(&url).unwrap();
    assert!(!format!("{store:?}").contains(canary));
}
