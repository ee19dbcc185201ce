//! `proposal-decision` and `proposal-project` through the real binary:
//! memory and correction decisions, exit codes, prefixes, privacy, and
//! memory materialization failures seen from outside.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use stream_core::payload::{
    Disposition, EvidenceIds, JudgmentRecorded, MaterializationFailed, MemoryChangeMaterialized,
    MemoryOperation, ProposalDecision,
};
use stream_core::text::{BoundedText, Label};
use stream_core::{EventId, Payload};
use stream_memory::lock::{LockEvidence, ProcState, boot_id, process_start};
use stream_memory::materialize::lock_name;
use stream_proposals::decision::{DecisionRequest, record_decision};
use stream_proposals::project::judgment_id;
use stream_proposals::settle::ValidatedProposal;
use stream_proposals::testing::World;
use stream_store::{EventQuery, Read};
use stream_testkit::canary::Canary;

use crate::common::{Home, Run};

/// The `memory.md` version `World` records.
pub(crate) const WORLD_MEMORY: &str = "---\nid: memory-1\n---\n# Memory\n";
/// What accepting the World's memory proposal writes.
const ACCEPTED: &str = "---\nid: memory-1\n---\n# Memory\n\ncanary-world-memory: likes tea\n";

/// An initialized home whose store holds a `World` and whose `memory.md`
/// holds the World's memory version.
pub(crate) struct Scene {
    pub(crate) home: Home,
    pub(crate) w: World,
}

impl Scene {
    pub(crate) fn new() -> Self {
        let home = Home::init();
        std::fs::create_dir_all(home.path().join(".thestream")).unwrap();
        let w = World::at(&home.path().join(".thestream/store.db"));
        let scene = Self { home, w };
        std::fs::write(scene.memory_path(), WORLD_MEMORY).unwrap();
        scene
    }

    pub(crate) fn memory_path(&self) -> PathBuf {
        self.home.path().join("context/memory.md")
    }

    pub(crate) fn memory(&self) -> String {
        std::fs::read_to_string(self.memory_path()).unwrap()
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        self.home.run(args)
    }

    pub(crate) fn decide(&self, proposal: &EventId, how: &[&str]) -> Run {
        let mut args = vec!["proposal-decision", "--proposal", proposal.as_str()];
        args.extend_from_slice(how);
        self.run(&args)
    }

    fn listed(&self, proposal: &EventId) -> Value {
        let run = self.run(&["proposal-list", "--all", "--json", "--show-sensitive"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let all: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
        all.into_iter()
            .find(|v| v["id"] == proposal.as_str())
            .unwrap()
    }

    pub(crate) fn count<P: Payload>(&self) -> usize {
        self.w
            .store
            .events(&EventQuery::of_type(P::TYPE))
            .unwrap()
            .len()
    }

    /// A new run whose one proposal is this memory change.
    pub(crate) fn propose(&mut self, operation: MemoryOperation, text: &str) -> EventId {
        let trigger = self.w.base.message("Please remember this.");
        let (settlement, _) = self.w.base.settle_run(&trigger, Some("Noted."), |s| {
            vec![ValidatedProposal::Memory {
                target: s.capabilities.memory_target.clone().unwrap(),
                operation,
                text: BoundedText::new(text).unwrap(),
                reason: BoundedText::new("asked").unwrap(),
                evidence: EvidenceIds::new(vec![s.trigger.event_id.clone()]).unwrap(),
            }]
        });
        settlement.proposals()[0].id.clone()
    }

    fn edit_file(&self, text: &str) -> PathBuf {
        let path = self.home.path().join("edit.txt");
        std::fs::write(&path, text).unwrap();
        path
    }
}

pub(crate) fn no_leak(run: &Run, canary: &str) {
    assert!(
        !run.stdout.contains(canary) && !run.stderr.contains(canary),
        "canary leaked:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn accepting_a_memory_proposal_materializes_it() {
    let s = Scene::new();
    let run = s.decide(&s.w.memory, &["--accept"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("recorded"), "{}", run.stdout);
    assert!(
        run.stdout.contains("memory.md materialized: receipt"),
        "{}",
        run.stdout
    );
    no_leak(&run, "canary-world-memory");
    assert_eq!(s.memory(), ACCEPTED);
    let mode = std::fs::metadata(s.memory_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);
    let listed = s.listed(&s.w.memory);
    assert_eq!(listed["state"], "accepted");
    assert_eq!(listed["outcome"], "materialized");
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);

    // An identical retry converges: exit 0, nothing new.
    let again = s.decide(&s.w.memory, &["--accept"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("already recorded"),
        "{}",
        again.stdout
    );
    assert!(
        again.stdout.contains("already materialized"),
        "{}",
        again.stdout
    );
    assert_eq!(s.memory(), ACCEPTED);
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);
}

#[test]
fn editing_a_memory_proposal_from_a_file_never_prints_the_text() {
    let s = Scene::new();
    let canary = Canary::new("edit-file");
    let file = s.edit_file(&format!("The owner says: {canary}\n"));
    let run = s.decide(&s.w.memory, &["--edit-file", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    no_leak(&run, canary.as_str());
    no_leak(&run, "canary-world-memory");
    assert_eq!(
        s.memory(),
        format!("{WORLD_MEMORY}\nThe owner says: {canary}\n")
    );
    let listed = s.listed(&s.w.memory);
    assert_eq!(
        (listed["state"].as_str(), listed["outcome"].as_str()),
        (Some("edited"), Some("materialized"))
    );
    // Nor through proposal-project, nor the default events listing.
    let project = s.run(&["proposal-project"]);
    assert_eq!(project.code, 0, "{}", project.stderr);
    no_leak(&project, canary.as_str());
    let events = s.run(&["events"]);
    no_leak(&events, canary.as_str());
}

#[test]
fn replace_document_through_the_binary() {
    let mut s = Scene::new();
    let text = "---\nid: memory-1\n---\n# Memory\n\n- likes tea\n";
    let proposal = s.propose(MemoryOperation::ReplaceDocument, text);
    let run = s.decide(&proposal, &["--accept"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(s.memory(), text);
    // An edit of a replace-document is the file's text (one trailing newline dropped).
    let mut s = Scene::new();
    let proposal = s.propose(MemoryOperation::ReplaceDocument, text);
    let file = s.edit_file("---\nid: memory-1\n---\n# Memory\n\n- likes coffee\n");
    let run = s.decide(&proposal, &["--edit-file", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        s.memory(),
        "---\nid: memory-1\n---\n# Memory\n\n- likes coffee"
    );
}

#[test]
fn rejecting_a_memory_proposal_changes_nothing() {
    let s = Scene::new();
    let run = s.decide(&s.w.memory, &["--reject"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("not changed"), "{}", run.stdout);
    assert_eq!(s.memory(), WORLD_MEMORY);
    let listed = s.listed(&s.w.memory);
    assert_eq!(listed["state"], "rejected");
    assert!(listed["outcome"].is_null());
}

#[test]
fn correction_decisions_through_the_binary() {
    // Accept: the judgment docs/design.md §14 specifies.
    let s = Scene::new();
    let run = s.decide(&s.w.correction, &["--accept", "--actor", "alice"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("judgment"), "{}", run.stdout);
    no_leak(&run, "Paris.");
    let listed = s.listed(&s.w.correction);
    assert_eq!(
        (listed["state"].as_str(), listed["outcome"].as_str()),
        (Some("accepted"), Some("judgment-recorded"))
    );
    let decision: EventId = listed["decisionEventId"].as_str().unwrap().parse().unwrap();
    let judgment: JudgmentRecorded =
        s.w.store
            .event(&judgment_id(&decision).unwrap())
            .unwrap()
            .unwrap()
            .decode()
            .unwrap();
    assert_eq!(judgment.replacement.text.as_str(), "Paris.");
    assert_eq!(judgment.actor.as_str(), "alice");
    assert!(judgment.quality_eligible && !judgment.external_export_eligible);

    // Edit: the file's text, never printed.
    let s = Scene::new();
    let canary = Canary::new("correction-edit");
    let file = s.edit_file(&format!("Paris, {canary}.\n"));
    let run = s.decide(&s.w.correction, &["--edit-file", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    no_leak(&run, canary.as_str());
    let listed = s.listed(&s.w.correction);
    let decision: EventId = listed["decisionEventId"].as_str().unwrap().parse().unwrap();
    let judgment: JudgmentRecorded =
        s.w.store
            .event(&judgment_id(&decision).unwrap())
            .unwrap()
            .unwrap()
            .decode()
            .unwrap();
    assert_eq!(
        judgment.replacement.text.as_str(),
        format!("Paris, {canary}.")
    );

    // Reject: no judgment.
    let s = Scene::new();
    let run = s.decide(&s.w.correction, &["--reject"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("no judgment"), "{}", run.stdout);
    let listed = s.listed(&s.w.correction);
    assert_eq!(listed["state"], "rejected");
    assert!(listed["outcome"].is_null());
    assert_eq!(s.count::<JudgmentRecorded>(), 0);
}

#[test]
fn a_different_second_decision_conflicts_and_an_identical_retry_converges() {
    let s = Scene::new();
    for proposal in [&s.w.memory, &s.w.correction] {
        assert_eq!(s.decide(proposal, &["--accept"]).code, 0);
        let other = s.decide(proposal, &["--reject"]);
        assert_eq!(other.code, 3, "{}\n{}", other.stdout, other.stderr);
        let other = s.decide(proposal, &["--accept", "--actor", "someone-else"]);
        assert_eq!(other.code, 3, "{}", other.stderr);
        let same = s.decide(proposal, &["--accept"]);
        assert_eq!(same.code, 0, "{}", same.stderr);
    }
    assert_eq!(s.count::<ProposalDecision>(), 2);
    assert_eq!(s.memory(), ACCEPTED);
}

/// "same-payload retries converge even when they race": identical decisions
/// started together all exit 0 and leave one decision and one outcome.
#[test]
fn racing_identical_decisions_all_exit_0_with_one_event() {
    let s = Scene::new();
    for proposal in [&s.w.memory, &s.w.correction] {
        let args = [
            "proposal-decision",
            "--proposal",
            proposal.as_str(),
            "--accept",
            "--actor",
            "alice",
            "--submission-id",
            "race-1",
        ];
        let children: Vec<_> = (0..3)
            .map(|_| {
                crate::common::command(s.home.path(), &args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let run: Run = child.wait_with_output().unwrap().into();
            assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        }
    }
    assert_eq!(s.count::<ProposalDecision>(), 2);
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);
    assert_eq!(s.count::<MaterializationFailed>(), 0);
    assert_eq!(s.count::<JudgmentRecorded>(), 1);
    assert_eq!(s.memory(), ACCEPTED);
}

#[test]
fn focus_proposals_cannot_be_decided() {
    let s = Scene::new();
    for how in [&["--accept"][..], &["--reject"][..]] {
        let run = s.decide(&s.w.focus, how);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("focus"), "{}", run.stderr);
    }
    assert_eq!(s.count::<ProposalDecision>(), 0);
}

#[test]
fn usage_errors_exit_2() {
    let s = Scene::new();
    let id = s.w.memory.as_str();
    for args in [
        &["proposal-decision", "--proposal", id][..],
        &[
            "proposal-decision",
            "--proposal",
            id,
            "--accept",
            "--reject",
        ][..],
        &[
            "proposal-decision",
            "--proposal",
            id,
            "--accept",
            "--edit-file",
            "x",
        ][..],
        &[
            "proposal-decision",
            "--proposal",
            id,
            "--edit-file",
            "/no/such/file",
        ][..],
    ] {
        let run = s.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
    // Edit text out of the proposal's bounds is refused, unprinted.
    let canary = Canary::new("too-long");
    let file = s.edit_file(&format!("{canary}{}", "x".repeat(4096)));
    let run = s.decide(&s.w.correction, &["--edit-file", file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    no_leak(&run, canary.as_str());
    assert_eq!(s.count::<ProposalDecision>(), 0);
}

#[test]
fn proposal_ids_may_be_unique_prefixes_of_at_least_12_hex_digits() {
    let s = Scene::new();
    let id = s.w.correction.as_str();
    assert_eq!(
        s.run(&["proposal-decision", "--proposal", &id[..11], "--accept"])
            .code,
        2
    );
    assert_eq!(
        s.run(&[
            "proposal-decision",
            "--proposal",
            "zzzzzzzzzzzz",
            "--accept"
        ])
        .code,
        2
    );
    assert_eq!(
        s.run(&[
            "proposal-decision",
            "--proposal",
            "000000000000",
            "--accept"
        ])
        .code,
        2
    );
    // Two proposal rows sharing a 12-digit prefix (copied in the SQLite file).
    let conn = rusqlite::Connection::open(&s.w.path).unwrap();
    conn.execute("INSERT INTO names (name) VALUES ('agent:copies')", [])
        .unwrap();
    for (seq, suffix) in [(1, "1"), (2, "2")] {
        conn.execute(
            "INSERT INTO events (id, source, seq, type, version, authorship, sensitive, root, parent, payload, payload_sha256, recorded_at, text_at, text_sha) \
             SELECT unhex(?1), (SELECT code FROM names WHERE name = 'agent:copies'), ?2, type, version, authorship, sensitive, root, parent, payload, payload_sha256, recorded_at, text_at, text_sha FROM events WHERE id = unhex(?3)",
            rusqlite::params![format!("abcdefabcdef{}", suffix.repeat(52)), seq, s.w.memory.as_str()],
        )
        .unwrap();
    }
    let run = s.run(&[
        "proposal-decision",
        "--proposal",
        "abcdefabcdef",
        "--accept",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("2 proposals"), "{}", run.stderr);
    // A unique 12-digit prefix works, in upper case too.
    let run = s.run(&[
        "proposal-decision",
        "--proposal",
        &id[..12].to_ascii_uppercase(),
        "--accept",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("judgment"), "{}", run.stdout);
}

/// Failures seen from outside: the exit code by reason, the reason printed,
/// `memory.md` untouched, `materialization-failed` listed.
#[test]
fn memory_failures_exit_by_reason_and_leave_memory_md_unchanged() {
    struct Row {
        name: &'static str,
        reason: &'static str,
        code: i32,
        setup: fn(&mut Scene) -> EventId,
    }
    let rows = [
        Row {
            name: "hand edit since the proposal",
            reason: "stale-base",
            code: 3,
            setup: |s| {
                std::fs::write(s.memory_path(), format!("{WORLD_MEMORY}by hand\n")).unwrap();
                s.w.memory.clone()
            },
        },
        Row {
            name: "memory.md is a symlink",
            reason: "symlink",
            code: 2,
            setup: |s| {
                let outside = s.home.path().join("outside.md");
                std::fs::rename(s.memory_path(), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, s.memory_path()).unwrap();
                s.w.memory.clone()
            },
        },
        Row {
            name: "replace-document changes the frontmatter id",
            reason: "frontmatter",
            code: 2,
            setup: |s| {
                s.propose(
                    MemoryOperation::ReplaceDocument,
                    "---\nid: somebody-else\n---\n",
                )
            },
        },
        Row {
            name: "over max_memory_bytes",
            reason: "size",
            code: 2,
            setup: |s| {
                let config = s.home.config();
                let text = std::fs::read_to_string(&config)
                    .unwrap()
                    .replace("max_memory_bytes = 262144", "max_memory_bytes = 40");
                std::fs::write(&config, text).unwrap();
                s.w.memory.clone()
            },
        },
    ];
    for row in rows {
        let mut s = Scene::new();
        let proposal = (row.setup)(&mut s);
        let before = std::fs::read(s.memory_path()).unwrap();
        let run = s.decide(&proposal, &["--accept"]);
        assert_eq!(
            run.code, row.code,
            "{}: {}\n{}",
            row.name, run.stdout, run.stderr
        );
        assert!(
            run.stdout.contains(&format!("failed: {}", row.reason)),
            "{}: {}",
            row.name,
            run.stdout
        );
        assert_eq!(
            std::fs::read(s.memory_path()).unwrap(),
            before,
            "{}",
            row.name
        );
        assert_eq!(
            s.listed(&proposal)["outcome"],
            "materialization-failed",
            "{}",
            row.name
        );
        let failed: Vec<MaterializationFailed> =
            s.w.store
                .events(&EventQuery::of_type(MaterializationFailed::TYPE))
                .unwrap()
                .iter()
                .map(|e| e.decode().unwrap())
                .collect();
        assert_eq!(failed.len(), 1, "{}", row.name);
        assert_eq!(failed[0].reason.as_str(), row.reason, "{}", row.name);
        // The same command again reports the same recorded outcome.
        let again = s.decide(&proposal, &["--accept"]);
        assert_eq!(again.code, row.code, "{}", row.name);
        // proposal-project counts an earlier failure as settled.
        assert_eq!(s.run(&["proposal-project"]).code, 0, "{}", row.name);
    }
}

/// A write that the operating system refuses (a file size limit on the
/// process) is recorded as `write`, and `memory.md` is untouched.
#[test]
fn a_refused_write_is_recorded_as_write() {
    let mut s = Scene::new();
    // 32,768 four-byte characters (the most a proposal holds): 128 KiB,
    // over the 96 KiB limit below, which leaves the store's own writes (a
    // WAL of up to 24 pages) room.
    let big = "\u{1D11E}".repeat(32_768);
    let proposal = s.propose(MemoryOperation::Append, &big);
    // Start the WAL from zero so the store's own writes stay under the limit.
    rusqlite::Connection::open(&s.w.path)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_thestream"));
    cmd.args([
        "proposal-decision",
        "--proposal",
        proposal.as_str(),
        "--accept",
    ])
    .current_dir(s.home.path())
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 96 * 1024,
                rlim_max: 96 * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let run: Run = cmd.output().unwrap().into();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("failed: write"), "{}", run.stdout);
    assert_eq!(s.memory(), WORLD_MEMORY);
    assert_eq!(s.listed(&proposal)["outcome"], "materialization-failed");
    // No temporary file is left in the root.
    let names: Vec<String> = std::fs::read_dir(s.home.path().join("context"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["memory.md"]);
}

fn record(s: &Scene, proposal: &EventId, disposition: Disposition) -> EventId {
    record_decision(
        &s.w.store,
        &DecisionRequest {
            proposal: proposal.clone(),
            disposition,
            replacement: None,
            submission_id: None,
            actor: Label::new("owner").unwrap(),
            signer: s.home.signing_key(),
        },
    )
    .unwrap()
    .id()
    .clone()
}

/// Decisions appended but never projected (the process died in between)
/// are finished by `proposal-project`, idempotently.
#[test]
fn proposal_project_finishes_decisions_left_unprojected() {
    let s = Scene::new();
    record(&s, &s.w.memory, Disposition::Accept);
    record(&s, &s.w.correction, Disposition::Accept);
    assert_eq!(s.memory(), WORLD_MEMORY);
    let run = s.run(&["proposal-project"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("2 settled"), "{}", run.stdout);
    no_leak(&run, "canary-world-memory");
    assert_eq!(s.memory(), ACCEPTED);
    assert_eq!(s.listed(&s.w.memory)["outcome"], "materialized");
    assert_eq!(s.listed(&s.w.correction)["outcome"], "judgment-recorded");
    let again = s.run(&["proposal-project"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("already materialized"),
        "{}",
        again.stdout
    );
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 1);
    assert_eq!(s.count::<JudgmentRecorded>(), 1);
}

/// A decision whose authorship was rewritten in the SQLite file is never
/// projected and gets no receipt of any kind.
#[test]
fn a_forged_decision_is_never_projected() {
    let s = Scene::new();
    let decision = record(&s, &s.w.memory, Disposition::Accept);
    rusqlite::Connection::open(&s.w.path)
        .unwrap()
        .execute(
            "UPDATE events SET authorship = 'agent' WHERE id = unhex(?1)",
            [decision.as_str()],
        )
        .unwrap();
    let run = s.run(&["proposal-project"]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("1 not projected"), "{}", run.stdout);
    assert_eq!(s.count::<MemoryChangeMaterialized>(), 0);
    assert_eq!(s.count::<MaterializationFailed>(), 0);
    assert_eq!(s.memory(), WORLD_MEMORY);
}

/// A root lock held by a live process: exit 3, nothing recorded; once the
/// owner is gone, `proposal-project` finishes the decision.
#[test]
fn a_live_lock_owner_exits_3_and_proposal_project_finishes_later() {
    let s = Scene::new();
    let mut owner = Command::new("sleep").arg("30").spawn().unwrap();
    let ProcState::Running { start_time } = process_start(owner.id()).unwrap() else {
        panic!("sleep is not running");
    };
    let evidence = LockEvidence {
        format: 1,
        boot_id: boot_id().unwrap(),
        pid: owner.id(),
        start_time,
        token: "0123456789abcdef0123456789abcdef".into(),
    };
    let locks = s.home.path().join(".thestream/locks");
    std::fs::create_dir(&locks).unwrap();
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o700)).unwrap();
    let lock = locks.join(lock_name(&s.home.path().join("context")));
    std::fs::write(&lock, evidence.encode()).unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();

    let run = s.decide(&s.w.memory, &["--accept"]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("locked"), "{}", run.stderr);
    assert_eq!(s.memory(), WORLD_MEMORY);
    assert_eq!(s.listed(&s.w.memory)["outcome"], Value::Null);
    assert_eq!(s.run(&["proposal-project"]).code, 3);

    owner.kill().unwrap();
    owner.wait().unwrap();
    let run = s.run(&["proposal-project"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(s.memory(), ACCEPTED);
    assert_eq!(s.listed(&s.w.memory)["outcome"], "materialized");
    assert!(!lock.exists());
}
