//! The target, the options, and the check made before any step.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stream_core::payload::ActivationStepKind;
use stream_core::text::Label;
use stream_declarations::model::{Context, Kind};
use stream_declarations::{LoadedDeclaration, RegistryError};
use stream_store::Read;
use stream_telegram::WebhookSecret;

use super::error::ActivationError;
use super::record::{RecordedSteps, activation_id, recorded_activations};
use crate::active::{ActiveDeclaration, active};

/// The declaration to activate, read once from its file.
#[derive(Clone)]
pub struct Target {
    declaration: LoadedDeclaration,
    pub(super) yaml: String,
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
    /// An attempt's timeout (`[provider] timeout_secs`): the self-test
    /// waits for the hello no longer than an attempt's worker would.
    pub provider_timeout: std::time::Duration,
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
    /// Whether a serve holds the store: one that does is waited for.
    pub serve_lease: std::sync::Arc<dyn crate::cooperation::ServeLease>,
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
