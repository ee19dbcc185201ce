//! Why activation refuses or stops.

use std::path::PathBuf;

use stream_broker::SelfTestError;
use stream_declarations::{DeclarationError, RegistryError};
use stream_store::StoreError;
use stream_telegram::{ApiError, ControlError};

use crate::active::ActiveError;
use crate::cooperation::CooperationError;

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
    /// The worker binary could not be read, or failed its sandbox self-test.
    #[error("verify-bundle: {0}")]
    SelfTest(#[from] SelfTestError),
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
