//! `thestream pair [--timeout SECS]`: learn the owner's Telegram user id.
//!
//! Prints a one-time code (CSPRNG), long-polls `getUpdates` for a private
//! message whose text is exactly that code, writes its sender's id into
//! `telegram.owner_user_id` (comments and layout kept), confirms every update
//! it read so `serve` never stores one, and answers "Paired." (docs/design.md
//! §19). Nothing is written to the store; no message text is printed.

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::Value;

use crate::Ctx;
use crate::config::TelegramMode;
use crate::exit::{CmdResult, Failure};

/// `pair` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Give up (exit 1, config unchanged) after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

/// 32 symbols, none easily mistaken for another (no I, O, 0, 1): each code
/// symbol is 5 uniformly random bits.
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// A code like `K7QD-M2XH`: 8 symbols (40 bits) in two groups.
fn code() -> Result<String, Failure> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| Failure::runtime(anyhow!("no system randomness: {e}")))?;
    let symbols: Vec<char> = bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(b & 31)]))
        .collect();
    let (a, b) = symbols.split_at(4);
    Ok(format!(
        "{}-{}",
        a.iter().collect::<String>(),
        b.iter().collect::<String>()
    ))
}

/// The sender of `update` when it is a private text message that is exactly
/// `code` from a person: `(user id, chat id)`.
fn pairing_sender(update: &Value, code: &str) -> Option<(i64, i64)> {
    let message = update.get("message")?;
    let chat = message.get("chat")?;
    let from = message.get("from")?;
    let private = chat.get("type")?.as_str()? == "private";
    let is_bot = from.get("is_bot").and_then(Value::as_bool).unwrap_or(true);
    let text = message.get("text")?.as_str()?;
    let user = from.get("id")?.as_i64()?;
    let chat_id = chat.get("id")?.as_i64()?;
    (private && !is_bot && text == code && user > 0 && chat_id == user).then_some((user, chat_id))
}

/// Sets `telegram.owner_user_id` in the TOML `text`, keeping every comment,
/// the key's own trailing comment and the layout.
fn with_owner(text: &str, owner: i64) -> Result<String, Failure> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| Failure::usage(anyhow!("the config no longer parses: {e}")))?;
    let telegram = doc
        .entry("telegram")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .ok_or_else(|| Failure::usage(anyhow!("telegram in the config is not a table")))?;
    match telegram
        .get_mut("owner_user_id")
        .and_then(|i| i.as_value_mut())
    {
        Some(value) => {
            let decor = value.decor().clone();
            *value = toml_edit::Value::from(owner);
            *value.decor_mut() = decor;
        }
        None => {
            telegram.insert("owner_user_id", toml_edit::value(owner));
        }
    }
    Ok(doc.to_string())
}

/// Replaces the config file with `text`: same mode, via a temporary file in
/// the same folder and a rename, so a crash leaves the old or the new file.
fn replace_file(path: &Path, text: &str) -> Result<(), Failure> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |e: std::io::Error| Failure::runtime(anyhow!("cannot write {}: {e}", path.display()));
    let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
    let tmp = path.with_extension("toml.pairing");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

fn telegram_failure(e: stream_telegram::ApiError) -> Failure {
    Failure::runtime(anyhow!("telegram: {e}"))
}

/// Runs `pair`.
pub fn run(ctx: &Ctx, args: Args) -> CmdResult {
    let config = ctx.config()?;
    if config.telegram.owner_user_id != 0 {
        return Err(Failure::usage(anyhow!(
            "telegram.owner_user_id is already set; pairing only fills an unset owner (set it to 0 to pair again)"
        )));
    }
    match config.telegram.mode {
        TelegramMode::Polling => {}
        TelegramMode::Webhook => {
            return Err(Failure::usage(anyhow!(
                "pair polls getUpdates, which Telegram refuses in webhook mode: pair with mode = \"polling\", then switch"
            )));
        }
    }
    // A serve reads the updates pairing needs: pairing holds the serve
    // lease, refused while another holds it. A SQLite store is only asked
    // when it exists (pair never creates it).
    let _lease = if config.store.backend == crate::config::StoreBackend::Postgres
        || config.store_path().exists()
    {
        let store = super::open_store(&config)?;
        Some(crate::store::take_lease(
            &store,
            "it reads the updates pairing needs: stop it, pair, then start it again",
        )?)
    } else {
        None
    };
    let original = std::fs::read_to_string(&ctx.config_path)
        .map_err(|e| Failure::runtime(anyhow!("cannot read {}: {e}", ctx.config_path.display())))?;
    let api = super::bot_api(&config)?;
    let code = code()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let me = api.get_me().await.map_err(telegram_failure)?;
        let bot: String = me
            .username
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        println!("pairing code: {code}");
        println!(
            "send it to @{bot} in a private chat within {} s",
            args.timeout
        );
        let _ = std::io::stdout().flush();
        let deadline = Instant::now() + Duration::from_secs(args.timeout);
        let mut offset: Option<i64> = None;
        let found = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break None;
            }
            let wait = u32::try_from(left.as_secs().clamp(1, 25)).unwrap_or(25);
            let updates = api
                .get_updates(offset, 100, wait)
                .await
                .map_err(telegram_failure)?;
            let mut hit = None;
            for update in &updates {
                if let Some(id) = update.get("update_id").and_then(Value::as_i64) {
                    offset = Some(offset.map_or(id + 1, |o| o.max(id + 1)));
                }
                if hit.is_none() {
                    hit = pairing_sender(update, &code);
                }
            }
            if hit.is_some() {
                break hit;
            }
        };
        // Confirm everything read: none of it is stored later by serve.
        if offset.is_some() {
            api.get_updates(offset, 1, 0)
                .await
                .map_err(telegram_failure)?;
        }
        let Some((owner, chat)) = found else {
            return Err(Failure::runtime(anyhow!(
                "no private message with the code arrived within {} s; the config is unchanged",
                args.timeout
            )));
        };
        replace_file(&ctx.config_path, &with_owner(&original, owner)?)?;
        println!("paired: telegram.owner_user_id = {owner}");
        if let Err(e) = api.send_message(chat, "Paired.", None).await {
            eprintln!("warning: the config is written, but \"Paired.\" was not sent: {e}");
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_two_groups_of_four_from_the_alphabet_and_differ() {
        let a = code().unwrap();
        let b = code().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 9);
        assert_eq!(&a[4..5], "-");
        assert!(a.bytes().all(|c| c == b'-' || ALPHABET.contains(&c)), "{a}");
    }

    #[test]
    fn owner_edit_keeps_comments_and_layout() {
        let text = crate::config::TEMPLATE;
        let edited = with_owner(text, 123_456).unwrap();
        let expected = text.replace(
            "owner_user_id = 0                        #",
            "owner_user_id = 123456                        #",
        );
        assert_eq!(edited, expected);
    }

    #[test]
    fn only_an_exact_private_code_from_a_person_pairs() {
        let msg = |chat_type: &str, from: i64, chat: i64, text: &str, is_bot: bool| {
            serde_json::json!({"update_id": 1, "message": {"message_id": 1,
                "from": {"id": from, "is_bot": is_bot, "first_name": "x"},
                "chat": {"id": chat, "type": chat_type}, "date": 0, "text": text}})
        };
        assert_eq!(
            pairing_sender(&msg("private", 5, 5, "AB12-CD34", false), "AB12-CD34"),
            Some((5, 5))
        );
        for miss in [
            msg("private", 5, 5, "AB12-CD34 ", false),
            msg("private", 5, 5, "ab12-cd34", false),
            msg("group", 5, -9, "AB12-CD34", false),
            msg("private", 5, 5, "AB12-CD34", true),
        ] {
            assert_eq!(pairing_sender(&miss, "AB12-CD34"), None, "{miss}");
        }
    }
}
