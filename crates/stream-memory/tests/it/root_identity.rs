//! One store, one context root: the identity of the root (its
//! `memory.md`'s frontmatter `id`) is recorded with the first receipt, and
//! a config pointing at another root is refused before anything is
//! written to it.

use serde_json::json;
use stream_core::SourceName;
use stream_core::ids::derive_document_id;
use stream_core::payload::{Disposition, MemoryOperation};
use stream_memory::materialize::{MaterializeError, MaterializeOutcome, ROOT_IDENTITY_CONTROL};
use stream_store::Read;

use crate::common::Mem;

const OTHER: &str = "---\nid: memory-2\n---\n# Another bot\n";

#[test]
fn a_second_root_is_refused_naming_both_ids_and_the_first_still_works() {
    let mut mem = Mem::new();
    let first = mem.decide(&mem.w.memory.clone(), Disposition::Accept, None);
    assert!(matches!(
        mem.run(&first).unwrap(),
        MaterializeOutcome::Materialized { .. }
    ));
    assert_eq!(
        mem.w.store.control(ROOT_IDENTITY_CONTROL).unwrap(),
        Some(json!({ "memoryId": "memory-1" }))
    );

    // A second config: the same store, another root.
    let root_a = mem.config.root.clone();
    let root_b = mem.dir.path().join("context-b");
    std::fs::create_dir(&root_b).unwrap();
    std::fs::write(root_b.join("memory.md"), OTHER).unwrap();
    mem.config.root = root_b.clone();
    mem.scan();
    let proposal = mem.propose(MemoryOperation::Append, "canary-root-b: likes coffee");
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    let outcomes = mem.outcomes().len();
    let a_before = std::fs::read(root_a.join("memory.md")).unwrap();
    let err = mem.run(&decision).unwrap_err();
    let shown = err.to_string();
    assert!(
        matches!(&err, MaterializeError::RootMismatch { recorded, configured }
            if recorded == "memory-1" && configured == "memory-2"),
        "{err:?}"
    );
    assert!(
        shown.contains("memory-1") && shown.contains("memory-2"),
        "{shown}"
    );
    assert!(
        !shown.contains("canary") && !shown.contains("context-b"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(root_b.join("memory.md")).unwrap(),
        OTHER
    );
    assert_eq!(std::fs::read(root_a.join("memory.md")).unwrap(), a_before);
    assert_eq!(
        std::fs::read_dir(&root_b).unwrap().count(),
        1,
        "no temporary left"
    );
    assert_eq!(mem.outcomes().len(), outcomes, "nothing recorded");

    // Edited by hand since: still this refusal, not a `stale-base` outcome,
    // and the store's pointer is not moved to the edit.
    let doc = derive_document_id(SourceName::CONTEXT, "memory.md").unwrap();
    let current = || mem.w.store.document(&doc).unwrap().unwrap().current_version;
    let pointer = current();
    std::fs::write(root_b.join("memory.md"), format!("{OTHER}by hand\n")).unwrap();
    assert!(matches!(
        mem.run(&decision),
        Err(MaterializeError::RootMismatch { .. })
    ));
    assert_eq!(current(), pointer);
    assert_eq!(mem.outcomes().len(), outcomes, "nothing recorded");

    // The first root again: its next decision materializes.
    mem.config.root = root_a;
    mem.scan();
    let proposal = mem.propose(MemoryOperation::Append, "likes scones");
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    assert!(matches!(
        mem.run(&decision).unwrap(),
        MaterializeOutcome::Materialized { .. }
    ));
    assert!(mem.memory_text().ends_with("\n\nlikes scones\n"));
}
