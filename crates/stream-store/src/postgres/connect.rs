//! How to reach the server: the parsed URL, its transport as
//! [`tls::policy`] decides it, and a label for errors that names the
//! database but never the password. Every connection, the writing store's
//! and the read-only one's, is made here.

use postgres::Client;
use postgres::config::{Host, SslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls;
use crate::StoreError;

/// The transport [`tls::policy`] chose, ready to connect with.
#[derive(Clone)]
enum Link {
    Plain,
    Tls(MakeRustlsConnect),
}

/// Connects, again whenever a connection is lost.
#[derive(Clone)]
pub(crate) struct Connector {
    config: postgres::Config,
    link: Link,
    /// Run after every connection (timeouts, the reader's `LISTEN`).
    setup: String,
    /// `postgres://host:port/dbname`: no user, no password.
    label: String,
}

impl Connector {
    /// Parses a libpq-style URL or key/value string and decides its
    /// transport; a refused one is refused here, before any connection.
    /// The error never repeats the URL (it holds a password).
    pub(crate) fn parse(url: &str) -> Result<Self, StoreError> {
        let (mut config, transport) = tls::decide(url)?;
        let link = match transport {
            tls::Transport::Plain => {
                config.ssl_mode(SslMode::Disable);
                Link::Plain
            }
            // TLS or nothing: the client never falls back under `require`.
            tls::Transport::Tls(roots) => {
                config.ssl_mode(SslMode::Require);
                Link::Tls(tls::connector(&roots)?)
            }
        };
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
            link,
            setup: String::new(),
            label,
        })
    }

    /// The same server, running `setup` after each connection.
    pub(crate) fn with_setup(&self, setup: String) -> Self {
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
        let client = match &self.link {
            Link::Plain => self.config.connect(postgres::NoTls),
            Link::Tls(tls) => self.config.connect(tls.clone()),
        }
        .map_err(|e| connect_error(&self.label, &e))?;
        let mut client = client;
        if !self.setup.is_empty() {
            client.batch_execute(&self.setup).map_err(super::backend)?;
        }
        Ok(client)
    }
}

/// A connection failure, naming the server and what went wrong, with the
/// cause the client's message leaves out ("server does not support TLS",
/// a certificate's issuer unknown). The client's messages carry no password.
fn connect_error(label: &str, e: &postgres::Error) -> StoreError {
    let cause = match (e.as_db_error(), std::error::Error::source(e)) {
        (None, Some(cause)) => format!(": {cause}"),
        (Some(_), _) | (None, None) => String::new(),
    };
    StoreError::Backend(format!(
        "cannot connect to {label}: {}{cause}",
        super::describe(e)
    ))
}
