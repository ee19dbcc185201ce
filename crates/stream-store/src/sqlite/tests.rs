//! Unit tests of the SQLite backend's own rules (query plans, statements).

use super::*;

/// Delivery lists the sources on every pass: that must cost a seek per
/// source, never a walk over every event.
#[test]
fn listing_sources_seeks_the_index_instead_of_scanning_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    assert!(store.sources().unwrap().is_empty());
    let plan: Vec<String> = store.with_reader(|c| {
        let mut stmt = c
            .prepare(&format!("EXPLAIN QUERY PLAN {SOURCES_SQL}"))
            .unwrap();
        stmt.query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    });
    assert!(plan.iter().any(|step| step.starts_with("SEARCH events")));
    assert!(
        plan.iter().all(|step| !step.starts_with("SCAN events")),
        "{plan:?}"
    );
}

/// Reads by source and by type seek their indexes through the code of the
/// name (schema 12), reads by one root or several seek the root index, and
/// every read fetches the names and a text by key.
#[test]
fn reads_by_source_type_and_roots_seek_their_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let source = SourceName::new("telegram:1".to_owned()).unwrap();
    let root = EventId::from_bytes([1; 32]);
    let other = EventId::from_bytes([2; 32]);
    let queries = [
        (
            EventQuery::source_after(&source, 3),
            "sqlite_autoindex_events_2 (source=? AND seq>?)",
        ),
        (EventQuery::of_type("test.event"), "events_by_type (type=?)"),
        (EventQuery::rooted_at(&root), "events_by_root (root=?)"),
        (
            EventQuery::rooted_at_any(vec![root.clone(), other]),
            "events_by_root (root=?)",
        ),
    ];
    for (query, index) in queries {
        let (sql, args) = crate::sqlite::events::query_sql(&query).unwrap();
        let plan: Vec<String> = store.with_reader(|c| {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            stmt.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        });
        assert!(
            plan.iter()
                .any(|step| step.starts_with("SEARCH e USING INDEX") && step.ends_with(index)),
            "{plan:?}"
        );
        // Only the list of roots itself is scanned.
        assert!(
            plan.iter()
                .all(|step| !step.starts_with("SCAN") || step.starts_with("SCAN rarray VIRTUAL")),
            "{plan:?}"
        );
    }
}

/// The bundled SQLite is built with `SQLITE_ENABLE_STAT4`, under which a
/// statement whose WHERE binds an indexed column is compiled again at every
/// step after new bindings: the statement cache saved nothing, and a
/// running `serve` spent 7 % of its CPU parsing SQL. With the query
/// planner stability guarantee a cached statement is compiled once. (The
/// store never runs ANALYZE, so no plan depended on the bindings anyway.)
#[test]
fn a_cached_statement_is_not_compiled_again_for_new_bindings() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    for c in [&store.reader, &store.writer] {
        let c = lock(c);
        let sql = "SELECT pos FROM events WHERE source = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";
        for (source, after) in [("a", 0), ("b", 1), ("a", 2)] {
            let mut stmt = c.prepare_cached(sql).unwrap();
            let rows = stmt
                .query_map(params![source, after, 64], |_| Ok(()))
                .unwrap()
                .count();
            assert_eq!(rows, 0);
            assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0);
        }
    }
}

/// Paging by position seeks the rowid b-tree from the position on; the
/// last position is read from its end: neither walks the history.
#[test]
fn reading_by_position_seeks_the_rowid() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    for (sql, args, expected) in [
        (
            crate::sqlite::events::EVENTS_AFTER_POSITION.as_str(),
            &[1, 100][..],
            "SEARCH e USING INTEGER PRIMARY KEY (rowid>?)",
        ),
        (
            "SELECT COALESCE(MAX(pos), 0) FROM events",
            &[],
            "SEARCH events",
        ),
    ] {
        let plan: Vec<String> = store.with_reader(|c| {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            stmt.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        });
        assert!(plan.iter().any(|step| step == expected), "{plan:?}");
        assert!(
            plan.iter().all(|step| !step.starts_with("SCAN")),
            "{plan:?}"
        );
    }
}

fn sqlite_failure(code: i32) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
}

/// One row per class of docs/operating.md's failing-disk policy: SQLite's
/// unix VFS reports ENOSPC on a write as `SQLITE_FULL` and a failed
/// `fsync` as `SQLITE_IOERR_FSYNC`; every other I/O error stops serve.
#[test]
fn disk_faults_are_classified_and_an_unnamed_io_error_stops() {
    use rusqlite::ffi;
    let rows = [
        (
            ffi::SQLITE_FULL,
            Some(DiskFault::Full),
            Recovery::AwaitSpace,
        ),
        (
            ffi::SQLITE_IOERR_FSYNC,
            Some(DiskFault::Sync),
            Recovery::Stop,
        ),
        (
            ffi::SQLITE_IOERR_DIR_FSYNC,
            Some(DiskFault::Sync),
            Recovery::Stop,
        ),
        (ffi::SQLITE_IOERR_WRITE, Some(DiskFault::Io), Recovery::Stop),
        (ffi::SQLITE_IOERR_READ, Some(DiskFault::Io), Recovery::Stop),
        (
            ffi::SQLITE_IOERR_SHORT_READ,
            Some(DiskFault::Io),
            Recovery::Stop,
        ),
        (ffi::SQLITE_IOERR, Some(DiskFault::Io), Recovery::Stop),
        // An extended code this build does not know is still an I/O error.
        (
            ffi::SQLITE_IOERR | (250 << 8),
            Some(DiskFault::Io),
            Recovery::Stop,
        ),
        (ffi::SQLITE_BUSY, None, Recovery::Retry),
        (ffi::SQLITE_CONSTRAINT, None, Recovery::Retry),
    ];
    for (code, fault, recovery) in rows {
        let e = backend(sqlite_failure(code));
        match (&e, fault) {
            (
                StoreError::Disk {
                    fault: got,
                    code: c,
                },
                Some(want),
            ) => {
                assert_eq!((*got, *c), (want, code), "code {code}");
            }
            (StoreError::Backend(_), None) => {}
            (other, _) => panic!("code {code}: {other:?}"),
        }
        assert_eq!(e.recovery(), recovery, "code {code}");
    }
}

/// After a failed sync nothing more is begun or committed through the
/// store, not even a transaction already open; a full disk stops nothing.
#[test]
fn a_failed_sync_stops_the_store_and_a_full_disk_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).unwrap();
    let full = store.seen::<()>(Err(backend(sqlite_failure(rusqlite::ffi::SQLITE_FULL))));
    assert!(matches!(
        full,
        Err(StoreError::Disk {
            fault: DiskFault::Full,
            ..
        })
    ));
    let mut tx = store.begin().unwrap();
    tx.set_control("k", &serde_json::json!(1)).unwrap();
    tx.commit().unwrap();

    let mut open = store.begin().unwrap();
    open.set_control("k", &serde_json::json!(2)).unwrap();
    let sync = sqlite_failure(rusqlite::ffi::SQLITE_IOERR_FSYNC);
    let _ = store.seen::<()>(Err(backend(sync)));
    let stopped = |r: Result<(), StoreError>| {
        assert!(
            matches!(
                r,
                Err(StoreError::Disk {
                    fault: DiskFault::Sync,
                    ..
                })
            ),
            "{r:?}"
        );
    };
    stopped(open.commit());
    stopped(store.begin().map(drop));
    stopped(store.data_version().map(drop));
    assert_eq!(store.control("k").unwrap(), Some(serde_json::json!(1)));
}
