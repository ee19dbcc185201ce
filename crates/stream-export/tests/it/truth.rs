//! Issue 43 item 5: training data that teaches the truth. A reply the
//! system wrote in the model's place (a proposal's acknowledgment, a
//! deterministic reply) is no SFT target and no DPO answer, and an earlier
//! one leaves the transcript with the owner message it answered, so no
//! example claims a call it does not show; no example holds an annotation.

use std::os::unix::fs::PermissionsExt;

use stream_core::payload::{MessageObservation, TextOrigin};
use stream_export::{
    Example, Exclusion, ExportError, ExportKind, preference_pairs, write, write_pairs,
};
use stream_proposals::testing::World;
use stream_testkit::canary::Canary;

use super::{ACK_REPLACEMENT, judged_world, selected};

/// The world's acknowledgment text, checked to be one.
fn ack_text(w: &World) -> String {
    let out: MessageObservation = serde_json::from_slice(&w.trigger_output.payload).unwrap();
    assert_eq!(out.origin, TextOrigin::Acknowledgment);
    out.text.as_str().to_owned()
}

fn turns(example: &Example) -> Vec<(&str, &str)> {
    example
        .messages
        .iter()
        .skip(1)
        .map(|m| (m.role, m.content.as_str()))
        .collect()
}

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn manifest(path: &std::path::Path) -> serde_json::Value {
    let name = format!("{}.manifest.json", path.display());
    serde_json::from_slice(&std::fs::read(name).unwrap()).unwrap()
}

#[test]
fn an_acknowledgment_is_no_target_and_leaves_no_claim_in_a_transcript() {
    let (w, _, owner) = judged_world();
    let ack = ack_text(&w);
    for (kind, earlier) in [
        (ExportKind::Private, "Paris."),
        (ExportKind::External, "Lyon."),
    ] {
        let selection = selected(&w.store, kind);
        assert_eq!(
            selection.excluded.get(&Exclusion::Acknowledgment),
            Some(&1),
            "{kind:?}"
        );
        for example in &selection.examples {
            for m in &example.messages {
                assert!(
                    m.content != ack && m.content != ACK_REPLACEMENT,
                    "{kind:?}: {m:?}"
                );
            }
            let text = serde_json::to_string(&example.messages).unwrap();
            assert!(!text.contains('⟨'), "{kind:?}: {text}");
        }
        // The later example's transcript had the acknowledgment turn: it
        // is left out with the owner message it answered, and the turns
        // still alternate.
        let later = selection
            .examples
            .iter()
            .find(|e| e.provenance.judgment_event_id.as_ref() == Some(&owner))
            .unwrap();
        assert_eq!(
            turns(later),
            [
                ("user", "What is the capital of France?"),
                ("assistant", earlier),
                ("user", "And the capital of Italy?"),
                ("assistant", "Rome."),
            ],
            "{kind:?}"
        );
        assert_eq!(
            selection.left_out_turns.get(&Exclusion::Acknowledgment),
            Some(&1),
            "{kind:?}"
        );
    }
}

#[test]
fn no_dpo_pair_answers_with_an_acknowledgment() {
    let (w, _, _) = judged_world();
    let ack = ack_text(&w);
    let selection = selected(&w.store, ExportKind::Private);
    let pairs = preference_pairs(&w.store, selection).unwrap();
    let answers: Vec<(&str, &str)> = pairs
        .pairs
        .iter()
        .map(|p| {
            (
                p.preferred_output[0].content.as_str(),
                p.non_preferred_output[0].content.as_str(),
            )
        })
        .collect();
    assert_eq!(answers, [("Paris.", "Lyon."), ("Rome.", "Milan.")]);
    for pair in &pairs.pairs {
        let text = serde_json::to_string(pair).unwrap();
        assert!(!text.contains(&ack) && !text.contains(ACK_REPLACEMENT));
        assert!(!text.contains('⟨'), "{text}");
    }
    assert_eq!(pairs.excluded.get(&Exclusion::Acknowledgment), Some(&1));
    assert_eq!(
        pairs.left_out_turns.get(&Exclusion::Acknowledgment),
        Some(&1)
    );
}

#[test]
fn the_manifest_says_what_was_left_out() {
    let (w, _, _) = judged_world();
    let dir = private_dir();
    let sft = dir.path().join("train.jsonl");
    let selection = selected(&w.store, ExportKind::Private);
    write(&sft, ExportKind::Private, &selection).unwrap();
    let private = manifest(&sft);
    insta::assert_json_snapshot!(private);

    let dpo = dir.path().join("pairs.jsonl");
    let pairs = preference_pairs(&w.store, selection).unwrap();
    write_pairs(&dpo, ExportKind::Private, &pairs).unwrap();
    let external = dir.path().join("external.jsonl");
    let selection = selected(&w.store, ExportKind::External);
    write(&external, ExportKind::External, &selection).unwrap();
    for path in [&sft, &dpo, &external] {
        let m = manifest(path);
        assert_eq!(m["excluded"]["acknowledgment"], 1, "{m}");
        assert_eq!(m["leftOutTurns"]["acknowledgment"], 1, "{m}");
        assert!(
            m["exampleContents"]
                .as_str()
                .unwrap()
                .contains("left out together with the owner message they answered"),
            "{m}"
        );
    }
}

/// A deterministic reply is treated as an acknowledgment is: the model did
/// not write it.
#[test]
fn a_deterministic_reply_is_no_target_and_leaves_the_transcript() {
    let mut w = World::new();
    let (output, receipt, root) = w.deterministic_turn("/help", "Fixed help text.");
    let out: MessageObservation = serde_json::from_slice(&output.payload).unwrap();
    assert_eq!(out.origin, TextOrigin::Deterministic);
    w.owner_correct(&output, &receipt, root.id(), "Better help.");
    let (output, receipt, root) = w.model_turn("And the capital of Italy?", "Milan.");
    let owner = w.owner_correct(&output, &receipt, root.id(), "Rome.");
    let selection = selected(&w.store, ExportKind::Private);
    assert_eq!(selection.excluded.get(&Exclusion::Deterministic), Some(&1));
    assert_eq!(
        selection.left_out_turns.get(&Exclusion::Deterministic),
        Some(&1)
    );
    let [example] = &selection.examples[..] else {
        panic!("{:?}", selection.examples)
    };
    assert_eq!(example.provenance.judgment_event_id.as_ref(), Some(&owner));
    assert_eq!(
        turns(example),
        [
            ("user", "What is the capital of France?"),
            ("assistant", "Lyon."),
            // The trigger's acknowledgment was never delivered.
            ("user", "Remember I like tea, and fix your last answer."),
            ("user", "And the capital of Italy?"),
            ("assistant", "Rome."),
        ]
    );
}

/// Reason codes are a closed set with stable wire codes.
#[test]
fn exclusion_codes_are_stable() {
    let codes: Vec<&str> = [
        Exclusion::NotQualityEligible,
        Exclusion::NotExternallyEligible,
        Exclusion::Superseded,
        Exclusion::Chain("snapshot"),
        Exclusion::NoPreference,
        Exclusion::Acknowledgment,
        Exclusion::Deterministic,
    ]
    .into_iter()
    .map(Exclusion::as_str)
    .collect();
    assert_eq!(
        codes,
        [
            "not-quality-eligible",
            "not-externally-eligible",
            "superseded",
            "snapshot",
            "no-preference",
            "acknowledgment",
            "deterministic",
        ]
    );
}

/// What is left out is counted by reason, never described by content: the
/// manifest, the counts and the errors carry no conversation text.
#[test]
fn what_was_left_out_carries_no_content() {
    let question = Canary::new("export-question");
    let answer = Canary::new("export-answer");
    let fix = Canary::new("export-fix");
    let ack_fix = Canary::new("export-ack-fix");
    let mut w = World::new();
    let receipt = w.deliver_trigger_reply();
    let (ack, root) = (w.trigger_output.clone(), w.trigger.id().clone());
    w.owner_correct(&ack, &receipt, &root, ack_fix.as_str());
    let (output, receipt, root) = w.model_turn(question.as_str(), answer.as_str());
    w.owner_correct(&output, &receipt, root.id(), fix.as_str());

    let mut selection = selected(&w.store, ExportKind::Private);
    let examples = serde_json::to_string(&selection.examples).unwrap();
    assert!(examples.contains(question.as_str()) && examples.contains(fix.as_str()));
    let dir = private_dir();
    let out = dir.path().join("train.jsonl");
    write(&out, ExportKind::Private, &selection).unwrap();
    let pairs = preference_pairs(&w.store, selected(&w.store, ExportKind::Private)).unwrap();
    let mut seen = vec![
        std::fs::read_to_string(format!("{}.manifest.json", out.display())).unwrap(),
        format!("{:?} {:?}", selection.excluded, selection.left_out_turns),
        format!("{:?} {:?}", pairs.excluded, pairs.left_out_turns),
    ];
    selection.examples[0].provenance.judgment_event_id = None;
    let err: ExportError = write(&out, ExportKind::Private, &selection).unwrap_err();
    seen.push(err.to_string());
    seen.push(format!("{err:?}"));
    for text in &seen {
        for canary in [&question, &answer, &fix, &ack_fix] {
            assert!(!text.contains(canary.as_str()), "{text}");
        }
    }
}
