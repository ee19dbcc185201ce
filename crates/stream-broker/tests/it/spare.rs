//! The spare worker (`keep_spare`): spawned and verified while idle, taken
//! by exactly one attempt, its clock restarted when taken, replaced when it
//! died while idle, killed and reaped with the broker.

use std::path::Path;
use std::time::Duration;

use stream_broker::{AttemptError, Broker, BrokerConfig, Refill};
use stream_core::payload::{ProviderApi, RunFailureReason as R};
use stream_protocol::WorkerResult;
use stream_testkit::packets::packet;
use stream_testkit::provider::ScriptedProvider;

use crate::common::*;

const API: ProviderApi = ProviderApi::OpenaiChat;
const READY: Duration = Duration::from_secs(20);

fn spare_config(worker: &Path, provider: &ScriptedProvider) -> BrokerConfig {
    let mut config = config(worker.to_owned(), provider, API);
    config.keep_spare = true;
    config
}

fn completes(runtime: &tokio::runtime::Runtime, broker: &Broker) {
    let report = runtime.block_on(broker.run_attempt(&packet(API))).unwrap();
    assert_eq!(report.status, 200);
    assert!(matches!(report.result, WorkerResult::Completed(_)));
}

fn gone(pid: i32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Waits until `pid` is a zombie (it died; nobody reaped it yet).
fn await_zombie(pid: i32) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.starts_with(" Z"))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// With `Refill::WhenAsked` (serve) the taken spare is replaced only when
/// the caller asks, once its turn's reply is out; by default, at once.
#[test]
fn a_spare_is_replaced_after_the_attempt_or_only_when_asked() {
    let provider = provider(2);
    let runtime = runtime();
    for refill in [Refill::AfterAttempt, Refill::WhenAsked] {
        let mut config = spare_config(&worker(), &provider);
        config.refill = refill;
        let broker = Broker::new(config).unwrap();
        let first = broker.spare_pid(READY).expect("a spare is made at start");
        completes(&runtime, &broker);
        match refill {
            Refill::AfterAttempt => {
                let next = broker.spare_pid(READY).expect("replaced after the attempt");
                assert_ne!(next, first);
            }
            Refill::WhenAsked => {
                // Long enough for a refill begun at the attempt's end to
                // have counted its spawn.
                std::thread::sleep(Duration::from_millis(300));
                assert_eq!(broker.workers_spawned(), 1, "nothing made unasked");
                assert_eq!(broker.spare_pid(Duration::ZERO), None);
                broker.prepare_spare();
                let next = broker.spare_pid(READY).expect("made when asked");
                assert_ne!(next, first);
                assert_eq!(broker.workers_spawned(), 2);
            }
        }
    }
    assert_eq!(provider.requests().len(), 2);
}

#[test]
fn a_spare_killed_while_idle_is_replaced_and_the_attempt_succeeds_with_one_request() {
    let provider = provider(1);
    let broker = Broker::new(spare_config(&worker(), &provider)).unwrap();
    let pid = broker.spare_pid(READY).expect("a spare is made at start");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    await_zombie(pid);
    completes(&runtime(), &broker);
    assert_eq!(provider.requests().len(), 1);
    assert!(gone(pid), "the dead spare was reaped");
    assert!(broker.workers_spawned() >= 2, "a fresh worker replaced it");
}

#[test]
fn each_worker_serves_exactly_one_attempt() {
    let provider = provider(3);
    let broker = Broker::new(spare_config(&worker(), &provider)).unwrap();
    let runtime = runtime();
    let mut pids = Vec::new();
    for attempt in 1..=3u64 {
        let pid = broker.spare_pid(READY).unwrap();
        assert!(!pids.contains(&pid), "attempt {attempt} got a fresh worker");
        pids.push(pid);
        completes(&runtime, &broker);
        assert!(
            gone(pid),
            "attempt {attempt}'s worker exited and was reaped"
        );
    }
    broker.spare_pid(READY).unwrap();
    assert_eq!(
        broker.workers_spawned(),
        4,
        "one worker per attempt + the next spare"
    );
    assert_eq!(provider.requests().len(), 3);
}

#[test]
fn an_attempt_taken_long_after_its_spare_was_spawned_is_not_timed_out() {
    let provider = provider(1);
    let mut config = spare_config(&worker(), &provider);
    config.spawn.wall_clock = Duration::from_millis(1500);
    let broker = Broker::new(config).unwrap();
    broker.spare_pid(READY).unwrap();
    // Idle for twice the wall clock: the parked spare's clock is stopped.
    std::thread::sleep(Duration::from_millis(3000));
    completes(&runtime(), &broker);
    broker.spare_pid(READY).unwrap();
    assert_eq!(
        broker.workers_spawned(),
        2,
        "the idle spare served the attempt (it was not killed and replaced)"
    );
}

#[test]
fn a_taken_spare_that_hangs_is_killed_at_its_restarted_deadline() {
    let provider = provider(1);
    let mut config = spare_config(&misbehaving("hang"), &provider);
    config.spawn.wall_clock = Duration::from_millis(800);
    let broker = Broker::new(config).unwrap();
    broker.spare_pid(READY).unwrap();
    std::thread::sleep(Duration::from_millis(1600));
    let err = runtime()
        .block_on(broker.run_attempt(&packet(API)))
        .unwrap_err();
    assert_eq!(err.reason(), R::WorkerTimeout, "{err}");
    assert!(provider.requests().is_empty());
}

#[test]
fn a_spare_is_verified_as_strictly_as_an_inline_worker() {
    let provider = provider(1);
    let broker = Broker::new(spare_config(&misbehaving("unsandboxed"), &provider)).unwrap();
    let err = runtime()
        .block_on(broker.run_attempt(&packet(API)))
        .unwrap_err();
    assert_eq!(err.reason(), R::SandboxNotEnforced, "{err}");
    assert!(broker.spare_pid(Duration::ZERO).is_none(), "never parked");
    assert!(provider.requests().is_empty());
}

/// The pidfds this process holds for `pid` (`/proc/self/fdinfo`).
fn pidfds_for(pid: i32) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir("/proc/self/fdinfo").unwrap() {
        let Ok(info) = std::fs::read_to_string(entry.unwrap().path()) else {
            continue;
        };
        if info.lines().any(|l| l == format!("Pid:\t{pid}")) {
            count += 1;
        }
    }
    count
}

#[test]
fn dropping_the_broker_kills_and_reaps_the_spare_and_closes_its_descriptors() {
    let provider = provider(1);
    let broker = Broker::new(spare_config(&worker(), &provider)).unwrap();
    completes(&runtime(), &broker);
    let pid = broker.spare_pid(READY).unwrap();
    assert_eq!(pidfds_for(pid), 1);
    drop(broker);
    assert!(gone(pid), "no process, not even a zombie");
    assert_eq!(pidfds_for(pid), 0);
}

/// `run_attempt_after` holds the one provider request until the caller's
/// `durable` resolves (the engine commits the run's snapshot meanwhile):
/// `false` kills and reaps the worker, which had the packet already, and
/// sends nothing; `true`, late, lets exactly one request go after it.
#[test]
fn the_request_waits_for_durable_and_a_withheld_attempt_sends_nothing() {
    let worker = worker();
    let provider = provider(1);
    let broker = Broker::new(spare_config(&worker, &provider)).unwrap();
    let runtime = runtime();

    let pid = broker.spare_pid(READY).unwrap();
    let withheld = runtime
        .block_on(broker.run_attempt_after(&packet(API), async { false }))
        .unwrap_err();
    assert!(matches!(withheld, AttemptError::Withheld), "{withheld:?}");
    assert_eq!(withheld.reason(), R::SnapshotInvalid);
    assert!(provider.requests().is_empty());
    assert!(gone(pid), "the withheld worker is killed and reaped");

    let mut seen_when_durable = None;
    let report = runtime
        .block_on(broker.run_attempt_after(&packet(API), async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            seen_when_durable = Some(provider.requests().len());
            true
        }))
        .unwrap();
    assert_eq!(
        seen_when_durable,
        Some(0),
        "nothing was sent before durable"
    );
    assert_eq!(report.status, 200);
    assert!(matches!(report.result, WorkerResult::Completed(_)));
    assert_eq!(provider.requests().len(), 1);
}
