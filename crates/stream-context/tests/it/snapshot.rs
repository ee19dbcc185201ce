use std::collections::BTreeMap;

use serde_json::value::RawValue;
use stream_context::{Manifest, Snapshot, SnapshotClaims, Turn, build};
use stream_core::ids::derive_run_id;
use stream_core::payload::ProposalKind;
use stream_core::{EventId, RunId, StoredEvent};
use stream_store::{Read, RunStatus, Store};

use crate::common::*;

fn run_for(trigger: &StoredEvent) -> RunId {
    derive_run_id(CONVERSATION, 18, trigger.id()).unwrap()
}

fn snap(fx: &Fixture, trigger: &StoredEvent) -> Snapshot {
    build(&fx.store, &spec(&all_kinds()), &run_for(trigger), trigger).unwrap()
}

fn targets(s: &Snapshot) -> Vec<EventId> {
    s.capabilities
        .correction_targets
        .iter()
        .map(|t| t.output_event_id.clone())
        .collect()
}

#[test]
fn transcript_holds_owner_messages_and_delivered_replies_in_order() {
    let mut fx = Fixture::new();
    let m1 = fx.message("first");
    let r1 = fx.reply(&m1, "reply one");
    let m2 = fx.message("second");
    let _undelivered = fx.reply_as(CONVERSATION, &m2, "never sent", false, vec![]);
    let now = fx.message("third");
    let s = snap(&fx, &now);
    let roles: Vec<String> = s
        .transcript
        .iter()
        .map(|t| match t {
            Turn::User(u) => format!("user:{}", u.text.as_deref().unwrap()),
            Turn::Assistant(a) => format!("assistant:{}", a.text),
        })
        .collect();
    assert_eq!(roles, ["user:first", "assistant:reply one", "user:second"]);
    assert_eq!(s.trigger.event_id, *now.id());
    // "Current, undelivered ... runs are unavailable."
    assert_eq!(targets(&s), [r1.output.clone()]);
}

/// The chains of the whole transcript are one read, not one per message: a
/// build's queries do not grow with the transcript.
#[test]
fn the_transcript_s_chains_are_read_in_one_query() {
    let mut fx = Fixture::new();
    let mut replies = Vec::new();
    for i in 0..12 {
        let m = fx.message(&format!("message {i}"));
        replies.push(fx.reply(&m, &format!("reply {i}")).output);
    }
    let now = fx.message("now");
    let reads = CountingReads::new(&fx.store);
    let s = build(&reads, &spec(&all_kinds()), &run_for(&now), &now).unwrap();
    // Twelve exchanges, every reply a target: each chain was read.
    assert_eq!(s.transcript.len(), 24);
    assert_eq!(targets(&s), replies);
    // One page of recent messages, one read of their chains.
    assert_eq!(reads.event_queries.get(), 2);
}

#[test]
fn effective_text_is_the_latest_judgment() {
    let mut fx = Fixture::new();
    let m1 = fx.message("capital of France?");
    let r1 = fx.reply(&m1, "Lyon.");
    let c1 = fx.message("/correct Paris.");
    fx.judge(&r1, &m1, &c1, "Paris.");
    let c2 = fx.message("/correct Paris, France.");
    fx.judge(&r1, &m1, &c2, "Paris, France.");
    let now = fx.message("thanks");
    let s = snap(&fx, &now);
    let Turn::Assistant(reply) = &s.transcript[1] else {
        panic!()
    };
    assert_eq!(reply.text, "Paris, France.");
}

/// One row per rule of the correction-target rules (docs/design.md §8); each row breaks
/// exactly that rule and the reply must not be a target (it stays history
/// when delivered).
#[test]
fn correction_targets_follow_every_seed_rule() {
    type Breaker = fn(&mut Fixture, &StoredEvent) -> Option<EventId>;
    let rows: Vec<(&str, Breaker)> = vec![
        // "a same-chat delivered Telegram receipt"
        ("undelivered", |fx, m| {
            fx.reply_as(CONVERSATION, m, "x", false, vec![]);
            None
        }),
        ("receipt in another chat", |fx, m| {
            let r = fx.reply_as(CONVERSATION, m, "x", false, vec![]);
            fx.deliver(&r.output, m, 7, CHAT);
            Some(r.output)
        }),
        // "the same Telegram source, chat, sender, and source root as its delivery receipt"
        ("receipt names another sender", |fx, m| {
            let r = fx.reply_as(CONVERSATION, m, "x", false, vec![]);
            fx.deliver(&r.output, m, CHAT, 777);
            Some(r.output)
        }),
        ("receipt names another source root", |fx, m| {
            let other = fx.message("other");
            let r = fx.reply_as(CONVERSATION, m, "x", false, vec![]);
            // The receipt points at a different root than the output's own.
            let _ = fx.deliver(&r.output, &other, CHAT, CHAT);
            Some(r.output)
        }),
        // "exactly one completed run from an allowlisted conversation-history agent"
        ("deterministic agent", |fx, m| {
            Some(fx.reply_as(FIXED, m, "usage", true, vec![]).output)
        }),
        ("run row not completed", |fx, m| {
            let r = fx.reply(m, "x");
            let mut row = fx.store.run(&r.run_id).unwrap().unwrap();
            row.status = RunStatus::Failed;
            let mut tx = fx.store.begin().unwrap();
            tx.put_run(&row).unwrap();
            tx.commit().unwrap();
            Some(r.output)
        }),
    ];
    for (name, breaker) in rows {
        let mut fx = Fixture::new();
        let m = fx.message("question");
        let broken = breaker(&mut fx, &m);
        let now = fx.message("now");
        let s = snap(&fx, &now);
        assert!(targets(&s).is_empty(), "{name}: {:?}", targets(&s));
        assert!(!s.exposes(ProposalKind::SelfCorrection), "{name}");
        if let Some(output) = broken {
            assert!(s.correction_target(&output).is_none(), "{name}");
        }
    }
}

#[test]
fn omitted_turns_are_not_targets() {
    let mut fx = Fixture::new();
    let old = fx.message("old");
    let r_old = fx.reply(&old, "old reply");
    let recent = fx.message("recent");
    let r_recent = fx.reply(&recent, "recent reply");
    let now = fx.message("now");
    let mut spec = spec(&all_kinds());
    spec.transcript_messages = 1;
    let s = build(&fx.store, &spec, &run_for(&now), &now).unwrap();
    assert_eq!(targets(&s), [r_recent.output]);
    assert!(!s.admits_evidence(&r_old.output));
    assert!(!s.admits_evidence(old.id()));
}

#[test]
fn latest_is_the_most_recent_target() {
    let mut fx = Fixture::new();
    let m1 = fx.message("one");
    fx.reply(&m1, "r1");
    let m2 = fx.message("two");
    let r2 = fx.reply(&m2, "r2");
    let now = fx.message("correct your last reply");
    let s = snap(&fx, &now);
    assert_eq!(
        s.latest_correction_target().unwrap().output_event_id,
        r2.output
    );
    assert_eq!(s.capabilities.correction_targets.len(), 2);
}

#[test]
fn evidence_is_exactly_messages_receipts_and_outputs() {
    let mut fx = Fixture::new();
    let m1 = fx.message("one");
    let r1 = fx.reply(&m1, "r1");
    let now = fx.message("two");
    let s = snap(&fx, &now);
    let expected = vec![
        m1.id().clone(),
        r1.receipt.clone().unwrap(),
        r1.output.clone(),
        now.id().clone(),
    ];
    assert_eq!(s.capabilities.evidence_ids, expected);
    // The run id and any unrelated id are not evidence.
    assert!(!s.admits_evidence(&EventId::parse(r1.run_id.as_str()).unwrap()));
}

#[test]
fn memory_target_binds_the_exact_current_version() {
    let mut fx = Fixture::new();
    fx.memory("---\nid: m\n---\nold\n");
    let (doc, version, sha) = fx.memory("---\nid: m\n---\ncanary-memory-now\n");
    let now = fx.message("remember this");
    let s = snap(&fx, &now);
    let target = s.capabilities.memory_target.clone().unwrap();
    assert_eq!(
        (target.document_id, target.version_id, target.sha256),
        (doc, version, sha)
    );
    assert_eq!(target.source.as_str(), "filesystem:telegram-agent-context");
    assert!(
        s.memory
            .as_ref()
            .unwrap()
            .text
            .contains("canary-memory-now")
    );
    assert!(s.exposes(ProposalKind::MemoryChange));
}

#[test]
fn tools_are_exposed_only_when_declared_and_capable() {
    let mut fx = Fixture::new();
    let first = fx.message("hello");
    // No memory, no delivered reply: only focus (declared in v18).
    let s = snap(&fx, &first);
    assert_eq!(s.capabilities.tools, [ProposalKind::FocusDeclaration]);
    fx.reply(&first, "hi");
    fx.memory("---\nid: m\n---\n");
    let now = fx.message("again");
    assert_eq!(snap(&fx, &now).capabilities.tools, ProposalKind::ALL);
    // v17 declares no focus.
    let v17 = spec(&[ProposalKind::MemoryChange, ProposalKind::SelfCorrection]);
    let s = build(&fx.store, &v17, &run_for(&now), &now).unwrap();
    assert_eq!(
        s.capabilities.tools,
        [ProposalKind::MemoryChange, ProposalKind::SelfCorrection]
    );
    // Not subscribed to memory.md: no memory in the snapshot, no memory tool.
    let mut unsubscribed = spec(&all_kinds());
    unsubscribed.memory_subscribed = false;
    let s = build(&fx.store, &unsubscribed, &run_for(&now), &now).unwrap();
    assert!(s.memory.is_none() && !s.exposes(ProposalKind::MemoryChange));
}

#[test]
fn snapshot_is_retry_stable_and_tampering_is_detected() {
    let mut fx = Fixture::new();
    fx.memory("---\nid: m\n---\nmemory\n");
    let m1 = fx.message("one");
    fx.reply(&m1, "r1");
    let now = fx.message("two");
    let s = snap(&fx, &now);
    let (bytes, id) = s.encode().unwrap();
    let mut tx = fx.store.begin().unwrap();
    tx.put_snapshot(&id, &bytes).unwrap();
    tx.commit().unwrap();
    // Later events (a new memory version, a new reply) do not change a retry.
    fx.memory("---\nid: m\n---\nchanged\n");
    let loaded = Snapshot::load(&fx.store, &id).unwrap();
    assert_eq!(loaded, s);
    assert!(
        snap(&fx, &now).encode().unwrap().0 != bytes,
        "a rebuild would differ"
    );

    // Tampered part with the old manifest.
    let mut tampered = s.clone();
    tampered.transcript.pop();
    let (bad, bad_id) = tampered.encode().unwrap();
    let err = Snapshot::decode(&bad, &bad_id).unwrap_err();
    assert!(err.to_string().contains("manifest"), "{err}");
    // Bytes that do not hash to the id.
    assert!(
        Snapshot::decode(&bytes, &bad_id)
            .unwrap_err()
            .to_string()
            .contains("hash")
    );
    // Non-canonical bytes of the same value.
    let pretty = serde_json::to_vec_pretty(&s).unwrap();
    let pretty_id = stream_core::SnapshotId::from(stream_core::canon::sha256(&pretty));
    assert!(
        Snapshot::decode(&pretty, &pretty_id)
            .unwrap_err()
            .to_string()
            .contains("canonical")
    );
}

#[test]
fn an_unknown_trigger_is_refused() {
    let mut fx = Fixture::new();
    let m = fx.message("x");
    let r = fx.reply(&m, "y");
    let output = fx.store.event(&r.output).unwrap().unwrap();
    assert!(build(&fx.store, &spec(&all_kinds()), &run_for(&m), &output).is_err());
}

/// "an output contract matching the completed run": the rule holds by
/// construction (ARCHITECTURE.md, `crates/stream-context`): the completed-run
/// receipt names exactly one output, every settlement writes that output
/// with `conversation-text@1`, and that is the only contract an output
/// event can carry, so the target's contract is the run's. Guarded here:
/// any other contract is refused at decode, and a target binds the contract
/// of the output its completed run named.
#[test]
fn the_output_contract_rule_holds_by_construction() {
    use stream_core::payload::{MessageObservation, OutputContract};
    for other in [
        "conversation-text@2",
        "conversation-text",
        "strict-json@1",
        "none",
        "",
    ] {
        assert!(
            serde_json::from_value::<OutputContract>(serde_json::json!(other)).is_err(),
            "{other}"
        );
    }
    let mut fx = Fixture::new();
    let m = fx.message("question");
    let r = fx.reply(&m, "x");
    let now = fx.message("now");
    let s = snap(&fx, &now);
    let target = s.correction_target(&r.output).unwrap();
    let output: MessageObservation = fx
        .store
        .event(&r.output)
        .unwrap()
        .unwrap()
        .decode()
        .unwrap();
    assert_eq!(output.output_contract, OutputContract::ConversationText1);
    assert_eq!(target.output_contract, output.output_contract);
}

/// `decode` hashes each part as its slice of the checked canonical bytes:
/// the same manifest as encoding every part, with and without memory.
#[test]
fn the_manifest_checked_from_slices_is_the_manifest_of_the_parts() {
    let mut fx = Fixture::new();
    fx.memory("---\nid: m\n---\ncanary-memory \"quoted\" \u{1F600}\n");
    let m1 = fx.message("one \u{e000} \\ \"");
    fx.reply(&m1, "r1");
    let now = fx.message("two");
    let mut unsubscribed = spec(&all_kinds());
    unsubscribed.memory_subscribed = false;
    for spec in [spec(&all_kinds()), unsubscribed] {
        let s = build(&fx.store, &spec, &run_for(&now), &now).unwrap();
        assert_eq!(s.manifest, Manifest::of(&s).unwrap());
        let (bytes, id) = s.encode().unwrap();
        assert_eq!(Snapshot::decode(&bytes, &id).unwrap(), s);
        // One part changed under the old manifest is refused.
        let mut other = s.clone();
        other.capabilities.tools.clear();
        let (bad, bad_id) = other.encode().unwrap();
        let err = Snapshot::decode(&bad, &bad_id).unwrap_err();
        assert!(err.to_string().contains("manifest"), "{err}");
    }
}

/// Snapshot bytes rebuilt from their members with `edit` applied (the
/// manifest entry of an edited part set to its new slice's hash when
/// `rehash`), and the id they hash to.
fn edited(
    bytes: &[u8],
    edit: impl FnOnce(&mut BTreeMap<String, Box<RawValue>>),
) -> (Vec<u8>, stream_core::SnapshotId) {
    let mut members: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes).unwrap();
    edit(&mut members);
    let bytes = serde_json::to_vec(&members).unwrap();
    let id = stream_core::SnapshotId::from(stream_core::canon::sha256(&bytes));
    (bytes, id)
}

fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap()
}

/// Replaces part `name` with `text` and its manifest entry with its hash.
fn forge_part(members: &mut BTreeMap<String, Box<RawValue>>, name: &str, text: String) {
    let mut manifest: serde_json::Value = serde_json::from_str(members["manifest"].get()).unwrap();
    manifest[name] = serde_json::json!(stream_core::canon::sha256(text.as_bytes()));
    members.insert(name.into(), raw(text));
    members.insert(
        "manifest".into(),
        raw(stream_core::canon::to_canonical_string(&manifest).unwrap()),
    );
}

fn why<T: std::fmt::Debug>(r: Result<T, stream_context::ContextError>) -> &'static str {
    match r {
        Err(stream_context::ContextError::SnapshotInvalid { why, .. }) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The authority chain reads a snapshot's claims (`SnapshotClaims`): the
/// same members as the full decode, with the prompt, transcript and memory
/// text bound by their manifest hashes instead of decoded.
#[test]
fn snapshot_claims_are_the_snapshot_s_own_and_bind_unread_parts_by_hash() {
    let mut fx = Fixture::new();
    fx.memory("---\nid: m\n---\ncanary-memory\n");
    let m1 = fx.message("one");
    fx.reply(&m1, "r1");
    let now = fx.message("two");
    let s = snap(&fx, &now);
    let (bytes, id) = s.encode().unwrap();
    assert_eq!(
        SnapshotClaims::decode(&bytes, &id).unwrap(),
        SnapshotClaims::from(&s)
    );
    let mut tx = fx.store.begin().unwrap();
    tx.put_snapshot(&id, &bytes).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        SnapshotClaims::load(&fx.store, &id).unwrap(),
        SnapshotClaims::from(&s)
    );

    // What both refuse alike.
    let both = |bytes: &[u8], id: &stream_core::SnapshotId| {
        let full = why(Snapshot::decode(bytes, id));
        assert_eq!(why(SnapshotClaims::decode(bytes, id)), full);
        full
    };
    let (_, other_id) = edited(&bytes, |_| {});
    assert_eq!(other_id, id, "rebuilding the members is byte-exact");
    let wrong_id = stream_core::SnapshotId::from(stream_core::canon::sha256(b"x"));
    assert_eq!(both(&bytes, &wrong_id), "hash");
    let pretty = serde_json::to_vec_pretty(&s).unwrap();
    let pretty_id = stream_core::SnapshotId::from(stream_core::canon::sha256(&pretty));
    assert_eq!(both(&pretty, &pretty_id), "not canonical");
    let (extra, extra_id) = edited(&bytes, |m| {
        m.insert("zzz".into(), raw("1".into()));
    });
    assert_eq!(both(&extra, &extra_id), "schema");
    for part in ["transcript", "memory", "prompt", "capabilities", "trigger"] {
        // Another value under the old manifest.
        let (bad, bad_id) = edited(&bytes, |m| {
            m.insert(part.into(), raw("null".into()));
        });
        assert_eq!(both(&bad, &bad_id), "manifest", "{part}");
    }
    // A read member that is not canonical, even with a manifest made to
    // match it.
    let (bad, bad_id) = edited(&bytes, |m| {
        let pretty = serde_json::to_string_pretty(&s.capabilities).unwrap();
        forge_part(m, "capabilities", pretty);
    });
    assert_eq!(both(&bad, &bad_id), "not canonical");

    // The boundary: a part the chain does not read, rewritten with a
    // manifest made to match it, is refused by the full decode (a retry)
    // and bound only by hash in the claims: only a writer other than
    // `build` (which hashes each part's canonical encoding) could make it.
    let (bad, bad_id) = edited(&bytes, |m| {
        let pretty = serde_json::to_string_pretty(&s.transcript).unwrap();
        forge_part(m, "transcript", pretty);
    });
    assert_eq!(why(Snapshot::decode(&bad, &bad_id)), "not canonical");
    assert!(SnapshotClaims::decode(&bad, &bad_id).is_ok());
}
