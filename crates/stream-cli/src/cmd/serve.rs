//! `thestream serve [--drain | --standby]`: ingress, the consumer and
//! delivery, under the store's serve lease (`stream_store::lease`): one
//! serve per bot. A second one exits 2 naming the holder; a standby waits
//! and takes over when the holder ends; a serve that loses its lease (its
//! PostgreSQL session gone) exits 1 at once, since another may take over.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use stream_declarations::registry::RegistryError;
use stream_engine::active::ActiveError;
use stream_engine::serve::{ServeError, connect, drain, run as run_forever};
use stream_engine::{EngineError, EngineSettings, IngressSettings, ProviderSettings};
use stream_store::{Recovery, Store};

use crate::Ctx;
use crate::config::{Config, TelegramMode};
use crate::exit::{CmdResult, Failure};
use crate::store::{lease_lost, take_lease, wait_for_lease};

/// `serve` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Handle every update, run and delivery available now, then exit 0.
    #[arg(long, conflicts_with = "standby")]
    drain: bool,
    /// Wait for the serve that holds this store to end, then take over.
    #[arg(long)]
    standby: bool,
}

/// What a refused serve is told to do.
const SECOND_SERVE: &str = "one serve per bot: stop it first, or start this one with `serve --standby` to take over when it ends";

/// The worker binary beside the running `thestream`.
pub fn default_worker() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| Failure::runtime(anyhow!("cannot locate thestream: {e}")))?;
    Ok(exe.with_file_name("thestream-worker"))
}

/// The engine settings of a config.
pub fn engine_settings(config: &Config) -> Result<EngineSettings, Failure> {
    let api = config.provider.api;
    let compat = config.provider.compat;
    let ingress = match config.telegram.mode {
        TelegramMode::Polling => IngressSettings::Polling,
        TelegramMode::Webhook => IngressSettings::Webhook {
            listen: config.telegram.webhook_listen.parse().map_err(|_| {
                Failure::usage(anyhow!("telegram.webhook_listen: not an address:port"))
            })?,
            secret_env: config.telegram.webhook_secret_env.clone(),
        },
    };
    let worker = match &config.sandbox.worker {
        Some(path) => path.clone(),
        None => default_worker()?,
    };
    if !worker.is_file() {
        return Err(Failure::usage(anyhow!(
            "the worker binary {} is missing; build it with `cargo build --release --bins`",
            worker.display()
        )));
    }
    let replies = match &config.agent.replies {
        Some(path) => path.clone(),
        None => config
            .agent
            .declaration
            .with_file_name("telegram-replies.v2.yaml"),
    };
    let context = config.context("serve")?;
    Ok(EngineSettings {
        context_root: context.root.clone(),
        max_memory_bytes: context.max_memory_bytes,
        lock_dir: config.data_dir.join("locks"),
        trusted_keys: config.trusted_keys(),
        telegram_api_base_url: config.telegram.api_base_url.clone(),
        bot_token_env: config.telegram.bot_token_env.clone(),
        owner_user_id: config.telegram.owner_user_id,
        ingress,
        provider: ProviderSettings {
            api,
            base_url: config.provider.base_url.clone(),
            model: config.provider.model.clone(),
            api_key_env: config.provider.api_key_env.clone(),
            compat,
        },
        declaration: config.agent.declaration.clone(),
        replies_declaration: replies,
        worker,
        allow_unenforced_sandbox: config.sandbox.allow_unenforced,
        max_attempts: 3,
        retry_backoff: Duration::from_millis(500),
        provider_timeout: config.provider.timeout_secs.duration(),
    })
}

fn failure(e: ServeError, store: &str) -> Failure {
    match e {
        ServeError::Secret { .. } => Failure::usage(e),
        // The store failed under the registry (a full disk at start): as
        // any store error, never a usage error.
        ServeError::Engine(EngineError::Active(
            ActiveError::Store(s) | ActiveError::Registry(RegistryError::Store(s)),
        )) => Failure::of_store(store, s),
        ServeError::Engine(EngineError::Declaration(_))
        | ServeError::Engine(EngineError::Active(
            ActiveError::OtherActive { .. } | ActiveError::Registry(_),
        ))
        | ServeError::Engine(EngineError::Broker(_))
        | ServeError::Engine(EngineError::Unservable { .. }) => Failure::usage(e),
        ServeError::Engine(EngineError::Store(s)) => Failure::of_store(store, s),
        ServeError::Engine(_)
        | ServeError::Api(_)
        | ServeError::Ingress(_)
        | ServeError::Delivery(_)
        | ServeError::TaskEnded { .. }
        | ServeError::Webhook(_)
        | ServeError::Cooperation(_) => Failure::runtime(e),
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
    tracing::info!("shutting down");
}

/// Runs `serve`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    if config.telegram.owner_user_id <= 0 {
        return Err(Failure::usage(anyhow!(
            "telegram.owner_user_id is not set, so nobody would be served: run `thestream pair` first"
        )));
    }
    let settings = engine_settings(&config)?;
    let opened = super::open_store(&config)?;
    let label = opened.label();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the runtime: {e}")))?;
    let lease = if args.standby {
        let waited = runtime.block_on(async {
            tokio::select! {
                lease = wait_for_lease(&opened) => Some(lease),
                () = shutdown_signal() => None,
            }
        });
        match waited {
            Some(lease) => lease?,
            None => return Ok(()),
        }
    } else {
        take_lease(&opened, SECOND_SERVE)?
    };
    let store: Arc<dyn Store> = Arc::new(opened);
    let served = runtime.block_on(async {
        let serving = async {
            let connected = connect(Arc::clone(&store), settings.clone())
                .await
                .map_err(|e| failure(e, &label))?;
            if args.drain {
                let report = drain(connected, &settings)
                    .await
                    .map_err(|e| failure(e, &label))?;
                println!(
                    "drained: {} updates stored, {} messages handled ({} runs completed, {} failed), {} replies delivered",
                    report.stored,
                    report.processed.triggers,
                    report.processed.completed,
                    report.processed.failed,
                    report.delivered
                );
                Ok(())
            } else {
                run_forever(connected, settings, shutdown_signal())
                    .await
                    .map_err(|e| failure(e, &label))
            }
        };
        tokio::select! {
            served = serving => Ok(served),
            lost = lease_lost(&lease) => Err(lost),
        }
    });
    match served {
        Ok(served) => {
            stopped_by_disk(store.as_ref(), &label)?;
            served
        }
        Err(lost) => {
            tracing::error!(error = %lost, "stopping at once: another serve may take over");
            // Like a crash, which the store's transactions are made for:
            // waiting for a run in flight would let two serves overlap.
            runtime.shutdown_background();
            Err(Failure::runtime(lost))
        }
    }
}

/// Whichever task noticed it first, a store stopped by its disk (a failed
/// sync: docs/operating.md, "A failing disk") ends `serve` with exit 1 and
/// this message naming the store; systemd restarts it and the restart
/// re-reads the store from disk.
fn stopped_by_disk(store: &dyn Store, label: &str) -> CmdResult {
    match store.data_version() {
        Err(e) => match e.recovery() {
            Recovery::Stop => Err(Failure::runtime(anyhow!(
                "serve stopped: the store {label} cannot be trusted after this failure; \
                 a restart re-reads it from disk: {e}"
            ))),
            Recovery::Retry | Recovery::AwaitSpace => Ok(()),
        },
        Ok(_) => Ok(()),
    }
}
