//! Helpers: the real worker binary, the test worker's modes, the broker, the
//! API key (a canary), and a capture of every log line of the test process.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use stream_broker::{AttemptError, AttemptReport, Broker, BrokerConfig};
use stream_core::payload::ProviderApi;
use stream_protocol::Packet;
use stream_testkit::canary::Canary;
use stream_testkit::capture::Captured;
use stream_testkit::provider::ScriptedProvider;

/// The environment variable holding the test key.
pub const KEY_ENV: &str = "THESTREAM_BROKER_TEST_API_KEY";

struct Setup {
    key: Canary,
    logs: Captured,
    modes: tempfile::TempDir,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let key = Canary::new("api-key");
        // SAFETY: set once, before any test of this binary reads the
        // environment (every test calls `setup` first).
        unsafe { std::env::set_var(KEY_ENV, key.as_str()) };
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        let modes = tempfile::tempdir().unwrap();
        let test_worker = stream_testkit::bin::binary("stream-test-worker").unwrap();
        for mode in [
            "garbage-hello",
            "silent",
            "unsandboxed",
            "garbage-request",
            "result-before-request",
            "mismatch-model",
            "mismatch-tool-choice",
            "choose-compat",
            "flood",
            "hang",
            "second-request",
            "double-request",
            "extra-after-result",
            "not-a-fork-server",
        ] {
            std::os::unix::fs::symlink(&test_worker, modes.path().join(mode)).unwrap();
        }
        Setup { key, logs, modes }
    })
}

/// The API key canary.
pub fn key() -> &'static Canary {
    &setup().key
}

/// Everything logged so far by this test process.
pub fn logs() -> String {
    setup().logs.text()
}

/// The real worker.
pub fn worker() -> PathBuf {
    setup();
    stream_testkit::bin::binary("thestream-worker").unwrap()
}

/// The test worker misbehaving as `mode`.
pub fn misbehaving(mode: &str) -> PathBuf {
    setup().modes.path().join(mode)
}

/// A config for `worker` against `provider`, with short limits.
pub fn config(worker: PathBuf, provider: &ScriptedProvider, api: ProviderApi) -> BrokerConfig {
    setup();
    let mut config = BrokerConfig::new(worker, provider.base_url(api), KEY_ENV.into());
    config.http_timeout = Duration::from_secs(5);
    config.spawn.wall_clock = Duration::from_secs(20);
    config
}

/// Runs one attempt on a fresh runtime.
pub fn attempt(config: BrokerConfig, packet: &Packet) -> Result<AttemptReport, AttemptError> {
    let broker = Broker::new(config).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(broker.run_attempt(packet))
}

/// A provider answering "Hi." `replies` times.
pub fn provider(replies: usize) -> ScriptedProvider {
    use stream_testkit::provider::{Reply, ScriptedCompletion};
    ScriptedProvider::start(vec![
        Reply::completion(ScriptedCompletion::text("Hi."));
        replies
    ])
    .unwrap()
}

/// A fresh current-thread runtime.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
