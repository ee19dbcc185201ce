//! The frame exchange of one attempt, in process over byte buffers.

use std::io::Cursor;

use serde_json::json;
use stream_core::payload::{ProviderApi, RunFailureReason};
use stream_protocol::framing::{parse_frame, write_frame};
use stream_protocol::{
    BrokerResponse, MAX_FRAME_BYTES, ParentFrame, WorkerErrorCode, WorkerFrame, WorkerResult,
};
use stream_worker::serve;

use crate::common::*;

fn frames(parent: &[ParentFrame]) -> Vec<u8> {
    let mut input = Vec::new();
    for frame in parent {
        write_frame(&mut input, frame, MAX_FRAME_BYTES).unwrap();
    }
    input
}

fn run(input: Vec<u8>) -> (Result<(), stream_worker::WorkerFailure>, Vec<WorkerFrame>) {
    let mut out = Vec::new();
    let result = serve(&mut Cursor::new(input), &mut out, json!({"test": true}));
    let frames = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| parse_frame::<WorkerFrame>(l).unwrap())
        .collect();
    (result, frames)
}

fn openai_tool_reply(args: &str) -> String {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "request_memory_change", "arguments": args}}
    ]}, "finish_reason": "tool_calls"}]})
    .to_string()
}

#[test]
fn one_request_then_one_result() {
    for api in [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages] {
        let p = sample_packet(api);
        let expected_request = stream_provider::build_request(&p).unwrap();
        let body = match api {
            ProviderApi::OpenaiChat => openai_tool_reply(&memory_args("x").to_string()),
            ProviderApi::AnthropicMessages => json!({"type": "message", "role": "assistant",
                "content": [{"type": "text", "text": "Saved."},
                            {"type": "tool_use", "id": "toolu_1", "name": "request_memory_change", "input": memory_args("x")}],
                "stop_reason": "tool_use"}).to_string(),
        };
        let input = frames(&[
            ParentFrame::Packet(Box::new(p)),
            ParentFrame::BrokerResponse(BrokerResponse { status: 200, body }),
        ]);
        let (result, out) = run(input);
        result.unwrap();
        assert_eq!(out.len(), 3, "{api:?}");
        assert!(matches!(&out[0], WorkerFrame::Hello(h) if h.sandbox == json!({"test": true})));
        assert!(matches!(&out[1], WorkerFrame::BrokerRequest(r) if r.body == expected_request));
        let WorkerFrame::Result(WorkerResult::Completed(c)) = &out[2] else {
            panic!("{api:?}: {:?}", out[2]);
        };
        assert_eq!(c.calls.len(), 1);
    }
}

/// The worker binary exits in `sent`: by then the whole result frame must
/// be out, and `sent` must not run for an attempt that ends in a failure.
#[test]
fn sent_runs_once_the_result_frame_is_out_and_only_then() {
    let input = frames(&[
        ParentFrame::Packet(Box::new(packet())),
        ParentFrame::BrokerResponse(BrokerResponse {
            status: 200,
            body: openai_tool_reply(&memory_args("x").to_string()),
        }),
    ]);
    let out = stream_testkit::capture::Captured::default();
    let seen = std::cell::Cell::new(None);
    let result = stream_worker::serve_then(
        &mut Cursor::new(input),
        &mut out.clone(),
        json!({"test": true}),
        || {
            let bytes = out.bytes();
            let last = bytes.split(|b| *b == b'\n').rfind(|l| !l.is_empty());
            seen.set(last.map(|l| parse_frame::<WorkerFrame>(l).unwrap()));
        },
    );
    result.unwrap();
    assert!(
        matches!(
            seen.take(),
            Some(WorkerFrame::Result(WorkerResult::Completed(_)))
        ),
        "sent ran before the result was written, or never"
    );

    let called = std::cell::Cell::new(false);
    let failed = stream_worker::serve_then(
        &mut Cursor::new(b"garbage\n".to_vec()),
        &mut Vec::new(),
        json!({"test": true}),
        || called.set(true),
    );
    assert!(failed.is_err());
    assert!(!called.get(), "sent ran for a failed attempt");
}

#[test]
fn provider_statuses_and_bodies_become_reasons() {
    for (status, body, reason) in [
        (500, "oops".to_owned(), RunFailureReason::ProviderTransient),
        (429, "{}".to_owned(), RunFailureReason::ProviderTransient),
        (400, "{}".to_owned(), RunFailureReason::ProviderRejected),
        (
            200,
            "<html>".to_owned(),
            RunFailureReason::ProviderMalformed,
        ),
        (
            200,
            openai_tool_reply("{not json"),
            RunFailureReason::MalformedCall,
        ),
    ] {
        let input = frames(&[
            ParentFrame::Packet(Box::new(packet())),
            ParentFrame::BrokerResponse(BrokerResponse { status, body }),
        ]);
        let (result, out) = run(input);
        result.unwrap();
        assert!(
            matches!(&out[2], WorkerFrame::Result(WorkerResult::Rejected { reason: r }) if *r == reason),
            "{status}: {:?}",
            out[2]
        );
    }
}

#[test]
fn frames_out_of_order_end_the_attempt() {
    let response = ParentFrame::BrokerResponse(BrokerResponse {
        status: 200,
        body: "{}".into(),
    });
    let (result, out) = run(frames(std::slice::from_ref(&response)));
    let failure = result.unwrap_err();
    assert_eq!(failure.code(), WorkerErrorCode::Protocol);
    assert_eq!(out.len(), 1, "only hello was sent");

    let packet_frame = ParentFrame::Packet(Box::new(packet()));
    let (result, out) = run(frames(&[packet_frame.clone(), packet_frame]));
    assert_eq!(result.unwrap_err().code(), WorkerErrorCode::Protocol);
    assert_eq!(out.len(), 2, "hello and the one request");

    let (result, _) = run(b"garbage\n".to_vec());
    assert_eq!(result.unwrap_err().code(), WorkerErrorCode::Protocol);
}

#[test]
fn unusable_packets_are_reported_without_a_request() {
    let mut p = packet();
    p.tools[0].name = "exec".into();
    let (result, out) = run(frames(&[ParentFrame::Packet(Box::new(p))]));
    assert_eq!(result.unwrap_err().code(), WorkerErrorCode::Packet);
    assert_eq!(out.len(), 1);
    let mut p = packet();
    p.history.remove(2); // the tool result: a call left unanswered
    let (result, out) = run(frames(&[ParentFrame::Packet(Box::new(p))]));
    assert_eq!(result.unwrap_err().code(), WorkerErrorCode::Packet);
    assert_eq!(out.len(), 1);
}

#[test]
fn failures_never_carry_argument_text() {
    let canary = stream_testkit::canary::Canary::new("args");
    let bad_args = format!("{{\"operation\": \"{canary}\", ");
    let input = frames(&[
        ParentFrame::Packet(Box::new(packet())),
        ParentFrame::BrokerResponse(BrokerResponse {
            status: 200,
            body: openai_tool_reply(&bad_args),
        }),
    ]);
    let (_, out) = run(input);
    let result = serde_json::to_string(&out[2]).unwrap();
    stream_testkit::canary::assert_no_leak(std::slice::from_ref(&canary), &result, "result frame");
    stream_testkit::canary::assert_no_leak(
        std::slice::from_ref(&canary),
        &format!("{:?}", out[2]),
        "result debug",
    );
}
