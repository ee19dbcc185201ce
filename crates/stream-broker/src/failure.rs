//! How an attempt fails, and where: the content-dark [`AttemptError`] and
//! the reason recorded for it. Its own module because both the attempt and
//! the HTTP request report it.

use stream_core::payload::RunFailureReason;
use stream_protocol::WorkerErrorCode;
use stream_sandbox::{ChildIoError, Ending, NotEnforced};

/// Where in the attempt something happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for `hello`.
    Hello,
    /// Sending the packet.
    Packet,
    /// Waiting for the one `broker.request`.
    Request,
    /// Sending the `broker.response`.
    Response,
    /// Waiting for the `result`.
    Result,
    /// Waiting for the worker to exit after its result.
    Exit,
}

/// Why an attempt failed. Content-dark: stages, codes and counts only —
/// never packet, request, response or argument text, never the key.
#[derive(Debug, thiserror::Error)]
pub enum AttemptError {
    /// The packet cannot be built into a native request.
    #[error("packet cannot be built into a request: {0}")]
    PacketUnbuildable(#[from] stream_provider::BuildError),
    /// The packet frame is over the frame cap.
    #[error("packet frame over {cap} bytes")]
    PacketTooLarge {
        /// The cap.
        cap: usize,
    },
    /// The API key's environment variable is unset or unusable.
    #[error("provider credential missing")]
    CredentialMissing,
    /// The worker could not be started.
    #[error("worker could not be started: {0}")]
    Spawn(#[from] stream_sandbox::SpawnError),
    /// The worker passed its wall-clock deadline and was killed.
    #[error("worker timed out at stage {stage:?}; killed")]
    WorkerTimeout {
        /// Where.
        stage: Stage,
    },
    /// The worker wrote more than its output cap or a line over the frame
    /// cap, and was killed.
    #[error("worker output over its cap at stage {stage:?}; killed")]
    WorkerOutputExceeded {
        /// Where.
        stage: Stage,
    },
    /// Talking to the worker failed.
    #[error("worker i/o failed at stage {stage:?}: {error}")]
    WorkerIo {
        /// Where.
        stage: Stage,
        /// What (content-dark).
        error: ChildIoError,
    },
    /// The worker closed its output early.
    #[error("worker ended its output at stage {stage:?}")]
    WorkerExited {
        /// Where.
        stage: Stage,
    },
    /// The worker wrote something that is not a frame.
    #[error("worker wrote a malformed frame at stage {stage:?}; killed")]
    Garbage {
        /// Where.
        stage: Stage,
    },
    /// The worker sent a valid frame out of order.
    #[error("worker sent {got} at stage {stage:?}; killed")]
    UnexpectedFrame {
        /// Where.
        stage: Stage,
        /// The frame received.
        got: &'static str,
    },
    /// The worker reported an error frame.
    #[error("worker reported error {code:?} at stage {stage:?}")]
    WorkerReported {
        /// Where.
        stage: Stage,
        /// Its code.
        code: WorkerErrorCode,
    },
    /// The hello frame's sandbox report does not parse.
    #[error("worker sandbox report is unreadable")]
    SandboxReportInvalid,
    /// The sandbox report lacks Landlock, seccomp or a required limit.
    #[error("{0}")]
    SandboxNotEnforced(#[from] NotEnforced),
    /// The worker's request differs from the one rebuilt from the packet.
    #[error("worker request does not match the packet; killed")]
    RequestMismatch,
    /// The worker asked for a second provider request.
    #[error("worker asked for a second provider request; killed")]
    SecondRequest,
    /// The provider did not answer within the HTTP timeout.
    #[error("provider request timed out")]
    ProviderTimeout,
    /// The provider could not be reached.
    #[error("provider unreachable")]
    ProviderUnreachable,
    /// The provider's body is over `MAX_PROVIDER_BODY_BYTES`.
    #[error("provider body over the cap (status {status})")]
    ProviderBodyTooLarge {
        /// HTTP status.
        status: u16,
    },
    /// The provider's body is not UTF-8.
    #[error("provider body is not UTF-8 (status {status})")]
    ProviderBodyNotUtf8 {
        /// HTTP status.
        status: u16,
    },
    /// The response does not fit one frame (escaping grew it past the cap).
    #[error("provider response does not fit one frame")]
    ResponseFrameTooLarge,
    /// The worker did not exit cleanly after its result.
    #[error("worker ended {ending:?} after its result")]
    WorkerEndedBadly {
        /// How it ended.
        ending: Ending,
    },
    /// What the attempt stands on (the run's stored snapshot) did not
    /// become durable: the worker was killed and no request was sent. A
    /// caller that withholds an attempt reports its own error, not this one.
    #[error("the attempt was withheld before its request was sent")]
    Withheld,
    /// The provider answered `status`, then the worker failed as `failure`
    /// says (a bad exit after its result, a hang, a second request, …). The
    /// one provider request of the attempt has been made.
    #[error("provider answered {status}, then: {failure}")]
    AfterResponse {
        /// The HTTP status the parent received.
        status: u16,
        /// How the worker failed after it.
        failure: Box<AttemptError>,
    },
}

impl AttemptError {
    /// The content-dark reason to record for this failure.
    pub fn reason(&self) -> RunFailureReason {
        use RunFailureReason as R;
        match self {
            Self::PacketUnbuildable(_) | Self::PacketTooLarge { .. } | Self::Withheld => {
                R::SnapshotInvalid
            }
            Self::CredentialMissing => R::ProviderRejected,
            Self::WorkerTimeout { .. } => R::WorkerTimeout,
            Self::Spawn(_)
            | Self::WorkerOutputExceeded { .. }
            | Self::WorkerIo { .. }
            | Self::WorkerExited { .. }
            | Self::Garbage { .. }
            | Self::UnexpectedFrame { .. }
            | Self::WorkerEndedBadly { .. } => R::WorkerFailed,
            Self::WorkerReported { code, .. } => match code {
                WorkerErrorCode::Sandbox => R::SandboxNotEnforced,
                WorkerErrorCode::Protocol | WorkerErrorCode::Packet => R::WorkerFailed,
            },
            Self::SandboxReportInvalid | Self::SandboxNotEnforced(_) => R::SandboxNotEnforced,
            Self::RequestMismatch => R::RequestMismatch,
            Self::SecondRequest => R::SecondRequest,
            Self::ProviderTimeout | Self::ProviderUnreachable => R::ProviderTransient,
            Self::ProviderBodyTooLarge { .. }
            | Self::ProviderBodyNotUtf8 { .. }
            | Self::ResponseFrameTooLarge => R::ProviderMalformed,
            Self::AfterResponse { failure, .. } => failure.reason(),
        }
    }

    /// The HTTP status the parent received, when the provider answered
    /// before the attempt failed.
    pub fn provider_status(&self) -> Option<u16> {
        if let Self::AfterResponse { status, .. } = self {
            Some(*status)
        } else {
            None
        }
    }

    pub(crate) fn from_child(stage: Stage, error: ChildIoError) -> Self {
        match error {
            ChildIoError::TimedOut => Self::WorkerTimeout { stage },
            ChildIoError::OutputCapExceeded { .. }
            | ChildIoError::LineTooLong { .. }
            | ChildIoError::KilledForOutput => Self::WorkerOutputExceeded { stage },
            ChildIoError::UnterminatedLine { .. }
            | ChildIoError::LineContainsNewline
            | ChildIoError::StdinClosed
            | ChildIoError::Io { .. } => Self::WorkerIo { stage, error },
        }
    }
}
