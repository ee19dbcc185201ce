//! TLS that cannot be stripped, against the plain-text test server: with
//! no `sslmode` the store demands TLS and the server's refusal ends the
//! open; `sslmode=disable` to loopback is the only way to plain text, and
//! modes that fall back to it are refused before connecting. Skipped,
//! saying why, where no server can be had (`stream_store::pgtest`).

use std::time::{Duration, Instant};

use stream_store::pgtest::fresh_url;
use stream_store::{PostgresStore, StoreError, TlsRefusal};

const CANARY: &str = "canary-pw-7c21";

/// The test server speaks no TLS: without `sslmode` (and with every mode
/// that means TLS) the open fails naming TLS, not the password; the same
/// URL with `sslmode=disable` opens.
#[test]
fn no_sslmode_demands_tls_of_the_plain_test_server() {
    let Some(url) = fresh_url() else { return };
    PostgresStore::open(&url).unwrap();
    let with_password = url.replace("sslmode=disable", &format!("password={CANARY}"));
    assert_ne!(with_password, url);
    if with_password.contains("host=/") {
        // A Unix socket: PostgreSQL offers no TLS there, nor does libpq ask.
        eprintln!("the test server is on a Unix socket; run under scripts/with-postgres for TCP");
        PostgresStore::open(&with_password).unwrap();
        return;
    }
    for url in [
        with_password.clone(),
        format!("{with_password} sslmode=require"),
        format!("{with_password} sslmode=verify-ca"),
        format!("{with_password} sslmode=verify-full"),
    ] {
        let refused = PostgresStore::open(&url).unwrap_err();
        let text = format!("{refused} {refused:?}");
        assert!(matches!(refused, StoreError::Backend(_)), "{text}");
        assert!(text.contains("server does not support TLS"), "{text}");
        assert!(!text.contains(CANARY), "{text}");
    }
    PostgresStore::open(&format!("{with_password} sslmode=disable")).unwrap();
}

/// `prefer` and `allow` would open on this server in plain text; they are
/// refused by name instead.
#[test]
fn prefer_and_allow_are_refused_by_name() {
    let Some(url) = fresh_url() else { return };
    for mode in ["prefer", "allow"] {
        let url = url.replace("sslmode=disable", &format!("sslmode={mode}"));
        let refused = PostgresStore::open(&url).unwrap_err();
        assert!(
            matches!(refused, StoreError::Tls(TlsRefusal::MayFallBack(m)) if m == mode),
            "{refused:?}"
        );
        assert!(refused.to_string().contains(&format!("sslmode={mode}")));
    }
}

/// `disable` to another machine is refused before any connection: the
/// address (TEST-NET-1) is never tried, which would take the timeout.
#[test]
fn disable_to_another_machine_is_refused_before_connecting() {
    let started = Instant::now();
    for url in [
        format!("host=192.0.2.1 user=u password={CANARY} sslmode=disable connect_timeout=30"),
        format!("postgres://u:{CANARY}@db.example/x?sslmode=disable"),
    ] {
        let refused = PostgresStore::open(&url).unwrap_err();
        assert!(
            matches!(refused, StoreError::Tls(TlsRefusal::PlainOffMachine)),
            "{refused:?}"
        );
        let text = refused.to_string();
        assert!(text.contains("sslmode=disable"), "{text}");
        assert!(!text.contains(CANARY), "{text}");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}
