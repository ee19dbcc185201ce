//! `activate` refusals before any step (an unenforced or missing worker, a
//! changed capability under the same version) and webhook mode's freeze and
//! resume.

use super::*;

fn assert_nothing_changed(s: &Stack, active_version: u64) {
    let db = store(s);
    assert!(recorded_steps(&db).is_empty(), "no step recorded");
    assert_eq!(db.control("ingress").unwrap(), None, "ingress never frozen");
    let active = db.control("active-declaration").unwrap().unwrap();
    assert_eq!(active["version"], json!(active_version));
    for method in [
        "getWebhookInfo",
        "deleteWebhook",
        "setWebhook",
        "setMyCommands",
    ] {
        assert!(
            s.telegram.calls_of(method).is_empty(),
            "{method} was called"
        );
    }
}

/// verify-bundle refuses a worker whose sandbox is not enforced, and a
/// missing worker binary, with nothing else changed (exit 2).
#[test]
fn verify_bundle_refuses_an_unenforced_or_missing_worker_and_changes_nothing() {
    let s = stack(ProviderApi::OpenaiChat);
    configure(&s, V17);
    drain(&s);
    let misbehaving = stream_testkit::bin::binary("stream-test-worker").unwrap();
    let unsandboxed = s.path().join("unsandboxed");
    std::os::unix::fs::symlink(&misbehaving, &unsandboxed).unwrap();
    configure_worker(&s, &unsandboxed);
    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(ran.code, 2, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("verify-bundle"), "{}", ran.stderr);
    assert!(ran.stderr.contains("not enforced"), "{}", ran.stderr);
    assert_nothing_changed(&s, 17);

    configure_worker(&s, &s.path().join("no-such-worker"));
    let ran = run(
        &s,
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    assert_eq!(ran.code, 2, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("worker binary"), "{}", ran.stderr);
    assert_nothing_changed(&s, 17);
}

/// The same id and version with another capability is refused before any
/// step (exit 2); so is a file that is not a conversation declaration.
#[test]
fn a_changed_capability_under_the_same_version_is_refused_before_any_step() {
    let s = stack(ProviderApi::OpenaiChat);
    configure(&s, V18);
    drain(&s);
    let changed = s.path().join("changed");
    std::fs::create_dir_all(changed.join("prompts")).unwrap();
    std::fs::copy(
        s.path().join(V18),
        changed.join("telegram-conversation.v18.yaml"),
    )
    .unwrap();
    let prompt = std::fs::read_to_string(
        s.path()
            .join("declarations/prompts/telegram-conversation.v18.md"),
    )
    .unwrap();
    std::fs::write(
        changed.join("prompts/telegram-conversation.v18.md"),
        format!("{prompt}\nOne more instruction.\n"),
    )
    .unwrap();
    let ran = run(
        &s,
        &[
            "activate",
            "--declaration",
            "changed/telegram-conversation.v18.yaml",
            "--skip-help-notice",
        ],
    );
    assert_eq!(ran.code, 2, "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr
            .contains("capability changed: bump the declaration version"),
        "{}",
        ran.stderr
    );
    assert_nothing_changed(&s, 18);

    let ran = run(
        &s,
        &[
            "activate",
            "--declaration",
            "declarations/telegram-replies.v2.yaml",
        ],
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("not a pi telegram-conversation"),
        "{}",
        ran.stderr
    );
    assert_nothing_changed(&s, 18);
}

/// Webhook mode: the freeze is `deleteWebhook` keeping pending updates
/// (Telegram holds what arrives meanwhile), the resume `setWebhook` with the
/// same URL and secret; everything is answered once.
#[test]
fn webhook_mode_freezes_with_delete_webhook_and_resumes_to_the_same_url() {
    let s = stack(ProviderApi::OpenaiChat);
    let url = configure_webhook(&s);
    configure(&s, V17);
    let serve = Proc::spawn(&s, "serve-v17", &["serve"]);
    let api = BotApi::new(
        &s.telegram.base_url(),
        BotToken::new(BOT_TOKEN.to_owned()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let secret = WebhookSecret::new(WEBHOOK_SECRET.to_owned()).unwrap();
    s.block_on(api.set_webhook(&url, &secret)).unwrap();
    s.say("Before the freeze: one.");
    s.script(Reply::completion(ScriptedCompletion::text(
        "v17 answers one.",
    )));
    wait_until("v17's first reply", Duration::from_secs(30), || {
        s.sent_texts().iter().any(|t| t == "v17 answers one.")
    });
    v17_in_flight(&s, Duration::from_millis(2000));

    let activate = Proc::spawn(
        &s,
        "activate",
        &["activate", "--declaration", V18, "--skip-help-notice"],
    );
    let db = store(&s);
    wait_until("the freeze", Duration::from_secs(30), || {
        recorded_steps(&db).len() >= 2
    });
    let deleted = s.telegram.calls_of("deleteWebhook");
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].params, json!({"drop_pending_updates": false}));
    assert_eq!(s.telegram.webhook_url(), None);
    s.say("During the activation.");
    s.script(Reply::completion(ScriptedCompletion::text("v18 answers.")));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        s.telegram.pending_updates(),
        1,
        "Telegram keeps it while frozen"
    );

    let ran = activate.finish(Duration::from_secs(60));
    assert_eq!(
        ran.code,
        0,
        "{}\n{}\n{}",
        ran.stdout,
        ran.stderr,
        serve.logs()
    );
    wait_until("v18's reply", Duration::from_secs(30), || {
        s.sent_texts().iter().any(|t| t == "v18 answers.")
    });
    drop(serve);
    let set = s.telegram.calls_of("setWebhook");
    assert_eq!(set.len(), 2, "the test's registration and the resume");
    assert_eq!(set[0].params, set[1].params, "same URL and secret");
    assert_eq!(set[1].params["url"], json!(url));
    assert_eq!(s.telegram.webhook_url(), Some(url));
    let events = s.events().unwrap();
    assert_steps_once_in_order(&events);
    assert_eq!(
        s.sent_texts(),
        ["v17 answers one.", "v17 answers two.", "v18 answers."]
    );
    let answered = answered_by(&events);
    assert_eq!(answered[2].1, [("telegram-conversation".into(), 18)]);
}
