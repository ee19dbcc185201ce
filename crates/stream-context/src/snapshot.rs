//! The snapshot document: canonical bytes, a manifest of part hashes, and
//! its id (SHA-256 of the bytes). A retry loads these bytes; it never rebuilds.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use stream_core::canon::{canonical_sha256, sha256, to_canonical_bytes};
use stream_core::payload::{CommandRef, CorrectionTarget, MemoryTarget, ProposalKind};
use stream_core::text::Label;
use stream_core::{EventId, Fingerprint, RunId, Sha256Hex, SnapshotId, SourceName, string_literal};
use stream_store::{PartFault, Read, SnapshotBytes, StoreError};

use crate::ContextError;

string_literal!(
    /// The snapshot format identifier.
    SnapshotFormat = "thestream/context-snapshot/1"
);

/// The declaration the snapshot was built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AgentRef {
    /// Declaration id.
    pub id: Label,
    /// Declaration version.
    pub version: u32,
    /// Declaration fingerprint (capability manifest included).
    pub declaration_fingerprint: Fingerprint,
}

/// A stored image: the blob holding its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageRef {
    /// Blob key.
    pub sha256: Sha256Hex,
    /// Media type.
    pub content_type: Label,
    /// Size in bytes.
    pub size: u64,
}

/// An owner message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UserTurn {
    /// The `message.received` event.
    pub event_id: EventId,
    /// Text or caption.
    pub text: Option<String>,
    /// Photo.
    pub image: Option<ImageRef>,
    /// A command of ours, if any.
    pub command: Option<CommandRef>,
}

/// A proposal call of an earlier turn, rebuilt from its proposal event:
/// canonical arguments, a stable synthetic id, the resolved target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HistoryCall {
    /// Synthetic id: 9 alphanumerics derived from the proposal event id,
    /// unique within the snapshot (snapshots stored before this rule hold
    /// longer ids, still within `^[A-Za-z0-9_-]{1,64}$`).
    pub id: String,
    /// The proposal event.
    pub proposal_event_id: EventId,
    /// Which kind.
    pub kind: ProposalKind,
    /// Canonical arguments.
    pub arguments: serde_json::Value,
}

/// A delivered assistant reply, with its effective text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AssistantTurn {
    /// The run that produced it.
    pub run_id: RunId,
    /// Its output event.
    pub output_event_id: EventId,
    /// Its delivery receipt.
    pub delivery_receipt_event_id: EventId,
    /// The effective text: the latest human judgment's replacement, else
    /// the delivered text.
    pub text: String,
    /// Proposal calls the completed-run receipt names, in order.
    pub calls: Vec<HistoryCall>,
}

/// One turn of the bounded transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Turn {
    /// The owner.
    User(UserTurn),
    /// A delivered reply.
    Assistant(AssistantTurn),
}

/// The exact `memory.md` version the snapshot holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MemoryPart {
    /// Source, document, path, version, hash, content type.
    pub target: MemoryTarget,
    /// The document text.
    pub text: String,
}

/// What the snapshot admits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Capabilities {
    /// The memory target, when the snapshot holds `memory.md`.
    pub memory_target: Option<MemoryTarget>,
    /// Eligible correction targets, oldest first.
    pub correction_targets: Vec<CorrectionTarget>,
    /// Every id a tool may cite.
    pub evidence_ids: Vec<EventId>,
    /// Exposed tools: declared and capable.
    pub tools: Vec<ProposalKind>,
}

/// The prompt, bound by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PromptPart {
    /// SHA-256 of the text.
    pub sha256: Sha256Hex,
    /// The text.
    pub text: String,
}

/// SHA-256 of each part's canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Of `agent`.
    pub agent: Sha256Hex,
    /// Of `prompt`.
    pub prompt: Sha256Hex,
    /// Of `transcript`.
    pub transcript: Sha256Hex,
    /// Of `trigger`.
    pub trigger: Sha256Hex,
    /// Of `memory`.
    pub memory: Sha256Hex,
    /// Of `capabilities`.
    pub capabilities: Sha256Hex,
}

/// The retry-stable context of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Snapshot {
    /// Format identifier.
    pub format: SnapshotFormat,
    /// The run.
    pub run_id: RunId,
    /// The declaration.
    pub agent: AgentRef,
    /// The Telegram source the chat lives on.
    pub telegram_source: SourceName,
    /// The chat.
    pub chat_id: i64,
    /// The current owner message.
    pub trigger: UserTurn,
    /// The prompt.
    pub prompt: PromptPart,
    /// Earlier turns, oldest first.
    pub transcript: Vec<Turn>,
    /// `memory.md`, when subscribed and present.
    pub memory: Option<MemoryPart>,
    /// What tools may target and cite.
    pub capabilities: Capabilities,
    /// Part hashes.
    pub manifest: Manifest,
}

/// A snapshot's members as the raw slices of its bytes: every member, so
/// that the top level is checked canonical on its own and each member can be
/// decoded (and checked canonical) from its slice.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Members<'a> {
    #[serde(borrow)]
    agent: &'a RawValue,
    #[serde(borrow)]
    capabilities: &'a RawValue,
    #[serde(borrow)]
    chat_id: &'a RawValue,
    #[serde(borrow)]
    format: &'a RawValue,
    #[serde(borrow)]
    manifest: &'a RawValue,
    #[serde(borrow)]
    memory: &'a RawValue,
    #[serde(borrow)]
    prompt: &'a RawValue,
    #[serde(borrow)]
    run_id: &'a RawValue,
    #[serde(borrow)]
    telegram_source: &'a RawValue,
    #[serde(borrow)]
    transcript: &'a RawValue,
    #[serde(borrow)]
    trigger: &'a RawValue,
}

impl<'a> Members<'a> {
    /// Every member with its name, in RFC 8785 order (all names are ASCII,
    /// so UTF-16 order is byte order).
    fn entries(&self) -> [(&'static str, &'a RawValue); 11] {
        [
            ("agent", self.agent),
            ("capabilities", self.capabilities),
            ("chatId", self.chat_id),
            ("format", self.format),
            ("manifest", self.manifest),
            ("memory", self.memory),
            ("prompt", self.prompt),
            ("runId", self.run_id),
            ("telegramSource", self.telegram_source),
            ("transcript", self.transcript),
            ("trigger", self.trigger),
        ]
    }

    /// Whether `bytes` are exactly these members in canonical order with no
    /// whitespace: then the whole is canonical when every member is (RFC
    /// 8785 encodes a member's value on its own).
    fn top_level_is_canonical(&self, bytes: &[u8]) -> bool {
        let mut expected = Vec::with_capacity(bytes.len());
        expected.push(b'{');
        for (i, (name, raw)) in self.entries().iter().enumerate() {
            if i > 0 {
                expected.push(b',');
            }
            expected.push(b'"');
            expected.extend_from_slice(name.as_bytes());
            expected.extend_from_slice(b"\":");
            expected.extend_from_slice(raw.get().as_bytes());
        }
        expected.push(b'}');
        expected == bytes
    }

    /// The manifest of these parts, each hashed as it stands in the bytes.
    fn manifest(&self) -> Manifest {
        let hash = |raw: &RawValue| sha256(raw.get().as_bytes());
        Manifest {
            agent: hash(self.agent),
            prompt: hash(self.prompt),
            transcript: hash(self.transcript),
            trigger: hash(self.trigger),
            memory: hash(self.memory),
            capabilities: hash(self.capabilities),
        }
    }
}

/// Snapshot bytes to decode: at hand, or as a store read them.
#[derive(Clone, Copy)]
enum Bytes<'a> {
    /// Not yet checked against the id.
    AtHand(&'a [u8]),
    /// Already hashed to their id by the store ([`SnapshotBytes`]).
    Stored(&'a SnapshotBytes),
}

/// The checks every decode shares, in this order: the bytes hash to the id
/// (`hash`; for [`Bytes::Stored`] the store hashed them, and only the id
/// they hash to is compared), parse into exactly the snapshot's members
/// (`schema`), the top level is canonical (`not canonical`), the manifest
/// decodes canonical, and every part's slice hashes to its manifest entry
/// (`manifest`).
fn checked_members<'a>(
    bytes: Bytes<'a>,
    id: &SnapshotId,
) -> Result<(Members<'a>, Manifest), ContextError> {
    let invalid = |why| invalid(id, why);
    let bytes = match bytes {
        Bytes::AtHand(bytes) if sha256(bytes).as_str() == id.as_str() => bytes,
        Bytes::Stored(stored) if stored.id() == id => stored.as_bytes(),
        Bytes::AtHand(_) | Bytes::Stored(_) => return Err(invalid("hash")),
    };
    let members: Members<'a> = serde_json::from_slice(bytes).map_err(|_| invalid("schema"))?;
    if !members.top_level_is_canonical(bytes) {
        return Err(invalid("not canonical"));
    }
    let manifest: Manifest = member(members.manifest, id)?;
    if members.manifest() != manifest {
        return Err(invalid("manifest"));
    }
    Ok((members, manifest))
}

fn invalid(id: &SnapshotId, why: &'static str) -> ContextError {
    ContextError::SnapshotInvalid {
        id: id.clone(),
        why,
    }
}

/// One member decoded from its slice, which must be its canonical encoding.
fn member<T: DeserializeOwned + Serialize>(
    raw: &RawValue,
    id: &SnapshotId,
) -> Result<T, ContextError> {
    let value: T = serde_json::from_str(raw.get()).map_err(|_| invalid(id, "schema"))?;
    let canonical = to_canonical_bytes(&value).map_err(|_| ContextError::Canonical)?;
    if canonical != raw.get().as_bytes() {
        return Err(invalid(id, "not canonical"));
    }
    Ok(value)
}

fn part_hash<T: Serialize>(part: &T) -> Result<Sha256Hex, ContextError> {
    canonical_sha256(part).map_err(|_| ContextError::Canonical)
}

impl Manifest {
    /// The manifest of `s`'s parts as they are now.
    pub fn of(s: &Snapshot) -> Result<Self, ContextError> {
        Self::of_parts(
            &s.agent,
            &s.prompt,
            &s.transcript,
            &s.trigger,
            &s.memory,
            &s.capabilities,
        )
    }

    /// The manifest of the given parts.
    pub fn of_parts(
        agent: &AgentRef,
        prompt: &PromptPart,
        transcript: &[Turn],
        trigger: &UserTurn,
        memory: &Option<MemoryPart>,
        capabilities: &Capabilities,
    ) -> Result<Self, ContextError> {
        Ok(Self {
            agent: part_hash(agent)?,
            prompt: part_hash(prompt)?,
            transcript: part_hash(&transcript)?,
            trigger: part_hash(trigger)?,
            memory: part_hash(memory)?,
            capabilities: part_hash(capabilities)?,
        })
    }
}

impl Snapshot {
    /// Canonical bytes and the id they hash to.
    pub fn encode(&self) -> Result<(Vec<u8>, SnapshotId), ContextError> {
        let bytes = to_canonical_bytes(self).map_err(|_| ContextError::Canonical)?;
        let id = SnapshotId::from(sha256(&bytes));
        Ok((bytes, id))
    }

    /// Parses stored bytes and verifies everything a retry relies on: the
    /// id is the bytes' hash, the bytes are canonical, the manifest matches
    /// every part, and the prompt matches its hash.
    ///
    /// The bytes are checked canonical member by member: the top level is
    /// rebuilt from the members' slices, and each member is decoded from
    /// its slice and encoded again (RFC 8785 encodes a member's value on its
    /// own, so this is the whole's canonical check). The manifest is checked
    /// by hashing those slices rather than encoding every part a second
    /// time.
    pub fn decode(bytes: &[u8], id: &SnapshotId) -> Result<Self, ContextError> {
        Self::decode_checked(Bytes::AtHand(bytes), id)
    }

    /// [`Snapshot::decode`] of bytes a store read and hashed to their id.
    pub fn decode_stored(stored: &SnapshotBytes) -> Result<Self, ContextError> {
        Self::decode_checked(Bytes::Stored(stored), stored.id())
    }

    fn decode_checked(bytes: Bytes<'_>, id: &SnapshotId) -> Result<Self, ContextError> {
        let (m, manifest) = checked_members(bytes, id)?;
        let snapshot = Snapshot {
            format: member(m.format, id)?,
            run_id: member(m.run_id, id)?,
            agent: member(m.agent, id)?,
            telegram_source: member(m.telegram_source, id)?,
            chat_id: member(m.chat_id, id)?,
            trigger: member(m.trigger, id)?,
            prompt: member(m.prompt, id)?,
            transcript: member(m.transcript, id)?,
            memory: member(m.memory, id)?,
            capabilities: member(m.capabilities, id)?,
            manifest,
        };
        if sha256(snapshot.prompt.text.as_bytes()) != snapshot.prompt.sha256 {
            return Err(invalid(id, "prompt hash"));
        }
        Ok(snapshot)
    }

    /// Loads a stored snapshot by id, reassembled from its content-addressed
    /// parts, and verifies it as [`Snapshot::decode`] does, except that the
    /// whole is hashed once, by the store ([`SnapshotBytes`]); a missing or
    /// altered part is refused.
    pub fn load(store: &dyn Read, id: &SnapshotId) -> Result<Self, ContextError> {
        Self::decode_checked(Bytes::Stored(&stored_bytes(store, id)?), id)
    }

    /// Whether `kind`'s tool is exposed.
    pub fn exposes(&self, kind: ProposalKind) -> bool {
        self.capabilities.exposes(kind)
    }

    /// The admitted correction target with this output id.
    pub fn correction_target(&self, output: &EventId) -> Option<&CorrectionTarget> {
        self.capabilities.correction_target(output)
    }

    /// `latest`: the most recent eligible assistant turn.
    pub fn latest_correction_target(&self) -> Option<&CorrectionTarget> {
        self.capabilities.correction_targets.last()
    }

    /// Whether `id` may be cited.
    pub fn admits_evidence(&self, id: &EventId) -> bool {
        self.capabilities.admits_evidence(id)
    }
}

impl Capabilities {
    /// Whether `kind`'s tool is exposed.
    pub fn exposes(&self, kind: ProposalKind) -> bool {
        self.tools.contains(&kind)
    }

    /// The admitted correction target with this output id.
    pub fn correction_target(&self, output: &EventId) -> Option<&CorrectionTarget> {
        self.correction_targets
            .iter()
            .find(|t| t.output_event_id == *output)
    }

    /// Whether `id` may be cited.
    pub fn admits_evidence(&self, id: &EventId) -> bool {
        self.evidence_ids.contains(id)
    }
}

/// What the authority chain reads of a stored snapshot
/// ([`SnapshotClaims::load`]): every member but the prompt, the transcript
/// and `memory.md`'s text, which the chain does not read and which are
/// bound by their manifest hashes instead of being decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotClaims {
    /// The run.
    pub run_id: RunId,
    /// The declaration.
    pub agent: AgentRef,
    /// The Telegram source the chat lives on.
    pub telegram_source: SourceName,
    /// The chat.
    pub chat_id: i64,
    /// The current owner message.
    pub trigger: UserTurn,
    /// What tools may target and cite.
    pub capabilities: Capabilities,
    /// Part hashes.
    pub manifest: Manifest,
}

impl SnapshotClaims {
    /// Loads and checks a stored snapshot as [`Snapshot::load`] does, except
    /// that the prompt, transcript and memory parts are checked by their
    /// slices' hashes against the manifest (which binds each to the
    /// canonical encoding it was built from) rather than decoded: the whole
    /// bytes still hash to the id, the top level and every decoded member
    /// are canonical.
    pub fn load(store: &dyn Read, id: &SnapshotId) -> Result<Self, ContextError> {
        Self::decode_checked(Bytes::Stored(&stored_bytes(store, id)?), id)
    }

    /// [`SnapshotClaims::load`] of bytes at hand.
    pub fn decode(bytes: &[u8], id: &SnapshotId) -> Result<Self, ContextError> {
        Self::decode_checked(Bytes::AtHand(bytes), id)
    }

    fn decode_checked(bytes: Bytes<'_>, id: &SnapshotId) -> Result<Self, ContextError> {
        let (m, manifest) = checked_members(bytes, id)?;
        let _format: SnapshotFormat = member(m.format, id)?;
        Ok(Self {
            run_id: member(m.run_id, id)?,
            agent: member(m.agent, id)?,
            telegram_source: member(m.telegram_source, id)?,
            chat_id: member(m.chat_id, id)?,
            trigger: member(m.trigger, id)?,
            capabilities: member(m.capabilities, id)?,
            manifest,
        })
    }
}

impl From<&Snapshot> for SnapshotClaims {
    fn from(s: &Snapshot) -> Self {
        Self {
            run_id: s.run_id.clone(),
            agent: s.agent.clone(),
            telegram_source: s.telegram_source.clone(),
            chat_id: s.chat_id,
            trigger: s.trigger.clone(),
            capabilities: s.capabilities.clone(),
            manifest: s.manifest.clone(),
        }
    }
}

/// The stored bytes of snapshot `id`; a part the store refuses is named.
fn stored_bytes(store: &dyn Read, id: &SnapshotId) -> Result<SnapshotBytes, ContextError> {
    match store.snapshot(id) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(ContextError::SnapshotMissing { id: id.clone() }),
        Err(StoreError::SnapshotHash { .. }) => Err(invalid(id, "hash")),
        Err(StoreError::SnapshotPart { fault, .. }) => Err(invalid(
            id,
            match fault {
                PartFault::Missing => "part missing",
                PartFault::Altered => "part altered",
                PartFault::Malformed => "part malformed",
                PartFault::TooLarge => "parts too large",
            },
        )),
        Err(e) => Err(e.into()),
    }
}
