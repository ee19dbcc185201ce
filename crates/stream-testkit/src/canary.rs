//! Canary strings: unique markers planted in sensitive text (messages, tool
//! arguments, proposal text, memory) and then searched for in logs, traces,
//! error messages and non-sensitive events, where they must never appear.

use std::fmt;

/// One canary: `canary-<label>-<16 random hex>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Canary(String);

impl Canary {
    /// A fresh canary carrying `label` (for telling canaries apart in a failure).
    pub fn new(label: &str) -> Self {
        let mut bytes = [0u8; 8];
        // A test without randomness still gets a distinct, if predictable, canary.
        if getrandom::fill(&mut bytes).is_err() {
            bytes = std::process::id()
                .to_le_bytes()
                .repeat(2)
                .try_into()
                .unwrap_or([7; 8]);
        }
        Self(format!("canary-{label}-{}", hex::encode(bytes)))
    }

    /// The marker text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `haystack` contains this canary.
    pub fn found_in(&self, haystack: &str) -> bool {
        haystack.contains(&self.0)
    }
}

impl fmt::Display for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Canary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Canary({})", self.0)
    }
}

/// The canaries found in `haystack`, labelled by `place` for the failure
/// message. Empty when clean.
pub fn leaks<'a>(canaries: &'a [Canary], haystack: &str) -> Vec<&'a Canary> {
    canaries.iter().filter(|c| c.found_in(haystack)).collect()
}

/// Fails the test if any canary appears in `haystack`.
#[track_caller]
pub fn assert_no_leak(canaries: &[Canary], haystack: &str, place: &str) {
    let found = leaks(canaries, haystack);
    assert!(
        found.is_empty(),
        "sensitive canaries leaked into {place}: {found:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_are_unique_and_detected() {
        let a = Canary::new("msg");
        let b = Canary::new("msg");
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("canary-msg-"));
        assert_eq!(
            leaks(&[a.clone(), b.clone()], &format!("log: {a}")),
            vec![&a]
        );
    }
}
