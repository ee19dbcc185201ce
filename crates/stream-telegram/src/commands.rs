//! Commands of ours, parsed from `bot_command` entities.
//!
//! Telegram marks every `/word` or `/word@botname` of a message as a
//! `bot_command` entity, with offsets and lengths in UTF-16 code units. The
//! message's command is its *first* `bot_command` entity: it is ours when
//! its name is `focus`, `correct` or `help` and it names no bot or names
//! this bot (usernames compare without regard to ASCII case). The text after
//! the entity, trimmed, is the argument. Text before the entity stays in the
//! message text and is not part of the argument.

use stream_core::payload::{BotCommand, CommandRef};
use stream_core::text::BoundedText;

use crate::wire::MessageEntity;

/// The byte index of UTF-16 code unit `offset` in `text`; `None` when the
/// offset is past the end or splits a surrogate pair.
pub fn utf16_to_byte(text: &str, offset: usize) -> Option<usize> {
    let mut units = 0usize;
    for (byte, ch) in text.char_indices() {
        if units == offset {
            return Some(byte);
        }
        units += ch.len_utf16();
        if units > offset {
            return None;
        }
    }
    (units == offset).then_some(text.len())
}

/// Parses one command name as written after the slash (`focus`,
/// `focus@OurBot`). `None` when it is not one of ours.
fn ours(word: &str, bot_username: &str) -> Option<BotCommand> {
    let (name, bot) = match word.split_once('@') {
        Some((name, bot)) => (name, Some(bot)),
        None => (word, None),
    };
    if let Some(bot) = bot
        && !bot.eq_ignore_ascii_case(bot_username)
    {
        return None;
    }
    match name {
        "focus" => Some(BotCommand::Focus),
        "correct" => Some(BotCommand::Correct),
        "help" => Some(BotCommand::Help),
        _ => None,
    }
}

/// The command of a message: see the module docs. Entities whose offsets do
/// not fit the text are ignored (the message is kept as plain text).
pub fn parse_command(
    text: &str,
    entities: &[MessageEntity],
    bot_username: &str,
) -> Option<CommandRef> {
    let entity = entities.iter().find(|e| e.kind == "bot_command")?;
    let start = utf16_to_byte(text, entity.offset)?;
    let end = utf16_to_byte(text, entity.offset.checked_add(entity.length)?)?;
    let word = text.get(start..end)?.strip_prefix('/')?;
    let name = ours(word, bot_username)?;
    let args = BoundedText::new(text.get(end..)?.trim()).ok()?;
    Some(CommandRef { name, args })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever offsets Telegram (or an attacker) sends, parsing never
        /// panics and only ever slices at character boundaries.
        #[test]
        fn arbitrary_entities_never_panic(
            text in "\\PC{0,24}",
            spans in proptest::collection::vec((0usize..40, 0usize..40), 0..4),
        ) {
            let entities: Vec<MessageEntity> = spans
                .iter()
                .map(|&(offset, length)| MessageEntity { kind: "bot_command".into(), offset, length })
                .collect();
            let _ = parse_command(&text, &entities, "OurBot");
            for &(offset, _) in &spans {
                if let Some(byte) = utf16_to_byte(&text, offset) {
                    prop_assert!(text.is_char_boundary(byte));
                    prop_assert_eq!(text[..byte].encode_utf16().count(), offset);
                }
            }
        }
    }

    #[test]
    fn utf16_offsets_map_to_byte_indices() {
        // "😀" is 2 UTF-16 units and 4 bytes; "é" is 1 unit and 2 bytes.
        let text = "😀é/x";
        assert_eq!(utf16_to_byte(text, 0), Some(0));
        assert_eq!(utf16_to_byte(text, 1), None);
        assert_eq!(utf16_to_byte(text, 2), Some(4));
        assert_eq!(utf16_to_byte(text, 3), Some(6));
        assert_eq!(utf16_to_byte(text, 5), Some(8));
        assert_eq!(utf16_to_byte(text, 6), None);
    }
}
