//! Training exports: selection by eligibility with the provenance chain
//! revalidated, proposals excluded, and private destinations.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cloned_ref_to_slice_refs
)]

mod dpo;
mod truth;

use std::os::unix::fs::PermissionsExt;

use stream_core::EventId;
use stream_core::payload::Disposition;
use stream_export::{
    DestinationError, Exclusion, ExportError, ExportKind, Provenance, select, write,
};
use stream_proposals::testing::World;
use stream_store::Read;
use stream_testkit::canary::Canary;

/// The owner's replacement of the trigger's acknowledgment.
const ACK_REPLACEMENT: &str = "Saved. Anything else?";

/// A world with an accepted self-correction (of the earlier reply), the
/// trigger's acknowledgment delivered and `/correct`ed by the owner (no
/// example: the parent wrote it), and a later model reply the owner
/// `/correct`ed. Returns the self-correction's and the last judgment's ids.
/// The selection of `kind` under the World's trusted keys, no progress bar.
pub(crate) fn selected(store: &dyn Read, kind: ExportKind) -> stream_export::Selection {
    select(
        store,
        kind,
        &stream_proposals::testing::trusted(),
        &|_, _| {},
    )
    .unwrap()
}

fn judged_world() -> (World, EventId, EventId) {
    let mut w = World::new();
    let self_correction = w.decide_correction(Disposition::Accept, None);
    let receipt = w.deliver_trigger_reply();
    let output = w.trigger_output.clone();
    let root = w.trigger.id().clone();
    w.owner_correct(&output, &receipt, &root, ACK_REPLACEMENT);
    let (output, receipt, root) = w.model_turn("And the capital of Italy?", "Milan.");
    let owner = w.owner_correct(&output, &receipt, root.id(), "Rome.");
    (w, self_correction, owner)
}

fn judgment_ids(kind: ExportKind, w: &World) -> Vec<EventId> {
    selected(&w.store, kind)
        .examples
        .iter()
        .map(|e| e.provenance.judgment_event_id.clone().unwrap())
        .collect()
}

#[test]
fn private_export_includes_accepted_self_corrections_with_full_provenance() {
    let (w, self_correction, owner) = judged_world();
    let selection = selected(&w.store, ExportKind::Private);
    let ids: Vec<_> = selection
        .examples
        .iter()
        .map(|e| e.provenance.judgment_event_id.clone().unwrap())
        .collect();
    assert_eq!(ids, [self_correction, owner]);
    for example in &selection.examples {
        assert_eq!(example.provenance.missing(), None);
    }
    let example = &selection.examples[0];
    assert_eq!(
        example.provenance.output_event_id.as_ref(),
        Some(&w.earlier_output)
    );
    assert_eq!(
        example.provenance.delivery_receipt_event_id.as_ref(),
        Some(&w.earlier_receipt)
    );
    let last = example.messages.last().unwrap();
    assert_eq!((last.role, last.content.as_str()), ("assistant", "Paris."));
    assert_eq!(example.messages[0].role, "system");
}

#[test]
fn external_export_excludes_self_corrections() {
    let (w, _self_correction, owner) = judged_world();
    assert_eq!(judgment_ids(ExportKind::External, &w), [owner]);
    let selection = selected(&w.store, ExportKind::External);
    assert_eq!(
        selection.excluded.get(&Exclusion::NotExternallyEligible),
        Some(&1)
    );
}

/// Issue 12: the external example of the owner's `/correct` holds no
/// `memory.md` and no internal id annotation; the private example of the
/// same judgment keeps `memory.md` and, like every example, no annotation
/// either (issue 43: ids live in provenance).
#[test]
fn external_examples_carry_no_memory_and_no_internal_ids() {
    let (w, _, owner) = judged_world();
    let of = |kind| {
        selected(&w.store, kind)
            .examples
            .into_iter()
            .find(|e| e.provenance.judgment_event_id.as_ref() == Some(&owner))
            .unwrap()
    };
    let private = serde_json::to_string(&of(ExportKind::Private).messages).unwrap();
    let external = of(ExportKind::External);
    let text = serde_json::to_string(&external.messages).unwrap();
    let memory = "# Memory";
    assert!(private.contains(memory), "{private}");
    assert!(!text.contains(memory), "{text}");
    for messages in [&text, &private] {
        assert!(
            !messages.contains("⟨message") && !messages.contains("⟨reply"),
            "{messages}"
        );
        for id in [w.trigger.id(), &w.earlier_output, &w.earlier_receipt] {
            assert!(!messages.contains(id.as_str()), "{messages}");
        }
    }
    assert_eq!(external.messages.last().unwrap().content, "Rome.");
    assert_eq!(
        external.messages.len(),
        of(ExportKind::Private).messages.len()
    );
}

#[test]
fn proposals_never_enter_an_example() {
    let (w, _, _) = judged_world();
    let selection = selected(&w.store, ExportKind::Private);
    let text = serde_json::to_string(&selection.examples).unwrap();
    // The memory proposal's text and the tool names appear nowhere.
    assert!(!text.contains("canary-world-memory"));
    for tool in [
        "request_memory_change",
        "submit_correction",
        "propose_focus",
    ] {
        assert!(!text.contains(tool), "{tool}");
    }
    assert!(
        selection
            .examples
            .iter()
            .flat_map(|e| &e.messages)
            .all(|m| ["system", "user", "assistant"].contains(&m.role))
    );
}

#[test]
fn rejected_and_superseded_judgments_are_not_exported() {
    let w = World::new();
    w.decide_correction(Disposition::Reject, None);
    assert!(judgment_ids(ExportKind::Private, &w).is_empty());

    let (mut w, self_correction, _) = judged_world();
    // A later /correct of the same earlier reply supersedes the self-correction.
    let output = w.store.event(&w.earlier_output).unwrap().unwrap().event;
    let (receipt, root) = (w.earlier_receipt.clone(), output.root.clone().unwrap());
    let later = w.owner_correct(&output, &receipt, &root, "Paris, France.");
    let ids = judgment_ids(ExportKind::Private, &w);
    assert!(
        !ids.contains(&self_correction) && ids.contains(&later),
        "{ids:?}"
    );
}

#[test]
fn a_broken_chain_is_excluded_not_exported() {
    let (w, self_correction, _) = judged_world();
    let conn = rusqlite::Connection::open(&w.path).unwrap();
    // Remove the judged run's snapshot (its root part) from the durable
    // store, by hand: the schema's foreign keys do not stop a file edit.
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    let deleted = conn
        .execute(
            "DELETE FROM blobs WHERE sha256 = (SELECT root FROM snapshots WHERE id = \
             unhex((SELECT json_extract(payload, '$.contextSnapshotId') FROM events \
             WHERE type = (SELECT code FROM names WHERE name = 'stream.thought.agent.run.completed') \
             AND json_extract(payload, '$.outputEventId') = ?1)))",
            [w.earlier_output.as_str()],
        )
        .unwrap();
    assert_eq!(deleted, 1);
    let selection = selected(&w.store, ExportKind::Private);
    assert!(
        !selection
            .examples
            .iter()
            .any(|e| e.provenance.judgment_event_id.as_ref() == Some(&self_correction))
    );
    assert_eq!(
        selection.excluded.get(&Exclusion::Chain("snapshot")),
        Some(&1)
    );
}

#[test]
fn writer_rejects_an_example_missing_any_id_and_writes_nothing() {
    let (w, _, _) = judged_world();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("train.jsonl");
    let mut selection = selected(&w.store, ExportKind::Private);
    selection.examples[1].provenance.context_snapshot_id = None;
    let err = write(&out, ExportKind::Private, &selection).unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::IncompleteExample {
                index: 1,
                field: "contextSnapshotId"
            }
        ),
        "{err}"
    );
    assert!(!out.exists());
    let empty = Provenance::default();
    assert_eq!(empty.missing(), Some("judgmentEventId"));
}

#[test]
fn export_files_are_owner_only_atomic_and_golden() {
    let (w, _, _) = judged_world();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = dir.path().join("train.jsonl");
    let selection = selected(&w.store, ExportKind::Private);
    let report = write(&out, ExportKind::Private, &selection).unwrap();
    assert_eq!(report.examples, 2);
    for path in [&out, &report.manifest] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 2, "no temp files left: {leftovers:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    insta::assert_json_snapshot!(first);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report.manifest).unwrap()).unwrap();
    assert_eq!(manifest["examples"], 2);
    assert_eq!(manifest["kind"], "private-training-export");
    assert_eq!(manifest["sha256"], report.sha256);
}

#[test]
fn private_destinations_only() {
    let (w, _, _) = judged_world();
    let selection = selected(&w.store, ExportKind::Private);
    let refuse = |path: &std::path::Path| write(path, ExportKind::Private, &selection).unwrap_err();
    assert!(matches!(
        refuse(std::path::Path::new("-")),
        ExportError::Destination(DestinationError::Stdout)
    ));
    assert!(matches!(
        refuse(std::path::Path::new("/dev/stdout")),
        ExportError::Destination(DestinationError::Stdout)
    ));
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(matches!(
        refuse(&shared.path().join("x.jsonl")),
        ExportError::Destination(DestinationError::ParentShared { .. })
    ));
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = private.path().join("link.jsonl");
    std::os::unix::fs::symlink("/tmp/elsewhere.jsonl", &link).unwrap();
    assert!(matches!(
        refuse(&link),
        ExportError::Destination(DestinationError::NotRegular { .. })
    ));
    assert!(matches!(
        refuse(&private.path().join("missing-dir/x.jsonl")),
        ExportError::Destination(DestinationError::ParentNotDirectory { .. })
    ));
    // Errors name paths, never example content.
    let canary = Canary::new("export");
    assert!(
        !refuse(std::path::Path::new("-"))
            .to_string()
            .contains(canary.as_str())
    );
}
