//! Sensitive text out of a view: every message, reply, proposal and memory
//! text becomes `[sensitive: N chars]` (docs/design.md §19) unless the
//! operator is at a terminal or asked with `--show-sensitive`.

use serde_json::Value;

use super::list::ProposalView;
use super::show::ProposalShow;

/// The marker that stands for a sensitive text of `text`'s length.
pub fn marker(text: &str) -> String {
    format!("[sensitive: {} chars]", text.chars().count())
}

fn hide(text: &mut String) {
    *text = marker(text);
}

fn hide_opt(text: &mut Option<String>) {
    if let Some(t) = text {
        hide(t);
    }
}

impl ProposalView {
    /// Replaces every sensitive text by its marker.
    pub fn redact(&mut self) {
        hide_opt(&mut self.proposed_text);
        hide_opt(&mut self.replacement);
        hide_opt(&mut self.reason);
        if let Some(declaration) = &self.declaration {
            self.declaration = Some(Value::String(marker(&declaration.to_string())));
        }
        for e in &mut self.evidence {
            hide(&mut e.text);
        }
    }
}

impl ProposalShow {
    /// Replaces every sensitive text by its marker.
    pub fn redact(&mut self) {
        self.view.redact();
        hide_opt(&mut self.diff);
        hide_opt(&mut self.original);
        if let Some(memory) = &mut self.memory {
            hide(&mut memory.diff);
            hide_opt(&mut memory.changed_since_base);
        }
        if let Some(decision) = &mut self.decision {
            hide_opt(&mut decision.replacement);
        }
    }
}
