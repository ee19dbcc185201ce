//! The Bot API requests thestream sends, as pure values: a method name and
//! its JSON parameters. The client posts them; golden tests pin them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::wire::MenuCommand;

/// One Bot API call: `POST <base>/bot<token>/<method>` with `params` as JSON.
/// Its `Debug` shows the method only: the parameters may hold message text.
#[derive(Clone, PartialEq)]
pub struct ApiRequest {
    /// The method, e.g. `sendMessage`.
    pub method: &'static str,
    /// Its parameters. May hold message text: never log it.
    pub params: Value,
    /// How long to wait for the answer, when it differs from the client's default
    /// (a long poll waits longer).
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for ApiRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRequest")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl ApiRequest {
    fn new(method: &'static str, params: Value) -> Self {
        Self {
            method,
            params,
            timeout: None,
        }
    }
}

/// Slack added to a long poll's own timeout before the HTTP call gives up.
pub const LONG_POLL_SLACK: Duration = Duration::from_secs(15);

/// `getMe`.
pub fn get_me() -> ApiRequest {
    ApiRequest::new("getMe", json!({}))
}

/// `getUpdates` from `offset` (none: from the oldest unconfirmed), at most
/// `limit` updates, waiting up to `timeout_secs` for the first one.
pub fn get_updates(offset: Option<i64>, limit: u8, timeout_secs: u32) -> ApiRequest {
    let mut params = json!({
        "limit": limit.clamp(1, 100),
        "timeout": timeout_secs,
    });
    if let (Some(offset), Some(map)) = (offset, params.as_object_mut()) {
        map.insert("offset".into(), json!(offset));
    }
    ApiRequest {
        method: "getUpdates",
        params,
        timeout: Some(Duration::from_secs(u64::from(timeout_secs)) + LONG_POLL_SLACK),
    }
}

/// `setWebhook` to `url` with `secret_token`; pending updates are kept.
pub fn set_webhook(url: &str, secret_token: &str) -> ApiRequest {
    ApiRequest::new(
        "setWebhook",
        json!({
            "url": url,
            "secret_token": secret_token,
            "drop_pending_updates": false,
        }),
    )
}

/// `deleteWebhook`, always keeping pending updates: Telegram holds them (up
/// to 24 hours) until the webhook is set again or `getUpdates` asks.
pub fn delete_webhook() -> ApiRequest {
    ApiRequest::new("deleteWebhook", json!({"drop_pending_updates": false}))
}

/// `getWebhookInfo`.
pub fn get_webhook_info() -> ApiRequest {
    ApiRequest::new("getWebhookInfo", json!({}))
}

/// `sendMessage` of plain `text` to `chat_id`, replying to `reply_to` when
/// given (and sending anyway if that message is gone). Link previews are
/// always off: Telegram's crawler fetching a URL the model wrote would be a
/// way out of the sandbox (a prompt-injected reply could carry memory or
/// transcript text in a URL).
pub fn send_message(chat_id: i64, text: &str, reply_to: Option<i64>) -> ApiRequest {
    let mut params = json!({
        "chat_id": chat_id,
        "text": text,
        "link_preview_options": {"is_disabled": true},
    });
    if let (Some(message_id), Some(map)) = (reply_to, params.as_object_mut()) {
        map.insert(
            "reply_parameters".into(),
            json!({
                "message_id": message_id,
                "allow_sending_without_reply": true,
            }),
        );
    }
    ApiRequest::new("sendMessage", params)
}

/// `getFile`.
pub fn get_file(file_id: &str) -> ApiRequest {
    ApiRequest::new("getFile", json!({"file_id": file_id}))
}

/// `setMyCommands` for the default scope.
pub fn set_my_commands(commands: &[MenuCommand]) -> ApiRequest {
    ApiRequest::new("setMyCommands", json!({"commands": commands}))
}

/// `deleteMyCommands` for the default scope.
pub fn delete_my_commands() -> ApiRequest {
    ApiRequest::new("deleteMyCommands", json!({}))
}
