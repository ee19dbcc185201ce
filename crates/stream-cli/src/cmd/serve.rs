//! `thestream serve [--drain]`: ingress, the consumer and delivery.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use stream_core::payload::ProviderApi;
use stream_engine::active::ActiveError;
use stream_engine::serve::{ServeError, connect, drain, run as run_forever};
use stream_engine::{
    EngineError, EngineSettings, IngressSettings, ProviderCompat, ProviderSettings,
};
use stream_store::Store;

use crate::Ctx;
use crate::config::{Config, TelegramMode};
use crate::exit::{CmdResult, Failure};

/// `serve` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Handle every update, run and delivery available now, then exit 0.
    #[arg(long)]
    drain: bool,
}

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
    if api == ProviderApi::AnthropicMessages && compat != ProviderCompat::Openai {
        return Err(Failure::usage(anyhow!(
            "provider.compat: {:?} applies to api = \"openai-chat\" only",
            compat.as_str()
        )));
    }
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

fn failure(e: ServeError) -> Failure {
    match e {
        ServeError::Secret { .. } => Failure::usage(e),
        ServeError::Engine(EngineError::Declaration(_))
        | ServeError::Engine(EngineError::Active(
            ActiveError::OtherActive { .. } | ActiveError::Registry(_),
        ))
        | ServeError::Engine(EngineError::Broker(_))
        | ServeError::Engine(EngineError::Unservable { .. }) => Failure::usage(e),
        ServeError::Engine(EngineError::Store(s)) => s.into(),
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
    let store: Arc<dyn Store> = Arc::new(super::open_store(&config)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let connected = connect(store, settings.clone()).await.map_err(failure)?;
        if args.drain {
            let report = drain(connected, &settings).await.map_err(failure)?;
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
            run_forever(connected, settings, shutdown_signal()).await.map_err(failure)
        }
    })
}
