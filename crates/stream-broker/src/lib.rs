//! The provider broker: one attempt of one run, in the trusted parent.
//!
//! [`Broker::run_attempt`] spawns `thestream-worker` through
//! `stream_sandbox::spawn` (empty environment, fds 0–2 only, wall-clock
//! deadline, output cap), reads its `hello` and refuses a worker whose
//! sandbox report does not verify, sends the packet, receives exactly one
//! `broker.request`, checks it by rebuilding the expected native request from
//! the packet with `stream-provider` (canonical-JSON equality: api, model,
//! tools and `tool_choice: auto` included), adds the credential, performs
//! exactly one HTTP request, answers `broker.response` and reads the
//! `result`. Anything else — a second request, garbage, an oversized frame,
//! too much output, a timeout — kills the worker and fails the attempt with a
//! content-dark [`AttemptError`] whose [`AttemptError::reason`] is the
//! `RunFailureReason` to record.
//!
//! With [`BrokerConfig::keep_spare`] (serve) the broker keeps one such
//! worker spawned, its hello verified, parked with its wall clock stopped:
//! an attempt takes it (restarting its wall clock) and the next spare
//! is made in the background once it ends, or once the caller asks
//! ([`Refill`]), so spawn and sandbox entry leave the critical path. Each
//! worker still serves exactly one attempt.
//!
//! With [`BrokerConfig::fork_server`] (serve) each worker, spare or inline,
//! is forked by a sandboxed, warmed fork server started from the same
//! sealed image, instead of spawned; a forked worker is checked exactly as
//! a spawned one.
//!
//! [`SealedWorker::self_test`] spawns the same sealed bytes with no packet
//! and returns the sandbox report of its hello ([`verify_worker`] also
//! judges it), and [`SealedWorker::self_test_forked`] does the same for a
//! forked worker: the one home of the worker self-test, for `activate` and
//! `doctor`.
//!
//! Read [`Broker`], [`BrokerConfig`] and [`AttemptReport`] first.
//!
//! This crate is parent-only: it holds the HTTP client and reads the API key
//! from the environment variable the caller names, so the worker must never
//! link it. The key never appears in logs, errors or `Debug` output; neither
//! do packet, request or response contents. It does not re-parse the
//! response for settlement (the caller does, from [`AttemptReport::body`]).

#![deny(missing_docs)]

mod attempt;
mod failure;
mod forks;
mod http;
mod selftest;
mod spare;

pub use attempt::AttemptReport;
pub use failure::{AttemptError, Stage};
pub use http::ANTHROPIC_VERSION;
pub use selftest::{SealedWorker, SelfTestError, verify_worker};
pub use stream_protocol::{ALLOW_UNENFORCED_FLAG, FORK_SERVER_FLAG};
pub use stream_sandbox::ImageError;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use stream_core::Sha256Hex;
use stream_core::payload::ProviderApi;

use stream_protocol::{MAX_FRAME_BYTES, Packet};
use stream_sandbox::{SpawnLimits, StderrMode};

/// How to run attempts.
#[derive(Clone)]
pub struct BrokerConfig {
    /// The `thestream-worker` binary, loaded once by [`Broker::new`].
    pub worker: PathBuf,
    /// Provider base URL (`https://api.openai.com/v1`, `https://api.anthropic.com`).
    pub base_url: String,
    /// The name of the environment variable holding the API key; empty for a
    /// keyless server (no credential, no auth header).
    pub api_key_env: String,
    /// Timeout of the one HTTP request, response body included
    /// ([`AttemptTimeout::http`]).
    pub http_timeout: Duration,
    /// Limits of the worker process (its wall clock covers the whole
    /// attempt: [`AttemptTimeout::wall_clock`]).
    pub spawn: SpawnLimits,
    /// Development only, off by default: accept a worker whose sandbox is not
    /// enforced (logged loudly at every attempt by `stream_sandbox::verify`).
    pub allow_unenforced: bool,
    /// Keep one verified worker parked for the next attempt (off by
    /// default; `serve` turns it on). Costs one idle process, no CPU.
    pub keep_spare: bool,
    /// When a taken spare is replaced (with `keep_spare`).
    pub refill: Refill,
    /// Make each worker by forking a fork server (`stream_sandbox::fork`)
    /// instead of spawning the binary again (off by default; `serve` turns
    /// it on): about 3 ms less CPU a worker. Each child still serves one
    /// attempt, in a worker's sandbox with namespaces of its own, and is
    /// verified as a spawned worker is. A server that cannot start or keeps
    /// failing is logged and workers are spawned.
    pub fork_server: bool,
}

/// Whether `serve` makes its workers with a fork server
/// ([`BrokerConfig::fork_server`]). The one decision: `serve` sets the
/// config from it, and `doctor` and activation's self-test
/// ([`verify_worker`]) test a forked worker too when it says yes, so that
/// they test the path serve takes.
pub fn serve_forks_workers() -> bool {
    true
}

/// When the broker makes the next spare worker after one was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refill {
    /// As soon as the attempt that took it has ended.
    AfterAttempt,
    /// When [`Broker::prepare_spare`] is called. `serve` asks once a turn's
    /// reply is out: a spawn forks this process and takes a core, and made
    /// at the attempt's end it slowed the settlement and delivery that
    /// follow (measured: a paced turn 13.9 -> 10.7 ms with the spawn after
    /// delivery).
    WhenAsked,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerConfig")
            .field("worker", &self.worker)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("http_timeout", &self.http_timeout)
            .field("spawn", &self.spawn)
            .field("allow_unenforced", &self.allow_unenforced)
            .field("keep_spare", &self.keep_spare)
            .field("refill", &self.refill)
            .field("fork_server", &self.fork_server)
            .finish()
    }
}

/// The limits of one attempt, both derived from its one timeout
/// (`[provider] timeout_secs`) by [`AttemptTimeout::of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimeout {
    /// The worker's wall clock: the whole attempt, the timeout itself.
    pub wall_clock: Duration,
    /// The HTTP request's timeout, response body included.
    pub http: Duration,
}

impl AttemptTimeout {
    /// The default timeout of an attempt (`[provider] timeout_secs = 120`).
    pub const DEFAULT: Duration = Duration::from_secs(120);
    /// The most the worker is left beyond the HTTP timeout.
    pub const MAX_MARGIN: Duration = Duration::from_secs(5);

    /// The one rule: the worker's wall clock is `timeout`, and the HTTP
    /// request gets `timeout` less a margin of a quarter of it, at most
    /// [`Self::MAX_MARGIN`]. The margin is the worker's time around the
    /// request: taking the packet and building its request before, parsing
    /// and judging the response (up to 2 MiB) and answering after. Measured,
    /// that is a few ms (docs/performance.md), so 5 s leaves a CPU that a
    /// local model has just saturated plenty of room, and an HTTP timeout
    /// always ends the attempt first: a transient failure that is retried,
    /// not a worker timeout after a 200, which is final. A quarter keeps
    /// the rule meaningful at the smallest timeouts (1 s: 750 ms for HTTP).
    pub fn of(timeout: Duration) -> Self {
        let margin = (timeout / 4).min(Self::MAX_MARGIN);
        Self {
            wall_clock: timeout,
            http: timeout.saturating_sub(margin),
        }
    }
}

impl BrokerConfig {
    /// Defaults: the limits of [`AttemptTimeout::DEFAULT`] (a 115 s HTTP
    /// timeout, a 120 s worker wall clock), lines up to one frame, at most
    /// three frames of output, stderr discarded.
    pub fn new(worker: PathBuf, base_url: String, api_key_env: String) -> Self {
        let limits = AttemptTimeout::of(AttemptTimeout::DEFAULT);
        Self {
            worker,
            base_url,
            api_key_env,
            http_timeout: limits.http,
            spawn: SpawnLimits {
                wall_clock: limits.wall_clock,
                output_cap: 3 * MAX_FRAME_BYTES as u64,
                line_cap: MAX_FRAME_BYTES,
                stderr: StderrMode::Null,
            },
            allow_unenforced: false,
            keep_spare: false,
            refill: Refill::AfterAttempt,
            fork_server: false,
        }
    }

    /// Bounds each attempt by `timeout` (`[provider] timeout_secs`): the
    /// HTTP timeout and the worker's wall clock of [`AttemptTimeout::of`].
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        let limits = AttemptTimeout::of(timeout);
        self.http_timeout = limits.http;
        self.spawn.wall_clock = limits.wall_clock;
        self
    }
}

/// The broker could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The HTTP client could not be built.
    #[error("HTTP client could not be built")]
    Client,
    /// The worker binary could not be loaded and sealed.
    #[error(transparent)]
    Worker(#[from] stream_sandbox::ImageError),
    /// The named environment variable holds no usable key.
    #[error("environment variable {env} holds no API key")]
    CredentialMissing {
        /// The variable's name (never its value).
        env: String,
    },
}

/// Runs attempts; holds the HTTP client (connection pool), the worker
/// binary sealed in memory with its hash, the config, and the spare worker.
/// Dropping it kills and reaps the spare.
#[derive(Debug)]
pub struct Broker {
    config: BrokerConfig,
    client: reqwest::Client,
    workers: Arc<spare::Workers>,
    worker_sha256: Sha256Hex,
}

impl Broker {
    /// Builds the HTTP client (rustls with ring, no redirects, no proxy, the
    /// configured timeout), checks that the key's variable is set, and loads
    /// the worker binary once into a sealed memory file and hashes that copy:
    /// every attempt executes exactly the bytes hashed, whatever happens to
    /// the file on disk afterwards.
    pub fn new(config: BrokerConfig) -> Result<Self, BrokerError> {
        http::credential(&config.api_key_env)?;
        let client = http::client(config.http_timeout)?;
        let SealedWorker { image, sha256 } = SealedWorker::load(&config.worker)?;
        Ok(Self {
            workers: Arc::new(spare::Workers::new(config.clone(), image)),
            config,
            client,
            worker_sha256: sha256,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The SHA-256 of the worker binary every attempt executes (the bundle
    /// id receipts name).
    pub fn worker_sha256(&self) -> &Sha256Hex {
        &self.worker_sha256
    }

    /// Workers made so far, forked or spawned, spares included (each serves
    /// at most one attempt; for tests and diagnostics).
    pub fn workers_spawned(&self) -> u64 {
        self.workers.spawned()
    }

    /// Of [`Broker::workers_spawned`], those forked by the fork server
    /// ([`BrokerConfig::fork_server`]; for tests and diagnostics).
    pub fn workers_forked(&self) -> u64 {
        self.workers.forked()
    }

    /// The pid of the fork server while one runs (for tests and
    /// diagnostics).
    pub fn fork_server_pid(&self) -> Option<i32> {
        self.workers.fork_server_pid()
    }

    /// The pid of the parked spare worker, waiting up to `max_wait` for one
    /// to be ready; `None` without [`BrokerConfig::keep_spare`] (for tests
    /// and benches).
    pub fn spare_pid(&self, max_wait: Duration) -> Option<i32> {
        self.workers.spare_pid(max_wait)
    }

    /// Makes the next spare worker if none is parked or being made (with
    /// [`BrokerConfig::keep_spare`]; see [`Refill::WhenAsked`]). Returns at
    /// once: the spare is made on the broker's own thread.
    pub fn prepare_spare(&self) {
        self.workers.refill();
    }

    /// Runs one attempt of `packet` (see the crate doc). At most one HTTP
    /// request is made, whatever the worker does.
    pub async fn run_attempt(&self, packet: &Packet) -> Result<AttemptReport, AttemptError> {
        attempt::run(self, packet, std::future::ready(true)).await
    }

    /// [`run_attempt`](Self::run_attempt), with the provider request held
    /// until `durable` resolves: the worker takes the packet and its request
    /// is checked meanwhile. `false` kills the worker and sends nothing
    /// ([`AttemptError::Withheld`]). The engine passes the commit of the
    /// run's snapshot, so that the commit's fsync and the worker's work
    /// overlap, and no request ever leaves before the snapshot is durable.
    pub async fn run_attempt_after(
        &self,
        packet: &Packet,
        durable: impl std::future::Future<Output = bool>,
    ) -> Result<AttemptReport, AttemptError> {
        attempt::run(self, packet, durable).await
    }
}

/// Asks the provider for its model list (`doctor`) with the broker's HTTP
/// client and credential rule: no worker, no tokens spent, no run, nothing
/// of a packet sent. `config.worker` is not read. Returns the HTTP status.
pub async fn list_models(config: &BrokerConfig, api: ProviderApi) -> Result<u16, ProbeError> {
    let key = http::credential(&config.api_key_env)?;
    let client = http::client(config.http_timeout)?;
    Ok(http::list_models(&client, &config.base_url, api, key.as_ref()).await?)
}

/// Sends `packet`'s request, built as an attempt's is
/// (`stream_provider::build_request`), straight to the provider (`doctor`'s
/// check that a local server accepts the real tool schemas): no worker, no
/// run. Spends the packet's few output tokens. Returns status and body.
pub async fn chat_probe(
    config: &BrokerConfig,
    packet: &stream_protocol::Packet,
) -> Result<(u16, String), ProbeError> {
    let key = http::credential(&config.api_key_env)?;
    let client = http::client(config.http_timeout)?;
    let body = stream_provider::request_body(packet).map_err(AttemptError::from)?;
    Ok(http::perform(
        &client,
        &config.base_url,
        packet.provider.api,
        key.as_ref(),
        body,
    )
    .await?)
}

/// Why [`list_models`] or [`chat_probe`] got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No client, or no key in the named variable.
    #[error(transparent)]
    Setup(#[from] BrokerError),
    /// The request failed.
    #[error(transparent)]
    Request(#[from] AttemptError),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One timeout gives both limits; the HTTP request always ends first,
    /// so a slow provider is a retried transient failure, never a worker
    /// killed after a 200.
    #[test]
    fn one_timeout_bounds_the_attempt_and_the_http_request_ends_first() {
        let ms = Duration::from_millis;
        for (timeout, http) in [
            (1, ms(750)),
            (2, ms(1500)),
            (3, ms(2250)),
            (20, ms(15_000)),
            (120, ms(115_000)),
            (3600, ms(3_595_000)),
        ] {
            let limits = AttemptTimeout::of(Duration::from_secs(timeout));
            assert_eq!(limits.wall_clock, Duration::from_secs(timeout));
            assert_eq!(limits.http, http, "{timeout} s");
        }
        for secs in 1..=3600 {
            let limits = AttemptTimeout::of(Duration::from_secs(secs));
            let margin = limits.wall_clock - limits.http;
            assert!(margin > Duration::ZERO && margin <= AttemptTimeout::MAX_MARGIN);
        }
        let config = BrokerConfig::new(PathBuf::new(), String::new(), String::new());
        assert_eq!(
            (config.http_timeout, config.spawn.wall_clock),
            (ms(115_000), AttemptTimeout::DEFAULT)
        );
        let config = config.with_attempt_timeout(Duration::from_secs(2));
        assert_eq!(
            (config.http_timeout, config.spawn.wall_clock),
            (ms(1500), ms(2000))
        );
    }
}
