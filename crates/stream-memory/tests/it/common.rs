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
