//! The worker self-test (`activate` verify-bundle, `doctor`): the real
//! worker passes on the bytes the broker would run; an unenforced sandbox, a
//! garbled hello or a missing binary fail with their own variant.

use stream_broker::{Broker, SealedWorker, SelfTestError, verify_worker};
use stream_core::payload::ProviderApi;
use stream_testkit::provider::ScriptedProvider;

use crate::common::*;

#[test]
fn the_real_worker_passes_its_self_test_with_the_bundle_id_an_attempt_names() {
    let bundle = verify_worker(&worker(), false).unwrap();
    let sealed = SealedWorker::load(&worker()).unwrap();
    assert_eq!(sealed.sha256(), &bundle);
    let provider = ScriptedProvider::start(vec![]).unwrap();
    let broker = Broker::new(config(worker(), &provider, ProviderApi::OpenaiChat)).unwrap();
    assert_eq!(broker.worker_sha256(), &bundle);
}

#[test]
fn the_self_test_refuses_what_an_attempt_would_refuse() {
    let unenforced = verify_worker(&misbehaving("unsandboxed"), false).unwrap_err();
    assert!(
        matches!(unenforced, SelfTestError::NotEnforced(_)),
        "{unenforced}"
    );
    // The report itself is returned unjudged (doctor shows it per feature).
    let sealed = SealedWorker::load(&misbehaving("unsandboxed")).unwrap();
    sealed.self_test(true).unwrap();

    let garbled = verify_worker(&misbehaving("garbage-hello"), false).unwrap_err();
    assert!(matches!(garbled, SelfTestError::Hello), "{garbled}");

    let missing = std::env::temp_dir().join("no-such-thestream-worker");
    let err = verify_worker(&missing, false).unwrap_err();
    assert!(matches!(err, SelfTestError::Image(_)), "{err}");
    assert!(err.to_string().contains("worker binary"), "{err}");
}
