//! The serve lease on both backends: one holder at a time, the others told
//! who holds it; freed with the holder; and on PostgreSQL a session ended
//! by the server is a lost lease its holder notices, and frees the lock.

use std::time::{Duration, Instant};

use stream_store::pgtest::{fresh_url, server};
use stream_store::{LeaseAttempt, LeaseHolder, LeaseState, PostgresStore, SqliteStore};

fn holder(pid: u32) -> LeaseHolder {
    LeaseHolder {
        host: "box".into(),
        pid,
        started: "2026-01-02T03:04:05Z".into(),
    }
}

fn held(attempt: LeaseAttempt) -> stream_store::Lease {
    match attempt {
        LeaseAttempt::Held(lease) => lease,
        LeaseAttempt::Taken(by) => panic!("taken by {by:?}"),
    }
}

fn taken(attempt: LeaseAttempt) -> Option<LeaseHolder> {
    match attempt {
        LeaseAttempt::Taken(by) => by,
        LeaseAttempt::Held(lease) => panic!("two holders: {:?}", lease.holder()),
    }
}

#[test]
fn a_sqlite_lease_has_one_holder_named_to_the_others_and_frees_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let (a, b) = (
        SqliteStore::open(&path).unwrap(),
        SqliteStore::open(&path).unwrap(),
    );
    let first = held(a.try_lease(holder(1)).unwrap());
    assert_eq!(taken(b.try_lease(holder(2)).unwrap()), Some(holder(1)));
    assert_eq!(b.lease_state().unwrap(), LeaseState::Taken(Some(holder(1))));
    drop(first);
    assert_eq!(b.lease_state().unwrap(), LeaseState::Free);
    let second = held(b.try_lease(holder(2)).unwrap());
    assert!(second.check().is_ok());
    assert_eq!(taken(a.try_lease(holder(3)).unwrap()), Some(holder(2)));
}

#[test]
fn a_postgres_lease_has_one_holder_named_to_the_others_and_frees_with_it() {
    let Some(url) = fresh_url() else { return };
    let (a, b) = (
        PostgresStore::open(&url).unwrap(),
        PostgresStore::open(&url).unwrap(),
    );
    assert_eq!(b.lease_state().unwrap(), LeaseState::Free);
    let first = held(a.try_lease(holder(1)).unwrap());
    assert_eq!(taken(b.try_lease(holder(2)).unwrap()), Some(holder(1)));
    assert_eq!(b.lease_state().unwrap(), LeaseState::Taken(Some(holder(1))));
    // Asking again and again keeps one session: a standby asks every 250 ms.
    for _ in 0..5 {
        assert_eq!(taken(b.try_lease(holder(2)).unwrap()), Some(holder(1)));
    }
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let sessions: i64 = server()
        .unwrap()
        .admin()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = 'thestream-lease'",
            &[&db],
        )
        .unwrap()
        .get(0);
    assert_eq!(sessions, 2, "the holder's and one asker's");
    // The same store asking again is refused too: the lock is the session's.
    assert_eq!(taken(a.try_lease(holder(3)).unwrap()), Some(holder(1)));
    assert!(first.check().is_ok());
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(5);
    let second = loop {
        match b.try_lease(holder(2)).unwrap() {
            LeaseAttempt::Held(lease) => break lease,
            LeaseAttempt::Taken(_) => {
                assert!(Instant::now() < deadline, "freed when dropped");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert_eq!(second.holder(), &holder(2));
}

/// The server ends the lease's session (as it does for a lost connection
/// or a host gone silent): the holder learns it has lost the lease, and
/// another takes it at once.
#[test]
fn a_postgres_lease_whose_session_ends_is_lost_and_taken_by_the_next() {
    let Some(url) = fresh_url() else { return };
    let (a, b) = (
        PostgresStore::open(&url).unwrap(),
        PostgresStore::open(&url).unwrap(),
    );
    let first = held(a.try_lease(holder(1)).unwrap());
    let db = url.rsplit("dbname=").next().unwrap().to_owned();
    let ended: i64 = server()
        .unwrap()
        .admin()
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = 'thestream-lease') t",
            &[&db],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 1, "the lease's session was ended");
    let deadline = Instant::now() + Duration::from_secs(5);
    let lost = loop {
        match first.check() {
            Err(lost) => break lost,
            Ok(()) => {
                assert!(Instant::now() < deadline, "the loss is noticed");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(lost.to_string().contains("lease"), "{lost}");
    assert!(!lost.to_string().contains("password"), "{lost}");
    let second = held(b.try_lease(holder(2)).unwrap());
    assert_eq!(
        stream_store::Read::control(&b, stream_store::LEASE_ROW).unwrap(),
        Some(serde_json::to_value(holder(2)).unwrap())
    );
    drop(second);
}
