//! The admission table and the command-parsing table.

use serde_json::{Value, json};
use stream_core::payload::BotCommand;
use stream_telegram::DropReason;
use stream_telegram::admission::admit;
use stream_telegram::commands::parse_command;
use stream_telegram::wire::MessageEntity;

use crate::common::{BOT_USERNAME, OWNER, STRANGER, text_from, utf16_len};

fn with_id(mut update: Value) -> Value {
    update["update_id"] = json!(5001);
    update
}

fn owner_msg(patch: impl FnOnce(&mut Value)) -> Value {
    let mut m = text_from(OWNER, "hello");
    patch(&mut m);
    with_id(json!({ "message": m }))
}

#[test]
fn admission_table() {
    let photo = json!([
        {"file_id": "s", "file_unique_id": "us", "width": 90, "height": 90, "file_size": 900},
        {"file_id": "l", "file_unique_id": "ul", "width": 1280, "height": 960, "file_size": 90000},
        {"file_id": "m", "file_unique_id": "um", "width": 320, "height": 240, "file_size": 9000},
    ]);
    let rows: Vec<(&str, Value, i64, Result<(), DropReason>)> = vec![
        // "only the configured owner's private chat is served"
        (
            "owner text in private chat",
            owner_msg(|_| {}),
            OWNER,
            Ok(()),
        ),
        (
            "owner photo with caption",
            owner_msg(|m| {
                m.as_object_mut().unwrap().remove("text");
                m["caption"] = json!("look");
                m["photo"] = photo.clone();
            }),
            OWNER,
            Ok(()),
        ),
        // "anything else is dropped without storing its content"
        (
            "another user's private chat",
            with_id(json!({"message": text_from(STRANGER, "hi")})),
            OWNER,
            Err(DropReason::ForeignSender),
        ),
        (
            "owner in a group",
            owner_msg(|m| m["chat"] = json!({"id": -100, "type": "group", "title": "g"})),
            OWNER,
            Err(DropReason::GroupChat),
        ),
        (
            "owner in a supergroup",
            owner_msg(|m| m["chat"] = json!({"id": -1001, "type": "supergroup"})),
            OWNER,
            Err(DropReason::GroupChat),
        ),
        (
            "a message in a channel chat",
            owner_msg(|m| m["chat"] = json!({"id": -1002, "type": "channel"})),
            OWNER,
            Err(DropReason::ChannelChat),
        ),
        (
            "a chat type Telegram may add later",
            owner_msg(|m| m["chat"] = json!({"id": OWNER, "type": "hologram"})),
            OWNER,
            Err(DropReason::UnknownChat),
        ),
        (
            "a channel post",
            with_id(
                json!({"channel_post": {"message_id": 1, "chat": {"id": -1002, "type": "channel"}, "date": 1, "text": "x"}}),
            ),
            OWNER,
            Err(DropReason::ChannelPost),
        ),
        (
            "an edited owner message",
            with_id(json!({"edited_message": text_from(OWNER, "edited")})),
            OWNER,
            Err(DropReason::EditedMessage),
        ),
        (
            "a callback query",
            with_id(
                json!({"callback_query": {"id": "1", "from": {"id": OWNER, "is_bot": false}, "data": "x"}}),
            ),
            OWNER,
            Err(DropReason::CallbackQuery),
        ),
        (
            "an inline query",
            with_id(
                json!({"inline_query": {"id": "1", "from": {"id": OWNER, "is_bot": false}, "query": "x"}}),
            ),
            OWNER,
            Err(DropReason::UnsupportedUpdate),
        ),
        (
            "an update with no message",
            with_id(json!({})),
            OWNER,
            Err(DropReason::NoMessage),
        ),
        (
            "an update without update_id",
            json!({"message": text_from(OWNER, "x")}),
            OWNER,
            Err(DropReason::Malformed),
        ),
        (
            "a message whose chat is missing",
            owner_msg(|m| {
                m.as_object_mut().unwrap().remove("chat");
            }),
            OWNER,
            Err(DropReason::Malformed),
        ),
        (
            "not an object",
            json!([1, 2]),
            OWNER,
            Err(DropReason::Malformed),
        ),
        (
            "a message without sender",
            owner_msg(|m| {
                m.as_object_mut().unwrap().remove("from");
            }),
            OWNER,
            Err(DropReason::NoSender),
        ),
        (
            "a bot using the owner's id",
            owner_msg(|m| m["from"]["is_bot"] = json!(true)),
            OWNER,
            Err(DropReason::ForeignSender),
        ),
        (
            "the owner's message in someone else's private chat",
            owner_msg(|m| m["chat"]["id"] = json!(STRANGER)),
            OWNER,
            Err(DropReason::ForeignSender),
        ),
        (
            "no owner configured admits nobody",
            owner_msg(|_| {}),
            0,
            Err(DropReason::ForeignSender),
        ),
        (
            "a sticker (no text, caption or photo)",
            owner_msg(|m| {
                m.as_object_mut().unwrap().remove("text");
                m["sticker"] = json!({"file_id": "x"});
            }),
            OWNER,
            Err(DropReason::NoContent),
        ),
        (
            "text longer than 4,096 characters",
            owner_msg(|m| m["text"] = json!("x".repeat(4097))),
            OWNER,
            Err(DropReason::TextTooLong),
        ),
    ];
    for (name, update, owner, expected) in rows {
        let got = admit(&update, owner, BOT_USERNAME);
        match (&got, expected) {
            (Ok(_), Ok(())) => {}
            (Err(d), Err(reason)) => assert_eq!(d.reason, reason, "{name}"),
            _ => panic!("{name}: got {got:?}, expected {expected:?}"),
        }
    }

    let photo_msg = owner_msg(|m| {
        m.as_object_mut().unwrap().remove("text");
        m["caption"] = json!("/focus look");
        m["caption_entities"] = json!([{"type": "bot_command", "offset": 0, "length": 6}]);
        m["photo"] = photo.clone();
        m["reply_to_message"] =
            json!({"message_id": 9, "chat": {"id": OWNER, "type": "private"}, "date": 1});
    });
    let admitted = admit(&photo_msg, OWNER, BOT_USERNAME).unwrap();
    let order: Vec<&str> = admitted
        .photo_sizes
        .iter()
        .map(|p| p.file_id.as_str())
        .collect();
    assert_eq!(order, ["l", "m", "s"], "largest first");
    assert_eq!(admitted.text.unwrap().as_str(), "/focus look");
    assert_eq!(admitted.command.unwrap().name, BotCommand::Focus);
    assert_eq!(admitted.reply_to_message_id, Some(9));
    assert_eq!(
        (admitted.update_id, admitted.chat_id, admitted.sender_id),
        (5001, OWNER, OWNER)
    );
}

#[test]
fn drop_reason_codes_are_golden() {
    let codes: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    insta::assert_json_snapshot!(codes);
}

fn entity(offset: usize, length: usize) -> MessageEntity {
    MessageEntity {
        kind: "bot_command".into(),
        offset,
        length,
    }
}

/// A `bot_command` entity around the first occurrence of `command` in `text`,
/// with offsets counted in UTF-16 code units as Telegram does.
fn marked(text: &str, command: &str) -> Vec<MessageEntity> {
    let byte = text.find(command).unwrap();
    vec![entity(utf16_len(&text[..byte]), utf16_len(command))]
}

#[test]
fn command_parsing_table() {
    use BotCommand::{Correct, Focus, Help};
    type Row<'a> = (&'a str, Vec<MessageEntity>, Option<(BotCommand, &'a str)>);
    let rows: Vec<Row> = vec![
        ("/focus", marked("/focus", "/focus"), Some((Focus, ""))),
        (
            "/focus learn rust",
            marked("/focus learn rust", "/focus"),
            Some((Focus, "learn rust")),
        ),
        (
            "/focus@OurBot learn",
            marked("/focus@OurBot learn", "/focus@OurBot"),
            Some((Focus, "learn")),
        ),
        // Usernames compare without regard to ASCII case.
        (
            "/focus@ourbot learn",
            marked("/focus@ourbot learn", "/focus@ourbot"),
            Some((Focus, "learn")),
        ),
        // "/focus@otherbot is not ours"
        (
            "/focus@OtherBot learn",
            marked("/focus@OtherBot learn", "/focus@OtherBot"),
            None,
        ),
        (
            "/correct I meant Tuesday",
            marked("/correct I meant Tuesday", "/correct"),
            Some((Correct, "I meant Tuesday")),
        ),
        ("/help", marked("/help", "/help"), Some((Help, ""))),
        ("/start", marked("/start", "/start"), None),
        (
            "/focus    spaced   ",
            marked("/focus    spaced   ", "/focus"),
            Some((Focus, "spaced")),
        ),
        // Emoji before the command: offsets are UTF-16 code units, not bytes or chars.
        (
            "😀 /focus plan 🎯 trip",
            marked("😀 /focus plan 🎯 trip", "/focus"),
            Some((Focus, "plan 🎯 trip")),
        ),
        (
            "👍🏽 /correct fix it",
            marked("👍🏽 /correct fix it", "/correct"),
            Some((Correct, "fix it")),
        ),
        (
            "é🎉 /help@OurBot now",
            marked("é🎉 /help@OurBot now", "/help@OurBot"),
            Some((Help, "now")),
        ),
        // The same text read with byte offsets would land inside the emoji.
        ("😀 /focus x", vec![entity(5, 6)], None),
        // Only entities make commands.
        ("/focus not marked", vec![], None),
        // An offset that splits a surrogate pair, or runs past the end.
        ("😀/focus", vec![entity(1, 6)], None),
        ("/focus", vec![entity(0, 60)], None),
        // The first bot_command decides.
        ("/start /focus x", vec![entity(0, 6), entity(7, 6)], None),
    ];
    for (text, entities, expected) in rows {
        let got = parse_command(text, &entities, BOT_USERNAME);
        let got = got.as_ref().map(|c| (c.name, c.args.as_str()));
        assert_eq!(got, expected, "{text}");
    }
}
