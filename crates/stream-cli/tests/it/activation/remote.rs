//! A serve on another machine sharing the store: its status rows carry
//! process evidence only its own host can judge (another boot), and
//! activation waits for it because it holds the store's serve lease. Here
//! this test process plays that serve: it holds the lease, obeys the stop
//! request and reports the new version ready.

use stream_engine::cooperation::{
    ConsumerRequest, ConsumerState, ConsumerStatus, ProcessEvidence, read_request, write_status,
};
use stream_store::Store;

use super::*;

/// Evidence of a process on another machine: a boot id that is not ours.
fn elsewhere(pid: u32) -> ProcessEvidence {
    ProcessEvidence {
        format: 1,
        boot_id: "00000000-0000-4000-8000-000000000000".into(),
        pid,
        start_time: 1,
        token: "ab".repeat(16),
    }
}

fn fingerprint(s: &Stack, file: &str) -> stream_core::Fingerprint {
    let ran = run(s, &["declaration-check", file]);
    let hex = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("fingerprint: "))
        .unwrap();
    stream_core::Fingerprint::parse(hex).unwrap()
}

fn report(store: &SqliteStore, consumer: &str, status: &ConsumerStatus) {
    let mut tx = store.begin().unwrap();
    write_status(&mut *tx, consumer, status).unwrap();
    tx.commit().unwrap();
}

#[test]
fn activation_waits_for_a_serve_on_another_machine_by_its_lease() {
    let s = stack(ProviderApi::OpenaiChat);
    configure(&s, V17);
    drain(&s);
    let db = store(&s);
    let lease = match db
        .try_lease(stream_store::LeaseHolder {
            host: "the-other-box".into(),
            pid: 1111,
            started: "2026-01-02T03:04:05Z".into(),
        })
        .unwrap()
    {
        stream_store::LeaseAttempt::Held(lease) => lease,
        stream_store::LeaseAttempt::Taken(by) => panic!("taken by {by:?}"),
    };
    let worker = stream_testkit::bin::binary("thestream-worker").unwrap();
    let bundle = stream_broker::SealedWorker::load(&worker)
        .unwrap()
        .sha256()
        .clone();
    let running = move |fingerprint, pid| ConsumerStatus {
        state: ConsumerState::Running,
        activation_id: None,
        process: elsewhere(pid),
        telegram_source: SourceName::new("telegram:4242").unwrap(),
        worker_bundle_sha256: bundle.clone(),
        declaration_fingerprint: fingerprint,
    };
    let (v17, v18) = (fingerprint(&s, V17), fingerprint(&s, V18));
    report(&db, "telegram-conversation@17", &running(v17.clone(), 1111));

    // The other machine's serve: obeys the stop request, then rebuilds
    // for the active declaration and reports it ready.
    let path = s.store_path();
    let remote = std::thread::spawn(move || {
        let db = SqliteStore::open(&path).unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut stopped = false;
        while Instant::now() < deadline {
            if let ConsumerRequest::Stopped { activation_id, .. } =
                read_request(&db, "telegram-conversation@17").unwrap()
                && !stopped
            {
                let mut status = running(v17.clone(), 1111);
                status.state = ConsumerState::Stopped;
                status.activation_id = Some(activation_id);
                report(&db, "telegram-conversation@17", &status);
                stopped = true;
            }
            let active = db.control("active-declaration").unwrap().unwrap();
            if stopped && active["version"] == json!(18) {
                report(&db, "telegram-conversation@18", &running(v18, 2222));
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    remote.join().unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("stop-consumer: done: telegram-conversation@17 stopped by serve pid 1111"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("telegram-conversation@18 ready in serve pid 2222"),
        "{}",
        ran.stdout
    );
    drop(lease);
}
