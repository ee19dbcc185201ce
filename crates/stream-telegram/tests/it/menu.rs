//! The command menu: setMyCommands, then the notice unless skipped.

use serde_json::json;
use stream_telegram::menu::notice_text;
use stream_telegram::{MenuCommand, register_menu};

use crate::common::{Env, OWNER};

#[tokio::test]
async fn menu_is_registered_then_announced_unless_skipped() {
    let env = Env::start().await;
    let commands = vec![
        MenuCommand::new(0, "focus", "Propose a focus").unwrap(),
        MenuCommand::new(1, "correct", "Correct my last reply").unwrap(),
    ];
    let report = register_menu(&env.api, &commands, None).await.unwrap();
    assert_eq!((report.commands, report.notice_message_id), (2, None));
    assert_eq!(
        env.fake.commands(),
        json!([
            {"command": "focus", "description": "Propose a focus"},
            {"command": "correct", "description": "Correct my last reply"},
        ])
    );
    assert!(
        env.fake.calls_of("sendMessage").is_empty(),
        "--skip-help-notice sends nothing"
    );

    let report = register_menu(&env.api, &commands, Some(OWNER))
        .await
        .unwrap();
    assert!(report.notice_message_id.is_some());
    let sent = env.fake.calls_of("sendMessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].params,
        json!({
            "chat_id": OWNER,
            "text": "The command menu was updated: /focus, /correct.",
            "link_preview_options": {"is_disabled": true},
        })
    );
    assert_eq!(
        notice_text(&commands),
        "The command menu was updated: /focus, /correct."
    );
}

#[test]
fn menu_commands_follow_telegrams_rules() {
    assert!(MenuCommand::new(0, "focus_2", "ok").is_ok());
    assert!(MenuCommand::new(0, "Focus", "x").is_err());
    assert!(MenuCommand::new(0, "", "x").is_err());
    assert!(MenuCommand::new(0, "a".repeat(33), "x").is_err());
    assert!(MenuCommand::new(3, "help", " ").is_err());
    assert!(MenuCommand::new(0, "help", "d".repeat(257)).is_err());
}
