//! The target of an owner's `/correct`: one row per rule of
//! `stream_context::correct`.

use stream_context::ContextError;
use stream_context::correct::{LOOKBACK, owner_correction_target};
use stream_core::payload::*;
use stream_core::text::BoundedText;
use stream_core::*;
use stream_store::{Read, Store};

use crate::common::*;

/// What the resolution should give.
enum Expect {
    /// This receipt.
    Target(EventId),
    /// Nothing to correct.
    Nothing,
    /// Refused, naming this event.
    Refused(EventId),
}

/// The receipt event's Telegram message id (the fixture's scheme).
fn message_id_of(f: &Fixture, receipt: &EventId) -> i64 {
    let receipt: DeliveryReceipt = f.store.event(receipt).unwrap().unwrap().decode().unwrap();
    receipt.message_id
}

/// Appends `receipt` as the fixture's `deliver` would.
fn append_receipt(f: &Fixture, root: &StoredEvent, receipt: &DeliveryReceipt) -> NewEvent {
    let event = NewEvent::build(
        &f.telegram,
        Some(root.id()),
        Some(&receipt.output_event_id),
        receipt,
    )
    .unwrap();
    f.store.append(&event).unwrap();
    event
}

fn receipt_for(
    f: &Fixture,
    output: &EventId,
    root: &StoredEvent,
    message_id: i64,
) -> DeliveryReceipt {
    let out: MessageObservation = f.store.event(output).unwrap().unwrap().decode().unwrap();
    DeliveryReceipt {
        output_event_id: output.clone(),
        run_id: out.run_id,
        chat_id: CHAT,
        message_id,
        date: 1_790_000_600,
        root_sender_id: CHAT,
        source_root_event_id: root.id().clone(),
        continuation_message_ids: Vec::new(),
    }
}

/// Sets up the store and returns the `/correct` trigger's reply-to, what
/// the resolution should give, and the trigger when the row wrote it itself
/// (else it is written last).
type Setup = fn(&mut Fixture) -> (Option<i64>, Expect, Option<StoredEvent>);

#[test]
fn owner_correction_target_rules_table() {
    let rows: Vec<(&str, Setup)> = vec![
        ("the latest delivered conversation reply", |f| {
            let m1 = f.message("one");
            f.reply(&m1, "first");
            let m2 = f.message("two");
            let r2 = f.reply(&m2, "second");
            (None, Expect::Target(r2.receipt.unwrap()), None)
        }),
        ("a reply-to targets the reply it names", |f| {
            let m1 = f.message("one");
            let r1 = f.reply(&m1, "first");
            let m2 = f.message("two");
            f.reply(&m2, "second");
            let mid = message_id_of(f, r1.receipt.as_ref().unwrap());
            (Some(mid), Expect::Target(r1.receipt.unwrap()), None)
        }),
        ("a reply-to any message of a split reply targets it", |f| {
            let m1 = f.message("one");
            let r1 = f.reply_as(CONVERSATION, &m1, "long", false, Vec::new());
            let mut receipt = receipt_for(f, &r1.output, &m1, 700);
            receipt.continuation_message_ids = vec![701, 702];
            let event = append_receipt(f, &m1, &receipt);
            let m2 = f.message("two");
            f.reply(&m2, "second");
            (Some(702), Expect::Target(event.id), None)
        }),
        ("a reply-to naming no receipt targets nothing", |f| {
            let m1 = f.message("one");
            f.reply(&m1, "first");
            (Some(1), Expect::Nothing, None)
        }),
        ("another chat's receipts are passed over", |f| {
            let m1 = f.message("one");
            let r1 = f.reply(&m1, "first");
            let m2 = f.message("two");
            let r2 = f.reply_as(CONVERSATION, &m2, "elsewhere", false, Vec::new());
            f.deliver(&r2.output, &m2, CHAT + 1, CHAT + 1);
            (None, Expect::Target(r1.receipt.unwrap()), None)
        }),
        (
            "a fixed reply is passed over for the latest conversation reply",
            |f| {
                let m1 = f.message("one");
                let r1 = f.reply(&m1, "first");
                let m2 = f.message("/help");
                f.reply_as(FIXED, &m2, "help text", true, Vec::new());
                (None, Expect::Target(r1.receipt.unwrap()), None)
            },
        ),
        ("a reply-to a fixed reply targets nothing", |f| {
            let m1 = f.message("one");
            f.reply(&m1, "first");
            let m2 = f.message("/help");
            let fixed = f.reply_as(FIXED, &m2, "help text", true, Vec::new());
            let mid = message_id_of(f, fixed.receipt.as_ref().unwrap());
            (Some(mid), Expect::Nothing, None)
        }),
        ("an undelivered reply is no target", |f| {
            let m1 = f.message("one");
            f.reply_as(CONVERSATION, &m1, "kept", false, Vec::new());
            (None, Expect::Nothing, None)
        }),
        ("a receipt after the trigger is not considered", |f| {
            let m1 = f.message("one");
            let r1 = f.reply(&m1, "first");
            let trigger = f.message("/correct better");
            let m2 = f.message("two");
            f.reply(&m2, "second");
            (None, Expect::Target(r1.receipt.unwrap()), Some(trigger))
        }),
        ("a receipt beyond the lookback is out of reach", |f| {
            let m1 = f.message("one");
            f.reply(&m1, "first");
            let mut tx = f.store.begin().unwrap();
            for i in 0..LOOKBACK as i64 {
                let msg = MessageReceived {
                    update_id: 100_000 + i,
                    message_id: 100_000 + i,
                    chat_id: CHAT,
                    chat_type: PrivateChat,
                    sender_id: CHAT,
                    date: 1_790_001_000,
                    text: Some(BoundedText::new("filler").unwrap()),
                    photo: None,
                    photo_too_large: false,
                    reply_to_message_id: None,
                    command: None,
                };
                tx.append(&NewEvent::build(&f.telegram, None, None, &msg).unwrap())
                    .unwrap();
            }
            tx.commit().unwrap();
            (None, Expect::Nothing, None)
        }),
        ("an undecodable candidate receipt refuses, naming it", |f| {
            let m1 = f.message("one");
            let r1 = f.reply(&m1, "first");
            let m2 = f.message("two");
            let r2 = f.reply_as(CONVERSATION, &m2, "second", false, Vec::new());
            let receipt = receipt_for(f, &r2.output, &m2, 900);
            let mut event =
                NewEvent::build(&f.telegram, Some(m2.id()), Some(&r2.output), &receipt).unwrap();
            event.payload = br#"{"garbled":true}"#.to_vec();
            event.payload_sha256 = stream_core::canon::sha256(&event.payload);
            f.store.append(&event).unwrap();
            let _older = r1;
            (None, Expect::Refused(event.id), None)
        }),
        (
            "a candidate receipt naming a missing output refuses, naming it",
            |f| {
                let m1 = f.message("one");
                let r1 = f.reply(&m1, "first");
                let mut receipt = receipt_for(f, &r1.output, &m1, 901);
                receipt.output_event_id = EventId::parse(&"9".repeat(64)).unwrap();
                let event = append_receipt(f, &m1, &receipt);
                (None, Expect::Refused(event.id), None)
            },
        ),
        (
            "an unreadable receipt older than the target does not matter",
            |f| {
                let m1 = f.message("one");
                let r1 = f.reply_as(CONVERSATION, &m1, "first", false, Vec::new());
                let mut receipt = receipt_for(f, &r1.output, &m1, 902);
                receipt.output_event_id = EventId::parse(&"8".repeat(64)).unwrap();
                append_receipt(f, &m1, &receipt);
                let m2 = f.message("two");
                let r2 = f.reply(&m2, "second");
                (None, Expect::Target(r2.receipt.unwrap()), None)
            },
        ),
    ];
    for (name, setup) in rows {
        let mut f = Fixture::new();
        let (reply_to, expect, trigger) = setup(&mut f);
        let trigger = trigger.unwrap_or_else(|| f.message("/correct better"));
        let mut msg: MessageReceived = trigger.decode().unwrap();
        msg.reply_to_message_id = reply_to;
        let got = owner_correction_target(&f.store, &trigger, &msg, CONVERSATION);
        match (expect, got) {
            (Expect::Target(receipt), Ok(Some(target))) => {
                assert_eq!(target.delivery_receipt_event_id, receipt, "{name}");
                let r: DeliveryReceipt =
                    f.store.event(&receipt).unwrap().unwrap().decode().unwrap();
                assert_eq!(target.output_event_id, r.output_event_id, "{name}");
                assert_eq!(target.run_id, r.run_id, "{name}");
                assert_eq!(
                    target.source_root_event_id, r.source_root_event_id,
                    "{name}"
                );
            }
            (Expect::Nothing, Ok(None)) => {}
            (Expect::Refused(id), Err(ContextError::EventInvalid { id: named })) => {
                assert_eq!(named, id, "{name}");
            }
            (_, got) => panic!("{name}: got {got:?}"),
        }
    }
}
