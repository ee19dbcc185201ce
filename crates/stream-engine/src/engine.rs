//! The consumer: read the Telegram source after progress, route each owner
//! message, settle its run.

use std::sync::Arc;

use stream_broker::ImageError;
use stream_broker::{Broker, BrokerConfig, BrokerError, Refill};
use stream_core::payload::{BotCommand, MessageReceived};
use stream_core::{EventId, Sha256Hex, SourceName, StoredEvent};
use stream_declarations::install::{Expected, load_installed};
use stream_declarations::{DeclarationError, LoadedDeclaration};
use stream_proposals::SettleError;
use stream_store::{EventQuery, Store, StoreError};

use crate::active::{ActiveDeclaration, ActiveError, ensure_active};
use crate::attempter::Attempter;
use crate::cooperation::CooperationError;
use crate::settings::EngineSettings;

/// Why the engine stopped. Ids, counts and codes only.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A declaration did not load or validate.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    /// The configured declaration cannot be served.
    #[error(transparent)]
    Active(#[from] ActiveError),
    /// The broker could not be set up (e.g. the API key variable is unset).
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// A settlement could not be recorded.
    #[error(transparent)]
    Settle(#[from] SettleError),
    /// The worker binary could not be read for its bundle hash.
    #[error("cannot read the worker binary {path}: {kind:?}")]
    Worker {
        /// The path.
        path: String,
        /// The I/O error kind.
        kind: std::io::ErrorKind,
    },
    /// A declaration lacks something the engine needs.
    #[error("declaration {id} cannot be served: {what}")]
    Unservable {
        /// The declaration.
        id: String,
        /// What is missing.
        what: &'static str,
    },
    /// A stored event of the chain did not decode.
    #[error("stored event {id} does not decode")]
    EventInvalid {
        /// The event.
        id: EventId,
    },
    /// The context could not be built.
    #[error(transparent)]
    Context(#[from] stream_context::ContextError),
    /// An installed declaration could not be loaded to follow an activation.
    #[error(transparent)]
    Cooperation(#[from] crate::cooperation::CooperationError),
    /// Shutdown came during a retry backoff; the run stays pending with its
    /// attempts recorded, and the next serve goes on with it.
    #[error("interrupted by shutdown during a retry backoff")]
    Interrupted,
}

/// What one pass of the consumer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessReport {
    /// Owner messages handled.
    pub triggers: usize,
    /// Runs settled with an output.
    pub completed: usize,
    /// Runs given up (a final `run.failed`).
    pub failed: usize,
    /// Time spent in each stage of model runs, summed over the pass.
    pub stages: StageTimes,
}

/// Time spent per stage of model runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Context scan and snapshot build.
    pub snapshot: std::time::Duration,
    /// Packet build; storing the snapshot with the run row while the worker
    /// takes the packet; the one provider request; result.
    pub attempt: std::time::Duration,
    /// Trusted validation and the settlement transaction.
    pub settle: std::time::Duration,
}

impl StageTimes {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: StageTimes) {
        self.snapshot += other.snapshot;
        self.attempt += other.attempt;
        self.settle += other.settle;
    }
}

/// The engine of one store and one active declaration.
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) settings: EngineSettings,
    pub(crate) conversation: LoadedDeclaration,
    pub(crate) replies: LoadedDeclaration,
    pub(crate) active: ActiveDeclaration,
    pub(crate) broker: Arc<dyn Attempter>,
    /// The attempter given by [`Engine::with_attempter`], kept across
    /// `follow`; `None`: a broker built from the settings.
    pub(crate) given: Option<Arc<dyn Attempter>>,
    pub(crate) worker_bundle: Sha256Hex,
    pub(crate) telegram: SourceName,
    /// Ends a retry backoff early when it turns `true` (serve's shutdown).
    pub(crate) stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// Bumped after each trigger is settled (serve's delivery waits on it).
    pub(crate) settled: Option<crate::serve::signal::Commits>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("active", &self.active.consumer())
            .field("telegram", &self.telegram)
            .field("worker_bundle", &self.worker_bundle)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Loads the declarations, applies `serve`'s activation rule, hashes the
    /// worker bundle and sets up the broker.
    pub fn new(
        store: Arc<dyn Store>,
        settings: EngineSettings,
        telegram: SourceName,
    ) -> Result<Self, EngineError> {
        Self::start(store, settings, telegram, None)
    }

    /// [`Engine::new`] with attempts run by `attempter` instead of a broker
    /// built from the settings (`settings.worker` is not read): the seam
    /// in-process tests drive routing, retries, backoff and `follow`
    /// through. Everything the attempter returns is judged as a broker's.
    pub fn with_attempter(
        store: Arc<dyn Store>,
        settings: EngineSettings,
        telegram: SourceName,
        attempter: Arc<dyn Attempter>,
    ) -> Result<Self, EngineError> {
        Self::start(store, settings, telegram, Some(attempter))
    }

    fn start(
        store: Arc<dyn Store>,
        settings: EngineSettings,
        telegram: SourceName,
        given: Option<Arc<dyn Attempter>>,
    ) -> Result<Self, EngineError> {
        let conversation = LoadedDeclaration::load(&settings.declaration)?;
        let replies = LoadedDeclaration::load(&settings.replies_declaration)?;
        if replies.declaration.replies.is_none() {
            return Err(EngineError::Unservable {
                id: replies.id().to_owned(),
                what: "fixed replies",
            });
        }
        let active = ensure_active(store.as_ref(), &conversation, &replies)?;
        Self::build(
            store,
            settings,
            telegram,
            conversation,
            replies,
            active,
            given,
        )
    }

    /// Follows an activation: an engine for `active` (the store's new
    /// active declaration), rebuilt from the files activation installed in
    /// the store (blobs re-hashed, fingerprint equal to the active row's and
    /// the registry's), for the same Telegram source, with the worker bundle
    /// hashed anew.
    pub fn follow(&self, active: &ActiveDeclaration) -> Result<Self, EngineError> {
        let mut next = self.follow_files(active)?;
        next.stop = self.stop.clone();
        next.settled = self.settled.clone();
        Ok(next)
    }

    fn follow_files(&self, active: &ActiveDeclaration) -> Result<Self, EngineError> {
        let expected = Expected {
            id: &active.id,
            version: active.version,
            fingerprint: &active.fingerprint,
        };
        let (conversation, installed) =
            load_installed(self.store.as_ref(), &expected).map_err(CooperationError::from)?;
        if installed.context.telegram_source != self.telegram {
            return Err(EngineError::Unservable {
                id: active.id.clone(),
                what: "an install for this Telegram source",
            });
        }
        Self::build(
            Arc::clone(&self.store),
            self.settings.clone(),
            self.telegram.clone(),
            conversation,
            self.replies.clone(),
            active.clone(),
            self.given.clone(),
        )
    }

    fn build(
        store: Arc<dyn Store>,
        settings: EngineSettings,
        telegram: SourceName,
        conversation: LoadedDeclaration,
        replies: LoadedDeclaration,
        active: ActiveDeclaration,
        given: Option<Arc<dyn Attempter>>,
    ) -> Result<Self, EngineError> {
        let broker = match &given {
            Some(attempter) => Arc::clone(attempter),
            None => Arc::new(Self::broker(&settings)?),
        };
        let worker_bundle = broker.worker_sha256().clone();
        tracing::info!(
            declaration = %active.consumer(),
            worker_bundle = %worker_bundle.short(12),
            "engine ready"
        );
        Ok(Self {
            store,
            settings,
            conversation,
            replies,
            active,
            broker,
            given,
            worker_bundle,
            telegram,
            stop: None,
            settled: None,
        })
    }

    fn broker(settings: &EngineSettings) -> Result<Broker, EngineError> {
        let mut config = BrokerConfig::new(
            settings.worker.clone(),
            settings.provider.base_url.clone(),
            settings.provider.api_key_env.clone(),
        )
        .with_attempt_timeout(settings.provider_timeout);
        config.allow_unenforced = settings.allow_unenforced_sandbox;
        // Serve is long-lived: keep the next attempt's worker spawned and
        // verified while idle (docs/design.md §9), made once a turn's reply
        // is out ([`Engine::prepare_spare`]), not during its settlement and
        // delivery.
        config.keep_spare = true;
        config.refill = Refill::WhenAsked;
        // And fork each worker from a warmed fork server instead of
        // spawning it: about 3 ms less CPU an attempt.
        config.fork_server = stream_broker::serve_forks_workers();
        // The broker seals the worker in memory and hashes that copy: the
        // bundle receipts name is the worker every attempt executes.
        Broker::new(config).map_err(|e| match e {
            BrokerError::Worker(ImageError::Read { path, kind }) => EngineError::Worker {
                path: path.display().to_string(),
                kind,
            },
            BrokerError::Worker(ImageError::NotAFile { path }) => EngineError::Worker {
                path: path.display().to_string(),
                kind: std::io::ErrorKind::InvalidInput,
            },
            other @ (BrokerError::Worker(ImageError::Seal { .. })
            | BrokerError::Client
            | BrokerError::CredentialMissing { .. }) => EngineError::Broker(other),
        })
    }

    /// Makes retry backoffs end early (with [`EngineError::Interrupted`])
    /// once `stop` turns `true`.
    pub(crate) fn stop_on(&mut self, stop: tokio::sync::watch::Receiver<bool>) {
        self.stop = Some(stop);
    }

    /// Bumps `settled` after each trigger is settled, so that delivery
    /// wakes for new outputs only (not for every commit).
    pub(crate) fn signal_settled(&mut self, settled: crate::serve::signal::Commits) {
        self.settled = Some(settled);
    }

    /// Sleeps `wait`; `true` when stopped first.
    pub(crate) async fn pause(&self, wait: std::time::Duration) -> bool {
        let stopped = async {
            let stopped = match self.stop.clone() {
                Some(mut rx) => rx.wait_for(|s| *s).await.is_ok(),
                None => false,
            };
            if !stopped {
                // No serve to stop it (or its sender is gone): sleep on.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => false,
            () = stopped => true,
        }
    }

    /// The Telegram source the consumer reads.
    pub fn telegram(&self) -> &SourceName {
        &self.telegram
    }

    /// The consumer name, `<agent>@<version>`.
    pub fn consumer(&self) -> String {
        self.active.consumer()
    }

    /// The active declaration.
    pub fn active(&self) -> &ActiveDeclaration {
        &self.active
    }

    /// The SHA-256 of the worker binary.
    pub fn worker_bundle(&self) -> &Sha256Hex {
        &self.worker_bundle
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// Makes the next spare worker if none is ready: called once a delivery
    /// pass is done, when a turn's reply is out.
    pub fn prepare_spare(&self) {
        self.broker.prepare_spare();
    }

    /// The attempter, for a task that outlives this handle (serve's
    /// delivery asks it for the next spare).
    pub(crate) fn attempter(&self) -> Arc<dyn Attempter> {
        Arc::clone(&self.broker)
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Handles every owner message stored after the consumer's progress.
    pub async fn process_available(&self) -> Result<ProcessReport, EngineError> {
        self.process_until(None).await
    }

    /// Handles every owner message stored after the consumer's progress up
    /// to and including `seq` (a stop request's frozen head), none after it.
    pub async fn process_through(&self, seq: u64) -> Result<ProcessReport, EngineError> {
        self.process_until(Some(seq)).await
    }

    async fn process_until(&self, limit: Option<u64>) -> Result<ProcessReport, EngineError> {
        let mut report = ProcessReport::default();
        let progress = self.store.progress(&self.consumer())?;
        // Non-trigger events (receipts) are skipped with a local cursor;
        // progress itself moves only with a settled run.
        let mut cursor = progress
            .filter(|p| p.source == self.telegram)
            .map_or(0, |p| p.seq);
        loop {
            let batch = self
                .store
                .events(&EventQuery::source_after(&self.telegram, cursor).limit(64))?;
            let Some(last) = batch.last() else { break };
            let last_seq = last.seq;
            for event in &batch {
                if limit.is_some_and(|limit| event.seq > limit) {
                    return Ok(report);
                }
                if event.is::<MessageReceived>() {
                    report.triggers += 1;
                    let mut stages = StageTimes::default();
                    match self.handle(event, &mut stages).await? {
                        Settled::Completed => report.completed += 1,
                        Settled::Failed => report.failed += 1,
                    }
                    if let Some(settled) = &self.settled {
                        settled.bump();
                    }
                    report.stages.add(stages);
                }
            }
            cursor = last_seq;
        }
        Ok(report)
    }

    async fn handle(
        &self,
        trigger: &StoredEvent,
        stages: &mut StageTimes,
    ) -> Result<Settled, EngineError> {
        let msg: MessageReceived = trigger.decode().map_err(|_| EngineError::EventInvalid {
            id: trigger.id().clone(),
        })?;
        let replies = self
            .replies
            .declaration
            .replies
            .as_ref()
            .ok_or(EngineError::Unservable {
                id: self.replies.id().to_owned(),
                what: "fixed replies",
            })?;
        if msg.photo_too_large {
            return self.fixed_reply(trigger, &msg, self.photo_too_large_reply()?);
        }
        let command = msg
            .command
            .as_ref()
            .map(|c| (c.name, c.args.as_str().trim().is_empty()));
        match command {
            Some((BotCommand::Help, _)) => self.fixed_reply(trigger, &msg, replies.help.clone()),
            Some((BotCommand::Focus, true)) => {
                self.fixed_reply(trigger, &msg, replies.focus_usage.clone())
            }
            Some((BotCommand::Correct, true)) => {
                self.fixed_reply(trigger, &msg, replies.help.clone())
            }
            Some((BotCommand::Correct, false)) => self.owner_correct(trigger, &msg, replies),
            Some((BotCommand::Focus, false)) | None => self.model_run(trigger, &msg, stages).await,
        }
    }
}

/// How a trigger ended.
pub(crate) enum Settled {
    /// An output was settled.
    Completed,
    /// The run was given up.
    Failed,
}
