//! The page frame and the one rendering of untrusted text for a page.
//!
//! maud escapes every value spliced into a template; [`Untrusted`] adds the
//! terminal's rule (`stream_core::terminal::pieces`): each control, bidi or
//! invisible character is shown as its visible escape in a marked span, and
//! a text holding any is flagged with their count. Nothing is rendered as
//! Markdown and no text becomes an attribute other than an escaped `href`
//! built from ids.

use maud::{DOCTYPE, Markup, Render, html};
use stream_core::terminal::{self, Piece};

/// Text that a model, the owner or a file wrote.
#[derive(Clone, Copy)]
pub struct Untrusted<'a>(pub &'a str);

// The text may be sensitive: `Debug` shows its length only.
impl std::fmt::Debug for Untrusted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Untrusted({} bytes)", self.0.len())
    }
}

impl Render for Untrusted<'_> {
    fn render_to(&self, buffer: &mut String) {
        for piece in terminal::pieces(self.0) {
            match piece {
                Piece::Shown(text) => text.render_to(buffer),
                Piece::Hidden(c) => {
                    buffer.push_str("<span class=\"hidden-char\" title=\"hidden character\">");
                    terminal::escape(c).render_to(buffer);
                    buffer.push_str("</span>");
                }
            }
        }
    }
}

/// A whole untrusted text as a block: preformatted, wrapped by the page,
/// and flagged when it holds hidden characters.
pub fn block(text: &str) -> Markup {
    let hidden = terminal::count_hidden(text);
    html! {
        @if hidden > 0 {
            p.flag { (hidden_note(hidden)) }
        }
        pre.untrusted { (Untrusted(text)) }
    }
}

/// "3 hidden characters made visible".
pub fn hidden_note(hidden: usize) -> String {
    match hidden {
        1 => "1 hidden character made visible".to_owned(),
        n => format!("{} hidden characters made visible", terminal::thousands(n)),
    }
}

/// The first line of an untrusted text, at most `chars` characters, the rest
/// announced (never a silent cut), with the hidden-character flag.
pub fn summary(text: &str, chars: usize) -> Markup {
    let first = text.split('\n').next().unwrap_or_default();
    let shown: String = first.chars().take(chars).collect();
    let total = text.chars().count();
    let more = total - shown.chars().count();
    let hidden = terminal::count_hidden(text);
    html! {
        span.summary { (Untrusted(&shown)) }
        @if more > 0 {
            " " span.more { "… " (terminal::thousands(more)) " more chars" }
        }
        @if hidden > 0 {
            " " span.flag { (hidden_note(hidden)) }
        }
    }
}

/// A unified diff, each line classed by its first character so the page
/// colours it; the text itself is untrusted.
pub fn diff(text: &str) -> Markup {
    html! {
        @if terminal::count_hidden(text) > 0 {
            p.flag { (hidden_note(terminal::count_hidden(text))) }
        }
        pre.diff {
            @for line in text.split_inclusive('\n') {
                @let class = match line.as_bytes() {
                    [b'+', b'+', b'+', ..] | [b'-', b'-', b'-', ..] => "head",
                    [b'@', b'@', ..] => "hunk",
                    [b'+', ..] => "add",
                    [b'-', ..] => "del",
                    _ => "ctx",
                };
                span class=(class) { (Untrusted(line)) }
            }
        }
    }
}

/// The pages of the navigation bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// `/`
    Now,
    /// `/conversation`
    Conversation,
    /// `/proposals`
    Proposals,
    /// `/memory`
    Memory,
    /// `/exports`
    Exports,
    /// A page not in the bar (a turn).
    None,
}

const NAV: [(Nav, &str, &str); 5] = [
    (Nav::Now, "/", "Now"),
    (Nav::Conversation, "/conversation", "Conversation"),
    (Nav::Proposals, "/proposals", "Proposals"),
    (Nav::Memory, "/memory", "Memory"),
    (Nav::Exports, "/exports", "Exports"),
];

/// The frame of every page: the stylesheet and (on the live page only) the
/// script, both served from this origin.
pub fn page(title: &str, current: Nav, live: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · thestream inspector" }
                link rel="stylesheet" href="/assets/inspect.css";
                @if live {
                    script src="/assets/live.js" defer {}
                }
            }
            body {
                header {
                    span.brand { "thestream" }
                    span.ro { "read-only" }
                    nav {
                        @for (nav, href, label) in NAV {
                            @if nav == current {
                                a.current href=(href) aria-current="page" { (label) }
                            } @else {
                                a href=(href) { (label) }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// An id shown short, linking to its page.
pub fn id_link(prefix: &str, id: &str) -> Markup {
    let short: String = id.chars().take(12).collect();
    html! { a.id href={ (prefix) (id) } title=(id) { code { (short) } } }
}

/// A literal that needs no escaping but is written through maud anyway.
pub fn code(text: &str) -> Markup {
    html! { code { (text) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_escaped_and_its_hidden_characters_made_visible() {
        let hostile =
            "<script>alert(1)</script>\"><img src=x onerror=alert(2)>\r\u{1b}[8m\u{202e}&";
        let out = block(hostile).into_string();
        assert!(!out.contains("<script>"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(!out.contains('\u{1b}') && !out.contains('\u{202e}') && !out.contains('\r'));
        assert!(out.contains("&lt;script&gt;"));
        assert!(out.contains(r"\u{202e}") && out.contains(r"\r") && out.contains(r"\u{1b}"));
        assert!(out.contains("3 hidden characters made visible"));
        assert!(out.contains("&amp;"));
    }

    #[test]
    fn ten_thousand_lines_and_a_64_kib_line_are_shown_whole() {
        let lines: String = (0..10_000).map(|i| format!("<b>line {i}</b>\n")).collect();
        let out = block(&lines).into_string();
        assert_eq!(out.matches("&lt;b&gt;line ").count(), 10_000);
        assert!(!out.contains("<b>"));
        let long = "\u{202e}x".repeat(32 * 1024);
        let out = block(&long).into_string();
        assert!(out.contains("32,768 hidden characters made visible"));
        assert!(!out.contains('\u{202e}'));
    }

    #[test]
    fn a_summary_announces_what_it_leaves_out() {
        let out = summary("first line\nsecond", 5).into_string();
        assert!(out.contains("first"), "{out}");
        assert!(out.contains("… 12 more chars"), "{out}");
    }

    #[test]
    fn diff_lines_are_classed_and_escaped() {
        let out = diff("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+<b>new</b>\n ctx\n").into_string();
        assert!(
            out.contains("<span class=\"add\">+&lt;b&gt;new&lt;/b&gt;\n</span>"),
            "{out}"
        );
        assert!(out.contains("<span class=\"del\">-old\n</span>"));
        assert!(out.contains("<span class=\"head\">--- a\n</span>"));
    }
}
