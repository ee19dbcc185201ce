//! `--format dpo`: preference pairs from the revalidated selection.

use stream_core::payload::Disposition;
use stream_export::{Exclusion, ExportKind, preference_pairs, write_pairs};

use super::selected;
use stream_proposals::testing::World;

#[test]
fn dpo_pair_golden_line() {
    let w = World::new();
    w.decide_correction(Disposition::Accept, None);
    let selection = selected(&w.store, ExportKind::Private);
    let pairs = preference_pairs(&w.store, selection).unwrap();
    assert_eq!(pairs.pairs.len(), 1);
    let pair = &pairs.pairs[0];
    assert_eq!(pair.preferred_output[0].content, "Paris.");
    assert_eq!(pair.non_preferred_output[0].content, "Lyon.");
    assert_eq!(pair.input.messages.last().unwrap().role, "user");
    assert_eq!(pair.provenance.missing(), None);
    let line = serde_json::to_string(pair).unwrap();
    // Proposals never enter an export: no proposal text, no tool name.
    assert!(!line.contains("canary-world-memory"));
    assert!(!line.contains("submit_correction"));
    insta::assert_snapshot!(line);
}

#[test]
fn a_replacement_equal_to_the_original_is_excluded_as_no_preference() {
    let mut w = World::new();
    let (output, receipt, root) = w.model_turn("And the capital of Italy?", "Rome.");
    w.owner_correct(&output, &receipt, root.id(), "Rome.");
    let selection = selected(&w.store, ExportKind::Private);
    assert_eq!(selection.examples.len(), 1, "sft keeps it");
    let pairs = preference_pairs(&w.store, selection).unwrap();
    assert!(pairs.pairs.is_empty());
    assert_eq!(pairs.excluded.get(&Exclusion::NoPreference), Some(&1));
    assert_eq!(Exclusion::NoPreference.as_str(), "no-preference");

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let out = dir.path().join("pairs.jsonl");
    write_pairs(&out, ExportKind::Private, &pairs).unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("pairs.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["exampleFormat"], "dpo");
    assert_eq!(manifest["excluded"]["no-preference"], 1);
}
