//! Building a snapshot from the store.

use std::collections::BTreeMap;

use stream_core::canon::sha256;
use stream_core::ids::derive_document_id;
use stream_core::payload::{
    CorrectionTarget, DeliveryReceipt, JudgmentRecorded, MemoryTarget, MessageObservation,
    MessageReceived, OutputContract, ProposalKind, RunCompleted,
};
use stream_core::text::Label;
use stream_core::{EventId, MemoryPath, Payload, RunId, SourceName, StoredEvent};
use stream_store::{EventQuery, Read, RunStatus};

use crate::history::{CallIds, call_of};
use crate::{
    AgentRef, AssistantTurn, Capabilities, ContextError, ContextSpec, ImageRef, Manifest,
    MemoryPart, PromptPart, Snapshot, SnapshotFormat, Turn, UserTurn,
};

/// Largest page when walking a source backwards.
const PAGE: usize = 256;

/// The page to ask for when `wanted` more messages are needed. A page holds
/// messages only (the query names their type), so about as many as wanted:
/// a few more for another chat's messages, and more when a page came up
/// short.
fn page_size(wanted: usize, pages_read: u32) -> usize {
    wanted
        .saturating_add(4)
        .saturating_mul(1 << pages_read.min(6))
        .min(PAGE)
}

fn decode<P: stream_core::Payload>(e: &StoredEvent) -> Result<P, ContextError> {
    e.decode()
        .map_err(|_| ContextError::EventInvalid { id: e.id().clone() })
}

fn user_turn(event: &StoredEvent, msg: &MessageReceived) -> UserTurn {
    UserTurn {
        event_id: event.id().clone(),
        text: msg.text.as_ref().map(|t| t.as_str().to_owned()),
        image: msg.photo.as_ref().map(|p| ImageRef {
            sha256: p.blob_sha256.clone(),
            content_type: p.content_type.clone(),
            size: p.size,
        }),
        command: msg.command.clone(),
    }
}

/// The last `n` owner messages of `chat` before `before_seq`, oldest first.
fn recent_messages(
    store: &dyn Read,
    source: &SourceName,
    chat: i64,
    before_seq: u64,
    n: usize,
) -> Result<Vec<(StoredEvent, MessageReceived)>, ContextError> {
    let mut found = Vec::new();
    let mut cursor = before_seq;
    let mut pages_read = 0;
    while found.len() < n && cursor > 1 {
        let size = page_size(n - found.len(), pages_read);
        pages_read += 1;
        let page = store.events(
            &EventQuery {
                event_type: Some(MessageReceived::TYPE.to_owned()),
                ..EventQuery::source_before(source, cursor)
            }
            .limit(size),
        )?;
        let Some(last) = page.last() else { break };
        cursor = last.seq;
        for event in page {
            if found.len() == n {
                break;
            }
            if event.is::<MessageReceived>() {
                let msg: MessageReceived = decode(&event)?;
                if msg.chat_id == chat {
                    found.push((event, msg));
                }
            }
        }
    }
    found.reverse();
    Ok(found)
}

/// The chain of one owner message, grouped by what the transcript needs.
#[derive(Default)]
struct Chain {
    outputs: Vec<(StoredEvent, MessageObservation)>,
    receipts: BTreeMap<EventId, (StoredEvent, DeliveryReceipt)>,
    completions: BTreeMap<RunId, Vec<(StoredEvent, RunCompleted)>>,
    /// The latest judgment per judged output.
    judgments: BTreeMap<EventId, JudgmentRecorded>,
}

/// The chains of `messages`, read together (one query for the whole
/// transcript rather than one per message).
fn chains_of(
    store: &dyn Read,
    messages: &[(StoredEvent, MessageReceived)],
) -> Result<BTreeMap<EventId, Chain>, ContextError> {
    let roots = messages
        .iter()
        .map(|(event, _)| event.id().clone())
        .collect();
    let mut chains: BTreeMap<EventId, Chain> = BTreeMap::new();
    for event in store.events(&EventQuery::rooted_at_any(roots))? {
        if let Some(root) = event.event.root.clone() {
            chains.entry(root).or_default().add(event)?;
        }
    }
    Ok(chains)
}

impl Chain {
    /// Files one event of the chain, read in commit order.
    fn add(&mut self, event: StoredEvent) -> Result<(), ContextError> {
        if event.is::<MessageObservation>() {
            let out: MessageObservation = decode(&event)?;
            self.outputs.push((event, out));
        } else if event.is::<DeliveryReceipt>() {
            let receipt: DeliveryReceipt = decode(&event)?;
            self.receipts
                .insert(receipt.output_event_id.clone(), (event, receipt));
        } else if event.is::<RunCompleted>() {
            let done: RunCompleted = decode(&event)?;
            self.completions
                .entry(done.run_id.clone())
                .or_default()
                .push((event, done));
        } else if event.is::<JudgmentRecorded>() {
            // Commit order: a later judgment supersedes an earlier one.
            let judgment: JudgmentRecorded = decode(&event)?;
            self.judgments
                .insert(judgment.target_output_event_id.clone(), judgment);
        }
        Ok(())
    }
}

/// The correction-target rules (docs/design.md §8) for one delivered output. Every
/// rule must hold; any doubt makes the turn history only.
#[allow(clippy::too_many_arguments)]
fn correction_target(
    store: &dyn Read,
    spec: &ContextSpec,
    telegram: &SourceName,
    chat: i64,
    root: (&StoredEvent, &MessageReceived),
    output: (&StoredEvent, &MessageObservation),
    receipt: (&StoredEvent, &DeliveryReceipt),
    chain: &Chain,
) -> Result<Option<CorrectionTarget>, ContextError> {
    let (root_event, root_msg) = root;
    let (out_event, out) = output;
    let (receipt_event, receipt) = receipt;
    // Exactly one completed run from an allowlisted conversation-history agent.
    if !spec.history_agents.contains(out.agent_id.as_str()) {
        return Ok(None);
    }
    let completions = chain
        .completions
        .get(&out.run_id)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let [(_, done)] = completions else {
        return Ok(None);
    };
    let run_completed =
        matches!(store.run(&out.run_id)?, Some(run) if run.status == RunStatus::Completed);
    if !run_completed
        || done.agent_id != out.agent_id
        || done.agent_version != out.agent_version
        || done.output_event_id != *out_event.id()
        || done.trigger_event_id != *root_event.id()
    {
        return Ok(None);
    }
    // Exactly one canonical output event.
    if chain
        .outputs
        .iter()
        .filter(|(_, o)| o.run_id == out.run_id)
        .count()
        != 1
    {
        return Ok(None);
    }
    // Same Telegram source, chat, sender and source root as its receipt.
    let same = receipt_event.event.source == *telegram
        && receipt.chat_id == chat
        && out.chat_id == chat
        && root_msg.chat_id == chat
        && receipt.root_sender_id == root_msg.sender_id
        && receipt.source_root_event_id == *root_event.id()
        && out_event.event.root.as_ref() == Some(root_event.id())
        && receipt_event.event.parent.as_ref() == Some(out_event.id());
    if !same {
        return Ok(None);
    }
    // An output contract matching the completed run: holds by construction
    // (the completed run's receipt names this output, settled with the only
    // contract there is); a new contract must decide here.
    // Guarded by `the_output_contract_rule_holds_by_construction`.
    match out.output_contract {
        OutputContract::ConversationText1 => {}
    }
    Ok(Some(CorrectionTarget {
        run_id: out.run_id.clone(),
        output_event_id: out_event.id().clone(),
        delivery_receipt_event_id: receipt_event.id().clone(),
        source_root_event_id: root_event.id().clone(),
        output_contract: out.output_contract,
    }))
}

fn memory_part(store: &dyn Read) -> Result<Option<MemoryPart>, ContextError> {
    let source = SourceName::fixed(SourceName::CONTEXT);
    let doc_id = derive_document_id(source.as_str(), MemoryPath::VALUE)
        .map_err(|_| ContextError::Canonical)?;
    let Some(doc) = store.document(&doc_id)? else {
        return Ok(None);
    };
    let Some(version_id) = doc.current_version else {
        return Ok(None);
    };
    let Some(version) = store.version(&version_id)? else {
        return Ok(None);
    };
    let Some(bytes) = store.blob(&version.sha256)? else {
        return Ok(None);
    };
    if sha256(&bytes) != version.sha256 || bytes.len() as u64 != version.size {
        return Ok(None);
    }
    let (Ok(text), Ok(content_type)) = (String::from_utf8(bytes), Label::new(version.content_type))
    else {
        return Ok(None);
    };
    Ok(Some(MemoryPart {
        target: MemoryTarget {
            source,
            document_id: doc.id,
            path: MemoryPath,
            version_id,
            sha256: version.sha256,
            content_type,
        },
        text,
    }))
}

/// Builds the snapshot of run `run_id` for `trigger`.
pub fn build(
    store: &dyn Read,
    spec: &ContextSpec,
    run_id: &RunId,
    trigger: &StoredEvent,
) -> Result<Snapshot, ContextError> {
    let invalid_trigger = || ContextError::TriggerInvalid {
        id: trigger.id().clone(),
    };
    let current: MessageReceived = trigger.decode().map_err(|_| invalid_trigger())?;
    let telegram = trigger.event.source.clone();
    let chat = current.chat_id;

    let mut transcript = Vec::new();
    let mut targets = Vec::new();
    let mut evidence = Vec::new();
    let mut call_ids = CallIds::default();
    let messages = recent_messages(
        store,
        &telegram,
        chat,
        trigger.seq,
        spec.transcript_messages,
    )?;
    let mut chains = chains_of(store, &messages)?;
    for (event, msg) in &messages {
        transcript.push(Turn::User(user_turn(event, msg)));
        evidence.push(event.id().clone());
        let chain = chains.remove(event.id()).unwrap_or_default();
        let mut delivered: Vec<_> = chain
            .outputs
            .iter()
            .filter_map(|(out_event, out)| {
                chain
                    .receipts
                    .get(out_event.id())
                    .map(|receipt| (out_event, out, receipt))
            })
            .collect();
        delivered.sort_by_key(|(_, _, (receipt_event, _))| receipt_event.seq);
        for (out_event, out, (receipt_event, receipt)) in delivered {
            let target = correction_target(
                store,
                spec,
                &telegram,
                chat,
                (event, msg),
                (out_event, out),
                (receipt_event, receipt),
                &chain,
            )?;
            let calls = match chain.completions.get(&out.run_id).map(Vec::as_slice) {
                Some([(_, done)]) => done
                    .proposal_event_ids
                    .iter()
                    .map(|id| {
                        let proposal = store
                            .event(id)?
                            .ok_or_else(|| ContextError::EventInvalid { id: id.clone() })?;
                        call_of(&proposal, &mut call_ids)
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                _ => Vec::new(),
            };
            let text = match chain.judgments.get(out_event.id()) {
                Some(judgment) => judgment.replacement.text.as_str().to_owned(),
                None => out.text.as_str().to_owned(),
            };
            evidence.push(receipt_event.id().clone());
            evidence.push(out_event.id().clone());
            transcript.push(Turn::Assistant(AssistantTurn {
                run_id: out.run_id.clone(),
                output_event_id: out_event.id().clone(),
                delivery_receipt_event_id: receipt_event.id().clone(),
                text,
                calls,
            }));
            targets.extend(target);
        }
    }
    evidence.push(trigger.id().clone());

    let memory = if spec.memory_subscribed {
        memory_part(store)?
    } else {
        None
    };
    let tools = ProposalKind::ALL
        .into_iter()
        .filter(|kind| spec.proposals.contains(kind))
        .filter(|kind| match kind {
            ProposalKind::MemoryChange => memory.is_some(),
            ProposalKind::SelfCorrection => !targets.is_empty(),
            ProposalKind::FocusDeclaration => true,
        })
        .collect();
    let capabilities = Capabilities {
        memory_target: memory.as_ref().map(|m| m.target.clone()),
        correction_targets: targets,
        evidence_ids: evidence,
        tools,
    };
    let prompt = PromptPart {
        sha256: sha256(spec.prompt.as_bytes()),
        text: spec.prompt.clone(),
    };
    let agent = AgentRef {
        id: spec.agent_id.clone(),
        version: spec.agent_version,
        declaration_fingerprint: spec.declaration_fingerprint.clone(),
    };
    let trigger = user_turn(trigger, &current);
    let manifest = Manifest::of_parts(
        &agent,
        &prompt,
        &transcript,
        &trigger,
        &memory,
        &capabilities,
    )?;
    Ok(Snapshot {
        format: SnapshotFormat,
        run_id: run_id.clone(),
        agent,
        telegram_source: telegram,
        chat_id: chat,
        trigger,
        prompt,
        transcript,
        memory,
        capabilities,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_start_near_what_is_wanted_and_grow_to_the_cap() {
        assert_eq!(page_size(20, 0), 24);
        assert_eq!(page_size(20, 1), 48);
        assert_eq!(page_size(3, 0), 7);
        assert_eq!(page_size(20, 4), PAGE);
        assert_eq!(page_size(usize::MAX, 0), PAGE);
        assert_eq!(page_size(1, u32::MAX), PAGE);
    }
}
