//! Cited evidence resolved to the text it names, as the proposer's snapshot
//! held it (the exact turns the model saw), with the time it was recorded.

use serde::Serialize;
use stream_context::Snapshot;
use stream_context::Turn;
use stream_core::{EventId, SnapshotId};

/// Snapshots loaded once per listing: many proposals share one.
pub type SnapshotCache = std::collections::BTreeMap<SnapshotId, Option<Snapshot>>;
use stream_core::payload::{DeliveryReceipt, MessageObservation, MessageReceived};
use stream_store::{Read, StoreError};

/// What a cited id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceKind {
    /// An owner message.
    Message,
    /// A delivered reply (its output or its delivery receipt).
    Reply,
}

impl EvidenceKind {
    /// The stable wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Reply => "reply",
        }
    }
}

/// One cited id, resolved (docs/design.md §19: `{id, kind, text}`).
#[derive(Clone, Serialize)]
pub struct Evidence {
    /// The cited event id.
    pub id: EventId,
    /// Message or reply.
    pub kind: EvidenceKind,
    /// The text it names (a photo without caption: empty).
    pub text: String,
    /// When the cited event was recorded (ms since the epoch), if found.
    #[serde(skip)]
    pub recorded_at_ms: Option<i64>,
}

impl std::fmt::Debug for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evidence")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Resolves each cited id: a message to its stored text; a reply (its
/// output or delivery receipt) to its text as the proposer's snapshot held
/// it (the effective text the model saw), else as stored. `snapshot` is
/// loaded only when a reply is cited (loading one is the costly part), once
/// per listing through `cache`. An
/// id that resolves to nothing is left out (the chain validator refuses
/// such a proposal before any decision).
pub fn resolve_evidence(
    store: &dyn Read,
    snapshot_id: Option<&SnapshotId>,
    cache: &mut SnapshotCache,
    ids: &[EventId],
) -> Result<Vec<Evidence>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(event) = store.event(id)? else {
            continue;
        };
        let found = if let Ok(m) = event.decode::<MessageReceived>() {
            Some((
                EvidenceKind::Message,
                m.text.map(|t| t.as_str().to_owned()).unwrap_or_default(),
            ))
        } else {
            let snapshot = snapshot_id.and_then(|sid| {
                cache
                    .entry(sid.clone())
                    .or_insert_with(|| Snapshot::load(store, sid).ok())
                    .as_ref()
            });
            match snapshot.and_then(|s| from_snapshot(s, id)) {
                Some(found) => Some(found),
                None => reply_from_store(store, &event)?,
            }
        };
        if let Some((kind, text)) = found {
            out.push(Evidence {
                id: id.clone(),
                kind,
                text,
                recorded_at_ms: Some(event.recorded_at_ms),
            });
        }
    }
    Ok(out)
}

fn from_snapshot(snapshot: &Snapshot, id: &EventId) -> Option<(EvidenceKind, String)> {
    if &snapshot.trigger.event_id == id {
        return Some((
            EvidenceKind::Message,
            snapshot.trigger.text.clone().unwrap_or_default(),
        ));
    }
    snapshot.transcript.iter().find_map(|turn| match turn {
        Turn::User(u) if &u.event_id == id => {
            Some((EvidenceKind::Message, u.text.clone().unwrap_or_default()))
        }
        Turn::Assistant(a) if &a.output_event_id == id || &a.delivery_receipt_event_id == id => {
            Some((EvidenceKind::Reply, a.text.clone()))
        }
        Turn::User(_) | Turn::Assistant(_) => None,
    })
}

fn reply_from_store(
    store: &dyn Read,
    event: &stream_core::StoredEvent,
) -> Result<Option<(EvidenceKind, String)>, StoreError> {
    let output = if let Ok(r) = event.decode::<DeliveryReceipt>() {
        match store.event(&r.output_event_id)? {
            Some(e) => e.decode::<MessageObservation>().ok(),
            None => None,
        }
    } else {
        event.decode::<MessageObservation>().ok()
    };
    Ok(output.map(|o| (EvidenceKind::Reply, o.text.as_str().to_owned())))
}
