//! Test only: a worker that misbehaves in the way its program name says, so
//! the broker's end-to-end tests can prove each misbehaviour is caught.
//! Tests run it through symlinks named after the mode (the parent passes no
//! argument and no environment). Apart from the `unsandboxed` mode it enters
//! the real sandbox first, like `thestream-worker`.
//!
//! Modes: `garbage-hello`, `unsandboxed`, `garbage-request`,
//! `result-before-request`, `mismatch-model`, `mismatch-tool-choice`,
//! `choose-compat` (the request shaped for another server), `flood` (one endless line), `hang` (waits for input that never comes),
//! `second-request` (after the response), `double-request` (two requests
//! back to back), `extra-after-result`, `transient-after-response` (reports
//! `provider-transient` whatever the provider answered), `exit-1-after-result`
//! (a real worker's valid result, then exit code 1), `not-a-fork-server`
//! (a real worker that, like an older build, refuses `--fork-server`).
//!
//! With `--fork-server` it is a fork server (`stream_sandbox::fork`) whose
//! every child misbehaves in its mode, so the same violations are shown to
//! be caught in forked workers.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use stream_protocol::framing::{read_frame, write_frame};
use stream_protocol::{
    BrokerRequest, Hello, MAX_FRAME_BYTES, Packet, ParentFrame, Protocol, WorkerFrame, WorkerResult,
};

fn send(out: &mut impl Write, frame: &WorkerFrame) {
    let _ = write_frame(out, frame, MAX_FRAME_BYTES);
}

fn hello(sandbox: serde_json::Value) -> WorkerFrame {
    WorkerFrame::Hello(Hello {
        protocol: Protocol,
        worker_version: "test".into(),
        sandbox,
    })
}

fn read_packet(input: &mut impl BufRead) -> Option<Packet> {
    match read_frame::<_, ParentFrame>(input, MAX_FRAME_BYTES) {
        Ok(ParentFrame::Packet(p)) => Some(*p),
        Ok(ParentFrame::BrokerResponse(_)) | Err(_) => None,
    }
}

fn request(packet: &Packet) -> Option<WorkerFrame> {
    let body = stream_provider::build_request(packet).ok()?;
    Some(WorkerFrame::BrokerRequest(BrokerRequest { body }))
}

fn main() -> ExitCode {
    let mode = std::env::args()
        .next()
        .and_then(|a| a.rsplit('/').next().map(str::to_owned))
        .unwrap_or_default();
    // A worker that did not enforce anything but says so honestly.
    let policy = stream_sandbox::Policy {
        allow_unenforced: mode == "unsandboxed",
        ..stream_sandbox::Policy::default()
    };
    if std::env::args()
        .skip(1)
        .any(|a| a == stream_protocol::FORK_SERVER_FLAG)
    {
        if mode == "not-a-fork-server" {
            return ExitCode::from(2);
        }
        let Ok(server) = stream_sandbox::enter_fork_server(&policy) else {
            return ExitCode::FAILURE;
        };
        let served = stream_sandbox::fork::serve_forks(&policy, &server, |entered| {
            entered.map_or(1, |report| misbehave(&mode, report))
        });
        return ExitCode::from(u8::from(served.is_err()));
    }
    match stream_sandbox::enter(&policy) {
        Ok(report) => ExitCode::from(misbehave(&mode, report)),
        Err(_) => ExitCode::FAILURE,
    }
}

/// The mode's misbehaviour in a sandboxed process; the exit code.
fn misbehave(mode: &str, mut report: stream_sandbox::Enforcement) -> u8 {
    if mode == "unsandboxed" {
        report.seccomp.status = stream_sandbox::SeccompStatus::NotInstalled;
        report.landlock.status = stream_sandbox::LandlockStatus::NotEnforced;
    }
    let mut out = std::io::stdout().lock();
    let report = serde_json::to_value(&report).unwrap_or_default();
    if mode == "garbage-hello" {
        let _ = out.write_all(b"Hello, parent! This is not a frame.\n");
        return 1;
    }
    let mut input = std::io::stdin().lock();
    if mode == "silent" {
        // No hello at all, until stdin closes: only the parent's wait ends it.
        let _ = std::io::Read::read(&mut input, &mut [0u8; 1]);
        return 1;
    }
    if mode == "exit-1-after-result" || mode == "not-a-fork-server" {
        let served = stream_worker::serve(&mut input, &mut out, report);
        let _ = out.flush();
        return match (mode, served) {
            ("not-a-fork-server", Ok(())) => 0,
            _ => 1,
        };
    }
    send(&mut out, &hello(report));
    let Some(packet) = read_packet(&mut input) else {
        return 1;
    };
    let Some(good) = request(&packet) else {
        return 1;
    };
    match mode {
        "garbage-request" => {
            let _ = out.write_all(b"{\"frame\": \"broker.request\", \"body\": \n");
        }
        "result-before-request" => send(
            &mut out,
            &WorkerFrame::Result(WorkerResult::Rejected {
                reason: stream_core_reason(),
            }),
        ),
        "mismatch-model" | "mismatch-tool-choice" => {
            let mut body = match good {
                WorkerFrame::BrokerRequest(r) => r.body,
                WorkerFrame::Hello(_) | WorkerFrame::Result(_) | WorkerFrame::Error(_) => {
                    return 1;
                }
            };
            if mode == "mismatch-model" {
                body["model"] = serde_json::json!("gpt-4.1-pro-max");
            } else {
                body["tool_choice"] = serde_json::json!("required");
            }
            send(
                &mut out,
                &WorkerFrame::BrokerRequest(BrokerRequest { body }),
            );
        }
        "choose-compat" => {
            // Shapes the request for a server the packet did not name.
            let mut chosen = packet.clone();
            chosen.provider.compat = match packet.provider.compat {
                stream_protocol::ProviderCompat::Openai => stream_protocol::ProviderCompat::Ollama,
                stream_protocol::ProviderCompat::Ollama
                | stream_protocol::ProviderCompat::LlamaCpp
                | stream_protocol::ProviderCompat::Vllm => stream_protocol::ProviderCompat::Openai,
            };
            let Some(frame) = request(&chosen) else {
                return 1;
            };
            send(&mut out, &frame);
        }
        "flood" => {
            let chunk = [b'x'; 64 * 1024];
            while out.write_all(&chunk).is_ok() {}
        }
        "hang" => {
            // Waits for a frame the parent only sends after a request.
            let _ = read_frame::<_, ParentFrame>(&mut input, MAX_FRAME_BYTES);
        }
        "double-request" => {
            send(&mut out, &good);
            send(&mut out, &good);
            let _ = read_frame::<_, ParentFrame>(&mut input, MAX_FRAME_BYTES);
        }
        "transient-after-response" => {
            send(&mut out, &good);
            let _ = read_frame::<_, ParentFrame>(&mut input, MAX_FRAME_BYTES);
            send(
                &mut out,
                &WorkerFrame::Result(WorkerResult::Rejected {
                    reason: stream_core::payload::RunFailureReason::ProviderTransient,
                }),
            );
        }
        "second-request" | "extra-after-result" => {
            send(&mut out, &good);
            let _ = read_frame::<_, ParentFrame>(&mut input, MAX_FRAME_BYTES);
            if mode == "second-request" {
                send(&mut out, &good);
            } else {
                send(
                    &mut out,
                    &WorkerFrame::Result(WorkerResult::Rejected {
                        reason: stream_core_reason(),
                    }),
                );
                let _ = out.write_all(b"one more thing\n");
            }
        }
        _ => return 2,
    }
    let _ = out.flush();
    0
}

fn stream_core_reason() -> stream_core::payload::RunFailureReason {
    stream_core::payload::RunFailureReason::InvalidOutput
}
