//! `thestream doctor` against the loopback fakes: all ok here, and each
//! check failing for its own cause with exit 1 and no secret in the output.

use serde_json::Value;
use stream_core::payload::ProviderApi;
use stream_testkit::stack::{API_KEY, BOT_TOKEN, Ran, Stack};

use crate::common::stack;

fn checks(ran: &Ran) -> Vec<Value> {
    serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {}", ran.stdout))
}

fn verdict(ran: &Ran, check: &str) -> (bool, String) {
    let all = checks(ran);
    let c = all
        .iter()
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no {check} check in {}", ran.stdout));
    (
        c["ok"].as_bool().unwrap(),
        c["detail"].as_str().unwrap().to_owned(),
    )
}

fn assert_no_secret(ran: &Ran) {
    for secret in [BOT_TOKEN, API_KEY, "canary-"] {
        assert!(!ran.stdout.contains(secret), "{secret} in {}", ran.stdout);
        assert!(!ran.stderr.contains(secret), "{secret} in {}", ran.stderr);
    }
}

fn edit_config(stack: &Stack, from: &str, to: &str) {
    let path = stack.path().join("thestream.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from} not in the config");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

#[test]
fn doctor_is_all_ok_against_the_loopback_fakes_and_spends_no_tokens() {
    for api in [ProviderApi::OpenaiChat, ProviderApi::AnthropicMessages] {
        let stack = stack(api);
        let ran = stack.run(&["doctor", "--json"]).unwrap();
        assert_eq!(ran.code, 0, "{api:?}: {}\n{}", ran.stdout, ran.stderr);
        let names: Vec<String> = checks(&ran)
            .iter()
            .map(|c| {
                assert_eq!(c["ok"], true, "{c}");
                c["check"].as_str().unwrap().to_owned()
            })
            .collect();
        for name in [
            "config",
            "data-dir",
            "store",
            "context-root",
            "landlock",
            "seccomp",
            "user-namespaces",
            "worker",
            "worker-forked",
            "secrets",
            "telegram",
            "provider",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
        assert!(verdict(&ran, "telegram").1.contains("@thestream_test_bot"));
        assert!(verdict(&ran, "worker").1.contains("sha256 "));
        // Serve forks its workers: doctor tests a forked one too.
        assert!(verdict(&ran, "worker-forked").1.contains("forked"));
        let provider = verdict(&ran, "provider").1;
        assert!(
            provider.contains("answered 200 in ") && !provider.contains("warning"),
            "{provider}"
        );
        // One model listing with the parent's credential, no completion.
        assert!(stack.provider.requests().is_empty(), "{api:?}");
        let listings = stack.provider.model_listings();
        assert_eq!(listings.len(), 1, "{api:?}");
        match api {
            ProviderApi::OpenaiChat => assert_eq!(
                listings[0].header("authorization"),
                Some(format!("Bearer {API_KEY}").as_str())
            ),
            ProviderApi::AnthropicMessages => {
                assert_eq!(listings[0].header("x-api-key"), Some(API_KEY))
            }
        }
        assert_no_secret(&ran);
        // The human form: one line per check, each `ok`.
        let human = stack.run(&["doctor"]).unwrap();
        assert_eq!(human.code, 0, "{}", human.stdout);
        assert_eq!(human.stdout.lines().count(), names.len());
        assert!(
            human.stdout.lines().all(|l| l.starts_with("ok ")),
            "{}",
            human.stdout
        );
    }
}

#[test]
fn doctor_without_a_token_fails_telegram_and_names_the_variable() {
    let stack = stack(ProviderApi::OpenaiChat);
    let ran: Ran = stack
        .command(&["doctor", "--json"])
        .env_remove("TELEGRAM_BOT_TOKEN")
        .output()
        .unwrap()
        .into();
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (ok, detail) = verdict(&ran, "secrets");
    assert!(!ok && detail.contains("TELEGRAM_BOT_TOKEN"), "{detail}");
    assert!(!verdict(&ran, "telegram").0);
    assert!(verdict(&ran, "provider").0);
    assert_no_secret(&ran);
}

#[test]
fn doctor_with_a_wrong_token_reports_401_without_the_token() {
    let stack = stack(ProviderApi::OpenaiChat);
    let wrong = stream_testkit::canary::Canary::new("wrong-token");
    let ran: Ran = stack
        .command(&["doctor"])
        .env("TELEGRAM_BOT_TOKEN", format!("4242:{wrong}"))
        .output()
        .unwrap()
        .into();
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let line = ran.stdout.lines().find(|l| l.contains("telegram")).unwrap();
    assert!(line.starts_with("FAIL") && line.contains("401"), "{line}");
    assert!(!wrong.found_in(&ran.stdout) && !wrong.found_in(&ran.stderr));
    assert_no_secret(&ran);
}

#[test]
fn doctor_with_the_worker_missing_fails_the_worker_check() {
    let stack = stack(ProviderApi::OpenaiChat);
    let text = std::fs::read_to_string(stack.path().join("thestream.toml")).unwrap();
    let worker_line = text.lines().find(|l| l.starts_with("worker = ")).unwrap();
    edit_config(
        &stack,
        worker_line,
        "worker = \"/nonexistent/thestream-worker\"",
    );
    let ran = stack.run(&["doctor", "--json"]).unwrap();
    assert_eq!(ran.code, 1);
    let (ok, detail) = verdict(&ran, "worker");
    assert!(
        !ok && detail.contains("/nonexistent/thestream-worker"),
        "{detail}"
    );
    assert!(verdict(&ran, "telegram").0);
    assert_no_secret(&ran);
}

#[test]
fn doctor_with_the_provider_down_fails_the_provider_check() {
    let stack = stack(ProviderApi::OpenaiChat);
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    edit_config(
        &stack,
        &stack.provider.base_url(ProviderApi::OpenaiChat),
        &format!("http://127.0.0.1:{port}/v1"),
    );
    let ran = stack.run(&["doctor", "--json"]).unwrap();
    assert_eq!(ran.code, 1);
    let (ok, detail) = verdict(&ran, "provider");
    assert!(!ok && detail.contains("unreachable"), "{detail}");
    assert!(verdict(&ran, "telegram").0);
    assert_no_secret(&ran);
}

/// A provider request that takes more than half of `timeout_secs` is
/// warned about on the provider line; the check passes and doctor exits 0.
#[test]
fn a_provider_slower_than_half_of_timeout_secs_is_warned_about() {
    let stack = stack(ProviderApi::OpenaiChat);
    edit_config(&stack, "timeout_secs = 120", "timeout_secs = 1");
    stack
        .provider
        .delay_model_listings(std::time::Duration::from_millis(600));
    let ran = stack.run(&["doctor", "--json"]).unwrap();
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    let (ok, detail) = verdict(&ran, "provider");
    assert!(ok, "{detail}");
    assert!(
        detail.contains("warning: over half of provider.timeout_secs (1 s)"),
        "{detail}"
    );
    let human = stack.run(&["doctor"]).unwrap();
    assert_eq!(human.code, 0, "{}", human.stdout);
    let line = human
        .stdout
        .lines()
        // By the check column: a path (the worker's) may contain "provider".
        .find(|l| l.split_whitespace().nth(1) == Some("provider"))
        .unwrap();
    assert!(
        line.starts_with("ok ") && line.contains("warning"),
        "{line}"
    );
    assert_no_secret(&ran);
}
