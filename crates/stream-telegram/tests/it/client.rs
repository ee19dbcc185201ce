//! The Bot API client against the fake: the exact requests (golden), the
//! envelope, `retry_after`, retries of 5xx, timeouts and dropped
//! connections, and the token kept out of errors and logs.

use std::time::Duration;

use serde_json::{Value, json};
use stream_telegram::requests::{self, ApiRequest};
use stream_telegram::{ApiError, BotApi, BotToken, MenuCommand, WebhookSecret};
use stream_testkit::canary::assert_no_leak;
use stream_testkit::telegram::Fault;

use crate::common::{Env, OWNER, fast_options, logs, token_canary};

fn commands() -> Vec<MenuCommand> {
    vec![
        MenuCommand::new(0, "focus", "Propose a focus").unwrap(),
        MenuCommand::new(1, "help", "What I can do").unwrap(),
    ]
}

fn every_request() -> Vec<ApiRequest> {
    vec![
        requests::get_me(),
        requests::get_updates(None, 100, 25),
        requests::get_updates(Some(1001), 100, 0),
        requests::set_webhook("https://bot.example/telegram/webhook", "s3cret"),
        requests::delete_webhook(),
        requests::get_webhook_info(),
        requests::send_message(OWNER, "a reply", Some(10)),
        requests::send_message(OWNER, "a notice", None),
        requests::get_file("file-1"),
        requests::set_my_commands(&commands()),
        requests::delete_my_commands(),
    ]
}

#[test]
fn bot_api_requests_are_golden() {
    let wire: Vec<Value> = every_request()
        .iter()
        .map(|r| json!({"method": r.method, "params": r.params}))
        .collect();
    insta::assert_json_snapshot!(wire);
}

/// The fake parses what went over the wire: it must be exactly the golden params.
#[tokio::test]
async fn requests_on_the_wire_match_the_golden_params() {
    let env = Env::start().await;
    env.fake.add_file("file-1", "u-1", vec![1, 2, 3]);
    let secret = WebhookSecret::new("s3cret").unwrap();
    // One queued update (id 1000), so the long poll answers at once and the
    // offset 1001 below confirms it.
    env.fake.push_update(crate::common::owner_text("x"));
    env.api.get_me().await.unwrap();
    assert_eq!(env.api.get_updates(None, 100, 25).await.unwrap().len(), 1);
    assert!(
        env.api
            .get_updates(Some(1001), 100, 0)
            .await
            .unwrap()
            .is_empty()
    );
    env.api
        .set_webhook("https://bot.example/telegram/webhook", &secret)
        .await
        .unwrap();
    env.api.delete_webhook().await.unwrap();
    let info = env.api.get_webhook_info().await.unwrap();
    assert_eq!(info.url, "");
    env.api
        .send_message(OWNER, "a reply", Some(10))
        .await
        .unwrap();
    env.api.send_message(OWNER, "a notice", None).await.unwrap();
    let file = env.api.get_file("file-1").await.unwrap();
    env.api.set_my_commands(&commands()).await.unwrap();
    env.api.delete_my_commands().await.unwrap();

    let recorded: Vec<Value> = env
        .fake
        .calls()
        .iter()
        .map(|c| json!({"method": c.method, "params": c.params}))
        .collect();
    let golden: Vec<Value> = every_request()
        .iter()
        .map(|r| json!({"method": r.method, "params": r.params}))
        .collect();
    assert_eq!(recorded, golden);

    let bytes = env
        .api
        .download_file(file.file_path.as_deref().unwrap(), 1024)
        .await
        .unwrap();
    assert_eq!(bytes, vec![1, 2, 3]);
    assert!(matches!(
        env.api
            .download_file(file.file_path.as_deref().unwrap(), 2)
            .await,
        Err(ApiError::TooLarge { limit: 2, .. })
    ));
}

/// The fake wakes a thread waiting for a call when the call arrives (the
/// serve bench waits this way instead of polling the fake), and tells when
/// it arrived; a call that never comes times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_waiting_for_a_call_is_woken_when_it_arrives() {
    let env = Env::start().await;
    let before = std::time::Instant::now();
    tokio::task::block_in_place(|| {
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                env.fake
                    .wait_for_call("sendMessage", 0, Duration::from_secs(30))
            });
            std::thread::sleep(Duration::from_millis(20));
            tokio::runtime::Handle::current()
                .block_on(env.api.send_message(OWNER, "x", None))
                .unwrap();
            let sent = std::time::Instant::now();
            let arrived = waiter.join().unwrap().expect("woken by the call");
            assert!(before + Duration::from_millis(20) <= arrived && arrived <= sent);
            // Woken by the call, not by its 30 s timeout.
            assert!(sent.elapsed() < Duration::from_secs(10));
        });
    });
    assert_eq!(env.fake.count_of("sendMessage"), 1);
    assert_eq!(
        env.fake
            .wait_for_call("sendMessage", 1, Duration::from_millis(50)),
        None
    );
}

#[tokio::test]
async fn retry_after_is_respected() {
    let env = Env::start().await;
    env.fake
        .inject("sendMessage", Fault::RateLimit { retry_after: 1 });
    let sent = env.api.send_message(OWNER, "x", None).await.unwrap();
    assert_eq!(sent.chat.id, OWNER);
    let calls = env.fake.calls_of("sendMessage");
    assert_eq!(calls.len(), 2);
    assert!(
        calls[1].at() - calls[0].at() >= Duration::from_secs(1),
        "second attempt came {:?} after the 429",
        calls[1].at() - calls[0].at()
    );
}

#[tokio::test]
async fn retry_after_above_the_policy_is_returned_not_slept() {
    let env = Env::start().await;
    env.fake
        .inject("sendMessage", Fault::RateLimit { retry_after: 3600 });
    let err = env.api.send_message(OWNER, "x", None).await.unwrap_err();
    assert!(matches!(
        err,
        ApiError::RateLimited {
            retry_after_secs: 3600,
            ..
        }
    ));
    assert_eq!(env.fake.calls_of("sendMessage").len(), 1);
}

#[tokio::test]
async fn server_errors_dropped_connections_and_slow_answers_are_retried() {
    let env = Env::start().await;
    env.fake.inject("getMe", Fault::ServerError { status: 502 });
    env.fake.inject("getMe", Fault::DropConnection);
    env.fake.inject("getMe", Fault::ServerError { status: 500 });
    let me = env.api.get_me().await.unwrap();
    assert_eq!(me.id, crate::common::BOT_ID);
    assert_eq!(env.fake.calls_of("getMe").len(), 4);

    // A slow answer is a timeout, retried with the same bound.
    let mut options = fast_options();
    options.request_timeout = Duration::from_millis(500);
    let api = BotApi::new(
        &env.fake.base_url(),
        BotToken::new(env.token.clone()).unwrap(),
        options,
    )
    .unwrap();
    env.fake
        .inject("getWebhookInfo", Fault::Delay { millis: 3000 });
    api.get_webhook_info().await.unwrap();
    // At least one retry after the slow answer (more only on a very loaded machine).
    let calls = env.fake.calls_of("getWebhookInfo");
    assert!(calls.len() >= 2, "{calls:?}");
    assert_eq!(calls[0].fault, Some(Fault::Delay { millis: 3000 }));
}

#[tokio::test]
async fn retries_are_bounded() {
    let env = Env::start().await;
    for _ in 0..10 {
        env.fake.inject("getMe", Fault::ServerError { status: 503 });
    }
    let err = env.api.get_me().await.unwrap_err();
    assert!(
        matches!(
            err,
            ApiError::Server {
                status: 503,
                attempts: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(env.fake.calls_of("getMe").len(), 4);
}

#[tokio::test]
async fn refusals_are_typed_and_not_retried() {
    let env = Env::start().await;
    let err = env.api.send_message(OWNER, "", None).await.unwrap_err();
    assert!(
        matches!(
            &err,
            ApiError::Refused {
                method: "sendMessage",
                code: 400,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(env.fake.calls_of("sendMessage").len(), 1);
    env.fake.inject(
        "getUpdates",
        Fault::Refuse {
            code: 409,
            description: "Conflict: terminated by other getUpdates request".into(),
        },
    );
    let err = env.api.get_updates(None, 1, 0).await.unwrap_err();
    assert_eq!(err.telegram_code(), Some(409));
}

/// "The bot token never appears in logs or errors": every failure path,
/// with the token's secret part a canary.
#[tokio::test]
async fn the_token_never_appears_in_errors_debug_or_logs() {
    let (token, canary) = token_canary();
    let env = Env::start_with_token(&token).await;
    let mut seen = Vec::new();

    // Refused, rate-limited, server error, dropped connection, timeout.
    seen.push(env.api.send_message(OWNER, "", None).await.unwrap_err());
    env.fake
        .inject("getMe", Fault::RateLimit { retry_after: 999 });
    seen.push(env.api.get_me().await.unwrap_err());
    for _ in 0..4 {
        env.fake.inject("getMe", Fault::DropConnection);
    }
    seen.push(env.api.get_me().await.unwrap_err());
    for _ in 0..4 {
        env.fake.inject("getMe", Fault::ServerError { status: 500 });
    }
    seen.push(env.api.get_me().await.unwrap_err());
    seen.push(
        env.api
            .download_file("photos/missing.jpg", 10)
            .await
            .unwrap_err(),
    );
    // Nothing listens on port 9: connection refused, four times.
    let dead = BotApi::new(
        "http://127.0.0.1:9",
        BotToken::new(token.clone()).unwrap(),
        fast_options(),
    )
    .unwrap();
    seen.push(dead.get_me().await.unwrap_err());
    // A wrong token is refused (401) without echoing either token.
    let wrong = BotApi::new(
        &env.fake.base_url(),
        BotToken::new(format!("{token}x")).unwrap(),
        fast_options(),
    )
    .unwrap();
    seen.push(wrong.get_me().await.unwrap_err());

    let text: String = seen
        .iter()
        .map(|e| format!("{e} | {e:?}\n"))
        .collect::<String>()
        + &format!("{:?} {:?}", env.api, BotToken::new(token.clone()).unwrap());
    assert!(text.contains("Unauthorized"), "{text}");
    assert_no_leak(
        std::slice::from_ref(&canary),
        &text,
        "API errors and Debug output",
    );
    assert_no_leak(&[canary], &logs(), "captured logs");
}

/// The fake refuses what the Bot API refuses: `getFile` of a file over the
/// 20 MB a bot may download is `400 file is too big`, not a path.
#[tokio::test]
async fn the_fake_refuses_get_file_over_20_mb_as_the_bot_api_does() {
    let env = Env::start().await;
    env.fake
        .add_file("huge", "u-huge", vec![0xFF; 20 * 1024 * 1024 + 1]);
    env.fake
        .add_file("fits", "u-fits", vec![0xFF; 20 * 1024 * 1024]);
    let err = env.api.get_file("huge").await.unwrap_err();
    assert!(
        matches!(&err, ApiError::Refused { code: 400, description, .. } if description.contains("file is too big")),
        "{err}"
    );
    assert!(env.api.get_file("fits").await.is_ok());
}
