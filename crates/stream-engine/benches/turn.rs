//! Trusted per-turn overhead with an instant provider: from an update queued
//! at the (loopback) Bot API to its delivery receipt stored, by stage —
//! ingress, snapshot, attempt (packet, worker spawn and sandbox, the one
//! provider request, result), validation + settlement, delivery — against
//! two raw fsync'd SQLite commits plus one bare process spawn measured in the
//! same run. `cargo bench -p stream-engine --bench turn [-- TURNS] [--gap MS]`:
//! turns back to back, or `MS` apart (as an owner's messages come, the
//! spare worker made and warmed between them; the baseline's work is then
//! also measured after the same pause, between the turns).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use stream_core::payload::ProviderApi;
use stream_engine::serve::connect;
use stream_engine::{EngineSettings, IngressSettings, ProviderCompat, ProviderSettings};
use stream_store::{SqliteStore, Store};
use stream_telegram::{DeliveryOptions, PollMode, PollingOptions, deliver_pending, run_polling};
use stream_testkit::provider::{Reply, ScriptedCompletion, ScriptedProvider};
use stream_testkit::raw::RawCommits;
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

const OWNER: i64 = 7_000_001;

fn stats(name: &str, mut v: Vec<Duration>, base: Duration) {
    v.sort();
    let median = v[v.len() / 2];
    let p99 = v[(v.len() * 99 / 100).min(v.len() - 1)];
    println!(
        "{name:<28} median {:>8.2} ms   p99 {:>8.2} ms   median / baseline {:>5.2}",
        median.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        median.as_secs_f64() / base.as_secs_f64()
    );
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gap = args
        .iter()
        .position(|a| a == "--gap")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .map(Duration::from_millis);
    let turns: usize = args
        .iter()
        .take_while(|a| *a != "--gap")
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(60);
    // SAFETY: set before any other thread exists; only this process reads them.
    unsafe {
        std::env::set_var("BENCH_BOT_TOKEN", "4242:fake-token");
        std::env::set_var("BENCH_API_KEY", "sk-bench");
    }
    let worker = stream_testkit::bin::binary("thestream-worker").unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations");
    let dir = tempfile::tempdir().unwrap();
    let context = dir.path().join("context");
    std::fs::create_dir(&context).unwrap();
    std::fs::write(context.join("memory.md"), "---\nid: bench\n---\n# Memory\n").unwrap();
    let store_path = dir.path().join("store.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&store_path).unwrap());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let telegram = runtime
        .block_on(FakeTelegram::start(FakeTelegramConfig::default()))
        .unwrap();
    let provider = ScriptedProvider::start(Vec::new()).unwrap();
    let settings = EngineSettings {
        context_root: context,
        max_memory_bytes: 262_144,
        lock_dir: dir.path().join("locks"),
        trusted_keys: Default::default(),
        telegram_api_base_url: telegram.base_url(),
        bot_token_env: "BENCH_BOT_TOKEN".into(),
        owner_user_id: OWNER,
        ingress: IngressSettings::Polling,
        provider: ProviderSettings {
            api: ProviderApi::OpenaiChat,
            base_url: provider.base_url(ProviderApi::OpenaiChat),
            model: "bench-model".into(),
            api_key_env: "BENCH_API_KEY".into(),
            compat: ProviderCompat::Openai,
        },
        declaration: repo.join("telegram-conversation.v18.yaml"),
        replies_declaration: repo.join("telegram-replies.v2.yaml"),
        worker,
        allow_unenforced_sandbox: false,
        max_attempts: 1,
        retry_backoff: Duration::from_millis(10),
        provider_timeout: Duration::from_secs(30),
    };
    let connected = runtime
        .block_on(connect(Arc::clone(&store), settings))
        .unwrap();
    let (ingress, engine) = (connected.ingress, connected.engine);

    // The baseline's work on the same file; with `--gap`, also after the
    // same idle pause, between the turns (an fsync or a wake-up after idle
    // costs several times its back-to-back figure on a VM).
    let mut raw = RawCommits::open(&store_path).unwrap();
    let mut paced_base = Vec::new();
    let mut ingress_t = Vec::new();
    let (mut snapshot_t, mut attempt_t, mut settle_t) = (Vec::new(), Vec::new(), Vec::new());
    let (mut delivery_t, mut total_t) = (Vec::new(), Vec::new());
    for i in 0..turns + 5 {
        provider.push(Reply::completion(ScriptedCompletion::text(
            "An instant reply.",
        )));
        telegram.push_update(json!({"message": {
            "message_id": 1000 + i, "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
            "chat": {"id": OWNER, "type": "private"}, "date": 1_790_000_000, "text": format!("turn {i}")
        }}));
        if let Some(gap) = gap {
            std::thread::sleep(gap);
            let t = Instant::now();
            raw.commit().unwrap();
            raw.commit().unwrap();
            std::process::Command::new("/bin/true").status().unwrap();
            paced_base.push(t.elapsed());
            std::thread::sleep(gap);
        }
        let start = Instant::now();
        runtime.block_on(async {
            let polled = run_polling(
                &ingress,
                &PollingOptions {
                    timeout_secs: 0,
                    ..PollingOptions::default()
                },
                PollMode::Drain,
                std::future::pending(),
            )
            .await
            .unwrap();
            assert_eq!(polled.stored, 1);
            let stored = Instant::now();
            let report = engine.process_available().await.unwrap();
            assert_eq!(report.completed, 1);
            let processed = Instant::now();
            let delivered = deliver_pending(
                engine.store(),
                ingress.api(),
                ingress.source(),
                &DeliveryOptions::default(),
            )
            .await
            .unwrap();
            assert_eq!(delivered.sent, 1);
            let done = Instant::now();
            // As serve's delivery task does once a pass is done.
            engine.prepare_spare();
            if i >= 5 {
                ingress_t.push(stored - start);
                snapshot_t.push(report.stages.snapshot);
                attempt_t.push(report.stages.attempt);
                settle_t.push(report.stages.settle);
                delivery_t.push(done - processed);
                total_t.push(done - start);
            }
        });
    }

    // Baselines in the same run: one raw fsync'd commit on the same file,
    // and one bare spawn of a trivial binary.
    let commits: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            raw.commit().unwrap();
            t.elapsed()
        })
        .collect();
    let spawns: Vec<Duration> = (0..100)
        .map(|_| {
            let t = Instant::now();
            std::process::Command::new("/bin/true").status().unwrap();
            t.elapsed()
        })
        .collect();
    let (commit, spawn) = (median(commits), median(spawns));
    let baseline = commit * 2 + spawn;
    println!(
        "per-turn overhead, {turns} turns {}, instant scripted provider, sandboxed worker",
        gap.map_or("back to back".to_owned(), |g| format!(
            "{} ms apart",
            g.as_millis()
        ))
    );
    println!(
        "baseline: 2 raw fsync'd commits ({:.2} ms each) + 1 bare spawn of /bin/true ({:.2} ms) = {:.2} ms",
        commit.as_secs_f64() * 1e3,
        spawn.as_secs_f64() * 1e3,
        baseline.as_secs_f64() * 1e3
    );
    stats("ingress (update → stored)", ingress_t, baseline);
    stats("snapshot (scan, build)", snapshot_t, baseline);
    stats("attempt (store ∥ worker, request)", attempt_t, baseline);
    stats("validate + settle", settle_t, baseline);
    stats("delivery (send + receipt)", delivery_t, baseline);
    if !paced_base.is_empty() {
        let paced = median(paced_base);
        println!(
            "baseline after the same gap: {:.2} ms; total median / it {:.2}",
            paced.as_secs_f64() * 1e3,
            median(total_t.clone()).as_secs_f64() / paced.as_secs_f64()
        );
    }
    stats("total (stored → receipt)", total_t, baseline);
}
