//! Signed decisions: a decision written straight into the store, with a
//! valid envelope and chain but without the authority of a listed key, is
//! refused by the one validator every projection, listing and export runs.

use stream_core::payload::{JudgmentRecorded, ProposalKind};
use stream_core::{EventId, Payload};
use stream_proposals::authority::{Authority, Unauthorized};
use stream_proposals::project::{ProjectError, judgment_id, project_correction, verify_decision};
use stream_proposals::review::{Depth, Outcome, list};
use stream_proposals::testing::{World, Written, signer, trusted};
use stream_store::{EventQuery, Read};

fn refusal(w: &World, decision: &EventId) -> Unauthorized {
    match verify_decision(&w.store, decision, &trusted()) {
        Err(ProjectError::Unauthorized(refused)) => refused.reason,
        other => panic!("{other:?}"),
    }
}

#[test]
fn decisions_written_into_the_store_without_authority_are_refused() {
    for (written, reason) in [
        (Written::Unsigned, Unauthorized::Unsigned),
        (Written::OtherBytes, Unauthorized::BadSignature),
        (Written::ForeignKey, Unauthorized::UnknownKey),
    ] {
        let w = World::new();
        let decision = w.write_decision(&w.correction, written, &signer());
        assert_eq!(refusal(&w, &decision), reason, "{written:?}");
        let err = project_correction(&w.store, &decision, &trusted()).unwrap_err();
        assert!(matches!(err, ProjectError::Unauthorized(_)), "{err:?}");
        // Content-dark: ids and the code only.
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(shown.contains(reason.as_str()), "{shown}");
        assert!(
            w.store
                .event(&judgment_id(&decision).unwrap())
                .unwrap()
                .is_none()
        );
        assert!(
            w.store
                .events(&EventQuery::of_type(JudgmentRecorded::TYPE))
                .unwrap()
                .is_empty()
        );
        // Listed (pending or not) with the outcome `unauthorized`.
        let views = list(&w.store, false, Depth::Summary, &trusted()).unwrap();
        let view = views
            .iter()
            .find(|v| v.kind == ProposalKind::SelfCorrection)
            .unwrap();
        assert_eq!(view.outcome, Some(Outcome::Unauthorized), "{written:?}");
    }
}

#[test]
fn a_decision_signed_by_a_listed_key_is_authorized_and_names_it() {
    let w = World::new();
    let decision = w.write_decision(&w.correction, Written::Signed, &signer());
    let verified = verify_decision(&w.store, &decision, &trusted()).unwrap();
    assert_eq!(verified.authority(), &Authority::Signed(signer().key_id()));
    // The same decision, under a config that lists no key, is refused.
    assert!(matches!(
        verify_decision(&w.store, &decision, &Default::default()),
        Err(ProjectError::Unauthorized(_))
    ));
}

#[test]
fn a_legacy_decision_whose_judgment_was_recorded_keeps_it() {
    let w = World::new();
    let judgment = w.decide_correction_legacy();
    let event = w.store.event(&judgment).unwrap().unwrap();
    let j: JudgmentRecorded = event.decode().unwrap();
    let verified = verify_decision(&w.store, &j.feedback_source_event_id, &trusted()).unwrap();
    assert_eq!(verified.authority(), &Authority::Legacy);
    assert_eq!(verified.event().event.version, 1);
    // Without its judgment the same decision would be refused.
    let bare = World::new();
    let decision = bare.write_decision(&bare.correction, Written::Unsigned, &signer());
    assert_eq!(refusal(&bare, &decision), Unauthorized::Unsigned);
    assert_eq!(JudgmentRecorded::TYPE, event.event.event_type);
}
