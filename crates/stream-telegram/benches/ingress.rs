//! Ingress overhead: one owner text update from raw JSON to a committed
//! event (admission, command parsing, event building, one transaction with
//! the offset), against a bare append of the same event in its own
//! transaction on the same SQLite file. Prints medians and the ratio.
//!
//! Then a photo message of 1 MiB through the loopback Bot API (`getFile`,
//! the download, the hash that names the blob, one transaction holding the
//! blob and the event), beside one SHA-256 of the same bytes: the photo is
//! hashed once, on a blocking thread, and the store keeps it under that
//! digest.
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
use stream_testkit::telegram::{FakeTelegram, FakeTelegramConfig};

const N: i64 = 1000;
const OWNER: i64 = 42;
const PHOTOS: i64 = 60;
const PHOTO_BYTES: usize = 1024 * 1024;

/// An owner's private message `id` holding `content` (text or photo).
fn owner_update(id: i64, content: Value) -> Value {
    let mut message = json!({
        "message_id": id,
        "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
        "chat": {"id": OWNER, "type": "private"},
        "date": 1_790_000_000,
    });
    let (Value::Object(message_fields), Value::Object(content)) = (&mut message, content) else {
        unreachable!("both are objects");
    };
    message_fields.extend(content);
    json!({"update_id": id, "message": message})
}

fn update(id: i64) -> Value {
    owner_update(
        id,
        json!({
            "text": "😀 /focus plan the week around the release",
            "entities": [{"type": "bot_command", "offset": 3, "length": 6}],
        }),
    )
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
            photo_too_large: false,
            reply_to_message_id: None,
            command: None,
        };
        let event = NewEvent::build(&source, None, None, &payload).unwrap();
        let t = Instant::now();
        raw_store.append(&event).unwrap();
        raw.push(t.elapsed());
    }

    let (photo, hash) = photos(&rt, dir.path());

    let (pure, full, raw) = (median(pure), median(full), median(raw));
    println!("admission + command parsing (pure)      median {pure:?}");
    println!("ingress: update -> committed event+offset median {full:?}");
    println!("bare append of the same event           median {raw:?}");
    println!(
        "ratio ingress / bare append: {:.2}",
        full.as_secs_f64() / raw.as_secs_f64()
    );
    println!("ingress of a 1 MiB photo message         median {photo:?}");
    println!("one SHA-256 of the same 1 MiB           median {hash:?}");
}

/// A JPEG-looking photo, distinct per `id` (each stored as a new blob).
fn jpeg(id: i64) -> Vec<u8> {
    let mut bytes = vec![0xFF, 0xD8, 0xFF];
    bytes.extend(id.to_le_bytes());
    bytes.resize(PHOTO_BYTES, 0x5A);
    bytes
}

/// Medians of a photo message's ingress through the loopback Bot API, and
/// of one hash of the same bytes.
fn photos(rt: &tokio::runtime::Runtime, dir: &std::path::Path) -> (Duration, Duration) {
    let fake = rt
        .block_on(FakeTelegram::start(FakeTelegramConfig::default()))
        .unwrap();
    let config = FakeTelegramConfig::default();
    let api = BotApi::new(
        &fake.base_url(),
        BotToken::new(&config.token).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("photos.db")).unwrap());
    let ingress = Ingress::new(
        store,
        api,
        BotIdentity {
            id: config.bot_id,
            username: config.username.clone(),
        },
        IngressConfig::for_owner(OWNER),
    );
    let (mut ingested, mut hashed) = (Vec::new(), Vec::new());
    for id in 1..=PHOTOS {
        let bytes = jpeg(id);
        let t = Instant::now();
        std::hint::black_box(stream_core::canon::sha256(&bytes));
        hashed.push(t.elapsed());
        let file_id = format!("photo-{id}");
        fake.add_file(&file_id, &format!("unique-{id}"), bytes);
        let u = owner_update(
            id,
            json!({"photo": [{"file_id": file_id, "file_unique_id": format!("unique-{id}"),
                              "width": 1280, "height": 853, "file_size": PHOTO_BYTES}]}),
        );
        let t = Instant::now();
        let outcome = rt
            .block_on(ingress.handle_update(&u, Ack::PollingOffset))
            .unwrap();
        ingested.push(t.elapsed());
        assert!(matches!(outcome, UpdateOutcome::Stored { .. }));
    }
    (median(ingested), median(hashed))
}
