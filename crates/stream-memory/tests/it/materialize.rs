//! The memory materializer against a real SQLite store, real settled runs
//! and a real context root.

use std::os::unix::fs::PermissionsExt;

use stream_core::canon::sha256;
use stream_core::ids::derive_version_id;
use stream_core::payload::{
    Disposition, MaterializationFailed, MaterializationFailure, MemoryChangeMaterialized,
    MemoryOperation,
};
use stream_core::{Authorship, EventId, Payload, SourceName};
use stream_memory::lock::{LockError, LockEvidence};
use stream_memory::materialize::{
    MaterializeError, MaterializeOutcome, Recorded, compose, lock_name,
};
use stream_proposals::project::memory_outcome_id;
use stream_proposals::review::Outcome;
use stream_store::faulty::FaultyStore;
use stream_store::{Read, SqliteStore};
use stream_testkit::canary::Canary;

use crate::common::{Mem, WORLD_MEMORY, listed_outcome};

/// The receipt of a materialized outcome, checked against the store: the
/// envelope, the pointer, the new version and its file event.
fn receipt(mem: &Mem, decision: &EventId, outcome: MaterializeOutcome) -> MemoryChangeMaterialized {
    let MaterializeOutcome::Materialized {
        receipt, payload, ..
    } = outcome
    else {
        panic!("not materialized: {outcome:?}");
    };
    let store = &mem.w.store;
    assert_eq!(receipt, memory_outcome_id(decision).unwrap());
    let event = store.event(&receipt).unwrap().unwrap();
    let decision_event = store.event(decision).unwrap().unwrap();
    let proposal_event = store.event(&payload.proposal_event_id).unwrap().unwrap();
    assert_eq!(event.event.source.as_str(), SourceName::PROPOSALS);
    assert_eq!(event.event.authorship, Authorship::System);
    assert!(event.event.sensitive);
    assert_eq!(event.event.parent.as_ref(), Some(decision));
    assert_eq!(event.event.root, proposal_event.event.root);
    assert_eq!(
        decision_event.event.parent.as_ref(),
        Some(proposal_event.id())
    );
    let payload = *payload;
    assert_eq!(event.decode::<MemoryChangeMaterialized>().unwrap(), payload);

    let bytes = mem.memory();
    assert_eq!(payload.new_sha256, sha256(&bytes));
    assert_eq!(payload.byte_count, bytes.len() as u64);
    let doc = store.document(&payload.document_id).unwrap().unwrap();
    assert_eq!(doc.current_version.as_ref(), Some(&payload.new_version_id));
    let version = store.version(&payload.new_version_id).unwrap().unwrap();
    assert_eq!(
        version.previous_version.as_ref(),
        Some(&payload.base_version_id)
    );
    assert_eq!(
        payload.new_version_id,
        derive_version_id(
            &payload.document_id,
            &payload.new_sha256,
            Some(&payload.base_version_id)
        )
        .unwrap()
    );
    assert!(store.event(&payload.file_event_id).unwrap().is_some());
    assert_eq!(mem.mode(), 0o600, "memory.md is owner-only");
    payload
}

#[test]
fn accepted_append_writes_the_golden_bytes_and_a_verified_receipt() {
    let mem = Mem::new();
    let proposal = mem.w.memory.clone();
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    let outcome = mem.run(&decision).unwrap();
    assert!(matches!(
        outcome,
        MaterializeOutcome::Materialized {
            recorded: Recorded::Now,
            ..
        }
    ));
    let payload = receipt(&mem, &decision, outcome);
    assert_eq!(payload.base_sha256, sha256(WORLD_MEMORY.as_bytes()));
    insta::assert_debug_snapshot!("accepted_append", mem.memory_text());
    assert_eq!(listed_outcome(&mem, &proposal), Some(Outcome::Materialized));

    // Idempotent: the same outcome, nothing new written.
    let again = mem.run(&decision).unwrap();
    assert!(matches!(
        &again,
        MaterializeOutcome::Materialized { receipt, recorded: Recorded::Already, .. }
            if *receipt == memory_outcome_id(&decision).unwrap()
    ));
    assert_eq!(mem.outcomes().len(), 1);
    assert_eq!(mem.file_events(), 1);
}

#[test]
fn edited_append_uses_the_operators_text() {
    let mem = Mem::new();
    let canary = Canary::new("edit");
    let text = format!("Edited by the owner: {canary}\r\nsecond line\n");
    let decision = mem.decide(&mem.w.memory, Disposition::Edit, Some(&text));
    let outcome = mem.run(&decision).unwrap();
    receipt(&mem, &decision, outcome);
    let expected = format!("{WORLD_MEMORY}\nEdited by the owner: {canary}\nsecond line\n");
    assert_eq!(mem.memory_text(), expected);
    insta::assert_debug_snapshot!(
        "edited_append",
        mem.memory_text().replace(canary.as_str(), "[canary]")
    );
}

#[test]
fn accepted_replace_document_writes_the_text_exactly() {
    let mut mem = Mem::new();
    let text = "---\nid: memory-1\ntitle: Memory\n---\n# Memory\n\n- likes tea\n- lives in Paris\n";
    let proposal = mem.propose(MemoryOperation::ReplaceDocument, text);
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    let outcome = mem.run(&decision).unwrap();
    receipt(&mem, &decision, outcome);
    insta::assert_debug_snapshot!("accepted_replace_document", mem.memory_text());
    assert_eq!(mem.memory(), text.as_bytes());
}

#[test]
fn edited_replace_document_writes_the_operators_text_exactly() {
    let mut mem = Mem::new();
    let proposal = mem.propose(
        MemoryOperation::ReplaceDocument,
        "---\nid: memory-1\n---\nproposed\n",
    );
    let edit = "---\nid: memory-1\n---\n# Memory\n\nThe owner's own words.\n";
    let decision = mem.decide(&proposal, Disposition::Edit, Some(edit));
    let outcome = mem.run(&decision).unwrap();
    receipt(&mem, &decision, outcome);
    insta::assert_debug_snapshot!("edited_replace_document", mem.memory_text());
}

#[test]
fn a_crlf_base_keeps_its_line_endings_after_append() {
    let mut mem = Mem::with_memory("---\r\nid: memory-1\r\n---\r\n# Memory\r\nold line");
    let proposal = mem.propose(MemoryOperation::Append, "new line\r\n");
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    let outcome = mem.run(&decision).unwrap();
    receipt(&mem, &decision, outcome);
    assert_eq!(
        mem.memory(),
        b"---\r\nid: memory-1\r\n---\r\n# Memory\r\nold line\r\n\r\nnew line\r\n"
    );
}

#[test]
fn rejection_materializes_nothing() {
    let mem = Mem::new();
    let decision = mem.decide(&mem.w.memory, Disposition::Reject, None);
    assert_eq!(mem.run(&decision).unwrap(), MaterializeOutcome::Rejected);
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    assert!(mem.outcomes().is_empty());
    assert_eq!(listed_outcome(&mem, &mem.w.memory), None);
    // No lock was taken for nothing.
    assert!(
        !mem.config
            .lock_dir
            .join(lock_name(&mem.config.root))
            .exists()
    );
}

#[test]
fn a_correction_decision_is_not_materialized() {
    let mem = Mem::new();
    let decision = mem.decide(&mem.w.correction, Disposition::Accept, None);
    assert!(matches!(
        mem.run(&decision),
        Err(MaterializeError::NotAMemoryDecision { .. })
    ));
    assert!(mem.outcomes().is_empty());
}

#[test]
fn a_second_proposal_on_the_same_base_is_stale_not_rebased() {
    let mut mem = Mem::new();
    let first = mem.decide(&mem.w.memory.clone(), Disposition::Accept, None);
    // A second run, made before the first decision is materialized, sees the
    // same current version.
    let second_proposal = mem.propose(MemoryOperation::Append, "second fact");
    let second = mem.decide(&second_proposal, Disposition::Accept, None);
    receipt(&mem, &first, mem.run(&first).unwrap());
    let after_first = mem.memory();
    let outcome = mem.run(&second).unwrap();
    assert!(matches!(
        outcome,
        MaterializeOutcome::Failed {
            reason: MaterializationFailure::StaleBase,
            ..
        }
    ));
    assert_eq!(
        mem.memory(),
        after_first,
        "never rebased onto the new version"
    );
}

/// A way to break materialization from outside, and the reason it must give.
struct Row {
    name: &'static str,
    reason: MaterializationFailure,
    /// Sets the scene; returns the decision to materialize.
    setup: fn(&mut Mem) -> EventId,
}

fn accept_world_memory(mem: &mut Mem) -> EventId {
    let proposal = mem.w.memory.clone();
    mem.decide(&proposal, Disposition::Accept, None)
}

fn replace(mem: &mut Mem, text: &str) -> EventId {
    let proposal = mem.propose(MemoryOperation::ReplaceDocument, text);
    mem.decide(&proposal, Disposition::Accept, None)
}

fn base_sql(mem: &Mem, sql: &str) {
    let conn = rusqlite::Connection::open(&mem.w.path).unwrap();
    let sha = sha256(WORLD_MEMORY.as_bytes());
    assert_eq!(conn.execute(sql, [sha.as_str()]).unwrap(), 1, "{sql}");
}

fn rows() -> Vec<Row> {
    use MaterializationFailure as F;
    vec![
        Row {
            name: "hand edit after the proposal",
            reason: F::StaleBase,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.write_memory(format!("{WORLD_MEMORY}edited by hand\n").as_bytes());
                d
            },
        },
        Row {
            name: "hand edit after the proposal, then a scan",
            reason: F::StaleBase,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.write_memory(format!("{WORLD_MEMORY}edited by hand\n").as_bytes());
                mem.scan();
                d
            },
        },
        Row {
            name: "memory.md deleted",
            reason: F::Path,
            setup: |mem| {
                let d = accept_world_memory(mem);
                std::fs::remove_file(mem.memory_path()).unwrap();
                d
            },
        },
        Row {
            name: "memory.md replaced by a directory",
            reason: F::Path,
            setup: |mem| {
                let d = accept_world_memory(mem);
                std::fs::remove_file(mem.memory_path()).unwrap();
                std::fs::create_dir(mem.memory_path()).unwrap();
                d
            },
        },
        Row {
            name: "memory.md is a symlink to a file with the same bytes",
            reason: F::Symlink,
            setup: |mem| {
                let d = accept_world_memory(mem);
                let outside = mem.dir.path().join("outside.md");
                std::fs::rename(mem.memory_path(), &outside).unwrap();
                std::os::unix::fs::symlink(&outside, mem.memory_path()).unwrap();
                d
            },
        },
        Row {
            name: "the configured root is a symlink",
            reason: F::Symlink,
            setup: |mem| {
                let d = accept_world_memory(mem);
                let link = mem.dir.path().join("context-link");
                std::os::unix::fs::symlink(&mem.config.root, &link).unwrap();
                mem.config.root = link;
                d
            },
        },
        Row {
            name: "the configured root is missing",
            reason: F::Path,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.config.root = mem.dir.path().join("no-such-context");
                d
            },
        },
        Row {
            name: "the configured root is a file",
            reason: F::Path,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.config.root = mem.memory_path();
                d
            },
        },
        Row {
            name: "replace-document changes the frontmatter id",
            reason: F::Frontmatter,
            setup: |mem| replace(mem, "---\nid: memory-2\n---\n# Memory\n"),
        },
        Row {
            name: "replace-document without frontmatter",
            reason: F::Frontmatter,
            setup: |mem| replace(mem, "# Memory\n\nno frontmatter\n"),
        },
        Row {
            name: "replace-document with an empty id",
            reason: F::Frontmatter,
            setup: |mem| replace(mem, "---\nid: \"\"\n---\n# Memory\n"),
        },
        Row {
            name: "edit removes the frontmatter",
            reason: F::Frontmatter,
            setup: |mem| {
                let proposal = mem.propose(
                    MemoryOperation::ReplaceDocument,
                    "---\nid: memory-1\n---\nfine\n",
                );
                mem.decide(&proposal, Disposition::Edit, Some("no frontmatter at all"))
            },
        },
        Row {
            name: "a base without frontmatter cannot be appended to",
            reason: F::Frontmatter,
            setup: |mem| {
                mem.write_memory(b"# Memory without frontmatter\n");
                mem.scan();
                let proposal = mem.propose(MemoryOperation::Append, "a fact");
                mem.decide(&proposal, Disposition::Accept, None)
            },
        },
        Row {
            name: "the result is over max_memory_bytes",
            reason: F::Size,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.config.max_bytes = WORLD_MEMORY.len() as u64 + 10;
                d
            },
        },
        Row {
            name: "the base blob was tampered with in the store",
            reason: F::Content,
            setup: |mem| {
                let d = accept_world_memory(mem);
                base_sql(
                    mem,
                    "UPDATE blobs SET bytes = CAST('---\nid: memory-1\n---\n# Mem0ry\n' AS BLOB) WHERE sha256 = unhex(?1)",
                );
                d
            },
        },
        Row {
            name: "the base version's size was tampered with",
            reason: F::Content,
            setup: |mem| {
                let d = accept_world_memory(mem);
                base_sql(
                    mem,
                    "UPDATE document_versions SET size = size + 1 WHERE sha256 = unhex(?1)",
                );
                d
            },
        },
        Row {
            name: "the base version's content type was tampered with",
            reason: F::Content,
            setup: |mem| {
                let d = accept_world_memory(mem);
                base_sql(
                    mem,
                    "UPDATE document_versions SET content_type = 'text/plain' WHERE sha256 = unhex(?1)",
                );
                d
            },
        },
        Row {
            name: "the document's path was tampered with",
            reason: F::Content,
            setup: |mem| {
                let d = accept_world_memory(mem);
                let conn = rusqlite::Connection::open(&mem.w.path).unwrap();
                conn.execute("UPDATE documents SET path = 'other.md'", [])
                    .unwrap();
                d
            },
        },
        Row {
            name: "the root cannot be scanned (more entries than the scan allows)",
            reason: F::Scan,
            setup: |mem| {
                let d = accept_world_memory(mem);
                let crowd = mem.config.root.join("crowd");
                std::fs::create_dir(&crowd).unwrap();
                for i in 0..10_001 {
                    std::fs::File::create(crowd.join(format!("n{i}"))).unwrap();
                }
                d
            },
        },
        Row {
            name: "the configured source is not the context source",
            reason: F::Path,
            setup: |mem| {
                let d = accept_world_memory(mem);
                mem.config.source = SourceName::new("filesystem:elsewhere").unwrap();
                d
            },
        },
    ]
}

/// One row per failure reason that can be caused from outside: the failure
/// event carries the reason, nothing else, and `memory.md` is unchanged.
#[test]
fn every_outside_failure_is_recorded_with_its_reason_and_changes_nothing() {
    for row in rows() {
        let mut mem = Mem::new();
        let decision = (row.setup)(&mut mem);
        let before = snapshot_of(&mem);
        let outcome = mem
            .run(&decision)
            .unwrap_or_else(|e| panic!("{}: {e}", row.name));
        let MaterializeOutcome::Failed {
            reason, recorded, ..
        } = outcome
        else {
            panic!("{}: {outcome:?}", row.name);
        };
        assert_eq!(reason, row.reason, "{}", row.name);
        assert_eq!(recorded, Recorded::Now, "{}", row.name);
        assert_eq!(mem.failure(&decision), row.reason, "{}", row.name);
        assert_eq!(snapshot_of(&mem), before, "{}: memory.md changed", row.name);
        assert_eq!(
            listed_outcome(&mem, &mem.store_proposal_of(&decision)),
            Some(Outcome::MaterializationFailed),
            "{}",
            row.name
        );
        // Content-dark: the failure payload holds ids and the code only.
        let failure = &mem.outcomes()[0];
        assert!(!failure.event.sensitive);
        let payload: serde_json::Value = serde_json::from_slice(&failure.event.payload).unwrap();
        let keys: Vec<&str> = payload
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["decisionEventId", "proposalEventId", "reason"]);
        // A rerun returns the recorded outcome; it never retries.
        assert!(
            matches!(
                mem.run(&decision).unwrap(),
                MaterializeOutcome::Failed { reason, recorded: Recorded::Already, .. } if reason == row.reason
            ),
            "{}",
            row.name
        );
        // The lock was released.
        assert!(
            !mem.config
                .lock_dir
                .join(lock_name(&mem.config.root))
                .exists(),
            "{}",
            row.name
        );
    }
}

/// What `memory.md` is, without following a link: kind and bytes.
fn snapshot_of(mem: &Mem) -> (String, Vec<u8>) {
    let path = mem.memory_path();
    match std::fs::symlink_metadata(&path) {
        Err(_) => ("missing".into(), vec![]),
        Ok(m) if m.file_type().is_symlink() => (
            format!(
                "symlink -> {}",
                std::fs::read_link(&path).unwrap().display()
            ),
            std::fs::read(&path).unwrap(),
        ),
        Ok(m) if m.is_dir() => ("dir".into(), vec![]),
        Ok(m) => (
            format!("file {:o}", m.permissions().mode() & 0o7777),
            std::fs::read(&path).unwrap(),
        ),
    }
}

impl Mem {
    fn store_proposal_of(&self, decision: &EventId) -> EventId {
        let event = self.w.store.event(decision).unwrap().unwrap();
        event.event.parent.unwrap()
    }
}

/// Reason codes are a closed set with stable wire names.
#[test]
fn reason_codes_golden() {
    let codes: Vec<&str> = MaterializationFailure::ALL
        .iter()
        .map(|r| r.as_str())
        .collect();
    insta::assert_snapshot!("reason_codes", codes.join("\n"));
}

/// Tampering breaks trust: nothing is appended, no receipt of any kind is
/// built from the untrusted ids, memory.md is untouched.
#[test]
fn forged_lineage_gets_no_receipt_of_any_kind() {
    let rows: [(&str, &str); 4] = [
        (
            "decision authorship rewritten",
            "UPDATE events SET authorship = 'agent' WHERE id = unhex(?1)",
        ),
        (
            "decision parented elsewhere",
            "UPDATE events SET parent = root WHERE id = unhex(?1)",
        ),
        (
            "proposer run not completed",
            "UPDATE runs SET status = 'failed' WHERE run_id = unhex((SELECT json_extract(payload, '$.proposer.runId') FROM events WHERE id = (SELECT parent FROM events WHERE id = unhex(?1))))",
        ),
        (
            "proposal authorship rewritten",
            "UPDATE events SET authorship = 'human' WHERE id = (SELECT parent FROM events WHERE id = unhex(?1))",
        ),
    ];
    for (name, sql) in rows {
        let mut mem = Mem::new();
        let decision = accept_world_memory(&mut mem);
        let conn = rusqlite::Connection::open(&mem.w.path).unwrap();
        assert_eq!(conn.execute(sql, [decision.as_str()]).unwrap(), 1, "{name}");
        let err = mem.run(&decision).unwrap_err();
        assert!(
            matches!(err, MaterializeError::Decision(_)),
            "{name}: {err}"
        );
        assert!(mem.outcomes().is_empty(), "{name}");
        assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes(), "{name}");
        assert!(
            !err.to_string().contains("canary"),
            "{name}: errors carry ids only"
        );
    }
    // An id that is no decision at all.
    let mem = Mem::new();
    let err = mem.run(&mem.w.memory).unwrap_err();
    assert!(matches!(err, MaterializeError::Decision(_)));
    assert!(mem.outcomes().is_empty());
}

/// A receipt can only be the verified outcome of its own decision.
#[test]
fn a_forged_outcome_fails_closed() {
    let mut mem = Mem::new();
    let decision = accept_world_memory(&mut mem);
    receipt(&mem, &decision, mem.run(&decision).unwrap());
    let conn = rusqlite::Connection::open(&mem.w.path).unwrap();
    conn.execute(
        "UPDATE events SET authorship = 'human' WHERE type = (SELECT code FROM names WHERE name = ?1)",
        [MemoryChangeMaterialized::TYPE],
    )
    .unwrap();
    assert!(matches!(
        mem.run(&decision),
        Err(MaterializeError::OutcomeInvalid { .. })
    ));
}

/// Crash between the rename and the receipt: `memory.md` already holds
/// exactly this decision's bytes. A rerun finishes instead of failing
/// stale-base — whether the crash came before the scan or after it.
#[test]
fn a_crash_after_the_rename_is_finished_by_a_rerun() {
    for scanned in [false, true] {
        let mut mem = Mem::new();
        let decision = accept_world_memory(&mut mem);
        let text = "canary-world-memory: likes tea";
        let written = compose(MemoryOperation::Append, WORLD_MEMORY.as_bytes(), text);
        // What the crashed attempt left: the renamed file (and, maybe, its scan).
        mem.write_memory(&written);
        if scanned {
            mem.scan();
        }
        let payload = receipt(&mem, &decision, mem.run(&decision).unwrap());
        assert_eq!(mem.memory(), written, "scanned: {scanned}");
        assert_eq!(payload.new_sha256, sha256(&written));
        assert_eq!(mem.outcomes().len(), 1);
        assert_eq!(mem.file_events(), 1, "one new version, scanned: {scanned}");
    }
    // Bytes that are not exactly this decision's are stale, never adopted.
    let mut mem = Mem::new();
    let decision = accept_world_memory(&mut mem);
    let mut almost = compose(
        MemoryOperation::Append,
        WORLD_MEMORY.as_bytes(),
        "canary-world-memory: likes tea",
    );
    almost.push(b'\n');
    mem.write_memory(&almost);
    assert!(matches!(
        mem.run(&decision).unwrap(),
        MaterializeOutcome::Failed {
            reason: MaterializationFailure::StaleBase,
            ..
        }
    ));
    assert_eq!(mem.memory(), almost);
}

/// A store fault at every write step of materialization (the one
/// transaction of the scan and the receipt) leaves no outcome, and a clean rerun
/// converges on exactly one receipt and the golden bytes.
#[test]
fn a_fault_at_every_store_write_step_then_a_clean_rerun_converges() {
    let count = {
        let mut mem = Mem::new();
        let decision = accept_world_memory(&mut mem);
        let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
        faulty.fail_at(usize::MAX - 1);
        stream_memory::materialize(&faulty, &mem.config, &decision).unwrap();
        faulty.heal()
    };
    // put_blob, ensure_document, insert_version, set_current_version,
    // set_control (the root's identity, at the first materialization),
    // append (file event), append (receipt), commit: the new version,
    // the identity and the receipt commit together.
    assert_eq!(count, 8);
    let golden = compose(
        MemoryOperation::Append,
        WORLD_MEMORY.as_bytes(),
        "canary-world-memory: likes tea",
    );
    for step in 0..count {
        let mut mem = Mem::new();
        let decision = accept_world_memory(&mut mem);
        let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
        faulty.fail_at(step);
        let err = stream_memory::materialize(&faulty, &mem.config, &decision).unwrap_err();
        assert!(
            matches!(err, MaterializeError::Store(_)),
            "step {step}: {err}"
        );
        assert!(mem.outcomes().is_empty(), "step {step}: no outcome");
        assert!(
            !mem.config
                .lock_dir
                .join(lock_name(&mem.config.root))
                .exists(),
            "step {step}: the lock is released"
        );
        faulty.heal();
        let outcome = stream_memory::materialize(&faulty, &mem.config, &decision).unwrap();
        receipt(&mem, &decision, outcome);
        assert_eq!(mem.memory(), golden, "step {step}");
        assert_eq!(mem.outcomes().len(), 1, "step {step}");
        assert_eq!(mem.file_events(), 1, "step {step}");
    }
}

/// A store fault while recording a failure leaves nothing; the rerun
/// records the failure once.
#[test]
fn a_fault_while_recording_a_failure_then_a_rerun_records_it_once() {
    let mut mem = Mem::new();
    let decision = accept_world_memory(&mut mem);
    mem.config.max_bytes = 10;
    let faulty = FaultyStore::new(SqliteStore::open(&mem.w.path).unwrap());
    for step in 0..2 {
        faulty.fail_at(step);
        assert!(matches!(
            stream_memory::materialize(&faulty, &mem.config, &decision),
            Err(MaterializeError::Store(_))
        ));
        assert!(mem.outcomes().is_empty());
    }
    faulty.heal();
    stream_memory::materialize(&faulty, &mem.config, &decision).unwrap();
    assert_eq!(mem.failure(&decision), MaterializationFailure::Size);
}

/// A live lock owner is a conflict: nothing is written or recorded, and the
/// decision stays open until the owner is gone.
#[test]
fn a_live_lock_owner_blocks_without_an_outcome_and_a_rerun_finishes() {
    let mut mem = Mem::new();
    let decision = accept_world_memory(&mut mem);
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    crate::lock::plant(
        &mem.config.lock_dir,
        &lock_name(&mem.config.root),
        &crate::lock::evidence_of(child.id()),
    );
    let err = mem.run(&decision).unwrap_err();
    assert!(
        matches!(err, MaterializeError::Lock(LockError::Held { pid }) if pid == child.id()),
        "{err}"
    );
    assert!(mem.outcomes().is_empty());
    assert_eq!(mem.memory(), WORLD_MEMORY.as_bytes());
    child.kill().unwrap();
    child.wait().unwrap();
    receipt(&mem, &decision, mem.run(&decision).unwrap());
}

/// Two threads of one process: the lock serializes them; exactly one
/// receipt, and the loser sees either the conflict or the finished outcome.
#[test]
fn racing_materializers_one_receipt() {
    let mut mem = Mem::new();
    let decision = accept_world_memory(&mut mem);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let store = SqliteStore::open(&mem.w.path).unwrap();
                let config = mem.config.clone();
                let decision = decision.clone();
                s.spawn(move || stream_memory::materialize(&store, &config, &decision))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        match r {
            Ok(MaterializeOutcome::Materialized { .. }) => {}
            Err(MaterializeError::Lock(LockError::Held { .. })) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(results.iter().any(Result::is_ok));
    assert_eq!(mem.outcomes().len(), 1);
    assert_eq!(mem.file_events(), 1);
}

/// Errors and logs of the materializer never show proposal or memory text.
#[test]
fn errors_and_outcomes_never_carry_content() {
    let mut mem = Mem::new();
    let canary = Canary::new("materialize");
    let proposal = mem.propose(
        MemoryOperation::ReplaceDocument,
        &format!("---\nid: other\n---\n{canary}\n"),
    );
    let decision = mem.decide(&proposal, Disposition::Accept, None);
    let outcome = mem.run(&decision).unwrap();
    assert!(!format!("{outcome:?}").contains(canary.as_str()));
    let failure = &mem.outcomes()[0];
    assert!(!String::from_utf8_lossy(&failure.event.payload).contains(canary.as_str()));
    let failed: MaterializationFailed = failure.decode().unwrap();
    assert_eq!(failed.reason, MaterializationFailure::Frontmatter);
    let evidence = LockEvidence::current().unwrap();
    for e in [
        MaterializeError::Lock(LockError::Held { pid: evidence.pid }),
        MaterializeError::Lock(LockError::Malformed),
        MaterializeError::NotAMemoryDecision {
            decision: decision.clone(),
        },
    ] {
        let shown = format!("{e} {e:?}");
        assert!(
            !shown.contains(canary.as_str()) && !shown.contains('/'),
            "{shown}"
        );
    }
}
