//! `/conversation`: the turns in order — the owner's message, the reply as
//! delivered and, where a human judgment replaced it, the effective text —
//! each linked to its turn. A page holds the latest [`PAGE`] messages;
//! `?before=SEQ` pages back.

use std::collections::BTreeMap;

use maud::{Markup, html};
use stream_core::payload::{
    DeliveryReceipt, JudgmentRecorded, MessageObservation, MessageReceived, TextOrigin,
};
use stream_core::{EventId, Payload as _, StoredEvent};
use stream_store::{EventQuery, Read};

use crate::PageError;
use crate::html::{Nav, block, id_link, page};
use crate::pages::now::telegram_sources;

/// Messages a page shows.
pub const PAGE: usize = 100;

struct Reply {
    output: StoredEvent,
    payload: MessageObservation,
    receipt: Option<DeliveryReceipt>,
    effective: Option<String>,
}

struct Exchange {
    message: StoredEvent,
    payload: Option<MessageReceived>,
    replies: Vec<Reply>,
}

/// One page of the conversation.
pub struct Conversation {
    exchanges: Vec<Exchange>,
    older: Option<(String, u64)>,
}

/// Reads the latest [`PAGE`] messages before `before` (a `seq`) of each
/// Telegram source, and their replies.
pub fn gather(store: &dyn Read, before: Option<u64>) -> Result<Conversation, PageError> {
    let mut exchanges = Vec::new();
    let mut older = None;
    for source in telegram_sources(store)? {
        let before = match before {
            Some(before) => before,
            None => store.source_head(&source)? + 1,
        };
        let mut messages = store.events(
            &EventQuery {
                event_type: Some(MessageReceived::TYPE.to_owned()),
                ..EventQuery::source_before(&source, before)
            }
            .limit(PAGE),
        )?;
        messages.reverse();
        if messages.len() == PAGE
            && let Some(first) = messages.first()
        {
            older = Some((source.as_str().to_owned(), first.seq));
        }
        let roots: Vec<EventId> = messages.iter().map(|m| m.id().clone()).collect();
        let chain = store.events(&EventQuery::rooted_at_any(roots))?;
        let mut receipts: BTreeMap<EventId, DeliveryReceipt> = BTreeMap::new();
        let mut judged: BTreeMap<EventId, String> = BTreeMap::new();
        let mut outputs: BTreeMap<EventId, Vec<(StoredEvent, MessageObservation)>> =
            BTreeMap::new();
        for e in chain {
            match e.event.event_type.as_str() {
                DeliveryReceipt::TYPE => {
                    if let Ok(r) = e.decode::<DeliveryReceipt>() {
                        receipts.insert(r.output_event_id.clone(), r);
                    }
                }
                // In commit order: the latest judgment of an output wins.
                JudgmentRecorded::TYPE => {
                    if let Ok(j) = e.decode::<JudgmentRecorded>() {
                        judged.insert(
                            j.target_output_event_id,
                            j.replacement.text.as_str().to_owned(),
                        );
                    }
                }
                MessageObservation::TYPE => {
                    if let Ok(o) = e.decode::<MessageObservation>() {
                        outputs
                            .entry(o.trigger_event_id.clone())
                            .or_default()
                            .push((e, o));
                    }
                }
                _ => {}
            }
        }
        for message in messages {
            let replies = outputs
                .remove(message.id())
                .unwrap_or_default()
                .into_iter()
                .map(|(output, payload)| Reply {
                    receipt: receipts.remove(output.id()),
                    effective: judged.remove(output.id()),
                    output,
                    payload,
                })
                .collect();
            exchanges.push(Exchange {
                payload: message.decode().ok(),
                message,
                replies,
            });
        }
    }
    Ok(Conversation { exchanges, older })
}

/// The page.
pub fn render(c: &Conversation) -> Markup {
    let body = html! {
        h1 { "Conversation" }
        @if c.exchanges.is_empty() {
            p { "No message has been stored yet." }
        }
        @if let Some((_, seq)) = &c.older {
            p { a href={ "/conversation?before=" (seq) } { "Older messages" } }
        }
        @for x in &c.exchanges {
            article.exchange {
                section.owner {
                    h3 { "owner · " time { (stream_proposals::review::rfc3339(x.message.recorded_at_ms)) }
                        " · message " code { (x.message.id().short(12)) } }
                    @match &x.payload {
                        Some(m) => {
                            @if let Some(c) = &m.command { p { code { "/" (c.name.as_str()) } } }
                            @if m.photo.is_some() { p { "(photo)" } }
                            @if let Some(text) = &m.text { (block(text.as_str())) }
                        }
                        None => p.flag { "This message does not decode." },
                    }
                }
                @for r in &x.replies {
                    section.reply {
                        h3 { "reply · turn " (id_link("/turns/", r.payload.run_id.as_str()))
                            " · output " code { (r.output.id().short(12)) }
                            @if r.payload.origin != TextOrigin::Model {
                                " · written by " (crate::turn::origin(r.payload.origin))
                            }
                            @match &r.receipt {
                                Some(receipt) => { " · delivered as telegram message " (receipt.message_id) }
                                None => { " · " span.badge.pending { "not delivered yet" } }
                            }
                        }
                        (block(r.payload.text.as_str()))
                        @if let Some(effective) = &r.effective {
                            h4 { "Effective text (a human judgment replaced the reply)" }
                            (block(effective))
                        }
                    }
                }
            }
        }
    };
    page("Conversation", Nav::Conversation, false, body)
}
