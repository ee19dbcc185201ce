//! How to reach the server: the parsed URL, TLS when the URL asks for it,
//! and a label for errors that names the database but never the password.

use std::sync::Arc;

use postgres::Client;
use postgres::config::{Host, SslMode};
use rustls_platform_verifier::BuilderVerifierExt;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// Connects, again whenever a connection is lost.
#[derive(Clone)]
pub(crate) struct Connector {
    config: postgres::Config,
    /// Run after every connection (the reader's `LISTEN`).
    setup: &'static str,
    /// `postgres://host:port/dbname`: no user, no password.
    label: String,
}

impl Connector {
    /// Parses a libpq-style URL or key/value string. The error never
    /// repeats the URL (it holds a password).
    pub(crate) fn parse(url: &str) -> Result<Self, StoreError> {
        let mut config: postgres::Config = url.parse().map_err(|_| {
            StoreError::Backend("the database URL does not parse as a PostgreSQL URL".into())
        })?;
        // Named in pg_stat_activity, unless the URL names it.
        if config.get_application_name().is_none() {
            config.application_name("thestream");
        }
        let host = config
            .get_hosts()
            .first()
            .map(|h| match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let db = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres");
        let label = format!("postgres://{host}:{port}/{db}");
        Ok(Self {
            config,
            setup: "",
            label,
        })
    }

    /// The same server, running `setup` after each connection.
    pub(crate) fn with_setup(&self, setup: &'static str) -> Self {
        Self {
            setup,
            ..self.clone()
        }
    }

    /// Where, for messages: never the user or password.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    pub(crate) fn connect(&self) -> Result<Client, StoreError> {
        let client = match self.config.get_ssl_mode() {
            SslMode::Disable => self.config.connect(postgres::NoTls),
            // `prefer` falls back to plain text when the server has no TLS;
            // `require` refuses to. Certificates are checked with the
            // platform's roots, as for the provider.
            _ => self.config.connect(tls()?),
        }
        .map_err(|e| connect_error(&self.label, &e))?;
        let mut client = client;
        if !self.setup.is_empty() {
            client.batch_execute(self.setup).map_err(super::backend)?;
        }
        Ok(client)
    }
}

fn tls() -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| StoreError::Backend(format!("TLS setup failed: {e}")))?
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// A connection failure, naming the server and what went wrong (the
/// client's messages carry no password).
fn connect_error(label: &str, e: &postgres::Error) -> StoreError {
    StoreError::Backend(format!("cannot connect to {label}: {}", super::describe(e)))
}
