//! `/exports`: what each export would contain now — the examples counted
//! and the exclusions with their reasons — computed by the exports' own
//! selection, writing nothing.

use maud::{Markup, html};
use stream_export::{ExportKind, Selection, select};
use stream_proposals::authority::TrustedKeys;
use stream_store::Read;

use crate::PageError;
use crate::html::{Nav, page};

/// Both selections.
pub struct Exports {
    private: Selection,
    external: Selection,
}

/// Runs the private and the external selection.
pub fn gather(store: &dyn Read, trusted: &TrustedKeys) -> Result<Exports, PageError> {
    Ok(Exports {
        private: select(store, ExportKind::Private, trusted, &|_, _| {})?,
        external: select(store, ExportKind::External, trusted, &|_, _| {})?,
    })
}

fn selection(title: &str, command: &str, s: &Selection) -> Markup {
    html! {
        section.export {
            h2 { (title) }
            p { (s.examples.len()) " example(s) would be written by " code { (command) } "." }
            @if s.excluded.is_empty() && s.left_out_turns.is_empty() {
                p { "Nothing is left out." }
            }
            @if !s.excluded.is_empty() {
                table.list {
                    thead { tr { th { "left out because" } th { "judgments" } } }
                    tbody {
                        @for (why, n) in &s.excluded {
                            tr { td { code { (why.as_str()) } } td { (n) } }
                        }
                    }
                }
            }
            @if !s.left_out_turns.is_empty() {
                table.list {
                    thead { tr { th { "earlier turns left out because" } th { "turns" } } }
                    tbody {
                        @for (why, n) in &s.left_out_turns {
                            tr { td { code { (why.as_str()) } } td { (n) } }
                        }
                    }
                }
            }
        }
    }
}

/// The page.
pub fn render(e: &Exports) -> Markup {
    let body = html! {
        h1 { "Exports preview" }
        p { "What each export would contain if it ran now. Proposals never appear in an export; only judgments do." }
        (selection("Private training export", "thestream private-training-export --output FILE --acknowledge-sensitive-private-training", &e.private))
        (selection("Training export (external)", "thestream training-export --output FILE", &e.external))
    };
    page("Exports", Nav::Exports, false, body)
}
