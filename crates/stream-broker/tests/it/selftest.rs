//! The worker self-test (`activate` verify-bundle, `doctor`): the real
//! worker passes on the bytes the broker would run; an unenforced sandbox, a
//! garbled hello or a missing binary fail with their own variant.

use std::time::{Duration, Instant};

use stream_broker::{
    AttemptTimeout, Broker, SealedWorker, SelfTestError, serve_forks_workers, verify_worker,
};
use stream_core::payload::ProviderApi;
use stream_testkit::provider::ScriptedProvider;

use crate::common::*;

const TIMEOUT: Duration = AttemptTimeout::DEFAULT;

#[test]
fn the_real_worker_passes_its_self_test_with_the_bundle_id_an_attempt_names() {
    let bundle = verify_worker(&worker(), false, TIMEOUT).unwrap();
    let sealed = SealedWorker::load(&worker()).unwrap();
    assert_eq!(sealed.sha256(), &bundle);
    let provider = ScriptedProvider::start(vec![]).unwrap();
    let broker = Broker::new(config(worker(), &provider, ProviderApi::OpenaiChat)).unwrap();
    assert_eq!(broker.worker_sha256(), &bundle);
}

#[test]
fn the_self_test_refuses_what_an_attempt_would_refuse() {
    let unenforced = verify_worker(&misbehaving("unsandboxed"), false, TIMEOUT).unwrap_err();
    assert!(
        matches!(unenforced, SelfTestError::NotEnforced(_)),
        "{unenforced}"
    );
    // The report itself is returned unjudged (doctor shows it per feature).
    let sealed = SealedWorker::load(&misbehaving("unsandboxed")).unwrap();
    sealed.self_test(true, TIMEOUT).unwrap();

    let garbled = verify_worker(&misbehaving("garbage-hello"), false, TIMEOUT).unwrap_err();
    assert!(matches!(garbled, SelfTestError::Hello), "{garbled}");

    let missing = std::env::temp_dir().join("no-such-thestream-worker");
    let err = verify_worker(&missing, false, TIMEOUT).unwrap_err();
    assert!(matches!(err, SelfTestError::Image(_)), "{err}");
    assert!(err.to_string().contains("worker binary"), "{err}");
}

/// The hello is awaited no longer than an attempt's wall clock
/// (`[provider] timeout_secs`), which would refuse a worker that slow.
#[test]
fn the_self_test_waits_for_the_hello_no_longer_than_an_attempt_would() {
    let started = Instant::now();
    let err = verify_worker(&misbehaving("silent"), false, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, SelfTestError::Hello), "{err}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// Serve forks its workers, so the self-test forks one too from the same
/// bytes: the real worker's forked child passes, reporting what a spawned
/// worker does, and a worker that cannot serve forks is refused.
#[test]
fn the_self_test_also_forks_a_worker_when_serve_would() {
    assert!(serve_forks_workers());
    let sealed = SealedWorker::load(&worker()).unwrap();
    let spawned = sealed.self_test(false, TIMEOUT).unwrap();
    let forked = sealed.self_test_forked(false, TIMEOUT).unwrap();
    stream_sandbox::verify(&forked, false).unwrap();
    assert_eq!(forked.namespaces, spawned.namespaces);
    assert_eq!(forked.rlimits, spawned.rlimits);

    let err = verify_worker(&misbehaving("not-a-fork-server"), false, TIMEOUT).unwrap_err();
    assert!(matches!(err, SelfTestError::Fork(_)), "{err}");
}
