//! `thestream activate`: the seed's Recovery section as recorded, resumable
//! steps (DESIGN section 17).
//!
//! Each step, once done, is appended as `stream.system.activation.step@1`
//! on `system:activation`, parented to the step before it. The activation
//! id derives from the target declaration's id, version and fingerprint
//! (and the count of activations completed before it, so that a later
//! activation of the same declaration is a new one): a rerun after a crash
//! finds the steps already recorded and continues from the first one that
//! is not. The steps, in order:
//!
//! 1. `verify-bundle` — hash the worker binary (the bundle id) and run a
//!    sandbox self-test: spawn it, read and `verify` its hello, end it.
//! 2. `freeze-ingress` — polling: the `ingress` row (the running serve's
//!    polling loop obeys it); webhook: `deleteWebhook` keeping pending
//!    updates (the URL, read with `getWebhookInfo`, is kept in the
//!    activation's control row first, so a rerun resumes to the same URL).
//!    The frozen Telegram head is recorded with the step.
//! 3. `stop-consumer` — asks the old consumer to stop
//!    ([`ConsumerRequest::Stopped`]) and waits until the serve running it
//!    acknowledges: every trigger up to the frozen head answered, the run
//!    in flight settled, no trigger taken after. A serve that is not
//!    running (or died: its status row's process evidence no longer names a
//!    live process) is detected, not waited for: then the step is done when
//!    the old consumer has no unanswered trigger up to the frozen head, and
//!    refused (to be rerun after `serve --drain`) otherwise.
//! 4. `install-declaration` — the registry install (a changed capability
//!    under the same version is refused) and the declaration, prompt and
//!    context manifest installed in the store, with the step, in one
//!    transaction.
//! 5. `set-progress` — in one transaction: the new consumer's progress at
//!    the frozen head (`replay: now`), the `active-declaration` row switched,
//!    the new consumer's request cleared, the step.
//! 6. `await-ready` — waits for the serve to report the new consumer
//!    `running` with the same Telegram source and the same worker bundle as
//!    step 1, from a live process. With no live serve (after a short grace
//!    for one that is starting), activation stops here (refused, nothing advertised, ingress still frozen): the
//!    operator starts `serve` with the new declaration configured and reruns
//!    `activate`, which finishes from this step.
//! 7. `register-menu` — `setMyCommands` with the new declaration's
//!    commands; the help notice unless skipped.
//! 8. `resume-ingress` — `running`; webhook: `setWebhook` with the same URL
//!    and secret.
//!
//! Before any step, the target is checked (a `pi` conversation
//! declaration, its fingerprint not in conflict with the registry, no other
//! activation left incomplete), so a refusal there changes nothing.
//! Activation creates no proposal and never touches the context root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use stream_core::canon::canonical_sha256;
use stream_core::payload::{ActivationStep, ActivationStepKind, MessageReceived};
use stream_core::text::Label;
use stream_core::{EventId, NewEvent, Sha256Hex, SourceName};
use stream_declarations::model::{Context, Kind};
use stream_declarations::{DeclarationError, LoadedDeclaration, RegistryError};
use stream_protocol::framing::parse_frame;
use stream_protocol::{MAX_FRAME_BYTES, WorkerFrame};
use stream_sandbox::{Enforcement, NotEnforced, SpawnError, SpawnLimits, StderrMode};
use stream_store::{EventQuery, Progress, Read, Store, StoreError, Tx};
use stream_telegram::{
    ApiError, BotApi, ControlError, IngressMode, MenuCommand, WebhookSecret, freeze_ingress,
    register_menu, resume_ingress,
};

use crate::active::{ACTIVE_DECLARATION, ActiveDeclaration, ActiveError, active};
use crate::cooperation::{
    ConsumerRequest, ConsumerState, CooperationError, Liveness, install_files, liveness,
    read_status, write_request,
};
use crate::engine::{EngineError, hash_worker};

/// Why activation refused or stopped. Ids, versions, counts and codes only.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    /// The declaration file does not load or validate.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    /// The declaration file changed while it was being read.
    #[error("the declaration file changed while it was read; run activate again")]
    ChangedWhileReading,
    /// The declaration file could not be read.
    #[error("cannot read the declaration file {path}: {kind:?}")]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// The I/O error kind.
        kind: std::io::ErrorKind,
    },
    /// Only a `pi` declaration with the `telegram-conversation` context can
    /// be the conversation consumer.
    #[error("declaration {id}@{version} is not a pi telegram-conversation declaration")]
    NotAConversation {
        /// Declaration id.
        id: String,
        /// Declaration version.
        version: u32,
    },
    /// The registry refused (a changed capability under the same version).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Another activation is recorded and not finished.
    #[error(
        "activation {activation} of {declaration} is incomplete: finish it first by running activate with that declaration again"
    )]
    OtherActivationIncomplete {
        /// Its id.
        activation: String,
        /// Its `<id>@<version>`.
        declaration: String,
    },
    /// The worker binary could not be read.
    #[error("verify-bundle: cannot read the worker binary {path}: {kind:?}")]
    WorkerUnreadable {
        /// The path.
        path: String,
        /// The I/O error kind.
        kind: std::io::ErrorKind,
    },
    /// The worker could not be started for its self-test.
    #[error("verify-bundle: the worker could not be started: {0}")]
    SelfTestSpawn(#[from] SpawnError),
    /// The worker did not answer a well-formed hello.
    #[error("verify-bundle: the worker did not send a well-formed hello")]
    SelfTestHello,
    /// The worker's sandbox is not enforced.
    #[error("verify-bundle: {0}")]
    SandboxNotEnforced(#[from] NotEnforced),
    /// A Bot API call failed.
    #[error("telegram: {0}")]
    Telegram(#[from] ApiError),
    /// Freezing or resuming ingress failed.
    #[error(transparent)]
    Ingress(#[from] ControlError),
    /// Webhook mode, but Telegram has no webhook registered.
    #[error(
        "freeze-ingress: telegram.mode is webhook but Telegram reports no webhook URL; register the webhook first"
    )]
    WebhookNotRegistered,
    /// The old consumer is not being served and has triggers up to the
    /// frozen head it never answered.
    #[error(
        "stop-consumer: no serve is running {consumer} and it has {unanswered} unanswered messages from before the freeze; run `thestream serve --drain` (ingress stays frozen), then activate again"
    )]
    UnansweredWithoutServe {
        /// The old consumer.
        consumer: String,
        /// Its unanswered triggers.
        unanswered: u64,
    },
    /// The serve running the old consumer did not stop in time.
    #[error(
        "stop-consumer: the serve running {consumer} did not stop within {waited_secs} s; activate again to keep waiting"
    )]
    StopTimedOut {
        /// The old consumer.
        consumer: String,
        /// Seconds waited.
        waited_secs: u64,
    },
    /// A serve acknowledged the stop but left triggers unanswered.
    #[error(
        "stop-consumer: {consumer} acknowledged the stop with {unanswered} unanswered messages"
    )]
    StoppedWithUnanswered {
        /// The old consumer.
        consumer: String,
        /// Its unanswered triggers.
        unanswered: u64,
    },
    /// No live serve can report the new consumer ready.
    #[error(
        "await-ready: no serve is running; start `thestream serve` with agent.declaration set to this declaration, then activate again (ingress stays frozen, nothing is advertised)"
    )]
    NoServe {
        /// The new consumer.
        consumer: String,
    },
    /// The serve did not report the new consumer ready in time.
    #[error(
        "await-ready: {consumer} was not reported ready within {waited_secs} s; activate again to keep waiting"
    )]
    ReadyTimedOut {
        /// The new consumer.
        consumer: String,
        /// Seconds waited.
        waited_secs: u64,
    },
    /// The serve reported the new consumer with another source or bundle.
    #[error(
        "await-ready: {consumer} was reported with another {what} than this activation verified"
    )]
    ReadyMismatch {
        /// The new consumer.
        consumer: String,
        /// `telegram source` or `worker bundle`.
        what: &'static str,
    },
    /// A recorded step, or this run's step, conflicts with what is recorded.
    #[error("activation step {step} conflicts with the recorded one")]
    StepConflict {
        /// The step.
        step: &'static str,
    },
    /// A recorded step does not decode, or the record is out of order.
    #[error("the activation record {activation} is malformed")]
    RecordMalformed {
        /// The activation.
        activation: String,
    },
    /// A menu command is not acceptable to Telegram.
    #[error("register-menu: {0}")]
    Menu(#[from] stream_telegram::MenuCommandError),
    /// A cooperation row failed.
    #[error(transparent)]
    Cooperation(#[from] CooperationError),
    /// The active-declaration row failed.
    #[error(transparent)]
    Active(#[from] ActiveError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A blocking task did not finish.
    #[error("a blocking task was cancelled")]
    Join,
}

/// The declaration to activate, read once from its file.
#[derive(Clone)]
pub struct Target {
    declaration: LoadedDeclaration,
    yaml: String,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("id", &self.declaration.id())
            .field("version", &self.declaration.version())
            .field("fingerprint", &self.declaration.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Loads, validates and binds the declaration at `path` and its prompt,
    /// and keeps the exact file text (installed in the store later).
    pub fn load(path: &Path) -> Result<Self, ActivationError> {
        let declaration = LoadedDeclaration::load(path)?;
        let yaml = std::fs::read_to_string(path).map_err(|e| ActivationError::Unreadable {
            path: path.to_owned(),
            kind: e.kind(),
        })?;
        let rebuilt = LoadedDeclaration::from_parts(&yaml, declaration.prompt.clone())?;
        if rebuilt.fingerprint != declaration.fingerprint {
            return Err(ActivationError::ChangedWhileReading);
        }
        let d = &declaration.declaration;
        match (d.kind, d.context) {
            (Kind::Pi, Context::TelegramConversation) => {}
            (
                Kind::Pi
                | Kind::Deterministic
                | Kind::Repair
                | Kind::LettaAgentSdk
                | Kind::Atproto
                | Kind::Review
                | Kind::Conceptualizer,
                Context::TelegramConversation | Context::TelegramCommand | Context::None,
            ) => {
                return Err(ActivationError::NotAConversation {
                    id: declaration.id().to_owned(),
                    version: declaration.version(),
                });
            }
        }
        Ok(Self { declaration, yaml })
    }

    /// The loaded declaration.
    pub fn declaration(&self) -> &LoadedDeclaration {
        &self.declaration
    }

    /// Its control value in the `active-declaration` row.
    pub fn active(&self) -> ActiveDeclaration {
        ActiveDeclaration::of(&self.declaration)
    }
}

/// How ingress runs, for freeze and resume.
#[derive(Debug, Clone)]
pub enum IngressPlan {
    /// Long polling.
    Polling,
    /// A webhook; its URL is what Telegram reports at the freeze.
    Webhook {
        /// The secret `setWebhook` is given again at the resume.
        secret: WebhookSecret,
    },
}

/// Everything activation needs besides the store, the Bot API and the target.
#[derive(Debug, Clone)]
pub struct ActivationOptions {
    /// The `thestream-worker` binary.
    pub worker: PathBuf,
    /// Development only: accept a worker whose sandbox is not enforced.
    pub allow_unenforced_sandbox: bool,
    /// Ingress mode.
    pub ingress: IngressPlan,
    /// The owner chat the help notice goes to; `None` skips it.
    pub notice_chat: Option<i64>,
    /// How long stop-consumer waits for a live serve to stop.
    pub stop_timeout: Duration,
    /// How long await-ready waits for a live serve to report ready.
    pub ready_timeout: Duration,
    /// How long await-ready waits for a serve to appear when none is live
    /// (one may be starting) before refusing.
    pub no_serve_grace: Duration,
    /// How often control rows are re-read while waiting.
    pub poll_every: Duration,
}

/// Whether a step ran now or was found recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// Done by this run and recorded.
    Done,
    /// Recorded by an earlier run; skipped.
    Recorded,
}

/// One step as it went, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The step.
    pub step: ActivationStepKind,
    /// Done now or recorded earlier.
    pub outcome: StepOutcome,
    /// A short content-free detail (ids, counts, hashes).
    pub detail: String,
}

/// What activation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActivationOutcome {
    /// Every step is recorded.
    Completed {
        /// The activation id.
        activation_id: String,
        /// The new consumer, `<id>@<version>`.
        consumer: String,
        /// The consumer it replaced, if any.
        previous: Option<String>,
    },
    /// The target is already active and no activation is pending: nothing done.
    AlreadyActive {
        /// The consumer.
        consumer: String,
    },
}

/// The control key of an activation's working state.
pub fn state_key(activation_id: &str) -> String {
    format!("activation:{activation_id}")
}

/// The working state an activation keeps beside its step events: what a
/// rerun needs and the store no longer shows once a step has run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ActivationState {
    /// The consumer that was active at the freeze.
    pub previous_consumer: Option<String>,
    /// The webhook URL Telegram reported before `deleteWebhook`.
    pub webhook_url: Option<String>,
}

/// The id of the activation of `decl` after `generation` completed ones.
pub fn activation_id(decl: &LoadedDeclaration, generation: u64) -> Result<Label, ActivationError> {
    let malformed = || ActivationError::RecordMalformed {
        activation: format!("{}@{}", decl.id(), decl.version()),
    };
    let hash = canonical_sha256(&json!({
        "ns": "thestream/activation/1",
        "id": decl.id(),
        "version": decl.version(),
        "fingerprint": decl.fingerprint,
        "generation": generation,
    }))
    .map_err(|_| malformed())?;
    Label::new(hash.as_str()).map_err(|_| malformed())
}

/// The steps recorded for one activation.
pub type RecordedSteps = BTreeMap<ActivationStepKind, RecordedStep>;

/// One recorded step.
#[derive(Debug, Clone)]
pub struct RecordedStep {
    /// Its event id.
    pub id: EventId,
    /// Its payload.
    pub step: ActivationStep,
}

/// Every recorded activation: id → its steps.
pub fn recorded_activations(
    reader: &(impl Read + ?Sized),
) -> Result<BTreeMap<String, RecordedSteps>, ActivationError> {
    let source = SourceName::fixed(SourceName::ACTIVATION);
    let mut all: BTreeMap<String, RecordedSteps> = BTreeMap::new();
    let mut after = 0;
    loop {
        let batch = reader.events(&EventQuery::source_after(&source, after).limit(512))?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        for event in &batch {
            let step: ActivationStep =
                event
                    .decode()
                    .map_err(|_| ActivationError::RecordMalformed {
                        activation: event.id().short(12).to_owned(),
                    })?;
            all.entry(step.activation_id.as_str().to_owned())
                .or_default()
                .insert(
                    step.step,
                    RecordedStep {
                        id: event.id().clone(),
                        step,
                    },
                );
        }
    }
    Ok(all)
}

/// Owner messages of `telegram` after `consumer`'s progress, up to `head`:
/// the triggers it has not answered.
pub fn unanswered(
    reader: &(impl Read + ?Sized),
    consumer: &str,
    telegram: &SourceName,
    head: u64,
) -> Result<u64, ActivationError> {
    let mut after = reader
        .progress(consumer)?
        .filter(|p| p.source == *telegram)
        .map_or(0, |p| p.seq);
    let mut count = 0;
    while after < head {
        let batch = reader.events(&EventQuery::source_after(telegram, after).limit(512))?;
        let Some(last) = batch.last() else { break };
        after = last.seq;
        count += batch
            .iter()
            .filter(|e| e.seq <= head && e.is::<MessageReceived>())
            .count() as u64;
    }
    Ok(count)
}

/// verify-bundle: the worker's SHA-256 and its sandbox self-test (spawn,
/// read and verify the hello, end it).
pub async fn verify_bundle(
    worker: &Path,
    allow_unenforced: bool,
) -> Result<Sha256Hex, ActivationError> {
    let bundle = hash_worker(worker).map_err(|e| match e {
        EngineError::Worker { path, kind } => ActivationError::WorkerUnreadable { path, kind },
        _ => ActivationError::WorkerUnreadable {
            path: worker.display().to_string(),
            kind: std::io::ErrorKind::Other,
        },
    })?;
    let worker = worker.to_owned();
    let enforcement = tokio::task::spawn_blocking(move || self_test(&worker, allow_unenforced))
        .await
        .map_err(|_| ActivationError::Join)??;
    stream_sandbox::verify(&enforcement, allow_unenforced)?;
    Ok(bundle)
}

/// The sandbox self-test: spawns `worker`, reads its hello, ends it, and
/// returns what its sandbox achieved (not yet judged; see
/// `stream_sandbox::verify`). Blocking. `doctor` reports from it too.
pub fn self_test(worker: &Path, allow_unenforced: bool) -> Result<Enforcement, ActivationError> {
    let args: Vec<&std::ffi::OsStr> = if allow_unenforced {
        vec![stream_broker::ALLOW_UNENFORCED_FLAG.as_ref()]
    } else {
        vec![]
    };
    let wait = Duration::from_secs(20);
    let limits = SpawnLimits {
        wall_clock: wait,
        output_cap: 2 * MAX_FRAME_BYTES as u64,
        line_cap: MAX_FRAME_BYTES,
        stderr: StderrMode::Null,
    };
    let mut child = stream_sandbox::spawn(worker, &args, &limits)?;
    let hello = match child.read_line(wait) {
        Ok(Some(line)) => match parse_frame::<WorkerFrame>(&line) {
            Ok(WorkerFrame::Hello(hello)) => Some(hello),
            Ok(WorkerFrame::BrokerRequest(_) | WorkerFrame::Result(_) | WorkerFrame::Error(_))
            | Err(_) => None,
        },
        Ok(None) | Err(_) => None,
    };
    // The self-test ends here whatever the hello said.
    child.kill();
    let _ = child.wait(Duration::from_secs(5));
    let hello = hello.ok_or(ActivationError::SelfTestHello)?;
    serde_json::from_value(hello.sandbox).map_err(|_| ActivationError::SelfTestHello)
}

/// Checks that nothing recorded stands in the way of activating `target`,
/// and returns its activation id with the steps already recorded for it
/// (`None` when it is already active and nothing is pending). Writes nothing.
pub fn plan(
    reader: &dyn Read,
    target: &Target,
) -> Result<Option<(Label, RecordedSteps)>, ActivationError> {
    let decl = target.declaration();
    match decl.verify(reader) {
        Ok(()) | Err(RegistryError::NotInstalled { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let mut recorded = recorded_activations(reader)?;
    let complete = |steps: &RecordedSteps| steps.contains_key(&ActivationStepKind::ResumeIngress);
    let generation = recorded.values().filter(|s| complete(s)).count() as u64;
    let id = activation_id(decl, generation)?;
    if let Some((other, steps)) = recorded
        .iter()
        .find(|(other, steps)| !complete(steps) && other.as_str() != id.as_str())
    {
        let declaration = steps
            .values()
            .next()
            .map(|s| format!("{}@{}", s.step.declaration_id, s.step.declaration_version))
            .unwrap_or_default();
        return Err(ActivationError::OtherActivationIncomplete {
            activation: other.clone(),
            declaration,
        });
    }
    let steps = recorded.remove(id.as_str()).unwrap_or_default();
    if steps.is_empty() && active(reader)? == Some(target.active()) {
        return Ok(None);
    }
    Ok(Some((id, steps)))
}

/// Runs (or resumes) the activation of `target`. `on_step` is told of each
/// step as it is done or found recorded.
pub async fn activate(
    store: &Arc<dyn Store>,
    api: &BotApi,
    target: &Target,
    options: &ActivationOptions,
    on_step: &mut (dyn FnMut(&StepReport) + Send),
) -> Result<ActivationOutcome, ActivationError> {
    let consumer = target.active().consumer();
    let Some((id, recorded)) = plan(store.as_ref(), target)? else {
        return Ok(ActivationOutcome::AlreadyActive { consumer });
    };
    let telegram = SourceName::telegram(api.get_me().await?.id);
    let mut run = Run {
        store,
        api,
        target,
        options,
        id,
        telegram,
        recorded,
        parent: None,
        bundle: None,
        head: None,
    };
    run.verify_bundle(on_step).await?;
    run.freeze(on_step).await?;
    run.stop_consumer(on_step).await?;
    run.install(on_step)?;
    run.set_progress(on_step)?;
    run.await_ready(on_step).await?;
    run.register_menu(on_step).await?;
    run.resume(on_step).await?;
    let state = run.state()?;
    Ok(ActivationOutcome::Completed {
        activation_id: run.id.as_str().to_owned(),
        consumer,
        previous: state.previous_consumer,
    })
}

/// One run of one activation.
struct Run<'a> {
    store: &'a Arc<dyn Store>,
    api: &'a BotApi,
    target: &'a Target,
    options: &'a ActivationOptions,
    id: Label,
    telegram: SourceName,
    recorded: RecordedSteps,
    /// The last step's event: the next step's parent.
    parent: Option<EventId>,
    /// From verify-bundle.
    bundle: Option<Sha256Hex>,
    /// From freeze-ingress.
    head: Option<u64>,
}

impl Run<'_> {
    fn malformed(&self) -> ActivationError {
        ActivationError::RecordMalformed {
            activation: self.id.as_str().to_owned(),
        }
    }

    /// The step if recorded: taken as done, its data kept, reported.
    fn skip(
        &mut self,
        kind: ActivationStepKind,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<bool, ActivationError> {
        let Some(recorded) = self.recorded.get(&kind) else {
            return Ok(false);
        };
        let step = &recorded.step;
        let previous_ok = step.declaration_fingerprint == self.target.declaration().fingerprint
            && self
                .bundle
                .as_ref()
                .is_none_or(|b| *b == step.worker_bundle_sha256)
            && self.head.is_none_or(|h| step.frozen_head_seq == Some(h));
        if !previous_ok {
            return Err(self.malformed());
        }
        self.bundle = Some(step.worker_bundle_sha256.clone());
        self.head = step.frozen_head_seq.or(self.head);
        self.parent = Some(recorded.id.clone());
        on_step(&StepReport {
            step: kind,
            outcome: StepOutcome::Recorded,
            detail: format!("recorded earlier ({})", recorded.id.short(12)),
        });
        Ok(true)
    }

    fn bundle(&self) -> Result<Sha256Hex, ActivationError> {
        self.bundle.clone().ok_or_else(|| self.malformed())
    }

    fn head(&self) -> Result<u64, ActivationError> {
        self.head.ok_or_else(|| self.malformed())
    }

    fn event(&self, kind: ActivationStepKind) -> Result<NewEvent, ActivationError> {
        let decl = self.target.declaration();
        let payload = ActivationStep {
            activation_id: self.id.clone(),
            step: kind,
            declaration_id: Label::new(decl.id()).map_err(|_| self.malformed())?,
            declaration_version: decl.version(),
            declaration_fingerprint: decl.fingerprint.clone(),
            worker_bundle_sha256: self.bundle()?,
            frozen_head_seq: self.head,
        };
        NewEvent::build(
            &SourceName::fixed(SourceName::ACTIVATION),
            None,
            self.parent.as_ref(),
            &payload,
        )
        .map_err(|_| self.malformed())
    }

    /// Appends the step's event inside `tx`.
    fn append_in(
        &self,
        tx: &mut (impl Tx + ?Sized),
        event: &NewEvent,
        kind: ActivationStepKind,
    ) -> Result<(), ActivationError> {
        match tx.append(event)? {
            stream_store::AppendOutcome::Inserted { .. }
            | stream_store::AppendOutcome::Converged { .. } => Ok(()),
            stream_store::AppendOutcome::Conflict => Err(ActivationError::StepConflict {
                step: kind.as_str(),
            }),
        }
    }

    fn done(
        &mut self,
        kind: ActivationStepKind,
        event: &NewEvent,
        detail: String,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) {
        self.parent = Some(event.id.clone());
        tracing::info!(
            activation = %self.id.as_str().get(..12).unwrap_or_default(),
            step = kind.as_str(),
            "activation step recorded"
        );
        on_step(&StepReport {
            step: kind,
            outcome: StepOutcome::Done,
            detail,
        });
    }

    /// Appends the step alone (for steps whose effect is outside the store
    /// or in a transaction of another crate).
    fn record(
        &mut self,
        kind: ActivationStepKind,
        detail: String,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        self.done(kind, &event, detail, on_step);
        Ok(())
    }

    fn state(&self) -> Result<ActivationState, ActivationError> {
        let key = state_key(self.id.as_str());
        match self.store.control(&key)? {
            None => Ok(ActivationState::default()),
            Some(value) => serde_json::from_value(value)
                .map_err(|_| CooperationError::Malformed { key }.into()),
        }
    }

    fn write_state(&self, state: &ActivationState) -> Result<(), ActivationError> {
        let key = state_key(self.id.as_str());
        let value = serde_json::to_value(state)
            .map_err(|_| ActivationError::from(CooperationError::Malformed { key: key.clone() }))?;
        let mut tx = self.store.begin()?;
        tx.set_control(&key, &value)?;
        tx.commit()?;
        Ok(())
    }

    async fn verify_bundle(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::VerifyBundle;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let bundle =
            verify_bundle(&self.options.worker, self.options.allow_unenforced_sandbox).await?;
        let detail = format!("worker bundle {}, sandbox enforced", bundle.short(12));
        self.bundle = Some(bundle);
        self.record(kind, detail, on_step)
    }

    /// The ingress mode, with the webhook URL kept in the activation's state
    /// (read from Telegram the first time, before anything is deleted).
    async fn ingress_mode(&self, may_ask: bool) -> Result<IngressMode, ActivationError> {
        match &self.options.ingress {
            IngressPlan::Polling => Ok(IngressMode::Polling),
            IngressPlan::Webhook { secret } => {
                let mut state = self.state()?;
                let url = match state.webhook_url.clone() {
                    Some(url) => url,
                    None if may_ask => {
                        let url = self.api.get_webhook_info().await?.url;
                        if url.is_empty() {
                            return Err(ActivationError::WebhookNotRegistered);
                        }
                        state.webhook_url = Some(url.clone());
                        self.write_state(&state)?;
                        url
                    }
                    None => return Err(self.malformed()),
                };
                Ok(IngressMode::Webhook {
                    url,
                    secret: secret.clone(),
                })
            }
        }
    }

    async fn freeze(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::FreezeIngress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let mut state = self.state()?;
        if state.previous_consumer.is_none() {
            state.previous_consumer = active(self.store.as_ref())?
                .filter(|a| *a != self.target.active())
                .map(|a| a.consumer());
            self.write_state(&state)?;
        }
        let mode = self.ingress_mode(true).await?;
        freeze_ingress(self.store, self.api, &mode).await?;
        // Every storing transaction re-reads the ingress row: from the
        // freeze's commit on, this head cannot move.
        let head = self.store.source_head(&self.telegram)?;
        self.head = Some(head);
        let how = match mode {
            IngressMode::Polling => "polling",
            IngressMode::Webhook { .. } => "webhook deleted, pending updates kept",
        };
        self.record(kind, format!("{how}; Telegram head at seq {head}"), on_step)
    }

    async fn stop_consumer(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::StopConsumer;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let head = self.head()?;
        let Some(old) = self.state()?.previous_consumer else {
            return self.record(kind, "no consumer was active".to_owned(), on_step);
        };
        {
            let mut tx = self.store.begin()?;
            write_request(
                &mut *tx,
                &old,
                &ConsumerRequest::Stopped {
                    activation_id: self.id.as_str().to_owned(),
                    through_seq: head,
                },
            )?;
            tx.commit()?;
        }
        let started = Instant::now();
        let detail = loop {
            let status = read_status(self.store.as_ref(), &old)?;
            let serving = match &status {
                Some(s)
                    if s.state == ConsumerState::Stopped
                        && s.activation_id.as_deref() == Some(self.id.as_str()) =>
                {
                    let left = unanswered(self.store.as_ref(), &old, &self.telegram, head)?;
                    if left > 0 {
                        return Err(ActivationError::StoppedWithUnanswered {
                            consumer: old,
                            unanswered: left,
                        });
                    }
                    break format!("{old} stopped by serve pid {}", s.process.pid);
                }
                // Evidence that cannot be judged counts as live: wait.
                Some(s) => !matches!(liveness(&s.process), Ok(Liveness::Gone)),
                None => false,
            };
            if !serving {
                let left = unanswered(self.store.as_ref(), &old, &self.telegram, head)?;
                if left > 0 {
                    return Err(ActivationError::UnansweredWithoutServe {
                        consumer: old,
                        unanswered: left,
                    });
                }
                break format!("{old} was not running; nothing left unanswered");
            }
            if started.elapsed() >= self.options.stop_timeout {
                return Err(ActivationError::StopTimedOut {
                    consumer: old,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(self.options.poll_every).await;
        };
        self.record(kind, detail, on_step)
    }

    fn install(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::InstallDeclaration;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let decl = self.target.declaration();
        decl.install(self.store.as_ref())?;
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        decl.verify(&*tx)?;
        let installed = install_files(&mut *tx, decl, &self.target.yaml, &self.telegram)?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        let detail = format!(
            "{}@{} fingerprint {}, declaration {}, prompt {}",
            decl.id(),
            decl.version(),
            decl.fingerprint.short(12),
            installed.declaration_sha256.short(12),
            installed
                .prompt_sha256
                .as_ref()
                .map_or("none", |p| p.short(12)),
        );
        self.done(kind, &event, detail, on_step);
        Ok(())
    }

    fn set_progress(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::SetProgress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let head = self.head()?;
        let target = self.target.active();
        let consumer = target.consumer();
        let value = serde_json::to_value(&target).map_err(|_| ActiveError::Malformed)?;
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        self.target.declaration().verify(&*tx)?;
        tx.set_progress(
            &consumer,
            &Progress {
                source: self.telegram.clone(),
                seq: head,
            },
        )?;
        tx.set_control(ACTIVE_DECLARATION, &value)?;
        write_request(&mut *tx, &consumer, &ConsumerRequest::Running {})?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        self.done(
            kind,
            &event,
            format!("{consumer} at seq {head} (replay: now); active declaration switched"),
            on_step,
        );
        Ok(())
    }

    async fn await_ready(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::AwaitReady;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let bundle = self.bundle()?;
        let consumer = self.target.active().consumer();
        let previous = self.state()?.previous_consumer;
        let started = Instant::now();
        let live = |status: &Option<crate::cooperation::ConsumerStatus>| {
            status
                .as_ref()
                .is_some_and(|s| matches!(liveness(&s.process), Ok(Liveness::Live)))
        };
        let pid = loop {
            let status = read_status(self.store.as_ref(), &consumer)?;
            if let Some(s) = &status {
                let current = s.state == ConsumerState::Running
                    && s.declaration_fingerprint == self.target.declaration().fingerprint;
                if current && live(&status) {
                    if s.telegram_source != self.telegram {
                        return Err(ActivationError::ReadyMismatch {
                            consumer,
                            what: "telegram source",
                        });
                    }
                    if s.worker_bundle_sha256 != bundle {
                        return Err(ActivationError::ReadyMismatch {
                            consumer,
                            what: "worker bundle",
                        });
                    }
                    break s.process.pid;
                }
            }
            // A serve that may still report: one running the new consumer
            // (rebuilding), or the one that ran the old consumer (following).
            let old = match &previous {
                Some(old) => read_status(self.store.as_ref(), old)?,
                None => None,
            };
            if !live(&status) && !live(&old) && started.elapsed() >= self.options.no_serve_grace {
                return Err(ActivationError::NoServe { consumer });
            }
            if started.elapsed() >= self.options.ready_timeout {
                return Err(ActivationError::ReadyTimedOut {
                    consumer,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(self.options.poll_every).await;
        };
        self.record(
            kind,
            format!(
                "{consumer} ready in serve pid {pid}: {}, worker bundle {}",
                self.telegram,
                bundle.short(12)
            ),
            on_step,
        )
    }

    async fn register_menu(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::RegisterMenu;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let commands = self
            .target
            .active()
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| MenuCommand::new(i, c.command.clone(), c.description.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let report = register_menu(self.api, &commands, self.options.notice_chat).await?;
        let notice = match report.notice_message_id {
            Some(id) => format!("help notice sent (message {id})"),
            None => "no help notice".to_owned(),
        };
        self.record(
            kind,
            format!("{} commands; {notice}", report.commands),
            on_step,
        )
    }

    async fn resume(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::ResumeIngress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let mode = self.ingress_mode(false).await?;
        resume_ingress(self.store, self.api, &mode).await?;
        let how = match mode {
            IngressMode::Polling => "polling",
            IngressMode::Webhook { .. } => "webhook set again to the same URL",
        };
        self.record(kind, how.to_owned(), on_step)
    }
}
