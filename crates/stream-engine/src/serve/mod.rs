//! `thestream serve`: ingress, the consumer and delivery together.
//!
//! With `drain`, it handles every update available now, every pending run
//! and every pending delivery, then returns. Without it, it runs until the
//! shutdown future completes, as separate tasks woken by what they wait
//! for ([`signal`]): every commit made through the serve's store (an
//! admitted update above all) wakes the consumer at once, every settled
//! trigger wakes delivery at once, and a one-second check of the store's
//! data version wakes both for another process's commits. No task polls on a short
//! tick. The consumer runs on its own thread (it blocks on SQLite, the
//! context scan and hashing); delivery never waits for it, so a run in
//! retry backoff delays no other output. A task that ends before shutdown
//! (a dead ingress) ends `serve` with an error.
//!
//! A running serve cooperates with `thestream activate` through the control
//! rows of [`crate::cooperation`], re-read at every wake-up before the
//! consumer may take a trigger: it reports its consumer `running` when its
//! engine is built (the readiness report); it obeys a stop request by
//! answering every trigger up to the frozen head (the run in flight
//! included), taking no more, and reporting `stopped`; and when the
//! `active-declaration` row names another declaration it rebuilds its
//! engine from the files activation installed, reporting the new consumer
//! `running`. While the active row names a declaration it cannot (yet)
//! load, it takes no trigger at all. Delivery never stops.

mod follower;
pub mod signal;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stream_store::Store;
use stream_telegram::{
    ApiError, BotApi, BotToken, ClientOptions, DeliveryError, DeliveryOptions, DeliveryReport,
    Ingress, IngressConfig, IngressError, ListenerLimits, PollMode, PollingOptions, WebhookOptions,
    WebhookSecret, deliver_pending, run_polling, webhook_router,
};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::attempter::Attempter;
use crate::cooperation::{ConsumerRequest, CooperationError, read_request};
use crate::engine::{Engine, EngineError, ProcessReport};
use crate::settings::{EngineSettings, IngressSettings};
use follower::{Follower, Turn, materialize_decisions};
use signal::{Backoff, Commits, FOREIGN_COMMIT_CHECK, Signalling, watch_foreign_commits};

/// Why `serve` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// An environment variable the config names is unset or malformed.
    #[error("environment variable {name} is unset or malformed")]
    Secret {
        /// The variable's NAME (never its value).
        name: String,
    },
    /// The Bot API client could not be set up, or a call failed.
    #[error("telegram: {0}")]
    Api(#[from] ApiError),
    /// Ingress (getMe, polling, storing an update) failed.
    #[error("telegram ingress: {0}")]
    Ingress(#[from] IngressError),
    /// A delivery pass failed.
    #[error("telegram delivery: {0}")]
    Delivery(#[from] DeliveryError),
    /// One of serve's tasks ended (or panicked) before shutdown.
    #[error("the {task} task ended unexpectedly")]
    TaskEnded {
        /// `ingress`, `consumer`, `delivery` or `commit watcher`.
        task: &'static str,
    },
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

/// Ingress and the engine of one store, connected to Telegram.
#[derive(Debug)]
pub struct Connected {
    /// Ingress (and the Bot API client).
    pub ingress: Arc<Ingress>,
    /// The engine of the active declaration.
    pub engine: Engine,
    commits: Commits,
}

/// Connects to Telegram (getMe) and builds the engine for its source; both
/// use the store through a wrapper that signals every commit.
pub async fn connect(
    store: Arc<dyn Store>,
    settings: EngineSettings,
) -> Result<Connected, ServeError> {
    let (store, commits) = Signalling::wrap(store);
    let token =
        BotToken::new(secret(&settings.bot_token_env)?).map_err(|_| ServeError::Secret {
            name: settings.bot_token_env.clone(),
        })?;
    let api = BotApi::new(
        &settings.telegram_api_base_url,
        token,
        ClientOptions::default(),
    )?;
    let ingress = Ingress::connect(
        Arc::clone(&store),
        api,
        IngressConfig::for_owner(settings.owner_user_id),
    )
    .await?;
    let source = ingress.source().clone();
    // Loading declarations, the store's activation rule and hashing the
    // worker block: off the runtime.
    let engine = tokio::task::spawn_blocking(move || Engine::new(store, settings, source))
        .await
        .map_err(|_| ServeError::TaskEnded {
            task: "engine setup",
        })??;
    Ok(Connected {
        ingress: Arc::new(ingress),
        engine,
        commits,
    })
}

async fn deliver(ingress: &Ingress) -> Result<DeliveryReport, ServeError> {
    Ok(deliver_pending(
        ingress.store(),
        ingress.api(),
        ingress.source(),
        &DeliveryOptions::default(),
    )
    .await?)
}

/// One consumer pass of a drain on a blocking thread: bounded at the frozen
/// head when an activation asked this consumer to stop.
async fn drain_pass(engine: Arc<Engine>) -> Result<ProcessReport, ServeError> {
    let handle = tokio::runtime::Handle::current();
    let pass = tokio::task::spawn_blocking(move || {
        handle.block_on(async {
            match read_request(engine.store().as_ref(), &engine.consumer())
                .map_err(EngineError::from)?
            {
                ConsumerRequest::Running {} => engine.process_available().await,
                ConsumerRequest::Stopped { through_seq, .. } => {
                    engine.process_through(through_seq).await
                }
            }
        })
    });
    Ok(pass
        .await
        .map_err(|_| ServeError::TaskEnded { task: "consumer" })??)
}

/// A drain's look at the memory decisions recorded since `cursor`, as the
/// running serve's consumer makes before each pass, on a blocking thread.
async fn drain_decisions(engine: Arc<Engine>, mut cursor: u64) -> Result<u64, ServeError> {
    tokio::task::spawn_blocking(move || {
        materialize_decisions(&engine, &mut cursor);
        cursor
    })
    .await
    .map_err(|_| ServeError::TaskEnded { task: "consumer" })
}

/// Handles everything available now, then returns: repeats ingress (in
/// polling mode), the decisions' materialization, the consumer and
/// delivery until a whole pass finds nothing to do.
pub async fn drain(
    connected: Connected,
    settings: &EngineSettings,
) -> Result<DrainReport, ServeError> {
    let Connected {
        ingress, engine, ..
    } = connected;
    let engine = Arc::new(engine);
    let mut report = DrainReport::default();
    let mut decisions = 0;
    loop {
        let stored = match settings.ingress {
            IngressSettings::Polling => {
                run_polling(
                    &ingress,
                    &PollingOptions::default(),
                    PollMode::Drain,
                    std::future::pending(),
                )
                .await?
                .stored
            }
            // A webhook drain handles what is stored; Telegram keeps pushing.
            IngressSettings::Webhook { .. } => 0,
        };
        decisions = drain_decisions(Arc::clone(&engine), decisions).await?;
        let processed = drain_pass(Arc::clone(&engine)).await?;
        let delivered = deliver(&ingress).await?;
        engine.prepare_spare();
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

/// Completes when `stop` says so (or its sender is gone).
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Waits for the next commit, `retry` (when set) or `stop`; `false` on stop.
async fn wait_for_work(
    commits: &mut watch::Receiver<u64>,
    retry: Option<Duration>,
    stop: &watch::Receiver<bool>,
) -> bool {
    let retry = async {
        match retry {
            Some(wait) => tokio::time::sleep(wait).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        changed = commits.changed() => changed.is_ok(),
        () = retry => true,
        () = stopped(stop.clone()) => false,
    }
}

/// The consumer: a pass at every wake-up, until `stop`. Runs on its own
/// blocking thread (see [`run`]).
async fn consume(
    mut follower: Follower,
    mut commits: watch::Receiver<u64>,
    stop: watch::Receiver<bool>,
) -> Result<(), ServeError> {
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        // Seen before the pass: a commit during it wakes another one.
        commits.borrow_and_update();
        follower.materialize_decisions();
        let retry = match follower.cooperate().await {
            Turn::Take { retry } => match follower.engine.process_available().await {
                Ok(_) if !retry => {
                    backoff.reset();
                    None
                }
                Ok(_) => Some(backoff.failed()),
                Err(EngineError::Interrupted) => return Ok(()),
                Err(e) => {
                    tracing::error!(error = %e, "consumer pass failed; retrying");
                    Some(backoff.failed())
                }
            },
            Turn::Hold => None,
            Turn::Retry => Some(backoff.failed()),
        };
        if !wait_for_work(&mut commits, retry, &stop).await {
            return Ok(());
        }
    }
}

/// Delivery: a pass whenever a trigger is settled (or another process
/// committed), until `stop`; failed sends are tried again after a growing
/// wait (or at the next settlement).
async fn delivery(
    ingress: Arc<Ingress>,
    spares: Arc<dyn Attempter>,
    mut commits: watch::Receiver<u64>,
    stop: watch::Receiver<bool>,
) -> Result<(), ServeError> {
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        commits.borrow_and_update();
        let delivered = deliver(&ingress).await;
        // The turn's reply is out (or its pass ended): now the next spare
        // worker's spawn competes with nothing on the turn's path.
        spares.prepare_spare();
        let retry = match delivered {
            Ok(report) if report.pending == 0 => {
                backoff.reset();
                None
            }
            // More than one pass's worth, none failed: go on at once.
            Ok(report)
                if report.failed == 0 && report.not_delivered == 0 && report.no_room == 0 =>
            {
                backoff.reset();
                Some(Duration::ZERO)
            }
            Ok(_) => Some(backoff.failed()),
            Err(e) => {
                tracing::warn!(error = %e, "delivery pass failed; retrying");
                Some(backoff.failed())
            }
        };
        if !wait_for_work(&mut commits, retry, &stop).await {
            return Ok(());
        }
    }
}

/// Runs until `shutdown` completes.
pub async fn run(
    connected: Connected,
    settings: EngineSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let Connected {
        ingress,
        engine,
        commits,
    } = connected;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks: JoinSet<(&'static str, Result<(), ServeError>)> = JoinSet::new();
    match settings.ingress.clone() {
        IngressSettings::Polling => {
            let ingress = Arc::clone(&ingress);
            let rx = stop_rx.clone();
            tasks.spawn(async move {
                let polled = run_polling(
                    &ingress,
                    &PollingOptions::default(),
                    PollMode::UntilShutdown,
                    stopped(rx),
                )
                .await;
                ("ingress", polled.map(|_| ()).map_err(ServeError::from))
            });
        }
        IngressSettings::Webhook { listen, secret_env } => {
            let secret =
                WebhookSecret::new(secret(&secret_env)?).map_err(|_| ServeError::Secret {
                    name: secret_env.clone(),
                })?;
            let router = webhook_router(Arc::clone(&ingress), WebhookOptions::new(secret.clone()));
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| ServeError::Webhook(e.kind()))?;
            let rx = stop_rx.clone();
            tasks.spawn(async move {
                (
                    "ingress",
                    axum_serve(listener, router, secret, stopped(rx)).await,
                )
            });
        }
    }
    // Delivery wakes when a trigger is settled (not at every commit: a
    // burst of admitted updates would make it rescan once per update).
    let settled = Commits::new();
    let spares = engine.attempter();
    let mut engine = engine;
    engine.stop_on(stop_rx.clone());
    engine.signal_settled(settled.clone());
    let follower = Follower::new(engine)?;
    {
        let (commits, stop) = (commits.subscribe(), stop_rx.clone());
        let handle = tokio::runtime::Handle::current();
        tasks.spawn_blocking(move || {
            (
                "consumer",
                handle.block_on(consume(follower, commits, stop)),
            )
        });
    }
    {
        let delivered = delivery(
            Arc::clone(&ingress),
            spares,
            settled.subscribe(),
            stop_rx.clone(),
        );
        tasks.spawn(async move { ("delivery", delivered.await) });
    }
    {
        let store = Arc::clone(ingress.store());
        let wake = [commits, settled];
        // The watcher sleeps on this channel: dropping the sender at stop
        // ends it at once.
        let (stop_watcher, stop_std) = std::sync::mpsc::channel::<()>();
        tasks.spawn_blocking(move || {
            let watched =
                watch_foreign_commits(store.as_ref(), &wake, FOREIGN_COMMIT_CHECK, &stop_std);
            (
                "commit watcher",
                watched.map_err(|e| EngineError::Store(e).into()),
            )
        });
        let rx = stop_rx.clone();
        tasks.spawn(async move {
            stopped(rx).await;
            drop(stop_watcher);
            ("commit watcher stop", Ok(()))
        });
    }
    supervise(tasks, stop_tx, shutdown).await
}

/// Waits for `shutdown` or for the first task to end; either way stops the
/// others and waits for them. A task that ends first is an error.
async fn supervise(
    mut tasks: JoinSet<(&'static str, Result<(), ServeError>)>,
    stop: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let first = tokio::select! {
        () = shutdown => None,
        Some(done) = tasks.join_next() => Some(done),
    };
    let _ = stop.send(true);
    let mut result = match first {
        None => Ok(()),
        Some(Ok((_, Err(e)))) => Err(e),
        Some(Ok((task, Ok(())))) => Err(ServeError::TaskEnded { task }),
        Some(Err(_)) => Err(ServeError::TaskEnded { task: "a serve" }),
    };
    if let Err(e) = &result {
        tracing::error!(error = %e, "a serve task ended; stopping");
    }
    while let Some(done) = tasks.join_next().await {
        let ended = match done {
            Ok((_, r)) => r,
            Err(_) => Err(ServeError::TaskEnded { task: "a serve" }),
        };
        if result.is_ok() {
            result = ended;
        }
    }
    result
}

async fn axum_serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    secret: WebhookSecret,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // Header/body timeouts, connection pools (room kept for posts with the
    // secret) and keep-alive limits.
    let limits = ListenerLimits::default();
    stream_telegram::serve_webhook(listener, router, &secret, &limits, shutdown).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `join!` a dead ingress went unnoticed until shutdown; now the
    /// first task to end stops the others and is an error.
    #[tokio::test]
    async fn a_dead_ingress_task_ends_serve_with_an_error() {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks: JoinSet<(&'static str, Result<(), ServeError>)> = JoinSet::new();
        tasks.spawn(async { ("ingress", Ok(())) });
        let rx = stop_rx.clone();
        tasks.spawn(async move {
            stopped(rx).await;
            ("delivery", Ok(()))
        });
        let ended = tokio::time::timeout(
            Duration::from_secs(10),
            supervise(tasks, stop_tx, std::future::pending()),
        )
        .await;
        assert!(
            matches!(ended, Ok(Err(ServeError::TaskEnded { task: "ingress" }))),
            "{ended:?}"
        );
    }

    #[tokio::test]
    async fn shutdown_stops_every_task_and_is_not_an_error() {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks: JoinSet<(&'static str, Result<(), ServeError>)> = JoinSet::new();
        for task in ["ingress", "delivery"] {
            let rx = stop_rx.clone();
            tasks.spawn(async move {
                stopped(rx).await;
                (task, Ok(()))
            });
        }
        let ended =
            tokio::time::timeout(Duration::from_secs(10), supervise(tasks, stop_tx, async {}))
                .await;
        assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    }
}
