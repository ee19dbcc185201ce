//! Real worker, real broker, scripted provider.

use std::time::Duration;

use serde_json::json;
use stream_core::payload::{ProviderApi, RunFailureReason as R, ThinkingMarker};
use stream_protocol::{CallResult, OutputMode, Packet, WorkerResult};
use stream_testkit::packets::{correction_args, event_id, focus_args, memory_args, packet};
use stream_testkit::provider::{Reply, ScriptedCall, ScriptedCompletion, ScriptedProvider};

use crate::common::*;

const APIS: [ProviderApi; 2] = [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages];

fn mem() -> ScriptedCall {
    ScriptedCall::json(
        "call_mem_1",
        "request_memory_change",
        memory_args("Takes the 7:40 train."),
    )
}

fn cor() -> ScriptedCall {
    ScriptedCall::json(
        "call_cor_1",
        "submit_correction",
        correction_args("Canberra."),
    )
}

/// Runs one attempt of `packet` against one scripted reply; asserts that the
/// provider saw exactly one request, with the parent's credential.
fn one(
    api: ProviderApi,
    p: &Packet,
    reply: Reply,
) -> Result<stream_broker::AttemptReport, stream_broker::AttemptError> {
    let provider = ScriptedProvider::start(vec![reply]).unwrap();
    let outcome = attempt(config(worker(), &provider, api), p);
    let requests = provider.requests();
    assert_eq!(
        requests.len(),
        1,
        "{api:?}: exactly one provider request per run"
    );
    let request = &requests[0];
    match api {
        ProviderApi::OpenaiChat => {
            assert_eq!(request.path, "/v1/chat/completions");
            assert_eq!(
                request.header("authorization"),
                Some(format!("Bearer {}", key()).as_str())
            );
            assert_eq!(request.header("x-api-key"), None);
        }
        ProviderApi::AnthropicMessages => {
            assert_eq!(request.path, "/v1/messages");
            assert_eq!(request.header("x-api-key"), Some(key().as_str()));
            assert_eq!(
                request.header("anthropic-version"),
                Some(stream_broker::ANTHROPIC_VERSION)
            );
            assert_eq!(request.header("authorization"), None);
        }
    }
    assert_eq!(request.json(), stream_provider::build_request(p).unwrap());
    outcome
}

fn completed(
    outcome: Result<stream_broker::AttemptReport, stream_broker::AttemptError>,
) -> stream_protocol::Completion {
    let report = outcome.unwrap();
    assert_eq!(report.status, 200);
    match report.result {
        WorkerResult::Completed(c) => c,
        WorkerResult::Rejected { reason } => panic!("rejected: {}", reason.as_str()),
    }
}

#[test]
fn tool_only_completion_is_captured_with_one_request() {
    for api in APIS {
        let p = packet(api);
        let c = completed(one(
            api,
            &p,
            Reply::completion(ScriptedCompletion::calls(vec![mem()])),
        ));
        assert_eq!(c.text, None);
        assert_eq!(c.calls.len(), 1);
        assert_eq!(c.calls[0].tool, "request_memory_change");
        assert_eq!(c.calls[0].call_id, "call_mem_1");
        assert_eq!(c.calls[0].arguments, memory_args("Takes the 7:40 train."));
        assert_eq!(c.calls[0].result, CallResult::default());
    }
}

#[test]
fn text_and_tool_completion_is_captured() {
    for api in APIS {
        let p = packet(api);
        let reply = ScriptedCompletion {
            texts: vec!["You're right: Canberra. I saved a correction.".into()],
            thinking: Some("the owner is right".into()),
            calls: vec![
                cor(),
                ScriptedCall::json("call_focus", "propose_focus", focus_args("Weekly review.")),
            ],
            cut: false,
        };
        let c = completed(one(api, &p, Reply::completion(reply)));
        assert_eq!(
            c.text.as_deref(),
            Some("You're right: Canberra. I saved a correction.")
        );
        assert_eq!(c.thinking, ThinkingMarker::Redacted);
        let tools: Vec<&str> = c.calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, ["submit_correction", "propose_focus"]);
    }
}

#[test]
fn the_sandbox_report_is_verified_and_returned() {
    let api = ProviderApi::OpenaiChat;
    let report = one(
        api,
        &packet(api),
        Reply::completion(ScriptedCompletion::text("Hi.")),
    )
    .unwrap();
    assert!(stream_sandbox::verify(&report.sandbox, false).is_ok());
    assert!(report.worker.peak_rss_kib > 0);
}

#[test]
fn bad_calls_are_rejected_with_content_dark_reasons() {
    let no_focus = |api| {
        let mut p = packet(api);
        p.tools.retain(|t| t.name != "propose_focus");
        p
    };
    let no_targets = |api| {
        let mut p = packet(api);
        p.capability.correction_targets.clear();
        p
    };
    let strict = |api| {
        let mut p = packet(api);
        p.output_mode = OutputMode::StrictJson;
        p
    };
    let mut extra = memory_args("x");
    extra["path"] = json!("/etc/passwd");
    let mut wrong_type = memory_args("x");
    wrong_type["evidence_event_ids"] = json!("a1");
    let mut foreign_evidence = memory_args("x");
    foreign_evidence["evidence_event_ids"] = json!([event_id(0x99)]);
    let mut foreign_target = correction_args("x");
    foreign_target["target_output"] = json!(event_id(0xa1));
    type Case = (
        &'static str,
        fn(ProviderApi) -> Packet,
        Vec<ScriptedCall>,
        R,
    );
    let cases: Vec<Case> = vec![
        (
            "invalid JSON arguments",
            packet,
            vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                "{\"operation\": \"app",
            )],
            R::MalformedCall,
        ),
        (
            "extra properties",
            packet,
            vec![ScriptedCall::json("c1", "request_memory_change", extra)],
            R::MalformedCall,
        ),
        (
            "wrong types",
            packet,
            vec![ScriptedCall::json(
                "c1",
                "request_memory_change",
                wrong_type,
            )],
            R::MalformedCall,
        ),
        (
            "unexposed tool",
            no_focus,
            vec![ScriptedCall::json("c1", "propose_focus", focus_args("x"))],
            R::UnknownTool,
        ),
        (
            "unknown tool",
            packet,
            vec![ScriptedCall::json("c1", "write_file", json!({}))],
            R::UnknownTool,
        ),
        (
            "four calls",
            packet,
            vec![
                mem(),
                cor(),
                ScriptedCall::json("c3", "propose_focus", focus_args("x")),
                ScriptedCall::json("c4", "submit_correction", correction_args("y")),
            ],
            R::TooManyCalls,
        ),
        (
            "two of one kind",
            packet,
            vec![
                mem(),
                ScriptedCall::json("c2", "request_memory_change", memory_args("again")),
            ],
            R::DuplicateCall,
        ),
        (
            "evidence not admitted",
            packet,
            vec![ScriptedCall::json(
                "c1",
                "request_memory_change",
                foreign_evidence,
            )],
            R::CapabilityEscape,
        ),
        (
            "target not admitted",
            packet,
            vec![ScriptedCall::json(
                "c1",
                "submit_correction",
                foreign_target,
            )],
            R::CapabilityEscape,
        ),
        (
            "latest with no target",
            no_targets,
            vec![cor()],
            R::CapabilityEscape,
        ),
        (
            "oversized arguments",
            packet,
            vec![ScriptedCall::raw(
                "c1",
                "request_memory_change",
                &"x".repeat(stream_core::json::MAX_ARGUMENTS_BYTES + 1),
            )],
            R::OversizedCall,
        ),
        (
            "tool call in strict-json",
            strict,
            vec![mem()],
            R::ToolCallInStrictJson,
        ),
    ];
    for api in APIS {
        for (name, make, calls, reason) in &cases {
            // Anthropic cannot carry invalid JSON in `input`; the scripted
            // provider sends the raw text as a string, which the schema refuses.
            let p = make(api);
            let report = one(
                api,
                &p,
                Reply::completion(ScriptedCompletion::calls(calls.clone())),
            )
            .unwrap();
            match report.result {
                WorkerResult::Rejected { reason: got } => {
                    assert_eq!(got, *reason, "{api:?}: {name}")
                }
                WorkerResult::Completed(_) => panic!("{api:?}: {name} was captured"),
            }
        }
    }
}

#[test]
fn provider_errors_are_rejected_with_the_status_kept() {
    for api in APIS {
        for (status, reason) in [
            (400, R::ProviderRejected),
            (401, R::ProviderRejected),
            (429, R::ProviderTransient),
            (500, R::ProviderTransient),
            (529, R::ProviderTransient),
        ] {
            let report = one(api, &packet(api), Reply::error(status, "scripted_error")).unwrap();
            assert_eq!(report.status, status);
            assert!(stream_provider::parse_error_body(api, &report.body).is_some());
            assert!(
                matches!(report.result, WorkerResult::Rejected { reason: r } if r == reason),
                "{api:?} {status}"
            );
        }
        let report = one(api, &packet(api), Reply::raw(200, "<html>not json</html>")).unwrap();
        assert!(matches!(
            report.result,
            WorkerResult::Rejected {
                reason: R::ProviderMalformed
            }
        ));
    }
}

#[test]
fn provider_timeout_fails_the_attempt() {
    let api = ProviderApi::OpenaiChat;
    let provider = ScriptedProvider::start(vec![
        Reply::completion(ScriptedCompletion::text("late")).delayed(Duration::from_secs(3)),
    ])
    .unwrap();
    let mut config = config(worker(), &provider, api);
    config.http_timeout = Duration::from_millis(300);
    let err = attempt(config, &packet(api)).unwrap_err();
    assert_eq!(err.reason(), R::ProviderTransient, "{err}");
    assert_eq!(provider.requests().len(), 1);
}

#[test]
fn oversized_provider_body_fails_the_attempt() {
    for api in APIS {
        let provider = ScriptedProvider::start(vec![Reply::raw(
            200,
            "x".repeat(stream_protocol::MAX_PROVIDER_BODY_BYTES + 1),
        )])
        .unwrap();
        let err = attempt(config(worker(), &provider, api), &packet(api)).unwrap_err();
        assert_eq!(err.reason(), R::ProviderMalformed, "{err}");
        assert_eq!(provider.requests().len(), 1);
    }
}

#[test]
fn a_missing_credential_fails_before_anything_runs() {
    let provider = ScriptedProvider::start(vec![]).unwrap();
    let mut config = config(worker(), &provider, ProviderApi::OpenaiChat);
    config.api_key_env = "THESTREAM_BROKER_TEST_UNSET_KEY".into();
    assert!(matches!(
        stream_broker::Broker::new(config),
        Err(stream_broker::BrokerError::CredentialMissing { .. })
    ));
    assert!(provider.requests().is_empty());
}

#[test]
fn the_shipped_tool_schemas_work_inside_the_sandbox() {
    // The declarations crate's manifest (what production packets carry):
    // its schemas compile in the sandboxed worker, valid calls are captured,
    // and a bound it carries is enforced.
    use stream_core::payload::ProposalKind;
    for api in APIS {
        let mut p = packet(api);
        p.tools = ProposalKind::ALL
            .into_iter()
            .map(|kind| {
                let spec = stream_declarations::tool_spec(kind);
                stream_protocol::ToolDef {
                    name: spec.name.into(),
                    description: spec.description.into(),
                    input_schema: spec.schema,
                }
            })
            .collect();
        let c = completed(one(
            api,
            &p,
            Reply::completion(ScriptedCompletion::calls(vec![mem(), cor()])),
        ));
        assert_eq!(c.calls.len(), 2, "{api:?}");
        let mut too_long = correction_args("x");
        too_long["replacement"] = json!("y".repeat(4097));
        let report = one(
            api,
            &p,
            Reply::completion(ScriptedCompletion::calls(vec![ScriptedCall::json(
                "c1",
                "submit_correction",
                too_long,
            )])),
        )
        .unwrap();
        assert!(
            matches!(
                report.result,
                WorkerResult::Rejected {
                    reason: R::MalformedCall
                }
            ),
            "{api:?}"
        );
    }
}

/// Every compat mode reaches the provider as the parent rebuilt it (`one`
/// compares), and the worker still validates against the full schema: a
/// replacement over `maxLength` is refused even where llama.cpp's request
/// left the bound out.
#[test]
fn each_compat_mode_is_sent_as_rebuilt_and_validated_in_full() {
    use stream_protocol::ProviderCompat;
    let api = ProviderApi::OpenaiChat;
    for compat in ProviderCompat::ALL {
        let mut p = packet(api);
        p.provider.compat = compat;
        let c = completed(one(
            api,
            &p,
            Reply::completion(ScriptedCompletion::calls(vec![mem()])),
        ));
        assert_eq!(c.calls.len(), 1, "{compat:?}");
        let mut too_long = correction_args("x");
        too_long["replacement"] = json!("y".repeat(4097));
        let report = one(
            api,
            &p,
            Reply::completion(ScriptedCompletion::calls(vec![ScriptedCall::json(
                "c1",
                "submit_correction",
                too_long,
            )])),
        )
        .unwrap();
        assert!(
            matches!(
                report.result,
                WorkerResult::Rejected {
                    reason: R::MalformedCall
                }
            ),
            "{compat:?}"
        );
    }
}

#[test]
fn keyless_provider_gets_no_auth_header() {
    for api in APIS {
        let p = packet(api);
        let provider =
            ScriptedProvider::start(vec![Reply::completion(ScriptedCompletion::text("Hello."))])
                .unwrap();
        let mut config = config(worker(), &provider, api);
        config.api_key_env = String::new();
        let c = completed(attempt(config, &p));
        assert_eq!(c.text.as_deref(), Some("Hello."));
        let requests = provider.requests();
        assert_eq!(requests.len(), 1, "{api:?}");
        assert_eq!(requests[0].header("authorization"), None, "{api:?}");
        assert_eq!(requests[0].header("x-api-key"), None, "{api:?}");
        if api == ProviderApi::AnthropicMessages {
            assert_eq!(
                requests[0].header("anthropic-version"),
                Some(stream_broker::ANTHROPIC_VERSION)
            );
        }
    }
}
