//! TLS that cannot be stripped, against the plain-text test server: with
//! no `sslmode` the store demands TLS and the server's refusal ends the
//! open; `sslmode=disable` to loopback is the only way to plain text, and
//! modes that fall back to it are refused before connecting. Skipped,
//! saying why, where no server can be had (`stream_store::pgtest`). And
//! against a loopback server that speaks TLS with a private CA's
//! certificate (`tests/fixtures/tls`): `sslrootcert` is what it takes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

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

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// A server on 127.0.0.1 that accepts PostgreSQL's TLS request, does the
/// handshake with the private CA's `localhost` certificate and reports the
/// startup message it then reads (or why the handshake failed), closing
/// each connection after that.
fn tls_server() -> (u16, mpsc::Receiver<Result<Vec<u8>, String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cert = CertificateDer::from_pem_file(fixture("server.pem")).unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let config = Arc::new(config);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut tcp) = stream else { return };
            let mut request = [0u8; 8];
            let answered = tcp
                .read_exact(&mut request)
                .and_then(|()| tcp.write_all(b"S"));
            if answered.is_err() || request != [0, 0, 0, 8, 4, 210, 22, 47] {
                let _ = tx.send(Err(format!("no TLS request: {request:?}")));
                continue;
            }
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut len = [0u8; 4];
            let startup = tls.read_exact(&mut len).and_then(|()| {
                let mut body = vec![0; u32::from_be_bytes(len) as usize - 4];
                tls.read_exact(&mut body).map(|()| body)
            });
            if tx.send(startup.map_err(|e| e.to_string())).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

/// With `sslrootcert` naming the private CA, the chain verifies and the
/// startup message (user, database) crosses inside TLS; with the
/// platform's roots, or a host the certificate does not name, the
/// handshake fails and nothing is sent.
#[test]
fn sslrootcert_verifies_a_private_ca_and_the_host_name_is_still_checked() {
    let (port, seen) = tls_server();
    let ca = fixture("ca.pem");
    let base = format!("port={port} user=canary-user password={CANARY} dbname=store");
    let through = |url: String| {
        let refused = PostgresStore::open(&url).unwrap_err();
        let text = format!("{refused} {refused:?}");
        assert!(!text.contains(CANARY), "{text}");
        let got = seen.recv_timeout(Duration::from_secs(10)).unwrap();
        while seen.try_recv().is_ok() {}
        (text, got)
    };

    let (text, got) = through(format!(
        "host=localhost {base} sslrootcert={}",
        ca.display()
    ));
    let startup = got.unwrap();
    assert!(
        startup.windows(11).any(|w| w == b"canary-user"),
        "the startup message arrived inside TLS: {startup:?}"
    );
    assert!(!text.contains("TLS handshake"), "{text}");

    let (text, got) = through(format!("host=localhost {base}"));
    // The CA is no platform root (the issuer is unknown).
    assert!(text.contains("TLS handshake"), "{text}");
    assert!(got.is_err(), "{got:?}");

    let (text, got) = through(format!(
        "host=127.0.0.1 {base} sslmode=verify-ca sslrootcert={}",
        ca.display()
    ));
    assert!(text.contains("TLS handshake"), "{text}");
    assert!(text.contains("not valid for name"), "{text}");
    assert!(got.is_err(), "{got:?}");
}
