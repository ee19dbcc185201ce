//! The policy table: each mode against TCP, loopback and socket hosts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use super::*;

/// A private CA's certificate (self-signed, P-256), for `sslrootcert`.
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBkDCCATWgAwIBAgIUW0LnLI/yuG8mXG1KHhcGTmxEPoAwCgYIKoZIzj0EAwIw
HDEaMBgGA1UEAwwRdGhlc3RyZWFtIHRlc3QgQ0EwIBcNMjYxMjA2MjMxMzMzWhgP
MjEyNjExMTIyMzEzMzNaMBwxGjAYBgNVBAMMEXRoZXN0cmVhbSB0ZXN0IENBMFkw
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE142oGmG9ms7aj15q5fKR6OMdFnL4kUM6
+V8vokC7JEOVtrXkDGKhf2pvVcwROQzOutUni3t5ZZqNgEQcJ0iv96NTMFEwHQYD
VR0OBBYEFJT6nD1RW9SpJWO6gGb4vgIJqA77MB8GA1UdIwQYMBaAFJT6nD1RW9Sp
JWO6gGb4vgIJqA77MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIh
AIP+h6lbvecESIwtamsiVSUNiRzpqWILtNmk0Vl7ttBFAiEAyCk8Xmk3Xfc8duQP
hVLVoJ+S7Mlpy0WjTdCNco7hFo0=
-----END CERTIFICATE-----
";

fn transport(url: &str) -> Result<Transport, TlsRefusal> {
    match decide(url) {
        Ok((_, transport)) => Ok(transport),
        Err(StoreError::Tls(refusal)) => Err(refusal),
        Err(other) => panic!("{url}: {other}"),
    }
}

const TLS: Result<Transport, TlsRefusal> = Ok(Transport::Tls(Roots::Platform));
const PLAIN: Result<Transport, TlsRefusal> = Ok(Transport::Plain);

#[test]
fn no_sslmode_to_a_tcp_host_means_verify_full() {
    for url in [
        "postgres://u:pw@db.example:5432/thestream",
        "postgresql://db.example/thestream?application_name=x",
        "postgres://u:pw@localhost/thestream",
        "postgres://u:pw@127.0.0.1:5432/thestream",
        "host=db.example user=u password=pw dbname=thestream",
        "host=127.0.0.1 port=5432 user=u",
        "host=localhost,/run/postgresql user=u",
        "hostaddr=10.1.2.3 user=u",
    ] {
        assert_eq!(transport(url), TLS, "{url}");
    }
}

#[test]
fn require_verify_ca_and_verify_full_all_mean_tls_with_every_check() {
    for mode in ["require", "verify-ca", "verify-full"] {
        for url in [
            format!("postgres://u:pw@db.example/x?sslmode={mode}"),
            format!("host=db.example sslmode={mode}"),
            // Asked for, TLS is required even where it cannot be had.
            format!("host=/run/postgresql sslmode={mode}"),
        ] {
            assert_eq!(transport(&url), TLS, "{url}");
        }
    }
}

#[test]
fn disable_is_plain_text_only_to_this_machine() {
    for url in [
        "postgres://u:pw@localhost/x?sslmode=disable",
        "postgres://u:pw@LocalHost:5433/x?sslmode=disable",
        "postgres://u:pw@127.0.0.1/x?sslmode=disable",
        "postgres://u:pw@127.200.3.4/x?sslmode=disable",
        "postgres://u:pw@[::1]:5432/x?sslmode=disable",
        "postgres://u:pw@localhost,127.0.0.2/x?sslmode=disable",
        "postgres:///x?host=%2Frun%2Fpostgresql&sslmode=disable",
        "host=/run/postgresql sslmode=disable",
        "host=::1 sslmode=disable",
        "host=localhost hostaddr=127.0.0.1 sslmode=disable",
        "hostaddr=127.0.0.1 sslmode=disable",
    ] {
        assert_eq!(transport(url), PLAIN, "{url}");
    }
    for url in [
        "postgres://u:pw@db.example/x?sslmode=disable",
        "postgres://u:pw@10.0.0.1/x?sslmode=disable",
        "postgres://u:pw@128.0.0.1/x?sslmode=disable",
        "postgres://u:pw@[::2]/x?sslmode=disable",
        "postgres://u:pw@[::ffff:127.0.0.1]/x?sslmode=disable",
        "postgres://u:pw@localhost.example/x?sslmode=disable",
        "postgres://u:pw@localhost,db.example/x?sslmode=disable",
        "host=localhost hostaddr=10.0.0.1 sslmode=disable",
        "host=/run/postgresql,db.example sslmode=disable",
        "user=u sslmode=disable",
    ] {
        assert_eq!(transport(url), Err(TlsRefusal::PlainOffMachine), "{url}");
    }
}

#[test]
fn a_unix_socket_without_sslmode_is_plain_text() {
    assert_eq!(transport("host=/run/postgresql user=u"), PLAIN);
    assert_eq!(
        transport("postgresql:///x?host=/tmp/pg&user=u"),
        PLAIN,
        "the socket named in the query"
    );
}

#[test]
fn prefer_and_allow_are_refused_by_name() {
    for mode in ["prefer", "allow"] {
        for url in [
            format!("postgres://u:pw@db.example/x?sslmode={mode}"),
            format!("postgres://u:pw@localhost/x?sslmode={mode}"),
            format!("host=/run/postgresql sslmode={mode}"),
            format!("host=db.example sslmode = '{mode}'"),
        ] {
            let refused = transport(&url).unwrap_err();
            assert!(matches!(refused, TlsRefusal::MayFallBack(m) if m == mode));
            let text = StoreError::from(refused).to_string();
            assert!(text.contains(&format!("sslmode={mode}")), "{text}");
        }
    }
}

#[test]
fn an_unknown_mode_is_refused_without_repeating_it() {
    for url in [
        "postgres://u:pw@db.example/x?sslmode=canary-mode",
        "postgres://u:pw@db.example/x?sslmode=",
        "host=db.example sslmode=Disable",
    ] {
        let refused = transport(url).unwrap_err();
        assert_eq!(refused, TlsRefusal::UnknownMode, "{url}");
        assert!(!refused.to_string().contains("canary"));
    }
}

#[test]
fn the_last_sslmode_wins_as_in_libpq() {
    assert_eq!(
        transport("postgres://u@db.example/x?sslmode=disable&sslmode=verify-full"),
        TLS
    );
    assert_eq!(
        transport("host=db.example sslmode=verify-full sslmode=prefer"),
        Err(TlsRefusal::MayFallBack("prefer"))
    );
}

#[test]
fn sslrootcert_is_accepted_and_names_the_only_roots() {
    let file = Ok(Transport::Tls(Roots::File(PathBuf::from(
        "/etc/ca dir/ca.pem",
    ))));
    for url in [
        "postgres://u:pw@db.example/x?sslrootcert=/etc/ca%20dir/ca.pem",
        "postgres://u:pw@db.example/x?sslmode=verify-full&sslrootcert=/etc/ca%20dir/ca.pem",
        "host=db.example sslrootcert='/etc/ca dir/ca.pem' sslmode=verify-full",
    ] {
        assert_eq!(transport(url), file, "{url}");
    }
    // Beside plain text to this machine, it is unused.
    assert_eq!(
        transport("host=localhost sslmode=disable sslrootcert=/nowhere"),
        PLAIN
    );
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, CA_PEM).unwrap();
    connector(&Roots::File(ca.clone())).unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    for (path, why) in [
        (dir.path().join("missing.pem"), "No such file"),
        (junk, "holds no PEM certificate"),
    ] {
        let Err(refused) = connector(&Roots::File(path.clone())) else {
            panic!("{} accepted", path.display());
        };
        let text = refused.to_string();
        assert!(matches!(
            refused,
            StoreError::Tls(TlsRefusal::RootCert { .. })
        ));
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(why), "{text}");
    }
}

#[test]
fn everything_but_the_tls_parameters_reaches_the_client_library() {
    let (config, _) = decide(
        "postgres://u:p%40ss@db.example:6543/the%20db?sslmode=verify-full&application_name=app&connect_timeout=7",
    )
    .unwrap();
    assert_eq!(config.get_user(), Some("u"));
    assert_eq!(config.get_password(), Some(&b"p@ss"[..]));
    assert_eq!(config.get_dbname(), Some("the db"));
    assert_eq!(config.get_ports(), &[6543]);
    assert_eq!(config.get_application_name(), Some("app"));
    assert_eq!(
        config.get_connect_timeout(),
        Some(&std::time::Duration::from_secs(7))
    );
    let (config, _) =
        decide(r"host=db.example password='it\'s a \\ pass' sslrootcert=/ca.pem dbname = store")
            .unwrap();
    assert_eq!(config.get_password(), Some(&br"it's a \ pass"[..]));
    assert_eq!(config.get_dbname(), Some("store"));
    assert!(decide("host=db.example password='unterminated").is_err());
    assert!(decide("host=db.example sslmode").is_err());
}
