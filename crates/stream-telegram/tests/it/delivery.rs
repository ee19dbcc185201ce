//! The delivery outbox: replies sent to the trigger, receipt fields,
//! `message_id` 0, at-least-once across a failed receipt, never two receipts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stream_core::ids::derive_run_id;
use stream_core::payload::{
    DeliveryFailed, DeliveryReceipt, MessageObservation, OutputContract, TextOrigin, ThinkingMarker,
};
use stream_core::text::{Label, ReplyText};
use stream_core::{Authorship, EventId, NewEvent, SourceName};
use stream_store::faulty::FaultyStore;
use stream_store::{EventQuery, SqliteStore, Store};
use stream_telegram::delivery::{REFUSED_NOTICE, delivery_watermark_key};
use stream_telegram::{
    DeliveryError, DeliveryOptions, Ingress, PollMode, PollingOptions, deliver_pending, run_polling,
};
use stream_testkit::canary::{Canary, assert_no_leak};
use stream_testkit::telegram::Fault;

use crate::common::{BOT_ID, Env, OWNER, logs, message_update, text_from};

const AGENT: &str = "telegram-conversation";

/// Stores owner messages through real polling and returns their event ids
/// and message ids.
async fn inbound(env: &Env, ingress: &Ingress, message_ids: &[i64]) -> Vec<(EventId, i64)> {
    for (i, id) in message_ids.iter().enumerate() {
        let mut m = text_from(OWNER, &format!("question {i}"));
        m["message_id"] = json!(id);
        env.fake.push_update(message_update(m));
    }
    run_polling(
        ingress,
        &PollingOptions::default(),
        PollMode::Drain,
        std::future::pending(),
    )
    .await
    .unwrap();
    env.messages()
        .into_iter()
        .map(|(e, m)| (e.id().clone(), m.message_id))
        .collect()
}

/// Appends the canonical output of a run on `trigger`, as settlement would.
fn output(env: &Env, trigger: &EventId, chat_id: i64, text: &str) -> (EventId, MessageObservation) {
    let run_id = derive_run_id(AGENT, 18, trigger).unwrap();
    let payload = MessageObservation {
        run_id,
        agent_id: Label::new(AGENT).unwrap(),
        agent_version: 18,
        trigger_event_id: trigger.clone(),
        chat_id,
        output_contract: OutputContract::ConversationText1,
        text: ReplyText::new(text).unwrap(),
        origin: TextOrigin::Model,
        thinking: ThinkingMarker::None,
    };
    let event = NewEvent::build(
        &SourceName::agent(AGENT).unwrap(),
        Some(trigger),
        Some(trigger),
        &payload,
    )
    .unwrap();
    env.store.append(&event).unwrap();
    (event.id, payload)
}

fn receipts(env: &Env) -> Vec<(stream_core::StoredEvent, DeliveryReceipt)> {
    env.store
        .events(&EventQuery::of_type("stream.telegram.delivery.receipt"))
        .unwrap()
        .into_iter()
        .map(|e| {
            let r = e.decode::<DeliveryReceipt>().unwrap();
            (e, r)
        })
        .collect()
}

fn tg() -> SourceName {
    SourceName::telegram(BOT_ID)
}

#[tokio::test]
async fn outputs_are_sent_as_replies_and_receipted_once() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[21, 22]).await;
    let canary = Canary::new("reply");
    let (out_a, payload_a) = output(&env, &msgs[0].0, OWNER, &format!("answer {canary}"));
    let (out_b, _) = output(&env, &msgs[1].0, OWNER, "second answer");

    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (report.sent, report.pending, report.failed),
        (2, 0, 0),
        "{report:?}"
    );

    let sends = env.fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 2);
    assert_eq!(
        sends[0].params,
        json!({
            "chat_id": OWNER,
            "text": format!("answer {canary}"),
            "link_preview_options": {"is_disabled": true},
            "reply_parameters": {"message_id": 21, "allow_sending_without_reply": true},
        })
    );
    assert_eq!(sends[1].params["reply_parameters"]["message_id"], json!(22));

    let all = receipts(&env);
    assert_eq!(all.len(), 2);
    let (event, receipt) = &all[0];
    assert_eq!(
        receipt,
        &DeliveryReceipt {
            output_event_id: out_a.clone(),
            run_id: payload_a.run_id.clone(),
            chat_id: OWNER,
            message_id: 1,
            date: env.fake.config().date,
            root_sender_id: OWNER,
            source_root_event_id: msgs[0].0.clone(),
            continuation_message_ids: Vec::new(),
        }
    );
    assert_eq!(event.event.source, tg());
    assert_eq!(event.event.authorship, Authorship::System);
    assert!(event.event.sensitive);
    assert_eq!(
        event.event.root.as_ref(),
        Some(&msgs[0].0),
        "root = source root"
    );
    assert_eq!(
        event.event.parent.as_ref(),
        Some(&out_a),
        "parent = the output"
    );
    assert_eq!(all[1].1.output_event_id, out_b);
    assert_eq!(
        event.id(),
        &stream_telegram::delivery::receipt_id(&tg(), &out_a).unwrap(),
        "the receipt id derives from the output id"
    );

    // A second pass sends nothing.
    let again = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((again.sent, again.pending), (0, 0));
    assert_eq!(env.fake.calls_of("sendMessage").len(), 2);
    assert_no_leak(&[canary], &logs(), "captured logs");
}

/// A pass that sends one reply commits once: the receipt and the watermark
/// past it are one transaction (append, watermark row, commit: 3 writes;
/// the watermark used to be a second transaction). A fault at any of them
/// leaves neither, and the next pass sends again and receipts once.
#[tokio::test]
async fn one_reply_commits_its_receipt_and_watermark_together() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[31]).await;
    output(&env, &msgs[0].0, OWNER, "together");
    let faulty = Arc::new(FaultyStore::new(
        SqliteStore::open(&env.store_path).unwrap(),
    ));
    let store: Arc<dyn Store> = faulty.clone();
    let key = delivery_watermark_key(&tg());
    for step in 0..3 {
        faulty.fail_at(step);
        let failed = deliver_pending(&store, &env.api, &tg(), &DeliveryOptions::default()).await;
        assert!(failed.is_err(), "fault at write {step}: {failed:?}");
        faulty.heal();
        assert!(receipts(&env).is_empty(), "fault at write {step}");
        assert_eq!(
            env.store.control(&key).unwrap(),
            None,
            "fault at write {step}"
        );
    }
    faulty.fail_at(usize::MAX - 1);
    let report = deliver_pending(&store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(report.sent, 1);
    assert_eq!(faulty.heal(), 3, "append, watermark row, one commit");
    assert_eq!(receipts(&env).len(), 1);
    assert_eq!(
        env.store.control(&key).unwrap(),
        Some(json!({"agent:telegram-conversation": 1}))
    );
    assert_eq!(
        env.fake.calls_of("sendMessage").len(),
        4,
        "sent again after each fault"
    );
}

/// Two pending replies (to updates `ids`) and a faulty view of the store
/// whose room the test sets; the pass it runs and what it sent.
struct TwoPending {
    env: Env,
    faulty: Arc<FaultyStore<SqliteStore>>,
    store: Arc<dyn Store>,
}

impl TwoPending {
    async fn start(ids: [i64; 2]) -> Self {
        let env = Env::start().await;
        let ingress = env.ingress().await;
        let msgs = inbound(&env, &ingress, &ids).await;
        output(&env, &msgs[0].0, OWNER, "first");
        output(&env, &msgs[1].0, OWNER, "second");
        let faulty = Arc::new(FaultyStore::new(
            SqliteStore::open(&env.store_path).unwrap(),
        ));
        let store: Arc<dyn Store> = faulty.clone();
        Self { env, faulty, store }
    }

    /// One pass: (sent, no room, pending), and `sendMessage` calls so far.
    async fn pass(&self) -> ((u64, u64, u64), usize) {
        let report = deliver_pending(
            &self.store,
            &self.env.api,
            &tg(),
            &DeliveryOptions::default(),
        )
        .await
        .unwrap();
        let sends = self.env.fake.count_of("sendMessage");
        ((report.sent, report.no_room, report.pending), sends)
    }
}

/// Room is checked before every send, not once per pass: when the first
/// reply's receipt fills the disk, the second reply waits for the next pass.
#[tokio::test]
async fn a_disk_that_fills_during_a_pass_stops_the_next_send() {
    let two = TwoPending::start([34, 35]).await;
    two.faulty.set_room_for(1);
    assert_eq!(two.pass().await, ((1, 1, 1), 1));
    assert_eq!(receipts(&two.env).len(), 1);
    two.faulty.set_room_for(usize::MAX);
    assert_eq!(two.pass().await, ((1, 0, 0), 2));
}

/// While the store's disk has no room for a receipt nothing is sent (a
/// reply sent then would go out again once space returns); with room back
/// the reply goes out once.
#[tokio::test]
async fn nothing_is_sent_while_the_store_has_no_room_for_its_receipt() {
    let two = TwoPending::start([32, 33]).await;
    two.faulty.set_full(true);
    assert_eq!(two.pass().await, ((0, 1, 2), 0));
    assert!(receipts(&two.env).is_empty());
    two.faulty.set_full(false);
    assert_eq!(two.pass().await, ((2, 0, 0), 2));
    assert_eq!(receipts(&two.env).len(), 2);
}

#[tokio::test]
async fn message_id_zero_is_not_a_delivery() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[5]).await;
    output(&env, &msgs[0].0, OWNER, "scheduled?");
    env.fake.inject(
        "sendMessage",
        Fault::Respond {
            result: json!({"message_id": 0, "chat": {"id": OWNER, "type": "private"}, "date": 1}),
        },
    );
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (report.sent, report.not_delivered, report.pending),
        (0, 1, 1)
    );
    assert!(receipts(&env).is_empty());
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(report.sent, 1);
    assert_ne!(receipts(&env)[0].1.message_id, 0);
}

/// "At-least-once across crashes": the receipt cannot be written after a
/// successful send; the next pass sends again and receipts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_receipt_means_a_resend_and_still_one_receipt() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[7]).await;
    let (out, _) = output(&env, &msgs[0].0, OWNER, "resend me");
    env.fake.inject("sendMessage", Fault::Delay { millis: 500 });
    let pass = {
        let store = Arc::clone(&env.store);
        let api = env.api.clone();
        tokio::spawn(async move {
            deliver_pending(&store, &api, &tg(), &DeliveryOptions::default()).await
        })
    };
    assert!(
        env.fake
            .wait_until(Duration::from_secs(5), |f| !f
                .calls_of("sendMessage")
                .is_empty())
            .await
    );
    let sql = rusqlite::Connection::open(&env.store_path).unwrap();
    sql.execute_batch("ALTER TABLE events RENAME TO events_away")
        .unwrap();
    let failed = pass.await.unwrap();
    assert!(matches!(failed, Err(DeliveryError::Store(_))), "{failed:?}");
    sql.execute_batch("ALTER TABLE events_away RENAME TO events")
        .unwrap();
    assert!(receipts(&env).is_empty());

    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(report.sent, 1);
    assert_eq!(env.fake.calls_of("sendMessage").len(), 2, "sent again");
    let all = receipts(&env);
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].1.output_event_id.clone(), all[0].1.message_id),
        (out, 2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_racing_deliverers_leave_one_receipt() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[8]).await;
    output(&env, &msgs[0].0, OWNER, "raced");
    env.fake.inject("sendMessage", Fault::Delay { millis: 300 });
    env.fake.inject("sendMessage", Fault::Delay { millis: 300 });
    let run = || {
        let store = Arc::clone(&env.store);
        let api = env.api.clone();
        tokio::spawn(async move {
            deliver_pending(&store, &api, &tg(), &DeliveryOptions::default()).await
        })
    };
    let (a, b) = (run(), run());
    let (a, b) = (a.await.unwrap().unwrap(), b.await.unwrap().unwrap());
    assert_eq!(
        env.fake.calls_of("sendMessage").len(),
        2,
        "both sent (at-least-once)"
    );
    assert_eq!(a.sent + b.sent, 1, "{a:?} {b:?}");
    assert_eq!(a.conflicts + b.conflicts, 1, "{a:?} {b:?}");
    assert_eq!(receipts(&env).len(), 1, "never two receipts for one output");
}

#[tokio::test]
async fn outputs_rooted_elsewhere_are_not_sent() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[9]).await;
    // An output whose chat differs from its trigger's: never sent anywhere.
    output(&env, &msgs[0].0, OWNER + 1, "wrong chat");
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((report.sent, report.skipped), (0, 1));
    // Another bot's deliverer sees it as not its own.
    let other = deliver_pending(
        &env.store,
        &env.api,
        &SourceName::telegram(BOT_ID + 1),
        &DeliveryOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!((other.sent, other.skipped), (0, 1));
    assert!(env.fake.calls_of("sendMessage").is_empty());
    let _ = env.store.control("x");
}

/// Issue 12: a permanent refusal used to stay pending and be resent on
/// every pass forever. Now it is recorded once (content-dark), never
/// resent, the owner gets the fixed notice, and the next outputs go on.
#[tokio::test]
async fn a_permanent_refusal_is_recorded_once_and_never_resent() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[31, 32]).await;
    let canary = Canary::new("refused-reply");
    let (first, first_payload) = output(&env, &msgs[0].0, OWNER, &format!("refused {canary}"));
    let (second, _) = output(&env, &msgs[1].0, OWNER, "fine");
    env.fake.inject(
        "sendMessage",
        Fault::Refuse {
            code: 400,
            description: format!("Bad Request: can't parse {canary}"),
        },
    );
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (report.sent, report.failed, report.refused, report.pending),
        (1, 1, 1, 0),
        "{report:?}"
    );
    assert_eq!(report.last_error, Some("refused"));
    let got: Vec<EventId> = receipts(&env)
        .into_iter()
        .map(|(_, r)| r.output_event_id)
        .collect();
    assert_eq!(got, vec![second.clone()]);
    let failures = env
        .store
        .events(&EventQuery::of_type("stream.telegram.delivery.failed"))
        .unwrap();
    assert_eq!(failures.len(), 1);
    let failure = failures[0].decode::<DeliveryFailed>().unwrap();
    assert_eq!(
        failure,
        DeliveryFailed {
            output_event_id: first.clone(),
            run_id: first_payload.run_id.clone(),
            chat_id: OWNER,
            error_code: 400,
            sent_message_ids: Vec::new(),
            source_root_event_id: msgs[0].0.clone(),
        }
    );
    assert_eq!(failures[0].event.parent.as_ref(), Some(&first));
    assert!(!failures[0].event.sensitive);
    assert_no_leak(
        std::slice::from_ref(&canary),
        &String::from_utf8_lossy(&failures[0].event.payload),
        "the refusal event",
    );
    // The refused text, the notice (replying to the owner's message), the next output.
    let sends = env.fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 3);
    assert_eq!(sends[1].params["text"], json!(REFUSED_NOTICE));
    assert_eq!(sends[1].params["reply_parameters"]["message_id"], json!(31));
    assert_no_leak(&[canary], &logs(), "captured logs");

    // Never again, however many passes.
    for _ in 0..2 {
        let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
            .await
            .unwrap();
        assert_eq!((report.sent, report.refused, report.pending), (0, 0, 0));
    }
    assert_eq!(env.fake.calls_of("sendMessage").len(), 3);

    // A rate limit beyond the client's patience ends the pass and records nothing.
    let (later, _) = output(
        &env,
        &inbound(&env, &ingress, &[33]).await[2].0,
        OWNER,
        "later",
    );
    env.fake
        .inject("sendMessage", Fault::RateLimit { retry_after: 3600 });
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (
            report.sent,
            report.pending,
            report.refused,
            report.last_error
        ),
        (0, 1, 0, Some("rate-limited"))
    );
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((report.sent, report.pending), (1, 0));
    assert!(
        receipts(&env)
            .iter()
            .any(|(_, r)| r.output_event_id == later)
    );
}

/// A 401 or 404 is about the bot, not the message: nothing is recorded as
/// refused and the output stays pending.
#[tokio::test]
async fn a_refusal_about_the_bot_leaves_the_output_pending() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[41]).await;
    output(&env, &msgs[0].0, OWNER, "hello");
    env.fake.inject(
        "sendMessage",
        Fault::Refuse {
            code: 401,
            description: "Unauthorized".into(),
        },
    );
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((report.refused, report.pending), (0, 1), "{report:?}");
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((report.sent, report.pending), (1, 0));
}

/// Issue 12: 3,000 emoji are a valid reply (3,000 scalar values) but 6,000
/// UTF-16 code units; Telegram refused it and it stayed pending forever.
/// Now two messages, the first replying to the owner's, one receipt naming both.
#[tokio::test]
async fn a_reply_of_3000_emoji_goes_out_as_two_messages_with_one_receipt() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[51]).await;
    let text = "😀".repeat(3000);
    let (out, _) = output(&env, &msgs[0].0, OWNER, &text);
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (report.sent, report.failed, report.pending),
        (1, 0, 0),
        "{report:?}"
    );
    let sends = env.fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 2);
    let texts: Vec<&str> = sends
        .iter()
        .map(|c| c.params["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.concat(), text);
    assert_eq!(texts[0].encode_utf16().count(), 4096);
    assert_eq!(sends[0].params["reply_parameters"]["message_id"], json!(51));
    assert!(sends[1].params.get("reply_parameters").is_none());
    let all = receipts(&env);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].1.output_event_id, out);
    assert_eq!(all[0].1.message_ids().collect::<Vec<_>>(), [1, 2]);
}

/// A whitespace-only output stored before such text became no text: it is
/// recorded as refused without asking Telegram, and the owner told.
#[tokio::test]
async fn a_stored_whitespace_only_output_is_recorded_as_refused() {
    let env = Env::start().await;
    let ingress = env.ingress().await;
    let msgs = inbound(&env, &ingress, &[61]).await;
    output(&env, &msgs[0].0, OWNER, " \n\t ");
    let report = deliver_pending(&env.store, &env.api, &tg(), &DeliveryOptions::default())
        .await
        .unwrap();
    assert_eq!((report.refused, report.pending), (1, 0), "{report:?}");
    let sends = env.fake.calls_of("sendMessage");
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].params["text"], json!(REFUSED_NOTICE));
}
