//! stream.sandbox/1 wire format: golden frames, strictness, framing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Cursor;

use proptest::prelude::*;
use serde_json::json;
use stream_core::payload::{ProviderApi, RunFailureReason, ThinkingMarker};
use stream_core::{EventId, RunId};
use stream_protocol::framing::{FrameError, parse_frame, read_frame, write_frame};
use stream_protocol::*;

fn id(c: char) -> EventId {
    EventId::parse(&c.to_string().repeat(64)).unwrap()
}

fn packet() -> Packet {
    Packet {
        protocol: Protocol,
        run_id: RunId::parse(&"1".repeat(64)).unwrap(),
        attempt: 1,
        provider: ProviderSpec {
            api: ProviderApi::OpenaiChat,
            model: "gpt-4.1-mini".into(),
            max_output_tokens: 1024,
            compat: ProviderCompat::Openai,
        },
        system: "You are a helpful assistant.".into(),
        history: vec![
            HistoryMessage::User { text: Some("What is the capital of France?".into()), image: None },
            HistoryMessage::Assistant {
                text: None,
                tool_calls: vec![HistoryToolCall {
                    id: "proposal_aaaaaaaaaaaa".into(),
                    name: "request_memory_change".into(),
                    arguments: json!({"operation": "append", "proposed_text": "x", "reason": "y", "evidence_event_ids": []}),
                }],
            },
            HistoryMessage::ToolResult {
                call_id: "proposal_aaaaaaaaaaaa".into(),
                content: "Proposal captured as a durable inert proposal; approval and application are pending.".into(),
            },
            HistoryMessage::Assistant { text: Some("I saved that as a memory suggestion.".into()), tool_calls: vec![] },
        ],
        user: HistoryMessage::User {
            text: Some("And of Italy?".into()),
            image: Some(Image { media_type: "image/png".into(), data_base64: "iVBORw0KGgo=".into() }),
        },
        tools: vec![ToolDef {
            name: "submit_correction".into(),
            description: "Propose a correction of one of your earlier replies.".into(),
            input_schema: json!({"type": "object", "additionalProperties": false}),
        }],
        capability: Capability {
            memory_target: true,
            correction_targets: vec![id('b')],
            evidence_ids: vec![id('a'), id('b')],
            max_calls: 3,
        },
        output_mode: OutputMode::Text,
    }
}

fn line<T: serde::Serialize>(frame: &T) -> String {
    serde_json::to_string(frame).unwrap()
}

#[test]
fn frames_golden() {
    let frames = [
        line(&ParentFrame::Packet(Box::new(packet()))),
        line(&ParentFrame::BrokerResponse(BrokerResponse {
            status: 200,
            body: "{}".into(),
        })),
        line(&WorkerFrame::Hello(Hello {
            protocol: Protocol,
            worker_version: "0.1.0".into(),
            sandbox: json!({"seccomp": true}),
        })),
        line(&WorkerFrame::BrokerRequest(BrokerRequest {
            body: json!({"model": "gpt-4.1-mini"}),
        })),
        line(&WorkerFrame::Result(WorkerResult::Completed(Completion {
            text: Some("Rome.".into()),
            thinking: ThinkingMarker::Redacted,
            calls: vec![CapturedCall {
                tool: "submit_correction".into(),
                call_id: "call_1".into(),
                arguments: json!({"target_output": "latest"}),
                result: CallResult::default(),
            }],
        }))),
        line(&WorkerFrame::Result(WorkerResult::Rejected {
            reason: RunFailureReason::TooManyCalls,
        })),
        line(&WorkerFrame::Error(WorkerError {
            code: WorkerErrorCode::Protocol,
        })),
    ];
    insta::assert_snapshot!(frames.join("\n"));
}

#[test]
fn frames_round_trip() {
    let frame = ParentFrame::Packet(Box::new(packet()));
    let mut buf = Vec::new();
    write_frame(&mut buf, &frame, MAX_FRAME_BYTES).unwrap();
    let back: ParentFrame = read_frame(&mut Cursor::new(buf), MAX_FRAME_BYTES).unwrap();
    assert_eq!(back, frame);
}

/// `compat` is left out for `openai` (a default packet keeps its bytes) and
/// carried, round-tripping, for every other mode; an unknown mode is refused.
#[test]
fn provider_compat_is_carried_unless_default() {
    let default = serde_json::to_value(packet()).unwrap();
    assert!(default["provider"].get("compat").is_none());
    for compat in ProviderCompat::ALL {
        let mut p = packet();
        p.provider.compat = compat;
        let frame = ParentFrame::Packet(Box::new(p));
        let bytes = serde_json::to_vec(&frame).unwrap();
        let wire: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let expected = (!compat.is_openai()).then(|| json!(compat.as_str()));
        assert_eq!(wire["provider"].get("compat").cloned(), expected);
        assert_eq!(parse_frame::<ParentFrame>(&bytes).unwrap(), frame);
    }
    let mut bad = serde_json::to_value(ParentFrame::Packet(Box::new(packet()))).unwrap();
    bad["provider"]["compat"] = json!("lm-studio");
    assert!(parse_frame::<ParentFrame>(&serde_json::to_vec(&bad).unwrap()).is_err());
}

#[test]
fn frames_are_strict() {
    let mut packet = serde_json::to_value(ParentFrame::Packet(Box::new(packet()))).unwrap();
    let ok = serde_json::to_vec(&packet).unwrap();
    assert!(parse_frame::<ParentFrame>(&ok).is_ok());
    let mutations: Vec<(&str, serde_json::Value)> = vec![
        ("/protocol", json!("stream.sandbox/2")),
        ("/frame", json!("packets")),
        ("/outputMode", json!("yaml")),
        ("/capability/correctionTargets", json!(["latest"])),
        ("/user/role", json!("system")),
    ];
    for (ptr, value) in mutations {
        let mut bad = packet.clone();
        *bad.pointer_mut(ptr).unwrap() = value;
        assert!(
            parse_frame::<ParentFrame>(&serde_json::to_vec(&bad).unwrap()).is_err(),
            "{ptr}"
        );
    }
    packet
        .as_object_mut()
        .unwrap()
        .insert("credential".into(), json!("sk-canary"));
    assert!(parse_frame::<ParentFrame>(&serde_json::to_vec(&packet).unwrap()).is_err());
    // A worker frame is not a parent frame.
    let result = line(&WorkerFrame::Error(WorkerError {
        code: WorkerErrorCode::Sandbox,
    }));
    assert!(parse_frame::<ParentFrame>(result.as_bytes()).is_err());
    // A call result must say terminate: true.
    let bad_result = json!({"frame": "result", "outcome": "completed", "text": null, "thinking": "none",
        "calls": [{"tool": "t", "callId": "c", "arguments": {}, "result": {"status": "captured", "terminate": false}}]});
    assert!(parse_frame::<WorkerFrame>(&serde_json::to_vec(&bad_result).unwrap()).is_err());
}

#[test]
fn oversized_frames_are_refused_on_both_sides() {
    let frame = WorkerFrame::BrokerRequest(BrokerRequest {
        body: json!("x".repeat(1000)),
    });
    let mut buf = Vec::new();
    assert!(matches!(
        write_frame(&mut buf, &frame, 512),
        Err(FrameError::Oversized { .. })
    ));
    write_frame(&mut buf, &frame, 4096).unwrap();
    let res: Result<WorkerFrame, _> = read_frame(&mut Cursor::new(buf), 512);
    assert!(matches!(res, Err(FrameError::Oversized { cap: 512 })));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_parsers(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let mut cursor = Cursor::new(bytes.clone());
        let _ = read_frame::<_, ParentFrame>(&mut cursor, 1024);
        let _ = parse_frame::<WorkerFrame>(&bytes);
    }

    #[test]
    fn any_text_survives_framing(text in "\\PC{0,200}", status in 100u16..600) {
        let frame = ParentFrame::BrokerResponse(BrokerResponse { status, body: text });
        let mut buf = Vec::new();
        write_frame(&mut buf, &frame, MAX_FRAME_BYTES).unwrap();
        prop_assert_eq!(buf.iter().filter(|&&b| b == b'\n').count(), 1);
        let back: ParentFrame = read_frame(&mut Cursor::new(buf), MAX_FRAME_BYTES).unwrap();
        prop_assert_eq!(back, frame);
    }
}
