//! Routing, retries, backoff and `follow` of the consumer, in process: the engine
//! with a scripted [`Attempter`] (the seam the broker implements) over a
//! `FaultyStore`. What each attempt returns is scripted; how the engine
//! routes, judges, retries, waits and records is the code under test.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stream_broker::{AttemptError, AttemptReport, Stage};
use stream_context::packet::Packet;
use stream_core::payload::{
    BotCommand, CommandRef, DeliveryReceipt, MessageObservation, MessageReceived, PrivateChat,
    ProviderApi, RunFailed, RunFailureReason,
};
use stream_core::text::BoundedText;
use stream_core::{EventId, NewEvent, RunId, Sha256Hex, SourceName, StoredEvent};
use stream_declarations::install::{InstallError, install_files};
use stream_engine::active::ActiveDeclaration;
use stream_engine::attempter::{AttemptFuture, Attempter, Durable};
use stream_engine::cooperation::CooperationError;
use stream_engine::{Engine, EngineError, EngineSettings, IngressSettings, ProviderSettings};
use stream_store::faulty::FaultyStore;
use stream_store::{EventQuery, Read, SqliteStore, Store};

const OWNER: i64 = 7_000_003;
const BOT: i64 = 4243;

/// Returns its script in order, one entry per attempt, and notes when each
/// attempt came.
struct Scripted {
    script: Mutex<VecDeque<Result<AttemptReport, AttemptError>>>,
    calls: Mutex<Vec<Instant>>,
    bundle: Sha256Hex,
    /// When set: each request asserts that its run's snapshot is stored.
    stored_check: Mutex<Option<Arc<dyn Store>>>,
}

impl Scripted {
    fn new(script: Vec<AttemptError>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(script.into_iter().map(Err).collect()),
            calls: Mutex::new(Vec::new()),
            bundle: stream_core::canon::sha256(b"scripted worker"),
            stored_check: Mutex::new(None),
        })
    }

    fn calls(&self) -> Vec<Instant> {
        self.calls.lock().unwrap().clone()
    }
}

impl Attempter for Scripted {
    fn worker_sha256(&self) -> &Sha256Hex {
        &self.bundle
    }

    /// As the broker does: nothing is asked before `durable` says yes.
    fn run_attempt<'a>(&'a self, packet: &'a Packet, durable: Durable<'a>) -> AttemptFuture<'a> {
        Box::pin(async move {
            if !durable.await {
                return Err(AttemptError::Withheld);
            }
            if let Some(store) = self.stored_check.lock().unwrap().as_ref() {
                let run = store
                    .run(&packet.run_id)
                    .unwrap()
                    .expect("the run row is stored");
                let id = run.snapshot_id.expect("the run names its snapshot");
                assert!(
                    store.snapshot(&id).unwrap().is_some(),
                    "the snapshot is stored"
                );
            }
            self.calls.lock().unwrap().push(Instant::now());
            let next = self.script.lock().unwrap().pop_front();
            next.unwrap_or(Err(AttemptError::ProviderUnreachable))
        })
    }

    fn prepare_spare(&self) {}
}

fn settings(dir: &Path, max_attempts: u32, backoff: Duration) -> EngineSettings {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations");
    let context = dir.join("context");
    std::fs::create_dir_all(&context).unwrap();
    std::fs::write(context.join("memory.md"), "---\nid: it\n---\n# Memory\n").unwrap();
    EngineSettings {
        context_root: context,
        max_memory_bytes: 262_144,
        lock_dir: dir.join("locks"),
        trusted_keys: Default::default(),
        telegram_api_base_url: "http://127.0.0.1:9".into(),
        bot_token_env: "UNUSED_BOT_TOKEN".into(),
        owner_user_id: OWNER,
        ingress: IngressSettings::Polling,
        provider: ProviderSettings {
            api: ProviderApi::OpenaiChat,
            base_url: "http://127.0.0.1:9".into(),
            model: "it-model".into(),
            api_key_env: String::new(),
            compat: Default::default(),
        },
        declaration: repo.join("telegram-conversation.v18.yaml"),
        replies_declaration: repo.join("telegram-replies.v2.yaml"),
        worker: dir.join("never-read"),
        allow_unenforced_sandbox: false,
        max_attempts,
        retry_backoff: backoff,
        provider_timeout: Duration::from_secs(5),
    }
}

fn owner_message(store: &dyn Store, update: i64, text: &str, command: Option<BotCommand>) {
    let msg = MessageReceived {
        update_id: update,
        message_id: update,
        chat_id: OWNER,
        chat_type: PrivateChat,
        sender_id: OWNER,
        date: 1_790_000_000,
        text: Some(BoundedText::new(text).unwrap()),
        photo: None,
        photo_too_large: false,
        reply_to_message_id: None,
        command: command.map(|name| CommandRef {
            name,
            args: BoundedText::new("").unwrap(),
        }),
    };
    let event = NewEvent::build(&SourceName::telegram(BOT), None, None, &msg).unwrap();
    store.append(&event).unwrap();
}

/// Every `run.failed` the engine recorded, in order.
fn failures(store: &dyn Read) -> Vec<RunFailed> {
    let source = SourceName::agent("telegram-conversation").unwrap();
    store
        .events(&EventQuery::source_after(&source, 0).limit(100))
        .unwrap()
        .iter()
        .filter(|e| e.is::<RunFailed>())
        .map(|e: &StoredEvent| e.decode().unwrap())
        .collect()
}

fn after(status: u16, failure: AttemptError) -> AttemptError {
    AttemptError::AfterResponse {
        status,
        failure: Box::new(failure),
    }
}

fn status(code: u16) -> AttemptError {
    after(
        code,
        AttemptError::WorkerExited {
            stage: Stage::Result,
        },
    )
}

/// One row: what the attempts return; how many attempts the engine makes,
/// the reasons it records (the last one final), whether it gives up.
struct Row {
    name: &'static str,
    script: Vec<AttemptError>,
    attempts: usize,
    reasons: Vec<RunFailureReason>,
}

#[tokio::test]
async fn retries_and_verdicts_of_a_model_run_table() {
    use RunFailureReason as R;
    let rows = vec![
        Row {
            name: "transient statuses are retried up to max_attempts",
            script: vec![status(503), status(429), status(502)],
            attempts: 3,
            reasons: vec![R::ProviderTransient; 3],
        },
        Row {
            name: "a rejection after a transient failure is final at once",
            script: vec![status(503), status(400)],
            attempts: 2,
            reasons: vec![R::ProviderTransient, R::ProviderRejected],
        },
        Row {
            name: "a worker failure after a 200 is final: one provider request",
            script: vec![after(
                200,
                AttemptError::WorkerExited {
                    stage: Stage::Result,
                },
            )],
            attempts: 1,
            reasons: vec![R::WorkerFailed],
        },
        Row {
            name: "a provider timeout is retried",
            script: vec![AttemptError::ProviderTimeout, status(400)],
            attempts: 2,
            reasons: vec![R::ProviderTransient, R::ProviderRejected],
        },
        Row {
            name: "a request mismatch is final",
            script: vec![AttemptError::RequestMismatch],
            attempts: 1,
            reasons: vec![R::RequestMismatch],
        },
    ];
    for row in rows {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(FaultyStore::new(
            SqliteStore::open(&dir.path().join("s.db")).unwrap(),
        ));
        let scripted = Scripted::new(row.script);
        let engine = Engine::with_attempter(
            Arc::clone(&store),
            settings(dir.path(), 3, Duration::from_millis(1)),
            SourceName::telegram(BOT),
            scripted.clone(),
        )
        .unwrap();
        owner_message(store.as_ref(), 1, "hello", None);
        let report = engine.process_available().await.unwrap();
        assert_eq!(
            (report.triggers, report.completed, report.failed),
            (1, 0, 1),
            "{}",
            row.name
        );
        assert_eq!(scripted.calls().len(), row.attempts, "{}", row.name);
        let failed = failures(store.as_ref());
        let reasons: Vec<_> = failed.iter().map(|f| f.reason).collect();
        assert_eq!(reasons, row.reasons, "{}", row.name);
        let finals: Vec<_> = failed.iter().map(|f| f.is_final).collect();
        let mut expected = vec![false; row.attempts];
        *expected.last_mut().unwrap() = true;
        assert_eq!(finals, expected, "{}", row.name);
    }
}

/// Deterministic commands never reach the attempter.
#[tokio::test]
async fn fixed_replies_make_no_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let scripted = Scripted::new(Vec::new());
    let engine = Engine::with_attempter(
        Arc::clone(&store),
        settings(dir.path(), 3, Duration::from_millis(1)),
        SourceName::telegram(BOT),
        scripted.clone(),
    )
    .unwrap();
    owner_message(store.as_ref(), 1, "/help", Some(BotCommand::Help));
    owner_message(store.as_ref(), 2, "/focus", Some(BotCommand::Focus));
    owner_message(store.as_ref(), 3, "/correct", Some(BotCommand::Correct));
    let report = engine.process_available().await.unwrap();
    assert_eq!((report.triggers, report.completed), (3, 3));
    assert!(scripted.calls().is_empty());
}

/// A message whose photo was over the one photo bound (ingress stored it
/// without the photo, flagged) gets the fixed reply, whatever its caption,
/// and no attempt.
#[tokio::test]
async fn a_photo_over_the_bound_gets_a_fixed_reply_and_no_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let scripted = Scripted::new(Vec::new());
    let engine = Engine::with_attempter(
        Arc::clone(&store),
        settings(dir.path(), 3, Duration::from_millis(1)),
        SourceName::telegram(BOT),
        scripted.clone(),
    )
    .unwrap();
    let msg = MessageReceived {
        update_id: 1,
        message_id: 1,
        chat_id: OWNER,
        chat_type: PrivateChat,
        sender_id: OWNER,
        date: 1_790_000_000,
        text: Some(BoundedText::new("canary-caption what is this?").unwrap()),
        photo: None,
        photo_too_large: true,
        reply_to_message_id: None,
        command: None,
    };
    store
        .append(&NewEvent::build(&SourceName::telegram(BOT), None, None, &msg).unwrap())
        .unwrap();
    let report = engine.process_available().await.unwrap();
    assert_eq!((report.triggers, report.completed), (1, 1));
    assert!(scripted.calls().is_empty());
    let source = SourceName::agent("telegram-replies").unwrap();
    let texts: Vec<String> = store
        .events(&EventQuery::source_after(&source, 0).limit(10))
        .unwrap()
        .iter()
        .filter(|e| e.is::<MessageObservation>())
        .map(|e| {
            e.decode::<MessageObservation>()
                .unwrap()
                .text
                .as_str()
                .to_owned()
        })
        .collect();
    assert_eq!(texts.len(), 1);
    assert!(
        texts[0].starts_with("That photo is larger than 5 MiB"),
        "{texts:?}"
    );
}

/// The backoff before attempt n+1 is at least `retry_backoff · 2^(n-1)`
/// (a lower bound only: the machine may be slower, never faster).
#[tokio::test]
async fn the_backoff_doubles_between_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let scripted = Scripted::new(vec![status(503), status(503), status(503)]);
    let backoff = Duration::from_millis(40);
    let engine = Engine::with_attempter(
        Arc::clone(&store),
        settings(dir.path(), 3, backoff),
        SourceName::telegram(BOT),
        scripted.clone(),
    )
    .unwrap();
    owner_message(store.as_ref(), 1, "hello", None);
    engine.process_available().await.unwrap();
    let calls = scripted.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls[1] - calls[0] >= backoff);
    assert!(calls[2] - calls[1] >= backoff * 2);
}

/// An engine over a `FaultyStore` with `scripted` attempts, and one owner
/// message waiting.
fn faulty_engine(
    dir: &Path,
    scripted: &Arc<Scripted>,
    max_attempts: u32,
) -> (Arc<FaultyStore<SqliteStore>>, Arc<dyn Store>, Engine) {
    let faulty = Arc::new(FaultyStore::new(
        SqliteStore::open(&dir.join("s.db")).unwrap(),
    ));
    let store: Arc<dyn Store> = faulty.clone();
    let engine = Engine::with_attempter(
        Arc::clone(&store),
        settings(dir, max_attempts, Duration::from_millis(1)),
        SourceName::telegram(BOT),
        scripted.clone(),
    )
    .unwrap();
    owner_message(store.as_ref(), 1, "hello", None);
    (faulty, store, engine)
}

/// A store fault at any write of a retrying pass stops it with an error
/// or is survived; either way the next pass converges: attempt numbers go
/// on from what was recorded, none twice, and the run ends given up once.
#[tokio::test]
async fn a_store_fault_at_any_write_of_a_retrying_run_then_a_rerun_converges() {
    let mut faulted = 0;
    for n in 0..40 {
        let dir = tempfile::tempdir().unwrap();
        let scripted = Scripted::new(vec![status(503), status(503), status(503)]);
        let (faulty, store, engine) = faulty_engine(dir.path(), &scripted, 3);
        faulty.fail_at(n);
        if engine.process_available().await.is_err() {
            faulted += 1;
        }
        faulty.heal();
        engine.process_available().await.unwrap();
        let failed = failures(store.as_ref());
        let attempts: Vec<u32> = failed.iter().map(|f| f.attempt).collect();
        assert_eq!(attempts, vec![1, 2, 3], "fault at write {n}");
        let finals = failed.iter().filter(|f| f.is_final).count();
        assert_eq!(finals, 1, "fault at write {n}");
    }
    assert!(faulted > 0, "some write of the pass was faulted");
}

/// The run's snapshot is committed while the first attempt's worker takes
/// the packet, and the request waits for that commit. A store fault at each
/// write of a pass in turn: whenever a request is made, the run's snapshot
/// is already stored (checked by the attempter as it is asked); a fault in
/// the snapshot's commit withholds the request and fails the pass with the
/// store's error; the next pass converges on one final failure.
#[tokio::test]
async fn no_request_leaves_before_the_run_s_snapshot_is_stored() {
    let mut withheld = 0;
    for n in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let scripted = Scripted::new(vec![status(503)]);
        let (faulty, store, engine) = faulty_engine(dir.path(), &scripted, 1);
        *scripted.stored_check.lock().unwrap() = Some(Arc::clone(&store));
        faulty.fail_at(n);
        let first = engine.process_available().await;
        if matches!(first, Err(EngineError::Store(_)))
            && scripted.calls().is_empty()
            && failures(store.as_ref()).is_empty()
        {
            withheld += 1;
        }
        faulty.heal();
        engine.process_available().await.unwrap();
        let failed = failures(store.as_ref());
        assert_eq!(failed.len(), 1, "fault at write {n}");
        assert!(failed[0].is_final, "fault at write {n}");
    }
    assert!(withheld > 0, "some fault fell before the request");
}

/// What following an active row gives: the engine it rebuilds, or its
/// refusal.
enum Followed {
    /// An engine for this consumer, attempts through the same attempter.
    Consumer(&'static str),
    /// Refused: the declaration's files were never installed.
    NotInstalled,
    /// Refused: installed for another Telegram source.
    OtherSource,
    /// Refused: the files do not rebuild to the active row's fingerprint.
    Mismatch,
}

#[tokio::test]
async fn follow_table() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../declarations");
    let load = |name: &str| stream_declarations::LoadedDeclaration::load(&repo.join(name)).unwrap();
    let (v17, v18) = (
        load("telegram-conversation.v17.yaml"),
        load("telegram-conversation.v18.yaml"),
    );
    let yaml18 = std::fs::read_to_string(repo.join("telegram-conversation.v18.yaml")).unwrap();
    type Setup = fn(
        &dyn Store,
        &stream_declarations::LoadedDeclaration,
        &str,
        &stream_declarations::LoadedDeclaration,
    ) -> ActiveDeclaration;
    let rows: Vec<(&str, Setup, Followed)> = vec![
        (
            "an installed version is followed",
            |store, v18, yaml, _| {
                install(store, v18, yaml, BOT);
                ActiveDeclaration::of(v18)
            },
            Followed::Consumer("telegram-conversation@18"),
        ),
        (
            "a version never installed is refused",
            |_, v18, _, _| ActiveDeclaration::of(v18),
            Followed::NotInstalled,
        ),
        (
            "a version installed for another bot is refused",
            |store, v18, yaml, _| {
                install(store, v18, yaml, BOT + 1);
                ActiveDeclaration::of(v18)
            },
            Followed::OtherSource,
        ),
        (
            "an active row naming another fingerprint is refused",
            |store, v18, yaml, v17| {
                install(store, v18, yaml, BOT);
                let mut active = ActiveDeclaration::of(v18);
                active.fingerprint = v17.fingerprint.clone();
                active
            },
            Followed::Mismatch,
        ),
    ];
    for (name, setup, expected) in rows {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(FaultyStore::new(
            SqliteStore::open(&dir.path().join("s.db")).unwrap(),
        ));
        let mut settings = settings(dir.path(), 1, Duration::from_millis(1));
        settings.declaration = repo.join("telegram-conversation.v17.yaml");
        let scripted = Scripted::new(vec![status(400)]);
        let engine = Engine::with_attempter(
            Arc::clone(&store),
            settings,
            SourceName::telegram(BOT),
            scripted.clone(),
        )
        .unwrap();
        assert_eq!(engine.consumer(), "telegram-conversation@17", "{name}");
        let active = setup(store.as_ref(), &v18, &yaml18, &v17);
        let followed = engine.follow(&active);
        match (expected, followed) {
            (Followed::Consumer(consumer), Ok(next)) => {
                assert_eq!(next.consumer(), consumer, "{name}");
                assert_eq!(next.worker_bundle(), engine.worker_bundle(), "{name}");
                owner_message(store.as_ref(), 1, "hello", None);
                next.process_available().await.unwrap();
                assert_eq!(scripted.calls().len(), 1, "{name}: the same attempter");
            }
            (
                Followed::NotInstalled,
                Err(EngineError::Cooperation(CooperationError::Install(
                    InstallError::NotInstalled { .. },
                ))),
            )
            | (Followed::OtherSource, Err(EngineError::Unservable { .. }))
            | (
                Followed::Mismatch,
                Err(EngineError::Cooperation(CooperationError::Install(
                    InstallError::FingerprintMismatch { .. },
                ))),
            ) => {}
            (_, got) => panic!("{name}: got {:?}", got.map(|e| e.consumer())),
        }
    }
}

/// Installs `decl` (registry row and files) for the bot `bot`, as
/// activation's install step does.
fn install(store: &dyn Store, decl: &stream_declarations::LoadedDeclaration, yaml: &str, bot: i64) {
    decl.install(store).unwrap();
    let mut tx = store.begin().unwrap();
    install_files(&mut *tx, decl, yaml, &SourceName::telegram(bot)).unwrap();
    tx.commit().unwrap();
}

/// An undecodable receipt was once skipped, so `/correct` could
/// rewrite an older reply than the one meant; now it records nothing and
/// answers with the fixed failed-run reply.
#[tokio::test]
async fn an_unreadable_receipt_refuses_correct_with_the_fixed_failure_reply() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("s.db")).unwrap());
    let settings = settings(dir.path(), 1, Duration::from_millis(1));
    let replies = stream_declarations::LoadedDeclaration::load(&settings.replies_declaration)
        .unwrap()
        .declaration
        .replies
        .unwrap();
    let scripted = Scripted::new(Vec::new());
    let engine = Engine::with_attempter(
        Arc::clone(&store),
        settings,
        SourceName::telegram(BOT),
        scripted.clone(),
    )
    .unwrap();
    let some = |c: &str| c.repeat(64);
    let receipt = DeliveryReceipt {
        output_event_id: EventId::parse(&some("9")).unwrap(),
        run_id: RunId::parse(&some("8")).unwrap(),
        chat_id: OWNER,
        message_id: 77,
        date: 1_790_000_100,
        root_sender_id: OWNER,
        source_root_event_id: EventId::parse(&some("7")).unwrap(),
        continuation_message_ids: Vec::new(),
    };
    let mut garbled = NewEvent::build(&SourceName::telegram(BOT), None, None, &receipt).unwrap();
    garbled.payload = br#"{"garbled":true}"#.to_vec();
    garbled.payload_sha256 = stream_core::canon::sha256(&garbled.payload);
    store.append(&garbled).unwrap();
    let msg = MessageReceived {
        update_id: 2,
        message_id: 2,
        chat_id: OWNER,
        chat_type: PrivateChat,
        sender_id: OWNER,
        date: 1_790_000_200,
        text: Some(BoundedText::new("/correct better").unwrap()),
        photo: None,
        photo_too_large: false,
        reply_to_message_id: None,
        command: Some(CommandRef {
            name: BotCommand::Correct,
            args: BoundedText::new("better").unwrap(),
        }),
    };
    store
        .append(&NewEvent::build(&SourceName::telegram(BOT), None, None, &msg).unwrap())
        .unwrap();
    let report = engine.process_available().await.unwrap();
    assert_eq!((report.triggers, report.completed), (1, 1));
    let judgments = SourceName::fixed(SourceName::JUDGMENTS);
    assert_eq!(store.source_head(&judgments).unwrap(), 0, "no judgment");
    let source = SourceName::agent("telegram-replies").unwrap();
    let texts: Vec<String> = store
        .events(&EventQuery::source_after(&source, 0).limit(10))
        .unwrap()
        .iter()
        .filter(|e| e.is::<MessageObservation>())
        .map(|e| {
            e.decode::<MessageObservation>()
                .unwrap()
                .text
                .as_str()
                .to_owned()
        })
        .collect();
    assert_eq!(texts, [replies.run_failed.as_str().to_owned()]);
    assert!(scripted.calls().is_empty());
}
