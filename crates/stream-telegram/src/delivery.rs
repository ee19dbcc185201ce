//! The delivery outbox: every canonical output
//! (`stream.thought.derived.message.observation@1` on an `agent:*` source)
//! rooted in this bot's source and without a receipt is sent with
//! `sendMessage`, replying to its trigger message; then
//! `stream.telegram.delivery.receipt@1` is appended on the Telegram source
//! with root = the source root and parent = the output.
//!
//! At-least-once: a crash between `sendMessage` and the receipt sends again
//! on the next pass. Never two receipts: the receipt's id derives from the
//! output id alone, so a second receipt converges or conflicts and is not
//! written. A `message_id` of 0 (scheduled, not sent) is not a delivery and
//! leaves the output pending.
//!
//! A refused output (Telegram's 4xx) stays pending and the pass goes on
//! with the next ones; a rate limit or an outage ends the pass.
//!
//! A per-source watermark (`telegram-delivery-watermark:<bot-id>`) remembers
//! up to which `seq` every output is settled, so a pass does not re-read
//! the whole history.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use stream_core::ids::derive_event_id;
use stream_core::payload::{DeliveryReceipt, MessageObservation, MessageReceived};
use stream_core::{EventError, EventId, NewEvent, Payload, SourceName, StoredEvent};
use stream_store::{AppendOutcome, EventQuery, Read, Store, StoreError};

use crate::client::{ApiError, BotApi};

/// The control key of a bot's delivery watermark.
pub fn delivery_watermark_key(telegram_source: &SourceName) -> String {
    format!("telegram-delivery-watermark:{}", telegram_source.as_str())
}

/// Delivery settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryOptions {
    /// The most `sendMessage` calls one pass makes.
    pub max_per_pass: usize,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self { max_per_pass: 64 }
    }
}

/// What one pass did. Content-free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Outputs sent and receipted.
    pub sent: u64,
    /// Sent, but the receipt already existed identically (another deliverer).
    pub converged: u64,
    /// Sent, but a different receipt already existed; the first one stands.
    pub conflicts: u64,
    /// `sendMessage` answered `message_id` 0; left pending.
    pub not_delivered: u64,
    /// `sendMessage` failed; left pending.
    pub failed: u64,
    /// Outputs that can never be delivered by this bot (another bot's
    /// source root, missing or mismatched root/trigger); skipped.
    pub skipped: u64,
    /// Outputs still without a receipt after this pass.
    pub pending: u64,
    /// The code of the last `sendMessage` failure.
    pub last_error: Option<&'static str>,
}

/// Delivery failed before or after `sendMessage` in a way the caller must see.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Building the receipt failed.
    #[error(transparent)]
    Event(#[from] EventError),
    /// The watermark row holds something this build does not understand.
    #[error("control row `{key}` is invalid")]
    InvalidControl {
        /// The key.
        key: String,
    },
    /// A blocking store task did not finish.
    #[error("a store task was cancelled")]
    Join,
}

/// Why an output is skipped for good (logged, never content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    OutputInvalid,
    NoRoot,
    OtherBot,
    RootInvalid,
    TriggerInvalid,
    ChatMismatch,
}

impl Skip {
    fn as_str(self) -> &'static str {
        match self {
            Self::OutputInvalid => "output-invalid",
            Self::NoRoot => "no-root",
            Self::OtherBot => "other-bot",
            Self::RootInvalid => "root-invalid",
            Self::TriggerInvalid => "trigger-invalid",
            Self::ChatMismatch => "chat-mismatch",
        }
    }
}

struct Pending {
    output_id: EventId,
    output: MessageObservation,
    root_id: EventId,
    root_sender_id: i64,
    reply_to: i64,
}

enum Item {
    Settled,
    Skipped(Skip),
    Pending(Box<Pending>),
}

struct Scanned {
    source: String,
    seq: u64,
    item: Item,
}

/// The id the receipt of `output_id` has (or will have) on `telegram_source`.
pub fn receipt_id(
    telegram_source: &SourceName,
    output_id: &EventId,
) -> Result<EventId, DeliveryError> {
    Ok(derive_event_id(
        telegram_source.as_str(),
        DeliveryReceipt::IDENTITY_TYPE,
        &json!(output_id),
    )
    .map_err(EventError::from)?)
}

fn decode_received(
    store: &dyn Read,
    id: &EventId,
    telegram_source: &SourceName,
) -> Result<Result<MessageReceived, Skip>, StoreError> {
    let Some(event) = store.event(id)? else {
        return Ok(Err(Skip::RootInvalid));
    };
    if event.event.source != *telegram_source {
        return Ok(Err(Skip::OtherBot));
    }
    Ok(event
        .decode::<MessageReceived>()
        .map_err(|_| Skip::RootInvalid))
}

fn classify(
    store: &dyn Read,
    telegram_source: &SourceName,
    event: &StoredEvent,
) -> Result<Item, DeliveryError> {
    if store
        .event(&receipt_id(telegram_source, event.id())?)?
        .is_some()
    {
        return Ok(Item::Settled);
    }
    let Ok(output) = event.decode::<MessageObservation>() else {
        return Ok(Item::Skipped(Skip::OutputInvalid));
    };
    let Some(root_id) = event.event.root.clone() else {
        return Ok(Item::Skipped(Skip::NoRoot));
    };
    let root = match decode_received(store, &root_id, telegram_source)? {
        Ok(root) => root,
        Err(skip) => return Ok(Item::Skipped(skip)),
    };
    let trigger = match decode_received(store, &output.trigger_event_id, telegram_source)? {
        Ok(trigger) => trigger,
        Err(Skip::OtherBot) => return Ok(Item::Skipped(Skip::OtherBot)),
        Err(_) => return Ok(Item::Skipped(Skip::TriggerInvalid)),
    };
    if output.chat_id != root.chat_id || output.chat_id != trigger.chat_id {
        return Ok(Item::Skipped(Skip::ChatMismatch));
    }
    Ok(Item::Pending(Box::new(Pending {
        output_id: event.id().clone(),
        output,
        root_id,
        root_sender_id: root.sender_id,
        reply_to: trigger.message_id,
    })))
}

fn read_watermark(store: &dyn Read, key: &str) -> Result<BTreeMap<String, u64>, DeliveryError> {
    let invalid = || DeliveryError::InvalidControl {
        key: key.to_owned(),
    };
    match store.control(key)? {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| v.as_u64().map(|seq| (k, seq)).ok_or_else(invalid))
            .collect(),
        Some(_) => Err(invalid()),
    }
}

fn scan(
    store: &dyn Store,
    telegram_source: &SourceName,
    watermark: &BTreeMap<String, u64>,
) -> Result<Vec<Scanned>, DeliveryError> {
    let mut out = Vec::new();
    for source in store.sources()? {
        if !source.as_str().starts_with("agent:") {
            continue;
        }
        let after = watermark.get(source.as_str()).copied().unwrap_or(0);
        let query = EventQuery {
            event_type: Some(MessageObservation::TYPE.to_owned()),
            ..EventQuery::source_after(&source, after)
        };
        for event in store.events(&query)? {
            if !event.is::<MessageObservation>() {
                continue;
            }
            out.push(Scanned {
                source: source.as_str().to_owned(),
                seq: event.seq,
                item: classify(store, telegram_source, &event)?,
            });
        }
    }
    Ok(out)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DeliveryError> + Send + 'static,
) -> Result<T, DeliveryError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| DeliveryError::Join)?
}

/// Sends every pending output of `telegram_source` and appends its receipt.
/// See the module docs for the guarantees.
pub async fn deliver_pending(
    store: &Arc<dyn Store>,
    api: &BotApi,
    telegram_source: &SourceName,
    options: &DeliveryOptions,
) -> Result<DeliveryReport, DeliveryError> {
    let key = delivery_watermark_key(telegram_source);
    let (watermark, scanned) = {
        let store = Arc::clone(store);
        let source = telegram_source.clone();
        let key = key.clone();
        blocking(move || {
            let watermark = read_watermark(&*store, &key)?;
            let scanned = scan(&*store, &source, &watermark)?;
            Ok((watermark, scanned))
        })
        .await?
    };

    let mut report = DeliveryReport::default();
    let mut next = watermark.clone();
    let mut blocked: BTreeSet<String> = BTreeSet::new();
    let mut sends = 0usize;
    let mut stop = false;
    for Scanned { source, seq, item } in scanned {
        let settled = match item {
            Item::Settled => true,
            Item::Skipped(skip) => {
                report.skipped += 1;
                tracing::warn!(
                    source = %source,
                    seq,
                    reason = skip.as_str(),
                    "output cannot be delivered by this bot; skipped"
                );
                true
            }
            Item::Pending(_) if stop || sends >= options.max_per_pass => {
                report.pending += 1;
                false
            }
            Item::Pending(pending) => {
                sends += 1;
                let delivered =
                    send_one(store, api, telegram_source, &pending, &mut report).await?;
                match delivered {
                    Sent::Settled => true,
                    Sent::Pending => {
                        report.pending += 1;
                        false
                    }
                    Sent::Unavailable => {
                        // Rate limits and outages affect every output: end the pass.
                        report.pending += 1;
                        stop = true;
                        false
                    }
                }
            }
        };
        if settled && !blocked.contains(&source) {
            next.insert(source, seq);
        } else if !settled {
            blocked.insert(source);
        }
    }

    if next != watermark {
        let store = Arc::clone(store);
        let value = json!(next);
        blocking(move || {
            let mut tx = store.begin()?;
            tx.set_control(&key, &value)?;
            tx.commit()?;
            Ok(())
        })
        .await?;
    }
    Ok(report)
}

/// What one send achieved.
enum Sent {
    /// Receipted (now or by another deliverer).
    Settled,
    /// Still pending: `message_id` 0, or Telegram refused this one output.
    Pending,
    /// Still pending, and Telegram is unavailable for now.
    Unavailable,
}

/// Sends one output and appends its receipt.
async fn send_one(
    store: &Arc<dyn Store>,
    api: &BotApi,
    telegram_source: &SourceName,
    pending: &Pending,
    report: &mut DeliveryReport,
) -> Result<Sent, DeliveryError> {
    let sent = match api
        .send_message(
            pending.output.chat_id,
            pending.output.text.as_str(),
            Some(pending.reply_to),
        )
        .await
    {
        Ok(sent) => sent,
        Err(e) => {
            report.failed += 1;
            report.last_error = Some(e.code());
            tracing::warn!(
                output = pending.output_id.short(16),
                error = %e,
                "sendMessage failed; output stays pending"
            );
            return Ok(match e {
                ApiError::RateLimited { .. }
                | ApiError::Server { .. }
                | ApiError::Timeout { .. }
                | ApiError::Transport { .. } => Sent::Unavailable,
                ApiError::Refused { .. }
                | ApiError::Malformed { .. }
                | ApiError::TooLarge { .. }
                | ApiError::UnsafeFilePath
                | ApiError::BaseUrl
                | ApiError::ClientBuild => Sent::Pending,
            });
        }
    };
    if sent.message_id == 0 {
        report.not_delivered += 1;
        tracing::warn!(
            output = pending.output_id.short(16),
            "sendMessage answered message_id 0 (not sent); output stays pending"
        );
        return Ok(Sent::Pending);
    }
    let receipt = DeliveryReceipt {
        output_event_id: pending.output_id.clone(),
        run_id: pending.output.run_id.clone(),
        chat_id: sent.chat.id,
        message_id: sent.message_id,
        date: sent.date,
        root_sender_id: pending.root_sender_id,
        source_root_event_id: pending.root_id.clone(),
    };
    let event = NewEvent::build(
        telegram_source,
        Some(&pending.root_id),
        Some(&pending.output_id),
        &receipt,
    )?;
    let outcome = {
        let store = Arc::clone(store);
        blocking(move || {
            let mut tx = store.begin()?;
            let outcome = tx.append(&event)?;
            if outcome != AppendOutcome::Conflict {
                tx.commit()?;
            }
            Ok(outcome)
        })
        .await?
    };
    match outcome {
        AppendOutcome::Inserted { seq } => {
            report.sent += 1;
            tracing::info!(
                output = pending.output_id.short(16),
                message_id = sent.message_id,
                seq,
                "output delivered; receipt stored"
            );
        }
        AppendOutcome::Converged { .. } => report.converged += 1,
        AppendOutcome::Conflict => {
            report.conflicts += 1;
            tracing::warn!(
                output = pending.output_id.short(16),
                "output already has a different receipt; the first one stands"
            );
        }
    }
    Ok(Sent::Settled)
}
