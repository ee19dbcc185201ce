//! Long-polling ingress end to end against the fake: what is stored, the
//! persisted offset, duplicates, bad input, freeze/resume, and a SIGKILL
//! between commit and acknowledgement.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use stream_core::payload::BotCommand;
use stream_core::{Authorship, SourceName};
use stream_store::{Read, Store};
use stream_telegram::control::{polling_offset, polling_offset_key};
use stream_telegram::{
    Ack, BotApi, BotToken, Ingress, IngressConfig, IngressMode, IngressState, PollMode,
    PollingOptions, UpdateOutcome, freeze_ingress, resume_ingress, run_polling,
};
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::telegram::Fault;

use crate::common::{
    BOT_ID, Env, KillOnDrop, OWNER, STRANGER, bot, fast_options, logs, message_update, messages_in,
    open_store, owner_command, owner_text, text_from,
};

fn quick() -> PollingOptions {
    PollingOptions {
        timeout_secs: 1,
        limit: 100,
        frozen_recheck: Duration::from_millis(20),
        error_backoff: Duration::from_millis(20),
    }
}

async fn drain(ingress: &Ingress) -> stream_telegram::PollReport {
    run_polling(ingress, &quick(), PollMode::Drain, std::future::pending())
        .await
        .unwrap()
}

fn photo_message(sizes: Value, caption: Option<&str>) -> Value {
    let mut m = text_from(OWNER, "unused");
    let map = m.as_object_mut().unwrap();
    map.remove("text");
    map.insert("photo".into(), sizes);
    if let Some(c) = caption {
        map.insert("caption".into(), json!(c));
    }
    message_update(m)
}

#[tokio::test]
async fn polling_stores_owner_messages_before_acknowledging_them() {
    let env = Env::start().await;
    let jpeg_small = [&[0xFF, 0xD8, 0xFF][..], &[1u8; 40]].concat();
    let jpeg_large = [&[0xFF, 0xD8, 0xFF][..], &[2u8; 4000]].concat();
    env.fake.add_file("ph-s", "u-s", jpeg_small);
    env.fake.add_file("ph-l", "u-l", jpeg_large.clone());
    let stranger_canary = Canary::new("stranger");
    let owner_canary = Canary::new("owner-msg");

    let mut reply = text_from(OWNER, &format!("first {owner_canary}"));
    reply["message_id"] = json!(11);
    reply["reply_to_message"] =
        json!({"message_id": 3, "chat": {"id": OWNER, "type": "private"}, "date": 1});
    let first = env.fake.push_update(message_update(reply));
    env.fake.push_update(message_update(text_from(
        STRANGER,
        stranger_canary.as_str(),
    )));
    let photo = env.fake.push_update(photo_message(
        json!([
            {"file_id": "ph-s", "file_unique_id": "u-s", "width": 90, "height": 60, "file_size": 43},
            {"file_id": "ph-l", "file_unique_id": "u-l", "width": 1280, "height": 853, "file_size": 4003},
        ]),
        Some("a caption"),
    ));
    let emoji = "😀 /focus@OurBot plan a trip";
    let command = env.fake.push_update(owner_command(emoji, 3, 13));

    let ingress = env.ingress().await;
    assert_eq!(ingress.source(), &SourceName::telegram(BOT_ID));
    let report = drain(&ingress).await;
    assert_eq!((report.stored, report.dropped), (3, 1), "{report:?}");

    let stored = env.messages();
    assert_eq!(stored.len(), 3);
    let (event, m) = &stored[0];
    assert_eq!(event.event.source.as_str(), format!("telegram:{BOT_ID}"));
    assert_eq!(event.event.authorship, Authorship::External);
    assert!(event.event.sensitive);
    assert_eq!(
        (event.event.root.as_ref(), event.event.parent.as_ref()),
        (None, None)
    );
    assert_eq!(
        (m.update_id, m.message_id, m.chat_id, m.sender_id, m.date),
        (first, 11, OWNER, OWNER, 1_790_000_100)
    );
    assert_eq!(
        m.text.as_ref().unwrap().as_str(),
        format!("first {owner_canary}")
    );
    assert_eq!(m.reply_to_message_id, Some(3));
    assert!(m.photo.is_none() && m.command.is_none());

    let (_, m) = &stored[1];
    assert_eq!(m.update_id, photo);
    assert_eq!(m.text.as_ref().unwrap().as_str(), "a caption");
    let p = m.photo.as_ref().unwrap();
    assert_eq!((p.width, p.height, p.size), (1280, 853, 4003));
    assert_eq!(p.content_type.as_str(), "image/jpeg");
    assert_eq!(env.store.blob(&p.blob_sha256).unwrap().unwrap(), jpeg_large);

    let (_, m) = &stored[2];
    assert_eq!(m.update_id, command);
    let c = m.command.as_ref().unwrap();
    assert_eq!(
        (c.name, c.args.as_str()),
        (BotCommand::Focus, "plan a trip")
    );
    assert_eq!(m.text.as_ref().unwrap().as_str(), emoji);

    // The offset is the one the last update asked for, persisted.
    assert_eq!(
        polling_offset(&*env.store, BOT_ID).unwrap(),
        Some(command + 1)
    );
    // Each getUpdates after the first carries the stored offset, which is
    // what confirms the updates to Telegram.
    let offsets: Vec<Option<i64>> = env
        .fake
        .calls_of("getUpdates")
        .iter()
        .map(|c| c.params.get("offset").and_then(Value::as_i64))
        .collect();
    assert_eq!(offsets, vec![None, Some(command + 1)]);
    assert_eq!(env.fake.pending_updates(), 0);

    // The stranger's message left no trace: not in the store, not in logs.
    let all = env.store.events(&Default::default()).unwrap();
    for e in &all {
        assert_no_leak(
            std::slice::from_ref(&stranger_canary),
            &String::from_utf8_lossy(&e.event.payload),
            "stored payloads",
        );
    }
    assert_eq!(ingress.stats().dropped.get("foreign-sender"), Some(&1));
    assert_no_leak(&[stranger_canary, owner_canary], &logs(), "captured logs");
}

#[tokio::test]
async fn a_duplicate_update_converges() {
    let env = Env::start().await;
    let update = json!({"update_id": 5000, "message": text_from(OWNER, "once")});
    env.fake.push_update(update.clone());
    env.fake.push_update(update.clone());
    let ingress = env.ingress().await;
    let report = drain(&ingress).await;
    assert_eq!((report.stored, report.converged), (1, 1), "{report:?}");
    // Delivered again later (by webhook, or after a lost acknowledgement).
    let again = ingress.handle_update(&update, Ack::Caller).await.unwrap();
    assert!(
        matches!(again, UpdateOutcome::Converged { .. }),
        "{again:?}"
    );
    assert_eq!(env.messages().len(), 1);
}

#[tokio::test]
async fn bad_input_is_dropped_and_ingress_keeps_running() {
    let env = Env::start().await;
    env.fake.add_file("gone", "u-gone", vec![0xFF; 10]);
    let canary = Canary::new("bad-input");
    // Malformed: a message whose chat has the wrong type.
    let mut broken = text_from(OWNER, canary.as_str());
    broken["chat"] = json!("not a chat");
    env.fake.push_update(message_update(broken));
    // No update_id at all: it cannot move the offset, and must not stop us.
    env.fake
        .push_raw(json!({"message": text_from(OWNER, canary.as_str())}));
    env.fake.push_update(json!({}));
    env.fake
        .push_update(json!({"edited_message": text_from(OWNER, canary.as_str())}));
    // The download fails on every attempt.
    for _ in 0..4 {
        env.fake.inject("file", Fault::ServerError { status: 502 });
    }
    env.fake.push_update(photo_message(
        json!([{"file_id": "gone", "file_unique_id": "u-gone", "width": 8, "height": 6}]),
        Some(canary.as_str()),
    ));
    let good = env.fake.push_update(owner_text("still here"));

    let ingress = env.ingress_with(IngressConfig::for_owner(OWNER)).await;
    let report = drain(&ingress).await;
    let stored = env.messages();
    assert_eq!(stored.len(), 1, "{report:?}");
    assert_eq!(stored[0].1.update_id, good);
    let stats = ingress.stats();
    for reason in [
        "malformed",
        "no-message",
        "edited-message",
        "photo-download-failed",
    ] {
        assert!(stats.dropped.contains_key(reason), "{reason}: {stats:?}");
    }
    assert_eq!(stats.dropped.get("malformed"), Some(&2));
    // Nothing of a dropped update reached the store or the logs.
    assert_eq!(env.store.events(&Default::default()).unwrap().len(), 1);
    assert_no_leak(&[canary], &logs(), "captured logs");
    let log = logs();
    assert!(
        log.contains("reason=\"photo-download-failed\"")
            || log.contains("reason=photo-download-failed"),
        "reason codes are logged"
    );
}

/// One photo bound for ingress and the packet: a photo with no size within
/// it (declared, reported by `getFile`, or found while downloading) is not
/// stored, and its message is, flagged, to be answered with a fixed reply;
/// one at the bound is stored whole.
#[tokio::test]
async fn a_photo_over_the_one_bound_is_stored_without_it_to_be_answered() {
    const BOUND: usize = stream_core::payload::MAX_PHOTO_BYTES as usize;
    let env = Env::start().await;
    env.fake.add_file("over", "u-over", vec![0xFF; BOUND + 1]);
    env.fake.add_file("at", "u-at", vec![0xFF; BOUND]);
    let declared = env.fake.push_update(photo_message(
        json!([{"file_id": "over", "file_unique_id": "u-over", "width": 800, "height": 600, "file_size": BOUND + 1}]),
        Some("canary-caption"),
    ));
    let undeclared = env.fake.push_update(photo_message(
        json!([{"file_id": "over", "file_unique_id": "u-over", "width": 800, "height": 600}]),
        None,
    ));
    let at = env.fake.push_update(photo_message(
        json!([{"file_id": "at", "file_unique_id": "u-at", "width": 800, "height": 600, "file_size": BOUND}]),
        None,
    ));
    let ingress = env.ingress().await;
    let report = drain(&ingress).await;
    let stored = env.messages();
    assert_eq!(stored.len(), 3, "{report:?}");
    for (_, msg) in &stored {
        let over = msg.update_id == declared || msg.update_id == undeclared;
        assert_eq!(msg.photo_too_large, over, "{}", msg.update_id);
        assert_eq!(msg.photo.is_some(), !over, "{}", msg.update_id);
        if msg.update_id == at {
            assert_eq!(msg.photo.as_ref().map(|p| p.size), Some(BOUND as u64));
        }
    }
    assert!(ingress.stats().dropped.is_empty());
}

#[tokio::test]
async fn freeze_resume_in_polling_mode_loses_no_update() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let before = env.fake.push_update(owner_text("before"));
    drain(&ingress).await;

    freeze_ingress(&env.store, &env.api, &IngressMode::Polling)
        .await
        .unwrap();
    assert_eq!(ingress.state().await.unwrap(), IngressState::Frozen);
    let calls_at_freeze = env.fake.calls_of("getUpdates").len();
    let while_frozen: Vec<i64> = (0..3)
        .map(|i| env.fake.push_update(owner_text(&format!("frozen {i}"))))
        .collect();

    // An update fetched just as the freeze commits is neither stored nor acknowledged.
    let raced = json!({"update_id": while_frozen[0], "message": text_from(OWNER, "frozen 0")});
    let outcome = ingress
        .handle_update(&raced, Ack::PollingOffset)
        .await
        .unwrap();
    assert_eq!(outcome, UpdateOutcome::Frozen);
    assert_eq!(
        polling_offset(&*env.store, BOT_ID).unwrap(),
        Some(before + 1)
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = {
        let ingress = Arc::clone(&ingress);
        tokio::spawn(async move {
            run_polling(&ingress, &quick(), PollMode::UntilShutdown, async {
                let _ = stop_rx.await;
            })
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        env.fake.calls_of("getUpdates").len(),
        calls_at_freeze,
        "no getUpdates while frozen"
    );
    assert_eq!(env.messages().len(), 1);
    assert_eq!(env.fake.pending_updates(), 3);

    resume_ingress(&env.store, &env.api, &IngressMode::Polling)
        .await
        .unwrap();
    let store = Arc::clone(&env.store);
    assert!(
        env.fake
            .wait_until(Duration::from_secs(10), |_| messages_in(&*store).len() == 4)
            .await
    );
    let _ = stop_tx.send(());
    runner.await.unwrap().unwrap();
    let ids: Vec<i64> = env.messages().iter().map(|(_, m)| m.update_id).collect();
    assert_eq!(ids, [vec![before], while_frozen].concat());
    // A drain while frozen returns at once, without calling getUpdates.
    freeze_ingress(&env.store, &env.api, &IngressMode::Polling)
        .await
        .unwrap();
    let n = env.fake.calls_of("getUpdates").len();
    assert!(drain(&ingress).await.saw_frozen);
    assert_eq!(env.fake.calls_of("getUpdates").len(), n);
}

// ------------------------------------------------------------- SIGKILL

const CHILD_TEST: &str = "polling::child_polling_process";
const CHILD_ENV: &str = "STREAM_TELEGRAM_CHILD";

/// Not a test of its own: the body of a child process that polls until it
/// is killed. Run without its env var (in the normal suite) it does nothing.
#[test]
fn child_polling_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let spec: Value = serde_json::from_str(&spec).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store: Arc<dyn Store> = Arc::new(open_store(std::path::Path::new(
            spec["store"].as_str().unwrap(),
        )));
        let api = BotApi::new(
            spec["base_url"].as_str().unwrap(),
            BotToken::new(spec["token"].as_str().unwrap()).unwrap(),
            fast_options(),
        )
        .unwrap();
        let ingress = Ingress::new(store, api, bot(), IngressConfig::for_owner(OWNER));
        println!("POLLING");
        run_polling(
            &ingress,
            &quick(),
            PollMode::UntilShutdown,
            std::future::pending(),
        )
        .await
        .unwrap();
    });
}

fn spawn_child(env: &Env) -> KillOnDrop {
    let spec = json!({
        "store": env.store_path,
        "base_url": env.fake.base_url(),
        "token": env.token,
    });
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("POLLING") {
        line.clear();
        assert_ne!(reader.read_line(&mut line).unwrap(), 0, "the child exited");
    }
    KillOnDrop(child)
}

/// "A kill between store and acknowledgement loses nothing and duplicates
/// nothing." Two kill points: while a later update of the same batch is
/// being fetched (its photo download hangs), and while the getUpdates that
/// would acknowledge the committed update hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_commit_and_acknowledgement_loses_and_duplicates_nothing() {
    for hang in ["file", "getUpdates"] {
        let env = Env::start().await;
        env.fake
            .add_file("p", "u-p", vec![0xFF, 0xD8, 0xFF, 1, 2, 3]);
        let first = env
            .fake
            .push_update(owner_text("committed before the kill"));
        if hang == "file" {
            env.fake.push_update(photo_message(
                json!([{"file_id": "p", "file_unique_id": "u-p", "width": 4, "height": 3}]),
                None,
            ));
            env.fake.inject("file", Fault::Delay { millis: 120_000 });
        } else {
            env.fake.inject("getUpdates", Fault::Delay { millis: 0 });
            env.fake
                .inject("getUpdates", Fault::Delay { millis: 120_000 });
        }

        let mut child = spawn_child(&env);
        let reader = open_store(&env.store_path);
        let fake = &env.fake;
        let hung = fake
            .wait_until(Duration::from_secs(20), |f| match hang {
                "file" => !f.calls_of("file").is_empty(),
                _ => f.calls_of("getUpdates").len() == 2,
            })
            .await;
        assert!(hung, "{hang}: the child never reached the kill point");
        assert_eq!(
            messages_in(&reader).len(),
            1,
            "{hang}: committed before the kill"
        );
        child.0.kill().unwrap(); // SIGKILL
        child.0.wait().unwrap();

        // The committed update and its offset survived the kill together.
        assert_eq!(
            polling_offset(&reader, BOT_ID).unwrap(),
            Some(first + 1),
            "{hang}"
        );

        // Restart: polling resumes from the stored offset.
        let ingress = env.ingress().await;
        let calls_before = env.fake.calls_of("getUpdates").len();
        drain(&ingress).await;
        let after: Vec<Option<i64>> = env.fake.calls_of("getUpdates")[calls_before..]
            .iter()
            .map(|c| c.params.get("offset").and_then(Value::as_i64))
            .collect();
        assert_eq!(
            after[0],
            Some(first + 1),
            "{hang}: restarted from the stored offset"
        );

        let ids: Vec<i64> = env.messages().iter().map(|(_, m)| m.update_id).collect();
        let expected = if hang == "file" {
            vec![first, first + 1]
        } else {
            vec![first]
        };
        assert_eq!(ids, expected, "{hang}: nothing lost, nothing twice");
        assert_eq!(env.fake.pending_updates(), 0, "{hang}");
        let _ = reader.control(&polling_offset_key(BOT_ID)).unwrap();
    }
}
