//! The fixed acknowledgment of a tool-only completion (docs/design.md §12).
//!
//! It describes durable proposals only: no claim of application, approval,
//! learning, training, publication or future behaviour, and no identifier.

use std::collections::BTreeSet;

use stream_core::payload::ProposalKind;

/// The reply for a tool-only completion that captured `kinds`; `None` when
/// nothing was captured (a completion with neither text nor calls is invalid).
pub fn acknowledgment(kinds: &BTreeSet<ProposalKind>) -> Option<&'static str> {
    use ProposalKind::{FocusDeclaration as F, MemoryChange as M, SelfCorrection as C};
    let has = |k| kinds.contains(&k);
    Some(match (has(M), has(C), has(F)) {
        (true, false, false) => "I saved that as a memory suggestion.",
        (false, true, false) => "I saved that as a proposed correction.",
        (true, true, false) => "I saved those as memory and correction suggestions.",
        (false, false, true) => "I saved that as a focus proposal.",
        (true, false, true) => "I saved those as memory and focus suggestions.",
        (false, true, true) => "I saved those as correction and focus suggestions.",
        (true, true, true) => "I saved those as memory, correction, and focus suggestions.",
        (false, false, false) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProposalKind::*;

    #[test]
    fn the_seed_table_and_its_combinations() {
        let rows: [(&[ProposalKind], Option<&str>); 8] = [
            // "memory only: I saved that as a memory suggestion."
            (
                &[MemoryChange],
                Some("I saved that as a memory suggestion."),
            ),
            // "correction only: I saved that as a proposed correction."
            (
                &[SelfCorrection],
                Some("I saved that as a proposed correction."),
            ),
            // "both: I saved those as memory and correction suggestions."
            (
                &[MemoryChange, SelfCorrection],
                Some("I saved those as memory and correction suggestions."),
            ),
            // "focus only: I saved that as a focus proposal."
            (
                &[FocusDeclaration],
                Some("I saved that as a focus proposal."),
            ),
            (
                &[MemoryChange, FocusDeclaration],
                Some("I saved those as memory and focus suggestions."),
            ),
            (
                &[SelfCorrection, FocusDeclaration],
                Some("I saved those as correction and focus suggestions."),
            ),
            (
                &ProposalKind::ALL,
                Some("I saved those as memory, correction, and focus suggestions."),
            ),
            (&[], None),
        ];
        for (kinds, expected) in rows {
            let set: BTreeSet<_> = kinds.iter().copied().collect();
            assert_eq!(acknowledgment(&set), expected, "{kinds:?}");
        }
    }

    #[test]
    fn acknowledgments_claim_nothing_beyond_saving() {
        let forbidden = [
            "applied", "approved", "learn", "train", "publish", "will ", "remember", "id",
        ];
        for n in 1u8..8 {
            let set: BTreeSet<_> = ProposalKind::ALL
                .into_iter()
                .enumerate()
                .filter(|(i, _)| n & (1 << i) != 0)
                .map(|(_, k)| k)
                .collect();
            let text = acknowledgment(&set).unwrap().to_lowercase();
            for word in forbidden {
                assert!(!text.contains(word), "{text:?} contains {word:?}");
            }
            assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text:?}");
        }
    }
}
