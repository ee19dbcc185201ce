//! `thestream serve`: ingress, the consumer and delivery together.
//!
//! With `drain`, it handles every update available now, every pending run
//! and every pending delivery, then returns. Without it, it runs until the
//! shutdown future completes; the consumer and delivery wake on a short
//! tick, so a stored update is answered without waiting for a restart.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stream_store::Store;
use stream_telegram::{
    BotApi, BotToken, ClientOptions, DeliveryOptions, DeliveryReport, Ingress, IngressConfig,
    PollMode, PollingOptions, WebhookOptions, WebhookSecret, deliver_pending, run_polling,
    webhook_router,
};

use crate::engine::{Engine, EngineError, ProcessReport};
use crate::settings::{EngineSettings, IngressSettings};

/// Why `serve` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// An environment variable the config names is unset or malformed.
    #[error("environment variable {name} is unset or malformed")]
    Secret {
        /// The variable's NAME (never its value).
        name: String,
    },
    /// Telegram could not be reached or refused us.
    #[error("telegram: {0}")]
    Telegram(String),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The webhook server failed.
    #[error("webhook server: {0:?}")]
    Webhook(std::io::ErrorKind),
}

/// What a drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Updates stored by ingress.
    pub stored: u64,
    /// The consumer's passes, summed.
    pub processed: ProcessReport,
    /// Replies delivered.
    pub delivered: u64,
}

fn secret(name: &str) -> Result<String, ServeError> {
    std::env::var(name).map_err(|_| ServeError::Secret {
        name: name.to_owned(),
    })
}

/// Connects to Telegram (getMe) and builds the engine for its source.
pub async fn connect(
    store: Arc<dyn Store>,
    settings: EngineSettings,
) -> Result<(Arc<Ingress>, Engine), ServeError> {
    let token =
        BotToken::new(secret(&settings.bot_token_env)?).map_err(|_| ServeError::Secret {
            name: settings.bot_token_env.clone(),
        })?;
    let api = BotApi::new(
        &settings.telegram_api_base_url,
        token,
        ClientOptions::default(),
    )
    .map_err(|e| ServeError::Telegram(e.code().to_owned()))?;
    let ingress = Ingress::connect(
        Arc::clone(&store),
        api,
        IngressConfig::for_owner(settings.owner_user_id),
    )
    .await
    .map_err(|e| ServeError::Telegram(e.to_string()))?;
    let engine = Engine::new(store, settings, ingress.source().clone())?;
    Ok((Arc::new(ingress), engine))
}

async fn deliver(ingress: &Ingress, engine: &Engine) -> Result<DeliveryReport, ServeError> {
    deliver_pending(
        engine.store(),
        ingress.api(),
        ingress.source(),
        &DeliveryOptions::default(),
    )
    .await
    .map_err(|e| ServeError::Telegram(e.to_string()))
}

/// Handles everything available now, then returns: repeats ingress (in
/// polling mode), the consumer and delivery until a whole pass finds
/// nothing to do.
pub async fn drain(
    ingress: &Ingress,
    engine: &Engine,
    settings: &EngineSettings,
) -> Result<DrainReport, ServeError> {
    let mut report = DrainReport::default();
    loop {
        let stored = match settings.ingress {
            IngressSettings::Polling => {
                run_polling(
                    ingress,
                    &PollingOptions::default(),
                    PollMode::Drain,
                    std::future::pending(),
                )
                .await
                .map_err(|e| ServeError::Telegram(e.to_string()))?
                .stored
            }
            // A webhook drain handles what is stored; Telegram keeps pushing.
            IngressSettings::Webhook { .. } => 0,
        };
        let processed = engine.process_available().await?;
        let delivered = deliver(ingress, engine).await?;
        report.stored += stored;
        report.processed.triggers += processed.triggers;
        report.processed.completed += processed.completed;
        report.processed.failed += processed.failed;
        report.processed.stages.add(processed.stages);
        report.delivered += delivered.sent;
        if stored == 0 && processed.triggers == 0 && delivered.sent == 0 {
            return Ok(report);
        }
    }
}

/// Runs until `shutdown` completes.
pub async fn run(
    ingress: Arc<Ingress>,
    engine: Engine,
    settings: EngineSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let ingress_task = {
        let ingress = Arc::clone(&ingress);
        let rx = stop_rx.clone();
        match settings.ingress.clone() {
            IngressSettings::Polling => tokio::spawn(async move {
                run_polling(
                    &ingress,
                    &PollingOptions::default(),
                    PollMode::UntilShutdown,
                    stopped(rx),
                )
                .await
                .map(|_| ())
                .map_err(|e| ServeError::Telegram(e.to_string()))
            }),
            IngressSettings::Webhook { listen, secret_env } => {
                let secret =
                    WebhookSecret::new(secret(&secret_env)?).map_err(|_| ServeError::Secret {
                        name: secret_env.clone(),
                    })?;
                let router = webhook_router(Arc::clone(&ingress), WebhookOptions::new(secret));
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .map_err(|e| ServeError::Webhook(e.kind()))?;
                tokio::spawn(async move { axum_serve(listener, router, stopped(rx)).await })
            }
        }
    };
    let work = async {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stopped(stop_rx.clone()) => return Ok::<(), ServeError>(()),
            }
            if let Err(e) = engine.process_available().await {
                tracing::error!(error = %e, "consumer pass failed; retrying");
            }
            if let Err(e) = deliver(&ingress, &engine).await {
                tracing::warn!(error = %e, "delivery pass failed; retrying");
            }
        }
    };
    let shutdown = async {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let (work, (), ingress) = tokio::join!(work, shutdown, ingress_task);
    work?;
    ingress.map_err(|_| ServeError::Telegram("ingress task panicked".into()))?
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| ServeError::Webhook(e.kind()))
}
