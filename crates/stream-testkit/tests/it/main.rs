//! Integration tests of `stream-testkit`: the `stream-fake-telegram`
//! binary, driven from outside through `/_fake/` and spoken to by the real
//! Bot API client of `stream-telegram`.
//!
//! The test lives here, not beside the client, so that cargo builds the
//! binary with this test run's features (`CARGO_BIN_EXE_…`): built from
//! another package's test, it was a second build of some fifty crates with
//! the package's own, narrower feature set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use stream_telegram::{BotApi, BotToken, ClientOptions, RetryPolicy};
use stream_testkit::bin::KillOnDrop;

/// The client's defaults, with a short first backoff: one 502 is scripted.
fn fast_options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy {
            base_backoff: Duration::from_millis(20),
            ..RetryPolicy::default()
        },
        ..ClientOptions::default()
    }
}

async fn body(response: reqwest::Response) -> Value {
    serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
}

/// The fake as a process serves the Bot API the client speaks, takes
/// updates and faults through `/_fake/`, and records the calls.
#[tokio::test]
async fn the_fake_binary_serves_the_same_api() {
    let token = "777:binary_token";
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_stream-fake-telegram"))
            .args(["--token", token, "--bot-id", "777", "--username", "BinBot"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().strip_prefix("base_url=").unwrap().to_owned();
    let http = reqwest::Client::new();
    let owner = 777_001;
    let update = json!({"message": {
        "message_id": 10,
        "from": {"id": owner, "is_bot": false, "first_name": "Owner"},
        "chat": {"id": owner, "type": "private", "first_name": "Owner"},
        "date": 1_790_000_100,
        "text": "from outside",
    }});
    let pushed = body(
        http.post(format!("{base}/_fake/updates"))
            .body(update.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    http.post(format!("{base}/_fake/faults"))
        .body(
            json!({"method": "getMe", "fault": {"kind": "server-error", "status": 502}})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let api = BotApi::new(&base, BotToken::new(token).unwrap(), fast_options()).unwrap();
    assert_eq!(
        api.get_me().await.unwrap().username.as_deref(),
        Some("BinBot")
    );
    let updates = api.get_updates(None, 10, 0).await.unwrap();
    assert_eq!(updates[0]["update_id"], pushed["result"]["update_id"]);
    let calls = body(
        http.get(format!("{base}/_fake/calls"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let methods: Vec<&str> = calls["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["getMe", "getMe", "getUpdates"]);
}
