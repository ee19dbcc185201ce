//! The command menu: `setMyCommands` with the active declaration's
//! commands, then (unless skipped) a short notice to the owner's chat.

use crate::client::{ApiError, BotApi};
use crate::wire::MenuCommand;

/// What registering the menu did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuReport {
    /// Commands registered.
    pub commands: usize,
    /// The notice's message id, when one was sent.
    pub notice_message_id: Option<i64>,
}

/// The fixed notice text: names the commands, nothing else.
pub fn notice_text(commands: &[MenuCommand]) -> String {
    if commands.is_empty() {
        return "The command menu was cleared.".to_owned();
    }
    let names: Vec<String> = commands
        .iter()
        .map(|c| format!("/{}", c.command()))
        .collect();
    format!("The command menu was updated: {}.", names.join(", "))
}

/// Registers `commands` with `setMyCommands`; then, when `notice_chat` is
/// given, sends [`notice_text`] there.
pub async fn register_menu(
    api: &BotApi,
    commands: &[MenuCommand],
    notice_chat: Option<i64>,
) -> Result<MenuReport, ApiError> {
    api.set_my_commands(commands).await?;
    tracing::info!(
        commands = commands.len(),
        "telegram command menu registered"
    );
    let notice_message_id = match notice_chat {
        Some(chat) => {
            let sent = api.send_message(chat, &notice_text(commands), None).await?;
            Some(sent.message_id)
        }
        None => None,
    };
    Ok(MenuReport {
        commands: commands.len(),
        notice_message_id,
    })
}
