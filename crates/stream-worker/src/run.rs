//! One attempt over a reader and a writer: hello → packet → broker.request →
//! broker.response → result.

use std::io::{BufRead, Write};

use stream_protocol::framing::{FrameError, read_frame, write_frame};
use stream_protocol::{
    BrokerRequest, Hello, MAX_FRAME_BYTES, ParentFrame, Protocol, WorkerError, WorkerErrorCode,
    WorkerFrame,
};

use crate::capture::{Compiled, PacketError, PreparedPacket, evaluate_response};

/// Why an attempt ended without a result frame. Content-dark.
#[derive(Debug, thiserror::Error)]
pub enum WorkerFailure {
    /// The sandbox could not be entered.
    #[error("sandbox could not be entered")]
    Sandbox,
    /// A frame could not be read or written.
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    /// The parent sent a frame out of order.
    #[error("parent sent {got} where {expected} was expected")]
    OutOfOrder {
        /// The frame expected.
        expected: &'static str,
        /// The frame received.
        got: &'static str,
    },
    /// The packet was unusable.
    #[error("packet: {0}")]
    Packet(#[from] PacketError),
}

impl WorkerFailure {
    /// The content-dark code of the `error` frame for this failure.
    pub fn code(&self) -> WorkerErrorCode {
        match self {
            Self::Sandbox => WorkerErrorCode::Sandbox,
            Self::Frame(_) | Self::OutOfOrder { .. } => WorkerErrorCode::Protocol,
            Self::Packet(_) => WorkerErrorCode::Packet,
        }
    }
}

fn frame_name(frame: &ParentFrame) -> &'static str {
    match frame {
        ParentFrame::Packet(_) => "packet",
        ParentFrame::BrokerResponse(_) => "broker.response",
    }
}

fn send<W: Write>(out: &mut W, frame: &WorkerFrame) -> Result<(), WorkerFailure> {
    Ok(write_frame(out, frame, MAX_FRAME_BYTES)?)
}

/// Runs one attempt after the sandbox is entered: sends `hello` with the
/// sandbox report, then answers the packet with exactly one
/// `broker.request` and, after the response, one `result`.
///
/// On failure the caller sends the `error` frame (see [`WorkerFailure::code`]).
pub fn serve<R: BufRead, W: Write>(
    input: &mut R,
    output: &mut W,
    sandbox: serde_json::Value,
) -> Result<(), WorkerFailure> {
    serve_then(input, output, sandbox, || {})
}

/// [`serve`], calling `sent` once the `result` frame is written and
/// flushed, before anything the attempt holds is freed. The worker binary
/// exits there: the parent waits for that exit before it settles, and
/// freeing the packet, the response and the compiled schemas, then
/// returning through `main`, made every attempt about 0.1 ms longer
/// (`cargo bench -p stream-broker --bench attempt`, with a warm spare).
pub fn serve_then<R: BufRead, W: Write>(
    input: &mut R,
    output: &mut W,
    sandbox: serde_json::Value,
    sent: impl FnOnce(),
) -> Result<(), WorkerFailure> {
    serve_warmed(input, output, sandbox, Compiled::none(), sent)
}

/// [`serve_then`] in a process that has already compiled some tool schemas
/// (a fork server's child): the warm-up takes them instead of compiling.
pub(crate) fn serve_warmed<R: BufRead, W: Write>(
    input: &mut R,
    output: &mut W,
    sandbox: serde_json::Value,
    compiled: Compiled,
    sent: impl FnOnce(),
) -> Result<(), WorkerFailure> {
    send(
        output,
        &WorkerFrame::Hello(Hello {
            protocol: Protocol,
            worker_version: env!("CARGO_PKG_VERSION").into(),
            sandbox,
        }),
    )?;
    // After hello: a spare parked by the parent does this while idle.
    let mut compiled = crate::warm::canned_exchange(compiled);
    let packet = match read_frame::<_, ParentFrame>(input, MAX_FRAME_BYTES)? {
        ParentFrame::Packet(packet) => packet,
        other @ ParentFrame::BrokerResponse(_) => {
            return Err(WorkerFailure::OutOfOrder {
                expected: "packet",
                got: frame_name(&other),
            });
        }
    };
    let prepared = PreparedPacket::reusing(&packet, &mut compiled)?;
    let body = stream_provider::build_request(&packet).map_err(PacketError::from)?;
    send(output, &WorkerFrame::BrokerRequest(BrokerRequest { body }))?;
    let response = match read_frame::<_, ParentFrame>(input, MAX_FRAME_BYTES)? {
        ParentFrame::BrokerResponse(response) => response,
        other @ ParentFrame::Packet(_) => {
            return Err(WorkerFailure::OutOfOrder {
                expected: "broker.response",
                got: frame_name(&other),
            });
        }
    };
    let result = evaluate_response(&prepared, &response);
    send(output, &WorkerFrame::Result(result))?;
    sent();
    Ok(())
}

/// Sends the content-dark `error` frame for `failure`, if the stream still
/// takes it.
pub fn report_failure<W: Write>(output: &mut W, failure: &WorkerFailure) {
    let _ = write_frame(
        output,
        &WorkerFrame::Error(WorkerError {
            code: failure.code(),
        }),
        MAX_FRAME_BYTES,
    );
}
