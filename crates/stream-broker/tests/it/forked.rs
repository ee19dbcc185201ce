//! Workers forked by the broker's fork server (`fork_server`): each serves
//! one attempt and is checked as a spawned worker is (the same protocol
//! violations are caught); a spare can be forked; a binary that cannot be a
//! fork server, or a server that dies, leaves attempts to spawned workers.

use std::path::Path;
use std::time::Duration;

use stream_broker::{AttemptError, AttemptReport, Broker, BrokerConfig};
use stream_core::payload::ProviderApi;
use stream_protocol::WorkerResult;
use stream_testkit::packets::packet;
use stream_testkit::provider::ScriptedProvider;

use crate::common::*;

fn parent_of(pid: i32) -> Option<u32> {
    stream_testkit::procs::parent_of(u32::try_from(pid).ok()?)
}
use crate::misbehaving::VIOLATIONS;

const API: ProviderApi = ProviderApi::OpenaiChat;

fn forking(worker: &Path, provider: &ScriptedProvider) -> Broker {
    let mut config: BrokerConfig = config(worker.to_owned(), provider, API);
    config.fork_server = true;
    Broker::new(config).unwrap()
}

fn attempt_on(broker: &Broker) -> Result<AttemptReport, AttemptError> {
    runtime().block_on(broker.run_attempt(&packet(API)))
}

fn completes(broker: &Broker) {
    let report = attempt_on(broker).unwrap();
    assert_eq!(report.status, 200);
    assert!(matches!(report.result, WorkerResult::Completed(_)));
}

#[test]
fn forked_workers_complete_attempts_one_each() {
    let provider = provider(3);
    let broker = forking(&worker(), &provider);
    for made in 1..=3 {
        completes(&broker);
        assert_eq!(broker.workers_forked(), made);
        assert_eq!(broker.workers_spawned(), made);
    }
    assert_eq!(provider.requests().len(), 3);
}

#[test]
fn protocol_violations_are_caught_in_forked_workers() {
    for (mode, reason, requests) in VIOLATIONS {
        let provider = provider(2);
        let broker = forking(&misbehaving(mode), &provider);
        let err = attempt_on(&broker).expect_err(mode);
        assert_eq!(err.reason(), reason, "{mode}: {err}");
        assert_eq!(provider.requests().len(), requests, "{mode}");
        assert_eq!(broker.workers_forked(), 1, "{mode}: the worker was forked");
    }
}

#[test]
fn a_forked_spare_is_the_broker_s_child_and_serves_one_attempt() {
    let provider = provider(2);
    let mut config = config(worker(), &provider, API);
    config.fork_server = true;
    config.keep_spare = true;
    let broker = Broker::new(config).unwrap();
    let ready = Duration::from_secs(20);
    let first = broker.spare_pid(ready).expect("a spare");
    assert_eq!(parent_of(first), Some(std::process::id()));
    completes(&broker);
    let next = broker.spare_pid(ready).expect("the next spare");
    assert_ne!(next, first);
    assert_eq!(parent_of(next), Some(std::process::id()));
    completes(&broker);
    // Once the third spare is parked, every worker made was forked.
    broker.spare_pid(ready).expect("the third spare");
    assert_eq!(broker.workers_forked(), 3);
    assert_eq!(broker.workers_spawned(), 3);
}

#[test]
fn a_worker_that_cannot_be_a_fork_server_is_spawned() {
    let provider = provider(2);
    let broker = forking(&misbehaving("not-a-fork-server"), &provider);
    completes(&broker);
    completes(&broker);
    assert_eq!(broker.workers_forked(), 0);
    assert_eq!(broker.workers_spawned(), 2);
    assert_eq!(broker.fork_server_pid(), None);
}

#[test]
fn a_dead_fork_server_is_reaped_and_replaced() {
    let provider = provider(3);
    let broker = forking(&worker(), &provider);
    completes(&broker);
    let server = broker.fork_server_pid().expect("a running fork server");
    // Our child, still unreaped: its pid cannot name another process.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &server.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // The next attempt cannot fork: it spawns, and the dead server is reaped.
    completes(&broker);
    assert_eq!((broker.workers_forked(), broker.workers_spawned()), (1, 2));
    assert!(!Path::new(&format!("/proc/{server}")).exists());
    // The one after starts a new server and forks again.
    completes(&broker);
    assert_eq!(broker.workers_forked(), 2);
    assert_ne!(broker.fork_server_pid(), Some(server));
}
