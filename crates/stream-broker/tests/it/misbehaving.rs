//! A worker that breaks the protocol is killed and the attempt fails with a
//! content-dark reason; the provider sees at most one request.

use std::time::Duration;

use stream_broker::AttemptError;
use stream_core::payload::{ProviderApi, RunFailureReason as R};
use stream_protocol::ProviderCompat;
use stream_testkit::packets::packet;
use stream_testkit::provider::{Reply, ScriptedCompletion, ScriptedProvider};

use crate::common::*;

fn run(mode: &str, edit: impl FnOnce(&mut stream_broker::BrokerConfig)) -> (AttemptError, usize) {
    let api = ProviderApi::OpenaiChat;
    let provider = ScriptedProvider::start(vec![
        Reply::completion(ScriptedCompletion::text("Hi.")),
        Reply::completion(ScriptedCompletion::text("Hi again.")),
    ])
    .unwrap();
    let mut config = config(misbehaving(mode), &provider, api);
    edit(&mut config);
    let err = attempt(config, &packet(api)).expect_err(mode);
    (err, provider.requests().len())
}

/// Each mode of the test worker, the reason its attempt fails with, and
/// how many requests reach the provider.
pub const VIOLATIONS: [(&str, R, usize); 9] = [
    ("garbage-hello", R::WorkerFailed, 0),
    ("unsandboxed", R::SandboxNotEnforced, 0),
    ("garbage-request", R::WorkerFailed, 0),
    ("result-before-request", R::WorkerFailed, 0),
    ("mismatch-model", R::RequestMismatch, 0),
    ("mismatch-tool-choice", R::RequestMismatch, 0),
    ("second-request", R::SecondRequest, 1),
    ("double-request", R::SecondRequest, 1),
    ("extra-after-result", R::WorkerFailed, 1),
];

#[test]
fn protocol_violations_fail_the_attempt() {
    for (mode, reason, requests) in VIOLATIONS {
        let (err, seen) = run(mode, |_| {});
        assert_eq!(err.reason(), reason, "{mode}: {err}");
        assert_eq!(seen, requests, "{mode}: provider requests");
    }
}

/// The compat mode is the parent's: a worker that shapes the request for
/// another server (here, the token-limit field) is refused before anything
/// reaches the provider.
#[test]
fn a_worker_cannot_choose_the_compat_mode() {
    let api = ProviderApi::OpenaiChat;
    for compat in [ProviderCompat::Openai, ProviderCompat::LlamaCpp] {
        let provider =
            ScriptedProvider::start(vec![Reply::completion(ScriptedCompletion::text("Hi."))])
                .unwrap();
        let mut p = packet(api);
        p.provider.compat = compat;
        let err = attempt(config(misbehaving("choose-compat"), &provider, api), &p)
            .expect_err("choose-compat");
        assert_eq!(err.reason(), R::RequestMismatch, "{compat:?}: {err}");
        assert!(provider.requests().is_empty(), "{compat:?}");
    }
}

#[test]
fn too_much_output_kills_the_worker() {
    // One endless line: over the line cap …
    let (err, seen) = run("flood", |c| {
        c.spawn.line_cap = 256 * 1024;
    });
    assert!(
        matches!(err, AttemptError::WorkerOutputExceeded { .. }),
        "{err}"
    );
    assert_eq!(err.reason(), R::WorkerFailed);
    assert_eq!(seen, 0);
    // … or over the total output cap first.
    let (err, seen) = run("flood", |c| {
        c.spawn.output_cap = 128 * 1024;
    });
    assert!(
        matches!(err, AttemptError::WorkerOutputExceeded { .. }),
        "{err}"
    );
    assert_eq!(seen, 0);
}

#[test]
fn a_hanging_worker_times_out() {
    let (err, seen) = run("hang", |c| {
        c.spawn.wall_clock = Duration::from_millis(800);
    });
    assert_eq!(err.reason(), R::WorkerTimeout, "{err}");
    assert_eq!(seen, 0);
}

#[test]
fn the_development_switch_admits_an_unenforced_worker_only_when_on() {
    let (err, _) = run("unsandboxed", |_| {});
    assert!(matches!(err, AttemptError::SandboxNotEnforced(_)), "{err}");
    // With the switch on, the same worker gets past hello (and then fails on
    // what it does next: it is the test worker, not a real one).
    let (err, _) = run("unsandboxed", |c| c.allow_unenforced = true);
    assert!(!matches!(err, AttemptError::SandboxNotEnforced(_)), "{err}");
    assert!(crate::common::logs().contains("allow_unenforced is ON"));
}
