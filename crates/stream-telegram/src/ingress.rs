//! Ingress: from one raw update to a stored `stream.telegram.message.received@1`
//! on `telegram:<bot-id>`, committed before the update is acknowledged.
//!
//! [`Ingress::handle_update`] admits, downloads the photo (outside any
//! transaction), hashes it once on the thread that runs the commit (the digest
//! names it in the event and keys its blob), then commits in one
//! transaction: the blob, the event, and — in polling mode — the next
//! `getUpdates` offset. A dropped update commits
//! the offset alone. The transaction re-reads the `ingress` control row and
//! writes nothing when ingress is frozen.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use stream_core::canon::Hashed;
use stream_core::payload::{
    MAX_PHOTO_BYTES, MessageReceived, PhotoRef, PrivateChat, photo_too_large,
};
use stream_core::text::{BoundedText, Label};
use stream_core::{EventError, EventId, NewEvent, SourceName};
use stream_store::{AppendOutcome, Store, StoreError};

use crate::admission::{Admitted, DropReason, Dropped, admit, update_id_of};
use crate::client::{ApiError, BotApi};
use crate::control::{ControlError, IngressState, ingress_state, polling_offset_key};
use crate::wire::PhotoSize;

/// The bot, as `getMe` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    /// The bot's user id: the source is `telegram:<id>`.
    pub id: i64,
    /// The bot's username, deciding which `/command@bot` are ours.
    pub username: String,
}

/// What ingress needs from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressConfig {
    /// `telegram.owner_user_id`: the only user whose private chat is stored.
    /// 0 (unset) admits nobody.
    pub owner_user_id: i64,
}

impl IngressConfig {
    /// The owner. Photos are bounded by the one photo bound,
    /// `stream_core::payload::MAX_PHOTO_BYTES`.
    pub fn for_owner(owner_user_id: i64) -> Self {
        Self { owner_user_id }
    }
}

/// Ingress failed in a way the caller must see (the update was not stored
/// and must not be acknowledged).
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A control row was unreadable.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Building the event failed.
    #[error(transparent)]
    Event(#[from] EventError),
    /// A Bot API call failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// `getMe` returned a user that is not a bot or has no username.
    #[error("getMe did not describe a bot with a username")]
    NotABot,
    /// A blocking store task did not finish.
    #[error("a store task was cancelled")]
    Join,
}

/// How an update is acknowledged once stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// By the caller (webhook: the HTTP 200 after this returns).
    Caller,
    /// By the next `getUpdates`: the offset is committed with the update.
    PollingOffset,
}

/// What happened to one update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Stored now.
    Stored {
        /// The event.
        event_id: EventId,
        /// Its position.
        seq: u64,
    },
    /// Already stored identically (a duplicate delivery).
    Converged {
        /// The event.
        event_id: EventId,
        /// Its position.
        seq: u64,
    },
    /// The update id is stored with different content; nothing written.
    Conflict {
        /// The existing event.
        event_id: EventId,
    },
    /// Not admitted; nothing of its content stored.
    Dropped(Dropped),
    /// Ingress is frozen: nothing written, the update must not be acknowledged.
    Frozen,
}

/// Counters of what ingress did since it started. Content-free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngressStats {
    /// Updates stored.
    pub stored: u64,
    /// Duplicates that converged.
    pub converged: u64,
    /// Update ids stored with other content.
    pub conflicts: u64,
    /// Dropped updates by reason code.
    pub dropped: BTreeMap<&'static str, u64>,
}

impl IngressStats {
    /// All dropped updates.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// The ingress of one bot into one store. Shared by the polling loop and
/// the webhook server.
pub struct Ingress {
    store: Arc<dyn Store>,
    api: BotApi,
    bot: BotIdentity,
    source: SourceName,
    config: IngressConfig,
    stats: Mutex<IngressStats>,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress")
            .field("bot_id", &self.bot.id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

enum Commit {
    /// The message's event, appended (or not) under this id.
    Stored(AppendOutcome, EventId),
    Nothing,
    Frozen,
}

fn sniff_content_type(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "image/webp"
    } else if bytes.starts_with(b"GIF8") {
        "image/gif"
    } else {
        "application/octet-stream"
    }
}

impl Ingress {
    /// Asks `getMe` who the bot is, then builds the ingress.
    pub async fn connect(
        store: Arc<dyn Store>,
        api: BotApi,
        config: IngressConfig,
    ) -> Result<Self, IngressError> {
        let me = api.get_me().await?;
        let username = match (me.is_bot, me.username) {
            (true, Some(username)) => username,
            _ => return Err(IngressError::NotABot),
        };
        Ok(Self::new(
            store,
            api,
            BotIdentity {
                id: me.id,
                username,
            },
            config,
        ))
    }

    /// An ingress for a bot whose identity is already known.
    pub fn new(
        store: Arc<dyn Store>,
        api: BotApi,
        bot: BotIdentity,
        config: IngressConfig,
    ) -> Self {
        let source = SourceName::telegram(bot.id);
        Self {
            store,
            api,
            bot,
            source,
            config,
            stats: Mutex::new(IngressStats::default()),
        }
    }

    /// `telegram:<bot-id>`.
    pub fn source(&self) -> &SourceName {
        &self.source
    }

    /// The bot.
    pub fn bot(&self) -> &BotIdentity {
        &self.bot
    }

    /// The client.
    pub fn api(&self) -> &BotApi {
        &self.api
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// What ingress did so far.
    pub fn stats(&self) -> IngressStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn count(&self, f: impl FnOnce(&mut IngressStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The ingress state now.
    pub async fn state(&self) -> Result<IngressState, IngressError> {
        let store = Arc::clone(&self.store);
        let state = crate::offload::run(move || ingress_state(&*store))
            .await
            .map_err(|_| IngressError::Join)??;
        Ok(state)
    }

    /// The stored next `getUpdates` offset.
    pub async fn polling_offset(&self) -> Result<Option<i64>, IngressError> {
        let store = Arc::clone(&self.store);
        let bot = self.bot.id;
        let offset = crate::offload::run(move || crate::control::polling_offset(&*store, bot))
            .await
            .map_err(|_| IngressError::Join)??;
        Ok(offset)
    }

    /// Parses raw bytes (a webhook body) and handles the update.
    pub async fn handle_bytes(&self, body: &[u8], ack: Ack) -> Result<UpdateOutcome, IngressError> {
        match serde_json::from_slice::<Value>(body) {
            Ok(update) => self.handle_update(&update, ack).await,
            Err(_) => {
                let dropped = Dropped {
                    update_id: None,
                    reason: DropReason::Malformed,
                };
                self.log_drop(dropped);
                Ok(UpdateOutcome::Dropped(dropped))
            }
        }
    }

    fn log_drop(&self, dropped: Dropped) {
        self.count(|s| *s.dropped.entry(dropped.reason.as_str()).or_default() += 1);
        tracing::info!(
            update_id = dropped.update_id,
            reason = dropped.reason.as_str(),
            "telegram update dropped"
        );
    }

    /// Admits, fetches the photo, and commits one update (see the module
    /// docs). Returns an error only when nothing was committed and the
    /// update must not be acknowledged.
    pub async fn handle_update(
        &self,
        update: &Value,
        ack: Ack,
    ) -> Result<UpdateOutcome, IngressError> {
        let offset = match ack {
            Ack::Caller => None,
            Ack::PollingOffset => update_id_of(update).and_then(|id| id.checked_add(1)),
        };
        let admitted = match admit(update, self.config.owner_user_id, &self.bot.username) {
            Ok(admitted) => admitted,
            Err(dropped) => return self.commit_drop(dropped, offset).await,
        };
        let (photo, photo_too_large) = match self.fetch_photo(&admitted).await {
            Ok(photo) => (photo, false),
            // Stored without it, to be answered with a fixed reply rather
            // than dropped in silence.
            Err(DropReason::PhotoTooLarge) => {
                tracing::info!(
                    update_id = admitted.update_id,
                    "photo over the bound; stored without it"
                );
                (None, true)
            }
            Err(reason) => {
                let dropped = Dropped {
                    update_id: Some(admitted.update_id),
                    reason,
                };
                return self.commit_drop(dropped, offset).await;
            }
        };
        let payload = MessageReceived {
            update_id: admitted.update_id,
            message_id: admitted.message_id,
            chat_id: admitted.chat_id,
            chat_type: PrivateChat,
            sender_id: admitted.sender_id,
            date: admitted.date,
            text: admitted.text,
            // Named by its blob's digest in `Message::build`.
            photo: None,
            photo_too_large,
            reply_to_message_id: admitted.reply_to_message_id,
            command: admitted.command,
        };
        let message = Message { payload, photo };
        match self.commit(Some(message), offset).await? {
            Commit::Frozen => Ok(UpdateOutcome::Frozen),
            Commit::Nothing => Ok(UpdateOutcome::Frozen),
            Commit::Stored(AppendOutcome::Inserted { seq }, event_id) => {
                self.count(|s| s.stored += 1);
                tracing::info!(
                    update_id = admitted.update_id,
                    seq,
                    event_id = event_id.short(16),
                    "telegram update stored"
                );
                Ok(UpdateOutcome::Stored { event_id, seq })
            }
            Commit::Stored(AppendOutcome::Converged { seq }, event_id) => {
                self.count(|s| s.converged += 1);
                tracing::info!(
                    update_id = admitted.update_id,
                    seq,
                    "telegram update already stored; converged"
                );
                Ok(UpdateOutcome::Converged { event_id, seq })
            }
            Commit::Stored(AppendOutcome::Conflict, event_id) => {
                self.count(|s| s.conflicts += 1);
                tracing::warn!(
                    update_id = admitted.update_id,
                    event_id = event_id.short(16),
                    "telegram update id already stored with other content; kept the first"
                );
                Ok(UpdateOutcome::Conflict { event_id })
            }
        }
    }

    async fn commit_drop(
        &self,
        dropped: Dropped,
        offset: Option<i64>,
    ) -> Result<UpdateOutcome, IngressError> {
        match self.commit(None, offset).await? {
            Commit::Frozen => Ok(UpdateOutcome::Frozen),
            Commit::Nothing | Commit::Stored(..) => {
                self.log_drop(dropped);
                Ok(UpdateOutcome::Dropped(dropped))
            }
        }
    }

    /// One transaction: state check, blob, event, offset; the message's
    /// event is built (its photo hashed) on the thread that runs it first,
    /// before the write lock is taken.
    async fn commit(
        &self,
        message: Option<Message>,
        offset: Option<i64>,
    ) -> Result<Commit, IngressError> {
        let store = Arc::clone(&self.store);
        let source = self.source.clone();
        let key = polling_offset_key(self.bot.id);
        crate::offload::run(move || -> Result<Commit, IngressError> {
            let (event, blob) = match message {
                Some(message) => {
                    let (event, blob) = message.build(&source)?;
                    (Some(event), blob)
                }
                None => (None, None),
            };
            let mut tx = store.begin()?;
            match ingress_state(&*tx)? {
                IngressState::Running => {}
                IngressState::Frozen => return Ok(Commit::Frozen),
            }
            let mut result = Commit::Nothing;
            if let Some(blob) = &blob {
                tx.put_hashed(&blob.borrowed())?;
            }
            if let Some(event) = &event {
                result = Commit::Stored(tx.append(event)?, event.id.clone());
            }
            if let Some(offset) = offset {
                tx.set_control(&key, &json!({"offset": offset}))?;
            }
            if event.is_none() && offset.is_none() {
                return Ok(result);
            }
            tx.commit()?;
            Ok(result)
        })
        .await
        .map_err(|_| IngressError::Join)?
    }

    /// Downloads the largest photo size within the one photo bound.
    /// `Ok(None)` when the message has no photo, `PhotoTooLarge` when no
    /// size fits.
    async fn fetch_photo(&self, admitted: &Admitted) -> Result<Option<Fetched>, DropReason> {
        if admitted.photo_sizes.is_empty() {
            return Ok(None);
        }
        let cap = MAX_PHOTO_BYTES;
        let candidates: Vec<&PhotoSize> = admitted
            .photo_sizes
            .iter()
            .filter(|p| p.file_size.is_none_or(|n| !photo_too_large(n)))
            .collect();
        for size in candidates {
            let file = match self.api.get_file(&size.file_id).await {
                Ok(file) => file,
                Err(e) => {
                    tracing::info!(
                        update_id = admitted.update_id,
                        error = e.code(),
                        "getFile failed"
                    );
                    return Err(DropReason::PhotoDownloadFailed);
                }
            };
            if file.file_size.is_some_and(photo_too_large) {
                continue;
            }
            let Some(path) = file.file_path.as_deref() else {
                return Err(DropReason::PhotoDownloadFailed);
            };
            let bytes = match self.api.download_file(path, cap).await {
                Ok(bytes) => bytes,
                Err(ApiError::TooLarge { .. }) => continue,
                Err(e) => {
                    tracing::info!(
                        update_id = admitted.update_id,
                        error = e.code(),
                        "photo download failed"
                    );
                    return Err(DropReason::PhotoDownloadFailed);
                }
            };
            let (Ok(file_id), Ok(file_unique_id), Ok(content_type)) = (
                BoundedText::new(size.file_id.clone()),
                BoundedText::new(size.file_unique_id.clone()),
                Label::new(sniff_content_type(&bytes)),
            ) else {
                return Err(DropReason::Malformed);
            };
            return Ok(Some(Fetched {
                file_id,
                file_unique_id,
                width: size.width,
                height: size.height,
                content_type,
                bytes,
            }));
        }
        Err(DropReason::PhotoTooLarge)
    }
}

/// An admitted message on its way to the store, its photo not yet hashed.
struct Message {
    payload: MessageReceived,
    photo: Option<Fetched>,
}

impl Message {
    /// The event, its photo named by the digest of its bytes, and those
    /// bytes with that digest: hashed once (up to the photo bound, 5 MiB, is
    /// milliseconds of CPU), for the event and the store alike.
    fn build(self, source: &SourceName) -> Result<(NewEvent, Option<Hashed>), EventError> {
        let Self { mut payload, photo } = self;
        let blob = photo.map(|fetched| {
            let (photo, blob) = fetched.hashed();
            payload.photo = Some(photo);
            blob
        });
        Ok((NewEvent::build(source, None, None, &payload)?, blob))
    }
}

/// A downloaded photo, before its hash names it.
struct Fetched {
    file_id: BoundedText<1, 256>,
    file_unique_id: BoundedText<1, 256>,
    width: u32,
    height: u32,
    content_type: Label,
    bytes: Vec<u8>,
}

impl Fetched {
    /// The photo's reference and its bytes, named by their digest.
    fn hashed(self) -> (PhotoRef, Hashed) {
        let Self {
            file_id,
            file_unique_id,
            width,
            height,
            content_type,
            bytes,
        } = self;
        let blob = Hashed::new(bytes);
        let photo = PhotoRef {
            file_id,
            file_unique_id,
            width,
            height,
            size: blob.bytes().len() as u64,
            blob_sha256: blob.sha256().clone(),
            content_type,
        };
        (photo, blob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_sniffed_from_bytes() {
        assert_eq!(sniff_content_type(&[0xFF, 0xD8, 0xFF, 0xE0]), "image/jpeg");
        assert_eq!(sniff_content_type(b"\x89PNG\r\n\x1a\nrest"), "image/png");
        assert_eq!(sniff_content_type(b"RIFF\0\0\0\0WEBPVP8 "), "image/webp");
        assert_eq!(sniff_content_type(b"hello"), "application/octet-stream");
    }
}
