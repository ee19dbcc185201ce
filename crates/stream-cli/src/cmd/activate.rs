//! `thestream activate --declaration FILE [--skip-help-notice]`: moves the
//! conversation to another declaration version through the recorded,
//! resumable steps of `stream_engine::activation` (verify-bundle,
//! freeze-ingress, stop-consumer, install-declaration, set-progress,
//! await-ready, register-menu, resume-ingress), cooperating with a running
//! `serve` through control rows. A rerun continues from the first step not
//! recorded. Prints one line per step (ids, counts, hashes only).
//!
//! Exit codes: 0 activated (or already active); 1 a runtime failure or a
//! wait that did not end (no serve running, a timeout: rerun to continue);
//! 2 a refused declaration, bundle or config (nothing changed); 3 a
//! conflict with what is recorded (another activation incomplete, a serve
//! that reported another bundle or source).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use stream_broker::{ImageError, SelfTestError};
use stream_declarations::RegistryError;
use stream_declarations::install::InstallError;
use stream_engine::IngressSettings;
use stream_engine::activation::{
    ActivationError, ActivationOptions, ActivationOutcome, IngressPlan, StepOutcome, Target,
    activate,
};
use stream_engine::active::ActiveError;
use stream_engine::cooperation::CooperationError;
use stream_store::Store;
use stream_telegram::WebhookSecret;

use crate::Ctx;
use crate::exit::{CmdResult, Failure};

/// `activate` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The conversation declaration file to activate (its prompt beside it).
    #[arg(long, value_name = "FILE")]
    declaration: PathBuf,
    /// Register the menu without sending the help notice to the owner's chat.
    #[arg(long)]
    skip_help_notice: bool,
}

/// How long stop-consumer waits for a live serve to answer what was
/// received before the freeze (model runs included) and stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(600);
/// How long await-ready waits for a live serve to rebuild its engine.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long await-ready waits for a serve to appear when none is running.
const NO_SERVE_GRACE: Duration = Duration::from_secs(5);

fn failure(e: ActivationError) -> Failure {
    use ActivationError as E;
    match e {
        E::Declaration(_)
        | E::ChangedWhileReading
        | E::Unreadable { .. }
        | E::NotAConversation { .. }
        | E::SelfTest(
            SelfTestError::Image(ImageError::Read { .. } | ImageError::NotAFile { .. })
            | SelfTestError::Hello
            | SelfTestError::NotEnforced(_),
        )
        | E::WebhookNotRegistered
        | E::Menu(_)
        | E::Registry(RegistryError::FingerprintChanged { .. }) => Failure::usage(e),
        E::OtherActivationIncomplete { .. } | E::ReadyMismatch { .. } | E::StepConflict { .. } => {
            Failure::Conflict(e.into())
        }
        E::Store(s)
        | E::Registry(RegistryError::Store(s))
        | E::Cooperation(
            CooperationError::Store(s) | CooperationError::Install(InstallError::Store(s)),
        )
        | E::Active(ActiveError::Store(s)) => s.into(),
        E::Registry(RegistryError::NotInstalled { .. } | RegistryError::Malformed { .. })
        | E::SelfTest(
            SelfTestError::Image(ImageError::Seal { .. })
            | SelfTestError::Spawn(_)
            | SelfTestError::Fork(_),
        )
        | E::Telegram(_)
        | E::Ingress(_)
        | E::UnansweredWithoutServe { .. }
        | E::StopTimedOut { .. }
        | E::StoppedWithUnanswered { .. }
        | E::NoServe { .. }
        | E::ReadyTimedOut { .. }
        | E::RecordMalformed { .. }
        | E::Cooperation(_)
        | E::Active(_)
        | E::Join => Failure::runtime(e),
    }
}

/// Runs `activate`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    let settings = super::serve::engine_settings(&config)?;
    let target = Target::load(&args.declaration).map_err(failure)?;
    let api = super::bot_api(&config)?;
    let ingress = match &settings.ingress {
        IngressSettings::Polling => IngressPlan::Polling,
        IngressSettings::Webhook { secret_env, .. } => {
            let value = super::secret(secret_env, "telegram.webhook_secret_env")?;
            IngressPlan::Webhook {
                secret: WebhookSecret::new(value)
                    .map_err(|e| Failure::usage(anyhow!("{secret_env}: {e}")))?,
            }
        }
    };
    let notice_chat = super::notice_chat(&config, args.skip_help_notice)?;
    let opened = Arc::new(super::open_store(&config)?);
    let options = ActivationOptions {
        worker: settings.worker.clone(),
        allow_unenforced_sandbox: settings.allow_unenforced_sandbox,
        provider_timeout: settings.provider_timeout,
        ingress,
        notice_chat,
        stop_timeout: STOP_TIMEOUT,
        ready_timeout: READY_TIMEOUT,
        no_serve_grace: NO_SERVE_GRACE,
        poll_every: Duration::from_millis(100),
        serve_lease: opened.clone(),
    };
    let store: Arc<dyn Store> = opened;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the async runtime: {e}")))?;
    let mut print = |report: &stream_engine::activation::StepReport| {
        let mark = match report.outcome {
            StepOutcome::Done => "done",
            StepOutcome::Recorded => "skipped",
        };
        println!("{}: {mark}: {}", report.step.as_str(), report.detail);
    };
    let outcome = runtime
        .block_on(activate(&store, &api, &target, &options, &mut print))
        .map_err(failure)?;
    let decl = target.declaration();
    match outcome {
        ActivationOutcome::AlreadyActive { consumer } => {
            println!("{consumer} is already active; nothing to do");
        }
        ActivationOutcome::Completed {
            activation_id,
            consumer,
            previous,
        } => {
            let replaced = previous.map_or(String::new(), |p| format!(", replacing {p}"));
            println!(
                "activated {consumer} (fingerprint {}; activation {}){replaced}",
                decl.fingerprint.short(12),
                activation_id.get(..12).unwrap_or_default()
            );
        }
    }
    let configured = std::fs::canonicalize(&config.agent.declaration).ok();
    if configured.is_none() || configured != std::fs::canonicalize(&args.declaration).ok() {
        println!(
            "note: agent.declaration in the config names another file; set it to {} so that a restarted serve keeps serving {}@{}",
            args.declaration.display(),
            decl.id(),
            decl.version()
        );
    }
    Ok(())
}
