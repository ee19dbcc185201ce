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
//! A reply longer than Telegram's bound (4,096 UTF-16 code units) goes out
//! as consecutive messages ([`crate::split`]), the first replying to the
//! trigger; the one receipt lists every message id. A crash or outage in
//! the middle resends the whole reply on the next pass (at-least-once).
//!
//! Nothing is sent while the store's disk has no room for a receipt
//! ([`stream_store::Store::has_room`]): a reply sent then would be sent
//! again once space returns. The pass ends, as for an outage.
//!
//! An output Telegram refuses for good (a 4xx other than 429, 401 and 404)
//! is recorded once as `stream.telegram.delivery.failed@1` (codes and ids,
//! no content), never resent, and the owner gets [`REFUSED_NOTICE`]. A
//! rate limit or an outage ends the pass; anything else leaves the output
//! pending and the pass goes on with the next ones.
//!
//! A per-source watermark (`telegram-delivery-watermark:<bot-id>`) remembers
//! up to which `seq` every output is settled, so a pass does not re-read
//! the whole history.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use stream_core::ids::derive_event_id;
use stream_core::payload::{DeliveryFailed, DeliveryReceipt, MessageObservation, MessageReceived};
use stream_core::{EventError, EventId, NewEvent, Payload, SourceName, StoredEvent};
use stream_store::{AppendOutcome, EventQuery, Read, Store, StoreError};

use crate::client::{ApiError, BotApi};
use crate::split::{MAX_MESSAGE_UTF16, split_message};
use crate::wire::Message;

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
    /// `sendMessage` calls that failed (the output left pending, or refused).
    pub failed: u64,
    /// Outputs Telegram refused for good, recorded now (never resent).
    pub refused: u64,
    /// Outputs that can never be delivered by this bot (another bot's
    /// source root, missing or mismatched root/trigger); skipped.
    pub skipped: u64,
    /// Outputs still without a receipt after this pass.
    pub pending: u64,
    /// Passes ended before a send because the store's disk had no room for
    /// a receipt (0 or 1).
    pub no_room: u64,
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
    /// The watermark to write in the same transaction as this output's
    /// receipt or refusal (its own settlement included), so that a pass
    /// that sends one reply commits once, not twice.
    watermark: Option<Value>,
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

/// The id the recorded permanent refusal of `output_id` has (or will have)
/// on `telegram_source`.
pub fn refusal_id(
    telegram_source: &SourceName,
    output_id: &EventId,
) -> Result<EventId, DeliveryError> {
    Ok(derive_event_id(
        telegram_source.as_str(),
        DeliveryFailed::IDENTITY_TYPE,
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
        || store
            .event(&refusal_id(telegram_source, event.id())?)?
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
        watermark: None,
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

/// How many outputs of `telegram_source`'s chats wait for delivery now:
/// the outbox the next pass would send (what the inspector's health strip
/// shows), by the same scan and classification as the pass.
pub fn pending_count(store: &dyn Read, telegram_source: &SourceName) -> Result<u64, DeliveryError> {
    let watermark = read_watermark(store, &delivery_watermark_key(telegram_source))?;
    Ok(scan(store, telegram_source, &watermark)?
        .iter()
        .filter(|s| matches!(s.item, Item::Pending(_)))
        .count() as u64)
}

fn scan(
    store: &dyn Read,
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
    crate::offload::run(f)
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
    // The first send's room check rides on the scan's trip to a blocking
    // thread: one round trip fewer between a settled reply and its send.
    let (watermark, scanned, mut room_now) = {
        let store = Arc::clone(store);
        let source = telegram_source.clone();
        let key = key.clone();
        blocking(move || {
            let watermark = read_watermark(&*store, &key)?;
            let scanned = scan(&*store, &source, &watermark)?;
            let any_pending = scanned.iter().any(|s| matches!(s.item, Item::Pending(_)));
            let room = any_pending.then(|| store.has_room()).transpose()?;
            Ok((watermark, scanned, room))
        })
        .await?
    };

    let mut report = DeliveryReport::default();
    let mut next = watermark.clone();
    // What the store holds now: the watermark a receipt carried, if any.
    let mut written = watermark;
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
            Item::Pending(mut pending) => {
                sends += 1;
                let mut settled_next = next.clone();
                if !blocked.contains(&source) {
                    settled_next.insert(source.clone(), seq);
                }
                pending.watermark = Some(json!(settled_next));
                // Checked just before each send: a receipt may have filled the disk.
                let room = match room_now.take() {
                    Some(room) => room,
                    None => {
                        let store = Arc::clone(store);
                        blocking(move || Ok(store.has_room()?)).await?
                    }
                };
                let delivered =
                    send_one(store, api, telegram_source, &pending, room, &mut report).await?;
                match delivered {
                    Sent::Settled { marked } => {
                        if marked {
                            written = settled_next;
                        }
                        true
                    }
                    Sent::Pending => {
                        report.pending += 1;
                        false
                    }
                    Sent::Unavailable => {
                        // Rate limits, outages and a full disk affect every output: end the pass.
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

    if next != written {
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
    /// Receipted, or refused for good and recorded (now or by another
    /// deliverer); `marked` when the output's watermark was committed with
    /// its receipt or refusal.
    Settled { marked: bool },
    /// Still pending: `message_id` 0, or a failure worth another pass.
    Pending,
    /// Still pending, and Telegram is unavailable for now.
    Unavailable,
}

/// What a failed `sendMessage` means for the output being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Telegram refused this message for good: record it, never resend.
    Permanent(i64),
    /// Try this output again on the next pass.
    Retry,
    /// Nothing can be sent now: end the pass.
    Unavailable,
}

/// The one home of the delivery rule for a failed `sendMessage`: a 4xx
/// other than 429 is about the message and permanent, except 401 and 404,
/// which are about the bot (a revoked token, a wrong base URL) and hold
/// for every output alike.
fn failure(error: &ApiError) -> Failure {
    match error {
        ApiError::Refused { code, .. } => match code {
            401 | 404 | 429 => Failure::Unavailable,
            400..=499 => Failure::Permanent(*code),
            _ => Failure::Retry,
        },
        ApiError::RateLimited { .. }
        | ApiError::Server { .. }
        | ApiError::Timeout { .. }
        | ApiError::Transport { .. } => Failure::Unavailable,
        ApiError::Malformed { .. }
        | ApiError::TooLarge { .. }
        | ApiError::UnsafeFilePath
        | ApiError::BaseUrl
        | ApiError::ClientBuild => Failure::Retry,
    }
}

/// The fixed notice the owner gets when Telegram refused a reply for good.
/// Content-dark: it says neither what the reply was nor why it was refused.
pub const REFUSED_NOTICE: &str =
    "I couldn't send my reply to that message. Please ask again if you still need it.";

/// Appends `event` (a receipt or refusal on the Telegram source) with the
/// delivery watermark when one is given; the outcome of the append. On a
/// conflict nothing is written.
async fn append_one(
    store: &Arc<dyn Store>,
    event: NewEvent,
    watermark: Option<Value>,
) -> Result<AppendOutcome, DeliveryError> {
    let store = Arc::clone(store);
    blocking(move || {
        let mut tx = store.begin()?;
        let outcome = tx.append(&event)?;
        if outcome != AppendOutcome::Conflict {
            if let Some(value) = &watermark {
                tx.set_control(&delivery_watermark_key(&event.source), value)?;
            }
            tx.commit()?;
        }
        Ok(outcome)
    })
    .await
}

/// Sends one output (split into as many messages as Telegram's bound
/// needs, the first replying to the trigger) and appends its receipt, or
/// its refusal when Telegram refused it for good. `room`: whether the
/// store's disk had room for a receipt, read just before.
async fn send_one(
    store: &Arc<dyn Store>,
    api: &BotApi,
    telegram_source: &SourceName,
    pending: &Pending,
    room: bool,
    report: &mut DeliveryReport,
) -> Result<Sent, DeliveryError> {
    if !room {
        report.no_room += 1;
        tracing::warn!(
            output = pending.output_id.short(16),
            "the store's disk is nearly full; replies wait until a receipt can be stored"
        );
        return Ok(Sent::Unavailable);
    }
    let parts = split_message(pending.output.text.as_str(), MAX_MESSAGE_UTF16);
    if parts.is_empty() {
        // Whitespace only (stored before such text became no text):
        // Telegram refuses it as empty, so do not ask.
        tracing::warn!(
            output = pending.output_id.short(16),
            "output text is whitespace only; recorded as refused"
        );
        return refused(
            store,
            api,
            telegram_source,
            pending,
            400,
            Vec::new(),
            report,
        )
        .await;
    }
    let mut ids: Vec<i64> = Vec::with_capacity(parts.len());
    let mut first: Option<Message> = None;
    for (i, part) in parts.iter().enumerate() {
        let reply_to = (i == 0).then_some(pending.reply_to);
        let sent = match api
            .send_message(pending.output.chat_id, part, reply_to)
            .await
        {
            Ok(sent) => sent,
            Err(e) => {
                report.failed += 1;
                report.last_error = Some(e.code());
                // Codes only: Telegram's description may quote the text.
                tracing::warn!(
                    output = pending.output_id.short(16),
                    part = i,
                    error = e.code(),
                    telegram_code = e.telegram_code(),
                    "sendMessage failed"
                );
                return match failure(&e) {
                    Failure::Permanent(code) => {
                        refused(store, api, telegram_source, pending, code, ids, report).await
                    }
                    Failure::Retry => Ok(Sent::Pending),
                    Failure::Unavailable => Ok(Sent::Unavailable),
                };
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
        ids.push(sent.message_id);
        first.get_or_insert(sent);
    }
    let Some(first) = first else {
        return Ok(Sent::Pending);
    };
    let receipt = DeliveryReceipt {
        output_event_id: pending.output_id.clone(),
        run_id: pending.output.run_id.clone(),
        chat_id: first.chat.id,
        message_id: first.message_id,
        date: first.date,
        root_sender_id: pending.root_sender_id,
        source_root_event_id: pending.root_id.clone(),
        continuation_message_ids: ids.split_off(1),
    };
    let event = NewEvent::build(
        telegram_source,
        Some(&pending.root_id),
        Some(&pending.output_id),
        &receipt,
    )?;
    let outcome = append_one(store, event, pending.watermark.clone()).await?;
    match outcome {
        AppendOutcome::Inserted { seq } => {
            report.sent += 1;
            tracing::info!(
                output = pending.output_id.short(16),
                message_id = first.message_id,
                messages = parts.len(),
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
    Ok(Sent::Settled {
        marked: pending.watermark.is_some() && outcome != AppendOutcome::Conflict,
    })
}

/// Records a permanent refusal of `pending` once (content-dark: the code
/// and the ids of parts already sent), then tells the owner with the fixed
/// notice. The notice is sent only by the deliverer that recorded the
/// refusal, and not retried: the refusal is what must not be lost.
async fn refused(
    store: &Arc<dyn Store>,
    api: &BotApi,
    telegram_source: &SourceName,
    pending: &Pending,
    error_code: i64,
    sent_message_ids: Vec<i64>,
    report: &mut DeliveryReport,
) -> Result<Sent, DeliveryError> {
    let failed = DeliveryFailed {
        output_event_id: pending.output_id.clone(),
        run_id: pending.output.run_id.clone(),
        chat_id: pending.output.chat_id,
        error_code,
        sent_message_ids,
        source_root_event_id: pending.root_id.clone(),
    };
    let event = NewEvent::build(
        telegram_source,
        Some(&pending.root_id),
        Some(&pending.output_id),
        &failed,
    )?;
    let marked = pending.watermark.is_some();
    let seq = match append_one(store, event, pending.watermark.clone()).await? {
        AppendOutcome::Inserted { seq } => seq,
        AppendOutcome::Converged { .. } => return Ok(Sent::Settled { marked }),
        AppendOutcome::Conflict => return Ok(Sent::Settled { marked: false }),
    };
    report.refused += 1;
    tracing::warn!(
        output = pending.output_id.short(16),
        error_code,
        seq,
        "Telegram refused the output for good; recorded, not retried"
    );
    if let Err(e) = api
        .send_message(
            pending.output.chat_id,
            REFUSED_NOTICE,
            Some(pending.reply_to),
        )
        .await
    {
        tracing::warn!(
            output = pending.output_id.short(16),
            error = e.code(),
            "the refusal notice was not sent"
        );
    }
    Ok(Sent::Settled { marked })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: i64) -> ApiError {
        ApiError::Refused {
            method: "sendMessage",
            code,
            description: String::new(),
        }
    }

    #[test]
    fn only_a_refusal_of_the_message_is_permanent() {
        let rows = [
            (refused(400), Failure::Permanent(400)),
            (refused(403), Failure::Permanent(403)),
            (refused(413), Failure::Permanent(413)),
            (refused(401), Failure::Unavailable),
            (refused(404), Failure::Unavailable),
            (refused(429), Failure::Unavailable),
            (refused(302), Failure::Retry),
            (
                ApiError::RateLimited {
                    method: "sendMessage",
                    retry_after_secs: 30,
                },
                Failure::Unavailable,
            ),
            (
                ApiError::Server {
                    method: "sendMessage",
                    status: 502,
                    attempts: 3,
                },
                Failure::Unavailable,
            ),
            (
                ApiError::Timeout {
                    method: "sendMessage",
                    attempts: 3,
                },
                Failure::Unavailable,
            ),
            (
                ApiError::Malformed {
                    method: "sendMessage",
                },
                Failure::Retry,
            ),
        ];
        for (error, expected) in rows {
            assert_eq!(failure(&error), expected, "{error:?}");
        }
    }
}
