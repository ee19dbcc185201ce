//! `inspect`: the read-only inspector (`stream_inspect`) over the configured
//! store opened read-only, on a loopback port by default, until SIGTERM or
//! SIGINT.
//!
//! It holds no credential: started with the Telegram token, the webhook
//! secret or the provider key in its environment, it first replaces itself
//! (`exec`) by the same command without them, so neither its memory nor its
//! `/proc/PID/environ` holds one. It never opens the context root.

use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;

use anyhow::anyhow;
use stream_inspect::{Access, App, InspectStore, Serving, Settings, Token};
use stream_store::Read;

use crate::Ctx;
use crate::config::Config;
use crate::exit::{CmdResult, Failure};

/// `inspect` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address and port to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// Allow a listen address other than loopback (the page shows
    /// sensitive text to whoever holds the printed URL).
    #[arg(long)]
    allow_remote: bool,
    /// Open the printed URL in the desktop's browser.
    #[arg(long)]
    open: bool,
}

/// The variables that hold credentials the inspector must not hold.
fn credential_variables(config: &Config) -> Vec<&str> {
    [
        config.telegram.bot_token_env.as_str(),
        config.telegram.webhook_secret_env.as_str(),
        config.provider.api_key_env.as_str(),
    ]
    .into_iter()
    .filter(|name| !name.is_empty() && std::env::var_os(name).is_some())
    .collect()
}

/// Replaces this process by itself without the credential variables; returns
/// only when none is set.
fn shed_credentials(config: &Config) -> Result<(), Failure> {
    let set = credential_variables(config);
    if set.is_empty() {
        return Ok(());
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::runtime(anyhow!("cannot locate thestream: {e}")))?;
    let mut again = std::process::Command::new(exe);
    again.args(std::env::args_os().skip(1));
    for name in set {
        again.env_remove(name);
    }
    let error = again.exec();
    Err(Failure::runtime(anyhow!(
        "cannot restart the inspector without its credential variables: {error}"
    )))
}

/// The `Host` values that name this server.
fn hosts(addr: SocketAddr) -> Vec<String> {
    let mut hosts = vec![addr.to_string()];
    if addr.ip().is_loopback() {
        hosts.push(format!("localhost:{}", addr.port()));
    }
    hosts
}

/// The health strip's view of `serve`: the engine's status row of the
/// active consumer and the delivery outbox.
fn serving(store: &dyn Read) -> Serving {
    let active = stream_engine::active::active(store).ok().flatten();
    let status = stream_engine::cooperation::serving_status(store);
    let (serve, worker_bundle, telegram) = match status {
        Ok(Some(s)) => (
            format!("running (pid {})", s.process.pid),
            Some(s.worker_bundle_sha256.to_string()),
            Some(s.telegram_source),
        ),
        Ok(None) => ("not running".to_owned(), None, None),
        Err(_) => (
            "unknown (its status row is unreadable)".to_owned(),
            None,
            None,
        ),
    };
    let deliveries_pending =
        telegram.and_then(|source| stream_telegram::delivery::pending_count(store, &source).ok());
    Serving {
        serve,
        active: active.map(|a| format!("{} v{}", a.id, a.version)),
        worker_bundle,
        deliveries_pending,
    }
}

/// Runs `inspect`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    shed_credentials(&config)?;
    let remote = !args.listen.ip().is_loopback();
    if remote && !args.allow_remote {
        return Err(Failure::usage(anyhow!(
            "--listen {} is not a loopback address: add --allow-remote to serve it (whoever reaches the port with the printed URL reads sensitive text)",
            args.listen
        )));
    }
    let store: Box<dyn InspectStore> = Box::new(crate::store::open_read_only(&config)?);
    let settings = Settings {
        compat: config.provider.compat,
        provider: Some((config.provider.api, config.provider.model.clone())),
        declaration: stream_declarations::LoadedDeclaration::load(&config.agent.declaration)
            .ok()
            .map(std::sync::Arc::new),
        trusted: config.trusted_keys(),
        probe: serving,
        ..Settings::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| Failure::runtime(anyhow!("cannot listen on {}: {e}", args.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::runtime(anyhow!("cannot read the listen address: {e}")))?;
        if remote {
            tracing::warn!(%addr, "the inspector listens beyond loopback: anyone who reaches it with the URL reads sensitive text");
        }
        let token = Token::random().map_err(|e| Failure::runtime(anyhow!("no randomness: {e}")))?;
        let url = format!("http://{addr}/?token={}", token.as_str());
        let app = App::new(Access::new(token, hosts(addr)), store, settings);
        let mut out = std::io::stdout().lock();
        writeln!(out, "inspector: {url}")
            .and_then(|()| out.flush())
            .map_err(|e| Failure::runtime(anyhow!("cannot print the URL: {e}")))?;
        drop(out);
        if args.open {
            // Best effort: a machine without a desktop still has the URL.
            let _ = std::process::Command::new("xdg-open").arg(&url).spawn();
        }
        stream_inspect::serve(listener, app, stop_signal())
            .await
            .map_err(|e| Failure::runtime(anyhow!("the inspector stopped: {e}")))
    })
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
