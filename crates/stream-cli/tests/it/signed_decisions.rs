//! Signed decisions through the binary: `key init`, `init`'s enrolment, a
//! signed CLI decision, and decisions written straight into the store
//! without the authority of a listed key — refused by `proposal-project`
//! (exit 3), listed `unauthorized`, `memory.md` unchanged, the refusal of a
//! memory change recorded as `materialization.failed@1` `unauthorized`.

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use stream_core::Payload as _;
use stream_core::payload::{
    JudgmentRecorded, MaterializationFailed, MaterializationFailure, MemoryChangeMaterialized,
};
use stream_proposals::testing::Written;
use stream_store::{EventQuery, Read};

use crate::common::{Home, thestream};
use crate::memory_decisions::{Scene, WORLD_MEMORY, no_leak};

fn public_key_line(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("public key: "))
        .unwrap()
        .to_owned()
}

#[test]
fn key_init_writes_an_owner_only_key_once_and_init_enrolls_its_own() {
    let home = Home::init();
    // `init` wrote a key and listed it in the config it wrote.
    let key = home.path().join(".thestream/signing.key");
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
    let config = std::fs::read_to_string(home.config()).unwrap();
    let enrolled = format!("keys = [\"{}\"]", home.signing_key().key_id());
    assert!(config.contains(&enrolled), "{config}");
    // A second key is refused and the first left as it was.
    let before = std::fs::read(&key).unwrap();
    let again = home.run(&["key", "init"]);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert_eq!(std::fs::read(&key).unwrap(), before);
    assert!(again.stdout.is_empty());

    // Another machine: its own data dir, its own key.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("thestream.toml"), "data_dir = \"data\"\n").unwrap();
    let made = thestream(other.path(), &["key", "init"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let public = public_key_line(&made.stdout);
    let b64 = public.strip_prefix("ed25519:").unwrap();
    assert_eq!(b64.len(), 44, "{public}");
    let key = other.path().join("data/signing.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_ne!(public, home.signing_key().key_id().to_string());
    let twice = thestream(other.path(), &["key", "init"]);
    assert_eq!(twice.code, 2, "{}", twice.stderr);
    // A malformed key in the config is refused naming it.
    std::fs::write(
        other.path().join("thestream.toml"),
        "data_dir = \"data\"\n[authority]\nkeys = [\"ed25519:AAAA\"]\n",
    )
    .unwrap();
    let bad = thestream(other.path(), &["proposal-list"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("keys"), "{}", bad.stderr);
}

#[test]
fn a_signed_cli_decision_names_the_enrolled_key_and_materializes() {
    let s = Scene::new();
    let run = s.decide(&s.w.memory, &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_ne!(s.memory(), WORLD_MEMORY);
    let decisions =
        s.w.store
            .events(&EventQuery::of_type(
                "stream.thought.agent.proposal.decision",
            ))
            .unwrap();
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].event.version, 2);
    let payload: Value = serde_json::from_slice(&decisions[0].event.payload).unwrap();
    assert_eq!(
        payload["keyId"],
        s.home.signing_key().key_id().to_string().as_str()
    );
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);
}

#[test]
fn a_proposal_decision_without_a_key_is_refused_and_records_nothing() {
    let s = Scene::new();
    std::fs::remove_file(s.home.path().join(".thestream/signing.key")).unwrap();
    let run = s.decide(&s.w.memory, &["--accept"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("key init"), "{}", run.stderr);
    assert_eq!(s.memory(), WORLD_MEMORY);
}

fn listed_outcome(s: &Scene, all: bool) -> Vec<Value> {
    let mut args = vec!["proposal-list", "--json"];
    if all {
        args.push("--all");
    }
    let run = s.run(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

#[test]
fn unauthorized_memory_decisions_written_into_the_store_are_refused_everywhere() {
    for written in [Written::Unsigned, Written::OtherBytes, Written::ForeignKey] {
        let s = Scene::new();
        let decision =
            s.w.write_decision(&s.w.memory, written, &s.home.signing_key());
        for round in 0..2 {
            let run = s.run(&["proposal-project"]);
            assert_eq!(
                run.code, 3,
                "{written:?} round {round}\n{}\n{}",
                run.stdout, run.stderr
            );
            assert!(run.stderr.contains("not authorized"), "{}", run.stderr);
            no_leak(&run, "canary");
            assert_eq!(s.memory(), WORLD_MEMORY, "{written:?}");
        }
        // One outcome, recorded once: the failure `unauthorized`.
        assert_eq!(s.count::<MemoryChangeMaterialized>(), 0);
        let failed =
            s.w.store
                .events(&EventQuery::of_type(MaterializationFailed::TYPE))
                .unwrap();
        assert_eq!(failed.len(), 1, "{written:?}");
        let f: MaterializationFailed = failed[0].decode().unwrap();
        assert_eq!(f.reason, MaterializationFailure::Unauthorized);
        assert_eq!(f.decision_event_id, decision);
        // Listed without --all, with the outcome `unauthorized`.
        let listed = listed_outcome(&s, false);
        let view = listed
            .iter()
            .find(|v| v["id"] == s.w.memory.as_str())
            .unwrap();
        assert_eq!(view["outcome"], "unauthorized", "{written:?}");
        // A decision again from the CLI conflicts with the one recorded.
        let again = s.decide(&s.w.memory, &["--accept"]);
        assert_eq!(again.code, 3, "{}", again.stderr);
        assert_eq!(s.memory(), WORLD_MEMORY);
    }
}

#[test]
fn an_unauthorized_correction_gets_no_judgment_and_is_not_exported() {
    let s = Scene::new();
    s.w.write_decision(&s.w.correction, Written::ForeignKey, &s.home.signing_key());
    let run = s.run(&["proposal-project"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(s.count::<JudgmentRecorded>(), 0);
    let listed = listed_outcome(&s, false);
    let view = listed
        .iter()
        .find(|v| v["id"] == s.w.correction.as_str())
        .unwrap();
    assert_eq!(view["outcome"], "unauthorized");
}

#[test]
fn a_legacy_decision_with_its_judgment_still_exports_with_a_null_key_id() {
    let s = Scene::new();
    let judgment = s.w.decide_correction_legacy();
    let run = s.run(&["proposal-project"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = s.home.path().join("private.jsonl");
    let exported = s.run(&[
        "private-training-export",
        "--output",
        out.to_str().unwrap(),
        "--acknowledge-sensitive-private-training",
    ]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let provenance = &lines[0]["provenance"];
    assert_eq!(provenance["judgmentEventId"], judgment.as_str());
    assert_eq!(provenance["decisionKeyId"], Value::Null);
    let listed = listed_outcome(&s, true);
    let view = listed
        .iter()
        .find(|v| v["id"] == s.w.correction.as_str())
        .unwrap();
    assert_eq!(view["outcome"], "judgment-recorded");
}

#[test]
fn a_signed_correction_exports_its_key_id() {
    let s = Scene::new();
    let run = s.decide(&s.w.correction, &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = s.home.path().join("private.jsonl");
    let exported = s.run(&[
        "private-training-export",
        "--output",
        out.to_str().unwrap(),
        "--acknowledge-sensitive-private-training",
    ]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let line: Value = serde_json::from_str(
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        line["provenance"]["decisionKeyId"],
        s.home.signing_key().key_id().to_string().as_str()
    );
}
