//! The shared authority-chain validator, decisions and correction projection.

use stream_core::payload::{Disposition, JudgmentRecorded, ProposalDecision, ProposalKind};
use stream_core::text::Label;
use stream_core::{EventId, Payload};
use stream_proposals::chain::{ChainError, ChainLink, verify_chain};
use stream_proposals::decision::{
    Decided, DecisionError, DecisionRequest, record_decision, record_verified_decision,
};
use stream_proposals::project::{
    CorrectionProjection, ProjectError, judgment_id, project_correction, verify_decision,
};
use stream_store::faulty::FaultyStore;
use stream_store::{EventQuery, Read, SqliteStore};

use stream_proposals::testing::{World, signer, trusted};

fn link(err: ChainError) -> ChainLink {
    match err {
        ChainError::Broken { link, .. } => link,
        ChainError::Store(e) => panic!("store: {e}"),
    }
}

fn request(
    proposal: &EventId,
    disposition: Disposition,
    replacement: Option<&str>,
) -> DecisionRequest {
    DecisionRequest {
        proposal: proposal.clone(),
        disposition,
        replacement: replacement.map(str::to_owned),
        submission_id: None,
        actor: Label::new("owner").unwrap(),
        signer: signer(),
    }
}

#[test]
fn settled_proposals_verify() {
    let w = World::new();
    for (id, kind) in [
        (&w.memory, ProposalKind::MemoryChange),
        (&w.correction, ProposalKind::SelfCorrection),
        (&w.focus, ProposalKind::FocusDeclaration),
    ] {
        let verified = verify_chain(&w.store, id).unwrap();
        assert_eq!(verified.body().kind(), kind);
        assert_eq!(verified.snapshot(), &(&w.snapshot).into());
    }
}

#[test]
fn non_proposals_and_unknown_ids_do_not_verify() {
    let w = World::new();
    assert_eq!(
        link(verify_chain(&w.store, w.trigger.id()).unwrap_err()),
        ChainLink::Proposal
    );
    assert_eq!(
        link(verify_chain(&w.store, &EventId::parse(&"9".repeat(64)).unwrap()).unwrap_err()),
        ChainLink::Proposal
    );
}

/// Tampering with the stored file breaks exactly the link it touches.
#[test]
fn forged_lineage_fails_closed() {
    let rows: [(&str, &str, ChainLink); 5] = [
        (
            "proposal parent moved",
            "UPDATE events SET parent = root WHERE id = unhex(?1)",
            ChainLink::Proposal,
        ),
        (
            "proposal authorship changed",
            "UPDATE events SET authorship = 'human' WHERE id = unhex(?1)",
            ChainLink::Proposal,
        ),
        (
            "run row not completed",
            "UPDATE runs SET status = 'failed' WHERE run_id = unhex((SELECT json_extract(payload, '$.proposer.runId') FROM events WHERE id = unhex(?1)))",
            ChainLink::Run,
        ),
        (
            "snapshot root part replaced",
            "UPDATE blobs SET bytes = x'7b7d' WHERE sha256 = (SELECT root FROM snapshots WHERE id = unhex((SELECT json_extract(payload, '$.proposer.contextSnapshotId') FROM events WHERE id = unhex(?1))))",
            ChainLink::Snapshot,
        ),
        (
            "snapshot root part deleted",
            "DELETE FROM blobs WHERE sha256 = (SELECT root FROM snapshots WHERE id = unhex((SELECT json_extract(payload, '$.proposer.contextSnapshotId') FROM events WHERE id = unhex(?1))))",
            ChainLink::Snapshot,
        ),
    ];
    for (name, sql, expected) in rows {
        let w = World::new();
        let conn = rusqlite::Connection::open(&w.path).unwrap();
        // A hand edit of the file: the schema's foreign keys do not stop it.
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        assert_eq!(conn.execute(sql, [w.memory.as_str()]).unwrap(), 1, "{name}");
        let err = verify_chain(&w.store, &w.memory).unwrap_err();
        assert_eq!(link(err), expected, "{name}");
    }
}

/// A long `memory.md` is kept once, as the document version's blob, and
/// the snapshot refers to it: deleting or altering that blob breaks the
/// snapshot link.
#[test]
fn an_altered_or_deleted_memory_text_blob_breaks_the_snapshot_link() {
    let memory = format!(
        "---\nid: memory-1\n---\n{}",
        "canary-chain-memory line\n".repeat(400)
    );
    for sql in [
        "DELETE FROM blobs WHERE sha256 = (SELECT sha256 FROM document_versions)",
        "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'canary', 'CANARY') AS BLOB) \
         WHERE sha256 = (SELECT sha256 FROM document_versions)",
    ] {
        let w = World::with_memory(&memory);
        verify_chain(&w.store, &w.memory).unwrap();
        let conn = rusqlite::Connection::open(&w.path).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        let holding: i64 = conn
            .query_row(
                "SELECT count(*) FROM blobs WHERE instr(bytes, CAST('canary-chain-memory' AS BLOB)) > 0",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(holding, 1, "the snapshot keeps no second copy");
        assert_eq!(conn.execute(sql, []).unwrap(), 1, "{sql}");
        let err = verify_chain(&w.store, &w.memory).unwrap_err();
        assert_eq!(link(err), ChainLink::Snapshot, "{sql}");
    }
}

#[test]
fn a_proposal_the_receipt_does_not_name_fails() {
    let w = World::new();
    let conn = rusqlite::Connection::open(&w.path).unwrap();
    // Rewrite the completed-run receipt to name no proposal (hash fixed up so
    // only the chain check, not the envelope hash, can notice).
    let receipt: (String, Vec<u8>) = conn
        .query_row(
            "SELECT lower(hex(id)), payload FROM events WHERE type = (SELECT code FROM names WHERE name = 'stream.thought.agent.run.completed') AND payload LIKE ?1",
            [format!("%{}%", w.memory)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut payload: serde_json::Value = serde_json::from_slice(&receipt.1).unwrap();
    payload["proposalEventIds"] = serde_json::json!([]);
    let bytes = stream_core::canon::to_canonical_bytes(&payload).unwrap();
    let sha = stream_core::canon::sha256(&bytes);
    conn.execute(
        "UPDATE events SET payload = ?1, payload_sha256 = unhex(?2) WHERE id = unhex(?3)",
        rusqlite::params![bytes, sha.as_str(), receipt.0],
    )
    .unwrap();
    assert_eq!(
        link(verify_chain(&w.store, &w.memory).unwrap_err()),
        ChainLink::Receipt
    );
}

#[test]
fn accepted_correction_becomes_the_judgment_the_seed_specifies() {
    let w = World::new();
    let decided =
        record_decision(&w.store, &request(&w.correction, Disposition::Accept, None)).unwrap();
    let Decided::Recorded(decision) = decided else {
        panic!("{decided:?}")
    };
    let projected = project_correction(&w.store, &decision, &trusted()).unwrap();
    let CorrectionProjection::Judgment(judgment) = projected else {
        panic!()
    };
    assert_eq!(judgment, judgment_id(&decision).unwrap());
    let event = w.store.event(&judgment).unwrap().unwrap();
    let j: JudgmentRecorded = event.decode().unwrap();
    let json = serde_json::to_value(&j).unwrap();
    assert_eq!(json["kind"], "correct");
    assert_eq!(json["criterion"], "agent-self-correction");
    assert_eq!(json["criterionVersion"], 1);
    assert_eq!(json["actor"], "owner");
    assert_eq!(json["authority"], "human");
    assert_eq!(j.target_delivery_receipt_event_id, w.earlier_receipt);
    assert_eq!(j.target_output_event_id, w.earlier_output);
    assert_eq!(j.feedback_source_event_id, decision);
    assert_eq!(
        (j.quality_eligible, j.external_export_eligible),
        (true, false)
    );
    assert_eq!(j.replacement.text.as_str(), "Paris.");
    assert_eq!(json["replacement"]["contract"], "conversation-text@1");
    assert_eq!(
        event.event.root.as_ref(),
        w.store
            .event(&w.earlier_output)
            .unwrap()
            .unwrap()
            .event
            .root
            .as_ref()
    );
    // Re-running the projector converges.
    assert_eq!(
        project_correction(&w.store, &decision, &trusted()).unwrap(),
        CorrectionProjection::Judgment(judgment)
    );
    let judgments = w
        .store
        .events(&EventQuery::of_type(JudgmentRecorded::TYPE))
        .unwrap();
    assert_eq!(judgments.len(), 1);
}

#[test]
fn effective_output_changes_only_after_the_judgment() {
    let mut w = World::new();
    let effective = |w: &mut World| {
        let next = w.base.message("next");
        let run = stream_core::ids::derive_run_id("telegram-conversation", 18, next.id()).unwrap();
        let s = stream_context::build(&w.store, &stream_proposals::testing::spec(), &run, &next)
            .unwrap();
        s.transcript
            .iter()
            .find_map(|t| match t {
                stream_context::Turn::Assistant(a) if a.output_event_id == w.earlier_output => {
                    Some(a.text.clone())
                }
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(
        effective(&mut w),
        "Lyon.",
        "a proposal never changes effective output"
    );
    let decision = record_decision(
        &w.store,
        &request(&w.correction, Disposition::Edit, Some("Paris, France.")),
    )
    .unwrap();
    assert_eq!(
        effective(&mut w),
        "Lyon.",
        "a decision alone does not either"
    );
    project_correction(&w.store, decision.id(), &trusted()).unwrap();
    assert_eq!(effective(&mut w), "Paris, France.");
}

#[test]
fn rejection_records_refusal_and_no_judgment() {
    let w = World::new();
    let decision =
        record_decision(&w.store, &request(&w.correction, Disposition::Reject, None)).unwrap();
    assert_eq!(
        project_correction(&w.store, decision.id(), &trusted()).unwrap(),
        CorrectionProjection::Rejected
    );
    assert!(
        w.store
            .event(&judgment_id(decision.id()).unwrap())
            .unwrap()
            .is_none()
    );
}

#[test]
fn first_decision_wins_retries_converge_different_payloads_conflict() {
    let w = World::new();
    let first =
        record_decision(&w.store, &request(&w.correction, Disposition::Accept, None)).unwrap();
    assert!(matches!(first, Decided::Recorded(_)));
    let again =
        record_decision(&w.store, &request(&w.correction, Disposition::Accept, None)).unwrap();
    assert_eq!(again, Decided::Converged(first.id().clone()));
    let other = record_decision(&w.store, &request(&w.correction, Disposition::Reject, None));
    assert!(
        matches!(other, Err(DecisionError::Conflict { .. })),
        "{other:?}"
    );
    let mut later = request(&w.correction, Disposition::Accept, None);
    later.submission_id = Some(Label::new("another-submission").unwrap());
    assert!(matches!(
        record_decision(&w.store, &later),
        Err(DecisionError::Conflict { .. })
    ));
}

#[test]
fn racing_deciders_one_wins() {
    let w = World::new();
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = [Disposition::Accept, Disposition::Reject]
            .into_iter()
            .map(|d| {
                let path = w.path.clone();
                let proposal = w.correction.clone();
                scope.spawn(move || {
                    let store = SqliteStore::open(&path).unwrap();
                    record_decision(&store, &request(&proposal, d, None))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wins = results
        .iter()
        .filter(|r| matches!(r, Ok(Decided::Recorded(_))))
        .count();
    let conflicts = results
        .iter()
        .filter(|r| matches!(r, Err(DecisionError::Conflict { .. })))
        .count();
    assert_eq!((wins, conflicts), (1, 1), "{results:?}");
}

#[test]
fn decision_rules() {
    let w = World::new();
    // "Edit requires replacement text; accept/reject forbid it."
    assert!(matches!(
        record_decision(&w.store, &request(&w.correction, Disposition::Edit, None)),
        Err(DecisionError::Invalid(_))
    ));
    assert!(matches!(
        record_decision(
            &w.store,
            &request(&w.correction, Disposition::Accept, Some("x"))
        ),
        Err(DecisionError::Invalid(_))
    ));
    assert!(matches!(
        record_decision(
            &w.store,
            &request(&w.correction, Disposition::Edit, Some(&"x".repeat(4097)))
        ),
        Err(DecisionError::Invalid(_))
    ));
    // Focus proposals are listed but cannot be decided.
    assert!(matches!(
        record_decision(&w.store, &request(&w.focus, Disposition::Accept, None)),
        Err(DecisionError::NotDecidable { .. })
    ));
    // Nothing was written by any refusal.
    assert!(
        stream_proposals::project::decisions(&w.store)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn forged_decisions_are_not_projected() {
    let w = World::new();
    let decision =
        record_decision(&w.store, &request(&w.correction, Disposition::Accept, None)).unwrap();
    let conn = rusqlite::Connection::open(&w.path).unwrap();
    conn.execute(
        "UPDATE events SET authorship = 'agent' WHERE id = unhex(?1)",
        [decision.id().as_str()],
    )
    .unwrap();
    assert!(matches!(
        project_correction(&w.store, decision.id(), &trusted()),
        Err(ProjectError::DecisionInvalid { .. })
    ));
    assert!(
        w.store
            .event(&judgment_id(decision.id()).unwrap())
            .unwrap()
            .is_none()
    );
}

#[test]
fn projection_is_all_or_nothing_at_every_write_step() {
    let w = World::new();
    let decision =
        record_decision(&w.store, &request(&w.correction, Disposition::Accept, None)).unwrap();
    let faulty = FaultyStore::new(SqliteStore::open(&w.path).unwrap());
    // One append and one commit.
    for step in 0..2 {
        faulty.fail_at(step);
        assert!(project_correction(&faulty, decision.id(), &trusted()).is_err());
        assert!(
            w.store
                .event(&judgment_id(decision.id()).unwrap())
                .unwrap()
                .is_none(),
            "step {step}"
        );
    }
    faulty.heal();
    assert!(matches!(
        project_correction(&faulty, decision.id(), &trusted()).unwrap(),
        CorrectionProjection::Judgment(_)
    ));
}

/// `proposal-decision` on a correction: the chain is replayed once, and the
/// decision and its judgment are one transaction, so a fault at any write
/// leaves neither (before, a fault at the judgment left the decision
/// recorded and unprojected), and a clean rerun converges.
#[test]
fn a_correction_decision_and_its_judgment_commit_together_at_every_write_step() {
    let w = World::new();
    let req = request(&w.correction, Disposition::Accept, None);
    let faulty = FaultyStore::new(SqliteStore::open(&w.path).unwrap());
    let decisions = |store: &SqliteStore| {
        store
            .events(&EventQuery {
                event_type: Some(ProposalDecision::TYPE.into()),
                ..EventQuery::default()
            })
            .unwrap()
            .len()
    };
    // The decision's append, the judgment's append, the commit.
    for step in 0..3 {
        faulty.fail_at(step);
        assert!(
            matches!(
                record_verified_decision(&faulty, &req, &trusted()),
                Err(DecisionError::Store(_))
            ),
            "step {step}"
        );
        assert_eq!(decisions(&w.store), 0, "step {step}");
    }
    assert_eq!(faulty.heal(), 3, "exactly three writes in one transaction");
    let record = record_verified_decision(&faulty, &req, &trusted()).unwrap();
    let Decided::Recorded(decision) = &record.decided else {
        panic!("{:?}", record.decided)
    };
    let judgment = judgment_id(decision).unwrap();
    assert!(matches!(
        &record.correction,
        Some(Ok(CorrectionProjection::Judgment(id))) if *id == judgment
    ));
    assert!(w.store.event(&judgment).unwrap().is_some());
    // The decision handed on is the one stored, as verify_decision sees it.
    let again = verify_decision(&w.store, decision, &trusted()).unwrap();
    assert_eq!(record.verified.as_ref().unwrap().event(), again.event());
    assert_eq!(
        record.verified.as_ref().unwrap().decision(),
        again.decision()
    );
    assert_eq!(
        record.verified.as_ref().unwrap().proposal().event(),
        again.proposal().event()
    );
    // A rerun converges on both.
    let rerun = record_verified_decision(&w.store, &req, &trusted()).unwrap();
    assert_eq!(rerun.decided, Decided::Converged(decision.clone()));
    assert!(matches!(
        rerun.correction,
        Some(Ok(CorrectionProjection::Judgment(id))) if id == judgment
    ));
}

/// A memory decision gets no projection in the decision's transaction (the
/// materializer writes files after it), but the verified decision it hands
/// on is the stored one.
#[test]
fn a_memory_decision_hands_on_its_verified_decision_without_a_projection() {
    let w = World::new();
    let record = record_verified_decision(
        &w.store,
        &request(&w.memory, Disposition::Accept, None),
        &trusted(),
    )
    .unwrap();
    assert!(record.correction.is_none());
    assert_eq!(record.verified.as_ref().unwrap().id(), record.decided.id());
    assert_eq!(
        record.verified.as_ref().unwrap().proposal().event().id(),
        &w.memory
    );
}

/// `proposal-decision --proposal <full id>` reads that one event instead of
/// every proposal; what it resolves to is unchanged.
#[test]
fn a_full_proposal_id_resolves_to_itself_and_nothing_else_does() {
    use stream_proposals::review::{Resolved, resolve_prefix};
    let w = World::new();
    for id in [&w.memory, &w.correction, &w.focus] {
        assert_eq!(
            resolve_prefix(&w.store, id.as_str(), 12).unwrap(),
            Resolved::One(id.clone())
        );
        assert_eq!(
            resolve_prefix(&w.store, &id.as_str().to_ascii_uppercase(), 12).unwrap(),
            Resolved::One(id.clone())
        );
        assert_eq!(
            resolve_prefix(&w.store, &id.as_str()[..12], 12).unwrap(),
            Resolved::One(id.clone())
        );
    }
    // A full id of an event that is not a proposal, and of no event.
    assert_eq!(
        resolve_prefix(&w.store, w.trigger.id().as_str(), 12).unwrap(),
        Resolved::None
    );
    assert_eq!(
        resolve_prefix(&w.store, &"9".repeat(64), 12).unwrap(),
        Resolved::None
    );
}

/// `proposal-show` takes a unique prefix of 4 hex digits, as git does;
/// `proposal-decision` keeps its 12 through the same resolver.
#[test]
fn one_resolver_takes_four_digits_for_show_and_twelve_for_a_decision() {
    use stream_proposals::review::{Resolved, resolve_prefix};
    let w = World::new();
    let id = &w.memory;
    assert_eq!(
        resolve_prefix(&w.store, &id.as_str()[..4], 4).unwrap(),
        Resolved::One(id.clone())
    );
    assert_eq!(
        resolve_prefix(&w.store, &id.as_str()[..3], 4).unwrap(),
        Resolved::BadPrefix { min_digits: 4 }
    );
    for short in [4, 11] {
        assert_eq!(
            resolve_prefix(&w.store, &id.as_str()[..short], 12).unwrap(),
            Resolved::BadPrefix { min_digits: 12 }
        );
    }
    assert_eq!(
        resolve_prefix(&w.store, "g000", 4).unwrap(),
        Resolved::BadPrefix { min_digits: 4 }
    );
}
