//! proposal-list and the exports, through the real binary.

use serde_json::Value;
use stream_core::payload::Disposition;
use stream_proposals::testing::World;

use crate::common::Home;

/// A World in the home's store, whose config also lists the key the
/// World's decisions are signed with.
fn world(home: &Home) -> World {
    let config = std::fs::read_to_string(home.config()).unwrap();
    let key = stream_proposals::testing::signer().key_id();
    let enrolled = config.replacen("keys = [", &format!("keys = [\"{key}\", "), 1);
    std::fs::write(home.config(), enrolled).unwrap();
    World::at(&home.path().join(".thestream/store.db"))
}

#[test]
fn proposal_list_json_shows_pending_proposals_with_their_fields() {
    let home = Home::init();
    let w = world(&home);
    let run = home.run(&["proposal-list", "--json", "--show-sensitive"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list.len(), 3);
    let by_kind = |k: &str| list.iter().find(|v| v["kind"] == k).unwrap().clone();
    let memory = by_kind("memory-change");
    assert_eq!(memory["id"], w.memory.as_str());
    assert_eq!(
        (memory["state"].as_str(), memory["outcome"].is_null()),
        (Some("pending"), true)
    );
    assert_eq!(memory["operation"], "append");
    assert_eq!(memory["proposedText"], "canary-world-memory: likes tea");
    let correction = by_kind("self-correction");
    assert_eq!(correction["targetOutputEventId"], w.earlier_output.as_str());
    assert_eq!(correction["replacement"], "Paris.");
    assert!(by_kind("focus-declaration")["declaration"]["identity"].is_object());
}

#[test]
fn decided_proposals_leave_the_pending_list() {
    let home = Home::init();
    let w = world(&home);
    w.decide_correction(Disposition::Accept, None);
    let pending: Vec<Value> =
        serde_json::from_str(&home.run(&["proposal-list", "--json"]).stdout).unwrap();
    assert_eq!(pending.len(), 2);
    let all: Vec<Value> =
        serde_json::from_str(&home.run(&["proposal-list", "--all", "--json"]).stdout).unwrap();
    let correction = all.iter().find(|v| v["kind"] == "self-correction").unwrap();
    assert_eq!(
        (correction["state"].as_str(), correction["outcome"].as_str()),
        (Some("accepted"), Some("judgment-recorded"))
    );
}

#[test]
fn private_export_requires_acknowledgment_and_a_file() {
    let home = Home::init();
    let _w = world(&home);
    let out = home.path().join("private.jsonl");
    let out = out.to_str().unwrap();
    assert_eq!(
        home.run(&["private-training-export", "--output", out]).code,
        2
    );
    let run = home.run(&[
        "private-training-export",
        "--output",
        "-",
        "--acknowledge-sensitive-private-training",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("stdout"), "{}", run.stderr);
}

#[test]
fn exports_through_the_cli() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::init();
    let w = world(&home);
    w.decide_correction(Disposition::Accept, None);
    let out_dir = home.path().join("exports");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let private = out_dir.join("private.jsonl");
    let run = home.run(&[
        "private-training-export",
        "--output",
        private.to_str().unwrap(),
        "--acknowledge-sensitive-private-training",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("1 examples written"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("Paris."),
        "examples never go to stdout"
    );
    assert_eq!(
        std::fs::read_to_string(&private).unwrap().lines().count(),
        1
    );
    let external = out_dir.join("external.jsonl");
    let run = home.run(&["training-export", "--output", external.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("0 examples written"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("excluded 1: not-externally-eligible"),
        "{}",
        run.stdout
    );
}

/// Issue 43: the trigger's acknowledgment, delivered and `/correct`ed, is
/// no example and no DPO answer; the later example leaves it out; the CLI
/// says so by reason and prints no content.
#[test]
fn exports_leave_out_acknowledgments_and_say_so() {
    use std::os::unix::fs::PermissionsExt;
    let question = stream_testkit::canary::Canary::new("cli-export-question");
    let home = Home::init();
    let mut w = world(&home);
    let ack: stream_core::payload::MessageObservation =
        serde_json::from_slice(&w.trigger_output.payload).unwrap();
    let receipt = w.deliver_trigger_reply();
    let (output, root) = (w.trigger_output.clone(), w.trigger.id().clone());
    w.owner_correct(&output, &receipt, &root, "Saved. Anything else?");
    let (output, receipt, root) = w.model_turn(question.as_str(), "Milan.");
    w.owner_correct(&output, &receipt, root.id(), "Rome.");
    let out_dir = home.path().join("exports");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    for (file, format) in [("sft.jsonl", "sft"), ("dpo.jsonl", "dpo")] {
        let path = out_dir.join(file);
        let run = home.run(&[
            "private-training-export",
            "--output",
            path.to_str().unwrap(),
            "--acknowledge-sensitive-private-training",
            "--format",
            format,
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.starts_with("1 examples written"),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("excluded 1: acknowledgment")
                && run
                    .stdout
                    .contains("earlier turns left out 1: acknowledgment"),
            "{}",
            run.stdout
        );
        for printed in [&run.stdout, &run.stderr] {
            assert!(!printed.contains(question.as_str()), "{printed}");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(question.as_str()), "the example keeps it");
        for claim in [ack.text.as_str(), "Saved. Anything else?", "⟨"] {
            assert!(!text.contains(claim), "{claim}: {text}");
        }
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{}.manifest.json", path.display())).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["excluded"]["acknowledgment"], 1, "{manifest}");
        assert_eq!(manifest["leftOutTurns"]["acknowledgment"], 1, "{manifest}");
    }
}
