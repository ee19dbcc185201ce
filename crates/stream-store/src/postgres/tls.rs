//! The TLS policy of a database URL: TLS with the server's certificate and
//! name checked unless the URL says `sslmode=disable` to this machine, and
//! never a mode that falls back to plain text when the server (or a proxy
//! in between) declines TLS (docs/postgres.md, "TLS").
//!
//! The client library knows only `disable`, `prefer` and `require`, and no
//! `sslrootcert`: [`split`] takes both out of the URL before it is parsed,
//! and [`policy`] decides.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use postgres::config::Host;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls_platform_verifier::BuilderVerifierExt;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// Why a URL's TLS setting is refused. Names the mode, never the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsRefusal {
    /// `prefer` or `allow`: plain text whenever the server declines TLS.
    #[error(
        "sslmode={0} falls back to plain text when the server declines TLS; \
         remove it (TLS with the certificate and host name checked is the default)"
    )]
    MayFallBack(&'static str),
    /// `disable` to a host that is not this machine.
    #[error(
        "sslmode=disable is allowed only to this machine: a loopback host \
         (127.0.0.0/8, ::1, localhost) or a Unix socket"
    )]
    PlainOffMachine,
    /// A value libpq does not define.
    #[error("sslmode is not one of verify-full, verify-ca, require, disable")]
    UnknownMode,
    /// The `sslrootcert` file cannot give roots.
    #[error("sslrootcert {path}: {why}")]
    RootCert {
        /// The file, as the URL names it.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// The URL's `sslmode`, as libpq spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Unset,
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Self, TlsRefusal> {
        Ok(match value {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            // Not echoed: a mangled URL could put anything here.
            _ => return Err(TlsRefusal::UnknownMode),
        })
    }
}

/// Whose certificates the server's chain must lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Roots {
    Platform,
    /// `sslrootcert`: a private CA's certificates, and only those.
    File(PathBuf),
}

/// How connections to the URL's server are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Plain text: only ever to this machine.
    Plain,
    /// TLS or no connection; the chain and the host name are verified.
    Tls(Roots),
}

/// What [`split`] took out of the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsParams {
    pub mode: Mode,
    pub rootcert: Option<PathBuf>,
}

/// The URL's client configuration (its TLS parameters taken out) and the
/// transport [`policy`] decides for it.
pub(crate) fn decide(url: &str) -> Result<(postgres::Config, Transport), StoreError> {
    let unparsable =
        || StoreError::Backend("the database URL does not parse as a PostgreSQL URL".into());
    let (rest, taken) = split(url).ok_or_else(unparsable)?;
    let config: postgres::Config = rest.parse().map_err(|_| unparsable())?;
    let transport = policy(&params(&taken)?, &config)?;
    Ok((config, transport))
}

/// The TLS policy: the one place a URL's transport is decided. Every mode
/// is named; what is not plainly safe is refused.
fn policy(params: &TlsParams, config: &postgres::Config) -> Result<Transport, TlsRefusal> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let roots = match &params.rootcert {
        Some(path) => Roots::File(path.clone()),
        None => Roots::Platform,
    };
    match params.mode {
        // PostgreSQL offers no TLS on a Unix socket, and libpq does not
        // ask there: nothing crosses a network.
        Mode::Unset if only_sockets(hosts, addrs) => Ok(Transport::Plain),
        // rustls always checks the host name, so `require` and `verify-ca`
        // are as strict as `verify-full` (stricter than libpq's).
        Mode::Unset | Mode::Require | Mode::VerifyCa | Mode::VerifyFull => {
            Ok(Transport::Tls(roots))
        }
        Mode::Disable if this_machine(hosts, addrs) => Ok(Transport::Plain),
        Mode::Disable => Err(TlsRefusal::PlainOffMachine),
        Mode::Allow => Err(TlsRefusal::MayFallBack("allow")),
        Mode::Prefer => Err(TlsRefusal::MayFallBack("prefer")),
    }
}

fn only_sockets(hosts: &[Host], addrs: &[IpAddr]) -> bool {
    !hosts.is_empty() && addrs.is_empty() && hosts.iter().all(|h| matches!(h, Host::Unix(_)))
}

/// Every host and every address is this machine (none at all is not).
fn this_machine(hosts: &[Host], addrs: &[IpAddr]) -> bool {
    let host_is_local = |h: &Host| match h {
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
    };
    (!hosts.is_empty() || !addrs.is_empty())
        && hosts.iter().all(host_is_local)
        && addrs.iter().all(IpAddr::is_loopback)
}

/// Takes `sslmode` and `sslrootcert` out of a libpq URL or key/value
/// string, returning the rest for the client library to parse. `None`
/// when the string does not tokenize.
fn split(url: &str) -> Option<(String, Vec<(String, String)>)> {
    for prefix in ["postgres://", "postgresql://"] {
        if let Some(rest) = url.strip_prefix(prefix) {
            return Some(split_url(url, url.len() - rest.len()));
        }
    }
    split_key_values(url)
}

fn is_tls_key(key: &str) -> bool {
    key == "sslmode" || key == "sslrootcert"
}

/// The query of `postgres://…?k=v&…`, found as the client library finds
/// it: after the credentials (up to the first `@`), the first `?`.
fn split_url(url: &str, start: usize) -> (String, Vec<(String, String)>) {
    let rest = &url[start..];
    let after_credentials = start + rest.find('@').map_or(0, |i| i + 1);
    let Some(q) = url[after_credentials..]
        .find('?')
        .map(|i| after_credentials + i)
    else {
        return (url.to_owned(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for piece in url[q + 1..].split('&') {
        let decoded = piece.split_once('=').and_then(|(k, v)| {
            let k = percent_decode_str(k).decode_utf8().ok()?;
            let v = percent_decode_str(v).decode_utf8().ok()?;
            Some((k.into_owned(), v.into_owned()))
        });
        match decoded {
            Some((k, v)) if is_tls_key(&k) => taken.push((k, v)),
            // Left for the client library to parse, or to refuse.
            Some(_) | None => kept.push(piece),
        }
    }
    let mut out = url[..q].to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    (out, taken)
}

/// `k=v k='v w' …`, tokenized as the client library does; the rest is
/// written back with every value quoted.
fn split_key_values(s: &str) -> Option<(String, Vec<(String, String)>)> {
    let mut it = s.chars().peekable();
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut key = String::new();
        while let Some(c) = it.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        if key.is_empty() {
            break;
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        it.next_if_eq(&'=')?;
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let quoted = it.next_if_eq(&'\'').is_some();
        let mut value = String::new();
        loop {
            match it.peek().copied() {
                None if quoted => return None,
                None => break,
                Some('\'') if quoted => {
                    it.next();
                    break;
                }
                Some(c) if !quoted && c.is_whitespace() => break,
                Some('\\') => {
                    it.next();
                    value.extend(it.next());
                }
                Some(c) => {
                    it.next();
                    value.push(c);
                }
            }
        }
        if !quoted && value.is_empty() {
            return None;
        }
        if is_tls_key(&key) {
            taken.push((key, value));
        } else {
            let value = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{value}'"));
        }
    }
    Some((kept.join(" "), taken))
}

/// The taken parameters, the last of each winning as in libpq.
fn params(taken: &[(String, String)]) -> Result<TlsParams, TlsRefusal> {
    let mut params = TlsParams {
        mode: Mode::Unset,
        rootcert: None,
    };
    for (key, value) in taken {
        if key == "sslmode" {
            params.mode = Mode::parse(value)?;
        } else {
            params.rootcert = Some(PathBuf::from(value));
        }
    }
    Ok(params)
}

/// The TLS client for `roots`: rustls with the ring provider, the server's
/// chain verified to those roots and its name to the URL's host.
pub(crate) fn connector(roots: &Roots) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Backend(format!("TLS setup failed: {e}")))?;
    let config = match roots {
        Roots::Platform => builder
            .with_platform_verifier()
            .map_err(|e| StoreError::Backend(format!("TLS setup failed: {e}")))?,
        Roots::File(path) => builder.with_root_certificates(root_store(path)?),
    }
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn root_store(path: &std::path::Path) -> Result<rustls::RootCertStore, TlsRefusal> {
    let refuse = |why: String| TlsRefusal::RootCert {
        path: path.display().to_string(),
        why,
    };
    let bytes = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    let mut store = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| refuse(format!("not PEM certificates ({e})")))?;
        store
            .add(cert)
            .map_err(|e| refuse(format!("a certificate is not usable as a root ({e})")))?;
    }
    if store.is_empty() {
        return Err(refuse("holds no PEM certificate".into()));
    }
    Ok(store)
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
