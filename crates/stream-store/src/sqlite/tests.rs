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
