//! Helpers: a temporary context root and store.

use std::path::{Path, PathBuf};

use stream_core::SourceName;
use stream_store::SqliteStore;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: SqliteStore,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("context")).unwrap();
        let store = SqliteStore::open(&dir.path().join("store.db")).unwrap();
        Self { dir, store }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("context")
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    /// Sizes of the store file and its WAL: unchanged when nothing was written.
    pub fn store_files(&self) -> (u64, u64) {
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        (
            len(&self.dir.path().join("store.db")),
            len(&self.dir.path().join("store.db-wal")),
        )
    }
}

pub fn context_source() -> SourceName {
    SourceName::new(SourceName::CONTEXT).unwrap()
}

// --- materialization -------------------------------------------------------

use std::os::unix::fs::PermissionsExt;

use stream_core::payload::{
    Disposition, EvidenceIds, MaterializationFailed, MaterializationFailure,
    MemoryChangeMaterialized, MemoryOperation,
};
use stream_core::text::{BoundedText, Label};
use stream_core::{EventId, Payload, StoredEvent};
use stream_memory::materialize::{
    MaterializeConfig, MaterializeError, MaterializeOutcome, materialize,
};
use stream_proposals::decision::{DecisionRequest, record_decision};
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;
use stream_store::{EventQuery, Read};

/// The `memory.md` version `World` records.
pub const WORLD_MEMORY: &str = "---\nid: memory-1\n---\n# Memory\n";

/// A `World` (settled runs, proposals under stored snapshots) plus a real
/// context root and a data dir for the locks.
pub struct Mem {
    pub w: World,
    pub dir: tempfile::TempDir,
    pub config: MaterializeConfig,
}

impl Mem {
    /// The root's `memory.md` holds exactly the World's memory version.
    pub fn new() -> Self {
        let w = World::new();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("context");
        std::fs::create_dir(&root).unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
        let config = MaterializeConfig {
            root,
            source: context_source(),
            max_bytes: 262_144,
            lock_dir: data.join("locks"),
            trusted: stream_proposals::testing::trusted(),
        };
        let mem = Self { w, dir, config };
        mem.write_memory(WORLD_MEMORY.as_bytes());
        mem
    }

    /// The root's `memory.md` holds `text`, recorded by a scan (a new
    /// current version for proposals made from now on).
    pub fn with_memory(text: &str) -> Self {
        let mem = Self::new();
        mem.write_memory(text.as_bytes());
        mem.scan();
        mem
    }

    pub fn scan(&self) {
        stream_memory::scan(&self.w.store, &context_source(), &self.config.root).unwrap();
    }

    pub fn memory_path(&self) -> PathBuf {
        self.config.root.join("memory.md")
    }

    /// Writes `memory.md` by hand (mode 0644, as an editor would).
    pub fn write_memory(&self, bytes: &[u8]) {
        std::fs::write(self.memory_path(), bytes).unwrap();
        std::fs::set_permissions(self.memory_path(), std::fs::Permissions::from_mode(0o644))
            .unwrap();
    }

    pub fn memory(&self) -> Vec<u8> {
        std::fs::read(self.memory_path()).unwrap()
    }

    pub fn memory_text(&self) -> String {
        String::from_utf8(self.memory()).unwrap()
    }

    pub fn mode(&self) -> u32 {
        std::fs::metadata(self.memory_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// A new model run whose one proposal is this memory change, made under
    /// a snapshot of the current `memory.md` version.
    pub fn propose(&mut self, operation: MemoryOperation, text: &str) -> EventId {
        let trigger = self.w.base.message("Please remember this.");
        let (settlement, _) = self.w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation,
                text: BoundedText::new(text).unwrap(),
                reason: BoundedText::new("the owner asked").unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
        settlement.proposals()[0].id.clone()
    }

    pub fn decide(
        &self,
        proposal: &EventId,
        disposition: Disposition,
        replacement: Option<&str>,
    ) -> EventId {
        record_decision(
            &self.w.store,
            &DecisionRequest {
                proposal: proposal.clone(),
                disposition,
                replacement: replacement.map(str::to_owned),
                submission_id: None,
                actor: Label::new("owner").unwrap(),
                signer: stream_proposals::testing::signer(),
            },
        )
        .unwrap()
        .id()
        .clone()
    }

    pub fn run(&self, decision: &EventId) -> Result<MaterializeOutcome, MaterializeError> {
        materialize(&self.w.store, &self.config, decision)
    }

    /// Every materialization receipt and failure in the store.
    pub fn outcomes(&self) -> Vec<StoredEvent> {
        let mut all = self
            .w
            .store
            .events(&EventQuery::of_type(MemoryChangeMaterialized::TYPE))
            .unwrap();
        all.extend(
            self.w
                .store
                .events(&EventQuery::of_type(MaterializationFailed::TYPE))
                .unwrap(),
        );
        all
    }

    /// The failure reason recorded for `decision`, asserting it is the only
    /// outcome in the store.
    pub fn failure(&self, decision: &EventId) -> MaterializationFailure {
        let outcomes = self.outcomes();
        assert_eq!(outcomes.len(), 1, "exactly one outcome");
        let failed: MaterializationFailed = outcomes[0].decode().unwrap();
        assert_eq!(&failed.decision_event_id, decision);
        failed.reason
    }

    /// `file.changed@1` events: versions recorded by scans.
    pub fn file_events(&self) -> usize {
        self.w
            .store
            .events(&EventQuery::of_type(
                stream_core::payload::FileChanged::TYPE,
            ))
            .unwrap()
            .len()
    }
}

/// The outcome `proposal-list --all` shows for `proposal`.
pub fn listed_outcome(mem: &Mem, proposal: &EventId) -> Option<stream_proposals::review::Outcome> {
    stream_proposals::review::list(
        &mem.w.store,
        true,
        stream_proposals::review::Depth::Summary,
        &stream_proposals::testing::trusted(),
    )
    .unwrap()
    .into_iter()
    .find(|v| &v.id == proposal)
    .unwrap()
    .outcome
}
