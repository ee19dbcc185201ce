use stream_core::HumanAuthority;
use stream_core::payload::{ProposalDecision, SignatureBytes};
use stream_core::text::Label;

use super::*;

fn unsigned(disposition: Disposition) -> ProposalDecision {
    ProposalDecision {
        proposal_event_id: EventId::from_bytes([7; 32]),
        proposal_kind: DecidableKind::MemoryChange,
        disposition,
        replacement: match disposition {
            Disposition::Edit => Some("canary-edit".into()),
            Disposition::Accept | Disposition::Reject => None,
        },
        submission_id: Label::new("sub-1").unwrap(),
        actor: Label::new("alice").unwrap(),
        authority: HumanAuthority,
    }
}

fn proposal() -> Sha256Hex {
    Sha256Hex::from_bytes([9; 32])
}

fn signed_by(key: &SigningKey, disposition: Disposition) -> SignedProposalDecision {
    let d = unsigned(disposition);
    let mut signed = SignedProposalDecision {
        proposal_event_id: d.proposal_event_id,
        proposal_kind: d.proposal_kind,
        disposition: d.disposition,
        replacement: d.replacement,
        submission_id: d.submission_id,
        actor: d.actor,
        authority: HumanAuthority,
        proposal_sha256: proposal(),
        key_id: key.key_id(),
        signature: SignatureBytes::from_bytes([0; 64]),
    };
    key.sign(&mut signed).unwrap();
    signed
}

fn judge(
    decision: RecordedDecision,
    trusted: &TrustedKeys,
    outcome: bool,
) -> Result<Authority, Unauthorized> {
    authorize(&decision, &proposal(), trusted, || Ok(outcome)).unwrap()
}

#[test]
fn authorize_table() {
    let ours = SigningKey::from_bytes(&[1; 32]);
    let theirs = SigningKey::from_bytes(&[2; 32]);
    let trusted = TrustedKeys::new([ours.key_id()]);
    let signed = |d| RecordedDecision::Signed(signed_by(&ours, d));

    // "proposal-decision signs every decision it records"
    assert_eq!(
        judge(signed(Disposition::Accept), &trusted, false),
        Ok(Authority::Signed(ours.key_id()))
    );
    // "signed by a key not listed"
    assert_eq!(
        judge(
            RecordedDecision::Signed(signed_by(&theirs, Disposition::Accept)),
            &trusted,
            true
        ),
        Err(Unauthorized::UnknownKey)
    );
    // "whose signature does not cover its payload": the payload changed
    // after signing, and a signature by another key under a listed key id.
    let mut tampered = signed_by(&ours, Disposition::Edit);
    tampered.replacement = Some("canary-other".into());
    assert_eq!(
        judge(RecordedDecision::Signed(tampered), &trusted, true),
        Err(Unauthorized::BadSignature)
    );
    let mut borrowed = signed_by(&theirs, Disposition::Accept);
    borrowed.key_id = ours.key_id();
    assert_eq!(
        judge(RecordedDecision::Signed(borrowed), &trusted, true),
        Err(Unauthorized::BadSignature)
    );
    // Validly signed over another proposal text.
    let mut other = signed_by(&ours, Disposition::Accept);
    other.proposal_sha256 = Sha256Hex::from_bytes([8; 32]);
    ours.sign(&mut other).unwrap();
    assert_eq!(
        judge(RecordedDecision::Signed(other), &trusted, true),
        Err(Unauthorized::OtherProposal)
    );
    // "an unsigned decision whose outcome was already recorded keeps it;
    // an unsigned decision without an outcome is never applied"
    for d in [Disposition::Accept, Disposition::Edit] {
        let legacy = || RecordedDecision::Unsigned(unsigned(d));
        assert_eq!(judge(legacy(), &trusted, true), Ok(Authority::Legacy));
        assert_eq!(
            judge(legacy(), &trusted, false),
            Err(Unauthorized::Unsigned)
        );
    }
    // A legacy rejection applies nothing: it stays a rejection.
    assert_eq!(
        judge(
            RecordedDecision::Unsigned(unsigned(Disposition::Reject)),
            &trusted,
            false
        ),
        Ok(Authority::Legacy)
    );
    // Nothing is trusted by an empty list.
    assert_eq!(
        judge(signed(Disposition::Reject), &TrustedKeys::default(), true),
        Err(Unauthorized::UnknownKey)
    );
}

#[test]
fn signing_is_deterministic_so_a_retried_decision_converges() {
    let key = SigningKey::from_bytes(&[1; 32]);
    assert_eq!(
        signed_by(&key, Disposition::Accept),
        signed_by(&key, Disposition::Accept)
    );
}

#[test]
fn unauthorized_codes_golden() {
    let codes: Vec<_> = [
        Unauthorized::Unsigned,
        Unauthorized::UnknownKey,
        Unauthorized::BadSignature,
        Unauthorized::OtherProposal,
    ]
    .map(Unauthorized::as_str)
    .to_vec();
    assert_eq!(
        codes,
        ["unsigned", "unknown-key", "bad-signature", "other-proposal"]
    );
}

#[test]
fn a_signing_key_never_shows_its_secret() {
    let key = SigningKey::from_bytes(&[0x5a; 32]);
    let debug = format!("{key:?}");
    assert!(debug.starts_with("SigningKey(public ed25519:"), "{debug}");
    let secret_b64 = "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo=";
    assert!(!debug.contains(secret_b64) && !debug.contains("5a5a5a"));
}
