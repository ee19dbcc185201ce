//! The snapshot document: canonical bytes, a manifest of part hashes, and
//! its id (SHA-256 of the bytes). A retry loads these bytes; it never rebuilds.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use stream_core::canon::{canonical_sha256, sha256, to_canonical_bytes};
use stream_core::payload::{CommandRef, CorrectionTarget, MemoryTarget, ProposalKind};
use stream_core::text::Label;
use stream_core::{EventId, Fingerprint, RunId, Sha256Hex, SnapshotId, SourceName, string_literal};
use stream_store::{PartFault, Read, StoreError};

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

/// A snapshot's members as the raw slices of its bytes, for [`Snapshot::decode`]
/// to hash the parts of bytes it has checked canonical (the other members
/// are skipped; the typed parse holds them to the schema).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Members<'a> {
    #[serde(borrow)]
    agent: &'a RawValue,
    #[serde(borrow)]
    trigger: &'a RawValue,
    #[serde(borrow)]
    prompt: &'a RawValue,
    #[serde(borrow)]
    transcript: &'a RawValue,
    #[serde(borrow)]
    memory: &'a RawValue,
    #[serde(borrow)]
    capabilities: &'a RawValue,
}

impl Members<'_> {
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

    /// Parses stored bytes and verifies everything a retry or the authority
    /// chain relies on: the id is the bytes' hash, the bytes are canonical,
    /// the manifest matches every part, and the prompt matches its hash.
    ///
    /// Once the bytes are known canonical, each part's canonical encoding
    /// is exactly its member's slice of them (RFC 8785 encodes a member's
    /// value on its own), so the manifest is checked by hashing those
    /// slices rather than encoding every part a second time.
    pub fn decode(bytes: &[u8], id: &SnapshotId) -> Result<Self, ContextError> {
        let invalid = |why| ContextError::SnapshotInvalid {
            id: id.clone(),
            why,
        };
        if sha256(bytes).as_str() != id.as_str() {
            return Err(invalid("hash"));
        }
        let snapshot: Snapshot = serde_json::from_slice(bytes).map_err(|_| invalid("schema"))?;
        let canonical = to_canonical_bytes(&snapshot).map_err(|_| ContextError::Canonical)?;
        if canonical != bytes {
            return Err(invalid("not canonical"));
        }
        let members: Members<'_> = serde_json::from_slice(bytes).map_err(|_| invalid("schema"))?;
        if members.manifest() != snapshot.manifest {
            return Err(invalid("manifest"));
        }
        if sha256(snapshot.prompt.text.as_bytes()) != snapshot.prompt.sha256 {
            return Err(invalid("prompt hash"));
        }
        Ok(snapshot)
    }

    /// Loads a stored snapshot by id, reassembled from its content-addressed
    /// parts, and verifies it; a missing or altered part is refused.
    pub fn load(store: &dyn Read, id: &SnapshotId) -> Result<Self, ContextError> {
        let invalid = |why| ContextError::SnapshotInvalid {
            id: id.clone(),
            why,
        };
        let bytes = match store.snapshot(id) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(ContextError::SnapshotMissing { id: id.clone() }),
            Err(StoreError::SnapshotPart { fault, .. }) => {
                return Err(invalid(match fault {
                    PartFault::Missing => "part missing",
                    PartFault::Altered => "part altered",
                    PartFault::Malformed => "part malformed",
                    PartFault::TooLarge => "parts too large",
                }));
            }
            Err(e) => return Err(e.into()),
        };
        Self::decode(&bytes, id)
    }

    /// Whether `kind`'s tool is exposed.
    pub fn exposes(&self, kind: ProposalKind) -> bool {
        self.capabilities.tools.contains(&kind)
    }

    /// The admitted correction target with this output id.
    pub fn correction_target(&self, output: &EventId) -> Option<&CorrectionTarget> {
        self.capabilities
            .correction_targets
            .iter()
            .find(|t| t.output_event_id == *output)
    }

    /// `latest`: the most recent eligible assistant turn.
    pub fn latest_correction_target(&self) -> Option<&CorrectionTarget> {
        self.capabilities.correction_targets.last()
    }

    /// Whether `id` may be cited.
    pub fn admits_evidence(&self, id: &EventId) -> bool {
        self.capabilities.evidence_ids.contains(id)
    }
}
