//! From a snapshot to the worker's packet: provider-neutral history with
//! reconstructed tool calls, the current turn, the exposed tools and the
//! capability. The memory target's path, document id, version and hash stay
//! here: the packet only says whether a target exists.

use base64::Engine as _;
use stream_core::annotation;
use stream_core::payload::ProposalKind;
use stream_protocol::{
    Capability, HistoryMessage, HistoryToolCall, Image, MAX_CALLS, OutputMode, Protocol,
};
/// What [`build`] is given and gives (the engine names these here, not in
/// the wire crate it does not link).
pub use stream_protocol::{Packet, ProviderCompat, ProviderSpec, ToolDef};
use stream_store::Read;

use crate::history::NORMALIZED_RESULT;
use crate::{ContextError, Snapshot, Turn, UserTurn};

/// How an owner message is shown to the model: its id annotation, a photo
/// marker, then its text or caption with any annotation look-alike
/// neutralized ([`annotation::owner_message`]).
pub fn user_text(turn: &UserTurn) -> String {
    annotation::owner_message(&turn.event_id, turn.image.is_some(), turn.text.as_deref())
}

fn image(store: &dyn Read, turn: &UserTurn) -> Result<Option<Image>, ContextError> {
    let Some(image) = &turn.image else {
        return Ok(None);
    };
    let missing = || ContextError::Image {
        sha256: image.sha256.to_string(),
    };
    if stream_core::payload::photo_too_large(image.size) {
        return Err(missing());
    }
    let bytes = store.blob(&image.sha256)?.ok_or_else(missing)?;
    // The bytes sent are the ones the snapshot recorded, or none.
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len != image.size || stream_core::canon::sha256(&bytes) != image.sha256 {
        return Err(ContextError::ImageMismatch {
            sha256: image.sha256.to_string(),
        });
    }
    Ok(Some(Image {
        media_type: image.content_type.as_str().to_owned(),
        data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    }))
}

/// The declaration's prompt and the memory document when the snapshot holds
/// one: the system prompt without the annotation guide (a training example,
/// which shows no annotation).
pub fn prompt_with_memory(snapshot: &Snapshot) -> String {
    let mut system = snapshot.prompt.text.trim_end().to_owned();
    if let Some(memory) = &snapshot.memory {
        system.push_str("\n\n## memory.md (approved memory, read-only)\n\n");
        system.push_str(memory.text.trim_end());
    }
    system
}

/// The system prompt: the declaration's prompt, the memory document when the
/// snapshot holds one, and the annotation guide.
pub fn system_prompt(snapshot: &Snapshot) -> String {
    let mut system = prompt_with_memory(snapshot);
    system.push_str("\n\n");
    system.push_str(annotation::GUIDE);
    system
}

/// The neutral history of the snapshot's transcript: every owner text and
/// effective reply text with annotation look-alikes neutralized, the
/// system's own annotations real. A reply whose
/// completed-run receipt named proposals gets its canonical tool calls, one
/// normalized result per call, then its delivered text; any other reply is
/// text only, whatever the text claims.
pub fn history(snapshot: &Snapshot) -> Vec<HistoryMessage> {
    let mut messages = Vec::new();
    for turn in &snapshot.transcript {
        match turn {
            Turn::User(user) => messages.push(HistoryMessage::User {
                text: Some(user_text(user)),
                image: None,
            }),
            Turn::Assistant(reply) => {
                if !reply.calls.is_empty() {
                    messages.push(HistoryMessage::Assistant {
                        text: None,
                        tool_calls: reply
                            .calls
                            .iter()
                            .map(|call| HistoryToolCall {
                                id: call.id.clone(),
                                name: call.kind.tool_name().to_owned(),
                                arguments: call.arguments.clone(),
                            })
                            .collect(),
                    });
                    for call in &reply.calls {
                        messages.push(HistoryMessage::ToolResult {
                            call_id: call.id.clone(),
                            content: NORMALIZED_RESULT.to_owned(),
                        });
                    }
                }
                messages.push(HistoryMessage::Assistant {
                    text: Some(annotation::reply(
                        &reply.output_event_id,
                        &reply.delivery_receipt_event_id,
                        &reply.text,
                    )),
                    tool_calls: Vec::new(),
                });
            }
        }
    }
    messages
}

/// Builds the packet for one attempt. `tool_def` gives the fixed tool
/// definition (name, description, schema) of each exposed kind.
pub fn build(
    snapshot: &Snapshot,
    attempt: u32,
    provider: ProviderSpec,
    tool_def: &dyn Fn(ProposalKind) -> ToolDef,
    store: &dyn Read,
) -> Result<Packet, ContextError> {
    let caps = &snapshot.capabilities;
    Ok(Packet {
        protocol: Protocol,
        run_id: snapshot.run_id.clone(),
        attempt,
        provider,
        system: system_prompt(snapshot),
        history: history(snapshot),
        user: HistoryMessage::User {
            text: Some(user_text(&snapshot.trigger)),
            image: image(store, &snapshot.trigger)?,
        },
        tools: caps.tools.iter().map(|&kind| tool_def(kind)).collect(),
        capability: Capability {
            memory_target: caps.memory_target.is_some(),
            correction_targets: caps
                .correction_targets
                .iter()
                .map(|t| t.output_event_id.clone())
                .collect(),
            evidence_ids: caps.evidence_ids.clone(),
            max_calls: MAX_CALLS as u32,
        },
        output_mode: OutputMode::Text,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use stream_core::EventId;
    use stream_core::text::Label;
    use stream_store::{SqliteStore, Store};

    use super::*;
    use crate::ImageRef;

    const PHOTO: &[u8] = b"\xff\xd8\xffcanary-photo-bytes";

    fn turn(sha256: &stream_core::Sha256Hex, size: u64) -> UserTurn {
        UserTurn {
            event_id: EventId::parse(&"a".repeat(64)).unwrap(),
            text: None,
            image: Some(ImageRef {
                sha256: sha256.clone(),
                content_type: Label::new("image/jpeg").unwrap(),
                size,
            }),
            command: None,
        }
    }

    /// The photo bytes that go into a request are the ones the snapshot
    /// recorded: a blob of another size or content fails the packet (and
    /// so the run), and the error names only the blob.
    #[test]
    fn photo_bytes_that_differ_from_the_snapshot_are_never_sent() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let mut tx = store.begin().unwrap();
        let sha = tx.put_blob(PHOTO).unwrap();
        tx.commit().unwrap();
        let len = PHOTO.len() as u64;

        let sent = image(&store, &turn(&sha, len)).unwrap().unwrap();
        assert!(!sent.data_base64.is_empty());
        let refused = image(&store, &turn(&sha, len + 1)).unwrap_err();
        assert!(
            matches!(refused, ContextError::ImageMismatch { .. }),
            "{refused}"
        );

        // The stored bytes altered behind the snapshot's back, same length.
        let conn = rusqlite::Connection::open(store.path()).unwrap();
        let altered = conn
            .execute(
                "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS BLOB), CAST('canary' AS BLOB), CAST('CANARY' AS BLOB)) AS BLOB) WHERE sha256 = unhex(?1)",
                [sha.to_string()],
            )
            .unwrap();
        assert_eq!(altered, 1);
        let refused = image(&store, &turn(&sha, len)).unwrap_err();
        assert!(
            matches!(refused, ContextError::ImageMismatch { .. }),
            "{refused}"
        );
        assert!(!refused.to_string().contains("canary"));
    }

    /// One bound: a photo over it is never read, let alone sent.
    #[test]
    fn a_photo_over_the_one_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        let sha = stream_core::canon::sha256(b"absent");
        let over = stream_core::payload::MAX_PHOTO_BYTES + 1;
        assert!(matches!(
            image(&store, &turn(&sha, over)),
            Err(ContextError::Image { .. })
        ));
    }
}
