//! `thestream activate`: the recovery procedure of `docs/design.md §17` as
//! recorded, resumable steps.
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
//!    ([`ConsumerRequest::Stopped`](crate::cooperation::ConsumerRequest::Stopped)) and waits until the serve running it
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

mod bundle;
mod error;
mod plan;
mod record;
mod steps;

pub use bundle::verify_bundle;
pub use error::ActivationError;
pub use plan::{
    ActivationOptions, ActivationOutcome, IngressPlan, StepOutcome, StepReport, Target, plan,
};
pub use record::{
    ActivationState, RecordedStep, RecordedSteps, activation_id, recorded_activations, state_key,
    unanswered,
};
pub use steps::activate;
