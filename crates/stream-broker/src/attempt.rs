//! One attempt: the worker's frames in order, the request check, the one
//! HTTP request.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stream_protocol::framing::parse_frame;
use stream_protocol::{
    BrokerRequest, BrokerResponse, MAX_FRAME_BYTES, Packet, ParentFrame, WorkerFrame, WorkerResult,
};
use stream_sandbox::{ChildIoError, Ended, Ending, Enforcement, WorkerChild, WorkerImage};

use crate::failure::{AttemptError, Stage};
use crate::forks::{Forks, Hold};
use crate::http::{self, Secret};
use crate::{ALLOW_UNENFORCED_FLAG, Broker, BrokerConfig, Refill};

/// A completed attempt: the worker's result, with everything the parent
/// needs to check it.
pub struct AttemptReport {
    /// The worker's verified sandbox report.
    pub sandbox: Enforcement,
    /// The provider's HTTP status.
    pub status: u16,
    /// The provider's raw body (at most `MAX_PROVIDER_BODY_BYTES`), for the
    /// parent's own re-parse.
    pub body: String,
    /// The worker's result frame.
    pub result: WorkerResult,
    /// How the worker ended (exit status, peak RSS, CPU time).
    pub worker: Ended,
}

impl fmt::Debug for AttemptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outcome = match &self.result {
            WorkerResult::Completed(c) => format!("completed(calls={})", c.calls.len()),
            WorkerResult::Rejected { reason } => format!("rejected({})", reason.as_str()),
        };
        f.debug_struct("AttemptReport")
            .field("status", &self.status)
            .field("body_len", &self.body.len())
            .field("result", &outcome)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

fn frame_name(frame: &WorkerFrame) -> &'static str {
    match frame {
        WorkerFrame::Hello(_) => "hello",
        WorkerFrame::BrokerRequest(_) => "broker.request",
        WorkerFrame::Result(_) => "result",
        WorkerFrame::Error(_) => "error",
    }
}

/// The worker while an attempt is under way. Dropping it kills and reaps it.
pub(crate) struct Session {
    pub(crate) child: WorkerChild,
    wait: Duration,
    /// After `child`: its pid is released once it is reaped.
    pub(crate) hold: Hold,
}

impl Session {
    pub(crate) fn new(child: WorkerChild, config: &BrokerConfig, hold: Hold) -> Self {
        Self {
            child,
            wait: config.spawn.wall_clock,
            hold,
        }
    }

    /// Reads one frame; kills the worker on anything but a frame.
    fn read(&mut self, stage: Stage) -> Result<WorkerFrame, AttemptError> {
        match self.child.read_line(self.wait) {
            Ok(Some(line)) => parse_frame::<WorkerFrame>(&line).map_err(|_| {
                self.child.kill();
                AttemptError::Garbage { stage }
            }),
            Ok(None) => Err(self.ended_early(stage)),
            Err(e) => Err(AttemptError::from_child(stage, e)),
        }
    }

    /// The worker's output ended: say why (the watchdog's kill at the
    /// deadline also ends it, and must read as a timeout).
    fn ended_early(&mut self, stage: Stage) -> AttemptError {
        match self.child.wait(self.wait).map(|ended| ended.ending) {
            Ok(Ending::KilledForTime) => AttemptError::WorkerTimeout { stage },
            Ok(Ending::KilledForOutput) => AttemptError::WorkerOutputExceeded { stage },
            Ok(Ending::Exited { .. } | Ending::Signaled { .. } | Ending::KilledByParent) => {
                AttemptError::WorkerExited { stage }
            }
            Err(error) => AttemptError::from_child(stage, error),
        }
    }

    /// A frame that is not the one expected: kill, and say what it was.
    fn unexpected(&mut self, stage: Stage, frame: &WorkerFrame) -> AttemptError {
        self.child.kill();
        match (stage, frame) {
            (_, WorkerFrame::Error(e)) => AttemptError::WorkerReported {
                stage,
                code: e.code,
            },
            (Stage::Result | Stage::Exit, WorkerFrame::BrokerRequest(_)) => {
                AttemptError::SecondRequest
            }
            _ => AttemptError::UnexpectedFrame {
                stage,
                got: frame_name(frame),
            },
        }
    }

    fn write(&mut self, stage: Stage, frame: &ParentFrame) -> Result<(), AttemptError> {
        let line = serde_json::to_vec(frame).map_err(|_| AttemptError::ResponseFrameTooLarge)?;
        if line.len() + 1 > MAX_FRAME_BYTES {
            self.child.kill();
            return Err(match stage {
                Stage::Packet => AttemptError::PacketTooLarge {
                    cap: MAX_FRAME_BYTES,
                },
                Stage::Hello | Stage::Request | Stage::Response | Stage::Result | Stage::Exit => {
                    AttemptError::ResponseFrameTooLarge
                }
            });
        }
        self.child
            .write_line(&line)
            .map_err(|e| AttemptError::from_child(stage, e))
    }
}

/// Forks (with [`BrokerConfig::fork_server`]) or spawns the sealed worker,
/// reads its hello and verifies its sandbox report (the one home of that
/// check, for an inline worker and a spare, forked or spawned, alike):
/// nothing is ever sent to a worker this has not accepted.
pub(crate) fn launch(
    config: &BrokerConfig,
    worker: &WorkerImage,
    forks: &Forks,
) -> Result<(Session, Enforcement), AttemptError> {
    let args: Vec<&std::ffi::OsStr> = if config.allow_unenforced {
        vec![ALLOW_UNENFORCED_FLAG.as_ref()]
    } else {
        vec![]
    };
    let child = match forks.child(worker, &args, &config.spawn)? {
        Some(child) => child,
        None => stream_sandbox::spawn_image(worker, &args, &config.spawn)?,
    };
    let hold = forks.hold(child.pid());
    let mut session = Session::new(child, config, hold);
    let hello = match session.read(Stage::Hello)? {
        WorkerFrame::Hello(hello) => hello,
        other => return Err(session.unexpected(Stage::Hello, &other)),
    };
    let Ok(sandbox) = serde_json::from_value::<Enforcement>(hello.sandbox) else {
        session.child.kill();
        return Err(AttemptError::SandboxReportInvalid);
    };
    if let Err(not_enforced) = stream_sandbox::verify(&sandbox, config.allow_unenforced) {
        session.child.kill();
        return Err(not_enforced.into());
    }
    Ok((session, sandbox))
}

/// Phase 2: the packet to an accepted worker, the one request, its check.
fn exchange(
    mut session: Session,
    packet: Box<Packet>,
    expected: &serde_json::Value,
) -> Result<Session, AttemptError> {
    session.write(Stage::Packet, &ParentFrame::Packet(packet))?;
    // While the worker prepares its request: the parent's half of the check.
    let want = stream_core::canon::to_canonical_bytes(expected);
    let request: BrokerRequest = match session.read(Stage::Request)? {
        WorkerFrame::BrokerRequest(request) => request,
        other => return Err(session.unexpected(Stage::Request, &other)),
    };
    let same = match (stream_core::canon::to_canonical_bytes(&request.body), want) {
        (Ok(got), Ok(want)) => got == want,
        (Err(_), _) | (_, Err(_)) => false,
    };
    if !same {
        session.child.kill();
        return Err(AttemptError::RequestMismatch);
    }
    Ok(session)
}

/// Phase 3: the response, the result, a clean exit.
fn finish(
    mut session: Session,
    status: u16,
    body: &str,
) -> Result<(WorkerResult, Ended), AttemptError> {
    session.write(
        Stage::Response,
        &ParentFrame::BrokerResponse(BrokerResponse {
            status,
            body: body.to_owned(),
        }),
    )?;
    session.child.close_stdin();
    // Only reads and the wait follow, each bounded by the deadline.
    session.child.stop_watchdog();
    let result = match session.read(Stage::Result)? {
        WorkerFrame::Result(result) => result,
        other => return Err(session.unexpected(Stage::Result, &other)),
    };
    match session.read(Stage::Exit) {
        Err(AttemptError::WorkerExited { .. }) => {}
        Ok(other) => return Err(session.unexpected(Stage::Exit, &other)),
        Err(e) => return Err(e),
    }
    let ended = session
        .child
        .wait(session.wait)
        .map_err(|e| AttemptError::from_child(Stage::Exit, e))?;
    match ended.ending {
        Ending::Exited { code: 0 } => Ok((result, ended)),
        ending @ (Ending::Exited { .. }
        | Ending::Signaled { .. }
        | Ending::KilledForTime
        | Ending::KilledForOutput
        | Ending::KilledByParent) => Err(AttemptError::WorkerEndedBadly { ending }),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AttemptError> + Send + 'static,
) -> Result<T, AttemptError> {
    joined(tokio::task::spawn_blocking(f).await)
}

/// A supervision task's result; one that panicked or was cancelled fails
/// the attempt (its worker was reaped by the drop).
fn joined<T>(
    r: Result<Result<T, AttemptError>, tokio::task::JoinError>,
) -> Result<T, AttemptError> {
    r.map_err(|_| AttemptError::WorkerIo {
        stage: Stage::Exit,
        error: ChildIoError::Io {
            what: "supervision task",
            errno: 0,
        },
    })?
}

pub(crate) async fn run(
    broker: &Broker,
    packet: &Packet,
    durable: impl Future<Output = bool>,
) -> Result<AttemptReport, AttemptError> {
    let outcome = run_inner(broker, packet, durable).await;
    match broker.config.refill {
        Refill::AfterAttempt => broker.workers.refill(),
        Refill::WhenAsked => {}
    }
    let run = packet.run_id.short(12);
    match &outcome {
        Ok(report) => tracing::info!(
            run,
            attempt = packet.attempt,
            status = report.status,
            outcome = ?report,
            "provider attempt finished"
        ),
        Err(e) => tracing::warn!(
            run,
            attempt = packet.attempt,
            reason = e.reason().as_str(),
            error = %e,
            "provider attempt failed"
        ),
    }
    outcome
}

async fn run_inner(
    broker: &Broker,
    packet: &Packet,
    durable: impl Future<Output = bool>,
) -> Result<AttemptReport, AttemptError> {
    let config = broker.config.clone();
    let expected = stream_provider::build_request(packet)?;
    let key: Option<Secret> =
        http::credential(&config.api_key_env).map_err(|_| AttemptError::CredentialMissing)?;
    let api = packet.provider.api;
    let body = stream_provider::body_bytes(&expected)?;

    let packet_owned = Box::new(packet.clone());
    let workers = Arc::clone(&broker.workers);
    // The worker takes the packet and its request is checked on a blocking
    // thread while `durable` runs here; the request leaves only after it.
    let staging = tokio::task::spawn_blocking(move || {
        let (session, sandbox) = workers.take()?;
        Ok((exchange(session, packet_owned, &expected)?, sandbox))
    });
    let durable = durable.await;
    let (session, sandbox) = joined(staging.await)?;
    if !durable {
        blocking(move || {
            drop(session);
            Ok(())
        })
        .await?;
        return Err(AttemptError::Withheld);
    }

    let exchange = http::perform(&broker.client, &config.base_url, api, key.as_ref(), body).await;
    drop(key);
    let (status, response_body) = match exchange {
        Ok(exchange) => exchange,
        Err(e) => {
            // Dropping the session kills and reaps the worker.
            blocking(move || {
                drop(session);
                Ok(())
            })
            .await?;
            return Err(e);
        }
    };
    if status >= 400 {
        // Not model text: the provider's words about our request, bounded
        // and escaped (`stream_provider::provider_words` says why).
        tracing::warn!(
            run = packet.run_id.short(12),
            attempt = packet.attempt,
            status,
            provider_says = %stream_provider::provider_words(&response_body),
            "provider refused the request"
        );
    }
    let body_for_worker = response_body.clone();
    let (result, worker) = blocking(move || finish(session, status, &body_for_worker))
        .await
        .map_err(|failure| AttemptError::AfterResponse {
            status,
            failure: Box::new(failure),
        })?;
    Ok(AttemptReport {
        sandbox,
        status,
        body: response_body,
        result,
        worker,
    })
}
