//! `thestream serve`: ingress, the consumer and delivery together.
//!
//! With `drain`, it handles every update available now, every pending run
//! and every pending delivery, then returns. Without it, it runs until the
//! shutdown future completes; the consumer and delivery wake on a short
//! tick, so a stored update is answered without waiting for a restart.
//!
//! A running serve cooperates with `thestream activate` through the control
//! rows of [`crate::cooperation`], re-read at every tick before the consumer
//! may take a trigger: it reports its consumer `running` when its engine is
//! built (the readiness report); it obeys a stop request by answering every
//! trigger up to the frozen head (the run in flight included), taking no
//! more, and reporting `stopped`; and when the `active-declaration` row
//! names another declaration it rebuilds its engine from the files
//! activation installed, reporting the new consumer `running`. While the
//! active row names a declaration it cannot (yet) load, it takes no
//! trigger at all. Delivery never stops.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stream_store::Store;
use stream_telegram::{
    BotApi, BotToken, ClientOptions, DeliveryOptions, DeliveryReport, Ingress, IngressConfig,
    ListenerLimits, PollMode, PollingOptions, WebhookOptions, WebhookSecret, deliver_pending,
    run_polling, webhook_router,
};

use crate::active::active;
use crate::cooperation::{
    ConsumerRequest, ConsumerState, ConsumerStatus, CooperationError, ProcessEvidence,
    read_request, write_status,
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
    /// The serve's own process identity (for its status rows) is unavailable.
    #[error(transparent)]
    Cooperation(#[from] CooperationError),
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
        // A stop request of an activation bounds the consumer at the
        // frozen head, as it does a running serve.
        let processed = match read_request(engine.store().as_ref(), &engine.consumer())
            .map_err(EngineError::from)?
        {
            ConsumerRequest::Running {} => engine.process_available().await?,
            ConsumerRequest::Stopped { through_seq, .. } => {
                engine.process_through(through_seq).await?
            }
        };
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
    let mut follower = Follower::new(engine)?;
    let work = async {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stopped(stop_rx.clone()) => return Ok::<(), ServeError>(()),
            }
            if follower.cooperate().await {
                if let Err(e) = follower.engine.process_available().await {
                    tracing::error!(error = %e, "consumer pass failed; retrying");
                }
            }
            if let Err(e) = deliver(&ingress, &follower.engine).await {
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

/// The running serve's side of the cooperation with activation.
struct Follower {
    engine: Engine,
    process: ProcessEvidence,
    /// The state last written to the status row, `None` until written.
    reported: Option<(ConsumerState, Option<String>)>,
    /// The active declaration that could not be followed, to log it once.
    unfollowable: Option<crate::active::ActiveDeclaration>,
}

impl Follower {
    fn new(engine: Engine) -> Result<Self, ServeError> {
        let process = ProcessEvidence::current().map_err(CooperationError::from)?;
        let mut follower = Self {
            engine,
            process,
            reported: None,
            unfollowable: None,
        };
        follower.report(ConsumerState::Running, None);
        Ok(follower)
    }

    /// Writes the status row of the engine's consumer (once per change; a
    /// failed write is retried at the next tick).
    fn report(&mut self, state: ConsumerState, activation_id: Option<String>) {
        let wanted = (state, activation_id);
        if self.reported.as_ref() == Some(&wanted) {
            return;
        }
        let status = ConsumerStatus {
            state,
            activation_id: wanted.1.clone(),
            process: self.process.clone(),
            telegram_source: self.engine.telegram().clone(),
            worker_bundle_sha256: self.engine.worker_bundle().clone(),
            declaration_fingerprint: self.engine.active().fingerprint.clone(),
        };
        let consumer = self.engine.consumer();
        let written = (|| {
            let mut tx = self.engine.store().begin()?;
            write_status(&mut *tx, &consumer, &status)?;
            tx.commit()?;
            Ok::<(), CooperationError>(())
        })();
        match written {
            Ok(()) => {
                tracing::info!(consumer, state = ?state, "consumer status reported");
                self.reported = Some(wanted);
            }
            Err(e) => {
                tracing::error!(consumer, error = %e, "consumer status not written; retrying")
            }
        }
    }

    /// Follows the active declaration and obeys the consumer's request;
    /// `true` when the consumer may take triggers now. Anything unreadable
    /// fails closed: no trigger is taken until it reads again.
    async fn cooperate(&mut self) -> bool {
        let store = Arc::clone(self.engine.store());
        match active(store.as_ref()) {
            Ok(Some(now)) if now != *self.engine.active() => match self.engine.follow(&now) {
                Ok(next) => {
                    tracing::info!(
                        from = %self.engine.consumer(),
                        to = %next.consumer(),
                        "following the activation"
                    );
                    self.engine = next;
                    self.reported = None;
                    self.unfollowable = None;
                }
                Err(e) => {
                    if self.unfollowable.as_ref() != Some(&now) {
                        tracing::error!(
                            active = %now.consumer(),
                            error = %e,
                            "cannot follow the active declaration; taking no triggers"
                        );
                        self.unfollowable = Some(now);
                    }
                    return false;
                }
            },
            Ok(Some(_)) => {}
            Ok(None) => {
                tracing::warn!("no active declaration; taking no triggers");
                return false;
            }
            Err(e) => {
                tracing::warn!(error = %e, "active declaration unreadable; taking no triggers");
                return false;
            }
        }
        match read_request(store.as_ref(), &self.engine.consumer()) {
            Ok(ConsumerRequest::Running {}) => {
                self.report(ConsumerState::Running, None);
                true
            }
            Ok(ConsumerRequest::Stopped {
                activation_id,
                through_seq,
            }) => {
                let acknowledged = self.reported.as_ref()
                    == Some(&(ConsumerState::Stopped, Some(activation_id.clone())));
                if !acknowledged {
                    match self.engine.process_through(through_seq).await {
                        Ok(_) => self.report(ConsumerState::Stopped, Some(activation_id)),
                        Err(e) => {
                            tracing::error!(error = %e, "consumer pass before stopping failed; retrying");
                        }
                    }
                }
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "consumer request unreadable; taking no triggers");
                false
            }
        }
    }
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // Header/body timeouts, a connection cap and keep-alive limits.
    stream_telegram::serve_webhook(listener, router, &ListenerLimits::default(), shutdown).await;
    Ok(())
}
