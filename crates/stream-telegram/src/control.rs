//! The store's control rows this crate reads and writes: the ingress state
//! (`ingress`: `{"state": "running" | "frozen"}`) and the polling offset
//! (`telegram-polling-offset:<bot-id>`: `{"offset": N}`), plus freeze and
//! resume for both ingress modes.
//!
//! Freezing is exact: every transaction that stores an update re-reads the
//! `ingress` row inside itself, so once the freeze has committed no update
//! is stored (and none acknowledged) until the resume commits.

use std::sync::Arc;

use serde_json::{Value, json};
use stream_store::{Read, Store, StoreError};

use crate::client::{ApiError, BotApi};
use crate::token::WebhookSecret;

/// The control key of the ingress state.
pub const INGRESS_CONTROL: &str = "ingress";

/// The control key of the next `getUpdates` offset for a bot.
pub fn polling_offset_key(bot_id: i64) -> String {
    format!("telegram-polling-offset:{bot_id}")
}

/// Whether ingress may store and acknowledge updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressState {
    /// Normal operation (also when the row is absent).
    Running,
    /// No update is stored or acknowledged.
    Frozen,
}

impl IngressState {
    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Frozen => "frozen",
        }
    }
}

/// A control row could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A control row holds something this build does not understand.
    #[error("control row `{key}` is invalid")]
    Invalid {
        /// The key.
        key: String,
    },
    /// A Bot API call of the freeze or resume failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// A blocking store task did not finish.
    #[error("a store task was cancelled")]
    Join,
}

/// The ingress state as `reader` sees it. A row that is neither `running`
/// nor `frozen` is an error: ingress stops rather than guess.
pub fn ingress_state(reader: &dyn Read) -> Result<IngressState, ControlError> {
    let invalid = || ControlError::Invalid {
        key: INGRESS_CONTROL.to_owned(),
    };
    match reader.control(INGRESS_CONTROL)? {
        None => Ok(IngressState::Running),
        Some(value) => match value.get("state").and_then(Value::as_str) {
            Some("running") => Ok(IngressState::Running),
            Some("frozen") => Ok(IngressState::Frozen),
            _ => Err(invalid()),
        },
    }
}

/// The stored next `getUpdates` offset of `bot_id`, if any.
pub fn polling_offset(reader: &dyn Read, bot_id: i64) -> Result<Option<i64>, ControlError> {
    let key = polling_offset_key(bot_id);
    match reader.control(&key)? {
        None => Ok(None),
        Some(value) => value
            .get("offset")
            .and_then(Value::as_i64)
            .map(Some)
            .ok_or(ControlError::Invalid { key }),
    }
}

fn set_state_blocking(store: &dyn Store, state: IngressState) -> Result<(), ControlError> {
    let mut tx = store.begin()?;
    tx.set_control(INGRESS_CONTROL, &json!({"state": state.as_str()}))?;
    tx.commit()?;
    tracing::info!(state = state.as_str(), "ingress state set");
    Ok(())
}

async fn set_state(store: &Arc<dyn Store>, state: IngressState) -> Result<(), ControlError> {
    let store = Arc::clone(store);
    crate::offload::run(move || set_state_blocking(&*store, state))
        .await
        .map_err(|_| ControlError::Join)?
}

/// How ingress runs, for freeze and resume.
#[derive(Debug, Clone)]
pub enum IngressMode {
    /// Long polling: freezing only stops storing and calling `getUpdates`.
    Polling,
    /// Webhook at `url` with `secret`.
    Webhook {
        /// The public URL Telegram posts to.
        url: String,
        /// The secret Telegram echoes.
        secret: WebhookSecret,
    },
}

/// Freezes ingress without losing an update.
///
/// Polling: commits `frozen`; the polling loop stops calling `getUpdates`,
/// and an update already fetched is neither stored nor acknowledged.
/// Webhook: first `deleteWebhook` with `drop_pending_updates: false`
/// (Telegram keeps pending updates), then commits `frozen`; a push still in
/// flight after that commit is answered `503` and stays pending.
pub async fn freeze_ingress(
    store: &Arc<dyn Store>,
    api: &BotApi,
    mode: &IngressMode,
) -> Result<(), ControlError> {
    match mode {
        IngressMode::Polling => {}
        IngressMode::Webhook { .. } => {
            api.delete_webhook().await?;
        }
    }
    set_state(store, IngressState::Frozen).await
}

/// Resumes ingress: commits `running`, then (webhook mode) `setWebhook`
/// with the same URL and secret, which makes Telegram deliver what it kept.
pub async fn resume_ingress(
    store: &Arc<dyn Store>,
    api: &BotApi,
    mode: &IngressMode,
) -> Result<(), ControlError> {
    set_state(store, IngressState::Running).await?;
    match mode {
        IngressMode::Polling => {}
        IngressMode::Webhook { url, secret } => {
            api.set_webhook(url, secret).await?;
        }
    }
    Ok(())
}
