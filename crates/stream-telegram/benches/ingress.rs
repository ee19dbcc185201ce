//! Ingress overhead: one owner text update from raw JSON to a committed
//! event (admission, command parsing, event building, one transaction with
//! the offset), against a bare append of the same event in its own
//! transaction on the same SQLite file. Prints medians and the ratio.
//!
//! `cargo bench -p stream-telegram --bench ingress`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stream_core::payload::{MessageReceived, PrivateChat};
use stream_core::text::BoundedText;
use stream_core::{NewEvent, SourceName};
use stream_store::{SqliteStore, Store};
use stream_telegram::admission::admit;
use stream_telegram::{
    Ack, BotApi, BotIdentity, BotToken, ClientOptions, Ingress, IngressConfig, UpdateOutcome,
};

const N: i64 = 1000;
const OWNER: i64 = 42;

fn update(id: i64) -> Value {
    json!({
        "update_id": id,
        "message": {
            "message_id": id,
            "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
            "chat": {"id": OWNER, "type": "private"},
            "date": 1_790_000_000,
            "text": "😀 /focus plan the week around the release",
            "entities": [{"type": "bot_command", "offset": 3, "length": 6}],
        }
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // Pure: admission + command parsing.
    let sample = update(1);
    let mut pure = Vec::new();
    for _ in 0..10_000 {
        let t = Instant::now();
        let admitted = admit(&sample, OWNER, "OurBot").unwrap();
        std::hint::black_box(admitted);
        pure.push(t.elapsed());
    }

    // Ingress: update JSON to committed event + offset.
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("a.db")).unwrap());
    let api = BotApi::new(
        "http://127.0.0.1:9",
        BotToken::new("1:bench").unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let ingress = Ingress::new(
        store,
        api,
        BotIdentity {
            id: 1,
            username: "OurBot".into(),
        },
        IngressConfig::for_owner(OWNER),
    );
    let mut full = Vec::new();
    rt.block_on(async {
        for id in 1..=N {
            let u = update(id);
            let t = Instant::now();
            let outcome = ingress.handle_update(&u, Ack::PollingOffset).await.unwrap();
            full.push(t.elapsed());
            assert!(matches!(outcome, UpdateOutcome::Stored { .. }));
        }
    });

    // Baseline: the same event appended in its own transaction.
    let raw_store = SqliteStore::open(&dir.path().join("b.db")).unwrap();
    let source = SourceName::telegram(1);
    let mut raw = Vec::new();
    for id in 1..=N {
        let payload = MessageReceived {
            update_id: id,
            message_id: id,
            chat_id: OWNER,
            chat_type: PrivateChat,
            sender_id: OWNER,
            date: 1_790_000_000,
            text: Some(BoundedText::new("😀 /focus plan the week around the release").unwrap()),
            photo: None,
            reply_to_message_id: None,
            command: None,
        };
        let event = NewEvent::build(&source, None, None, &payload).unwrap();
        let t = Instant::now();
        raw_store.append(&event).unwrap();
        raw.push(t.elapsed());
    }

    let (pure, full, raw) = (median(pure), median(full), median(raw));
    println!("admission + command parsing (pure)      median {pure:?}");
    println!("ingress: update -> committed event+offset median {full:?}");
    println!("bare append of the same event           median {raw:?}");
    println!(
        "ratio ingress / bare append: {:.2}",
        full.as_secs_f64() / raw.as_secs_f64()
    );
}
