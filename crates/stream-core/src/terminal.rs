//! Untrusted text on a terminal: the one rendering rule.
//!
//! Anything a model or a Telegram user wrote may carry characters a terminal
//! acts on or hides: a lone `\r` that overwrites a line, `ESC[8m` that
//! conceals one, a bidi override that reorders what is read, zero-width and
//! other invisible format characters. [`render`] shows every such character
//! as a visible escape (`\r`, `\u{1b}`, `\u{202e}`) and counts them;
//! [`shorten`] is the same rendering cut to a window, always ending with how
//! much was left out and the command that shows it all — never a silent cut;
//! [`shorten_to_columns`] cuts one line to a terminal's width the same way.
//! [`render_styled`] escapes first and only then colours whole lines.
//!
//! Pure: no I/O. Everything that prints model- or user-written text to a
//! terminal calls these functions.

use std::fmt::Write as _;

/// Whether `c` is shown as an escape rather than itself: C0 and C1 controls
/// and DEL (except `\n` and `\t`), bidi embeddings, overrides, isolates and
/// marks, zero-width and other invisible format characters (Unicode `Cf`),
/// line and paragraph separators, invisible fillers (Hangul fillers, the
/// combining grapheme joiner, Khmer inherent vowels) and the variation
/// selectors that can smuggle text (all but the text/emoji presentation
/// selectors U+FE0E and U+FE0F).
pub fn is_hidden(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}'
        | '\u{b}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        // Soft hyphen and the rest of Unicode's format characters (Cf).
        | '\u{ad}'
        | '\u{600}'..='\u{605}'
        | '\u{61c}'
        | '\u{6dd}'
        | '\u{70f}'
        | '\u{890}'..='\u{891}'
        | '\u{8e2}'
        | '\u{180e}'
        // Zero-width space, joiners, LRM/RLM.
        | '\u{200b}'..='\u{200f}'
        // Line and paragraph separators, bidi embeddings and overrides.
        | '\u{2028}'..='\u{202e}'
        // Word joiner, invisible operators, bidi isolates, deprecated formats.
        | '\u{2060}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{110bd}'
        | '\u{110cd}'
        | '\u{13430}'..='\u{1343f}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        // Tag characters.
        | '\u{e0001}'
        | '\u{e0020}'..='\u{e007f}'
        // Invisible letters and marks.
        | '\u{34f}'
        | '\u{115f}'..='\u{1160}'
        | '\u{17b4}'..='\u{17b5}'
        | '\u{3164}'
        | '\u{ffa0}'
        // Variation selectors, except the presentation selectors.
        | '\u{180b}'..='\u{180d}'
        | '\u{180f}'
        | '\u{fe00}'..='\u{fe0d}'
        | '\u{e0100}'..='\u{e01ef}'
    )
}

/// Appends the visible escape of a hidden character.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\r' => out.push_str("\\r"),
        '\0' => out.push_str("\\0"),
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// The visible escape of a hidden character (`\\r`, `\\u{202e}`): what a
/// terminal and a page show in its place.
pub fn escape(c: char) -> String {
    let mut out = String::new();
    push_escape(&mut out, c);
    out
}

/// A stretch of untrusted text: characters shown as they are, or one
/// hidden character ([`is_hidden`]) to be shown as its [`escape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Shown as it is.
    Shown(&'a str),
    /// Shown as its escape.
    Hidden(char),
}

/// `text` cut into [`Piece`]s by the one rule of what is hidden: the page
/// renderer walks these, so a page and a terminal make the same characters
/// visible.
pub fn pieces(text: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        if is_hidden(first) {
            rest = &rest[first.len_utf8()..];
            return Some(Piece::Hidden(first));
        }
        let end = rest.find(is_hidden).unwrap_or(rest.len());
        let (shown, tail) = rest.split_at(end);
        rest = tail;
        Some(Piece::Shown(shown))
    })
}

/// Text made safe for a terminal, with the number of characters escaped.
#[derive(Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The text with every hidden character escaped.
    pub text: String,
    /// How many characters were escaped.
    pub escaped: usize,
}

// The text is untrusted and may be sensitive: never in `Debug`.
impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendered")
            .field("chars", &self.text.chars().count())
            .field("escaped", &self.escaped)
            .finish()
    }
}

/// Renders `text` for a terminal: every hidden character ([`is_hidden`])
/// becomes a visible escape; `\n` and `\t` stay. Nothing is dropped.
pub fn render(text: &str) -> Rendered {
    let mut out = String::with_capacity(text.len());
    let mut escaped = 0;
    for c in text.chars() {
        if is_hidden(c) {
            escaped += 1;
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Rendered { text: out, escaped }
}

/// Serialized JSON made safe for a terminal: every hidden character
/// ([`is_hidden`]) becomes a JSON `\uXXXX` escape (a surrogate pair above
/// U+FFFF), so the text still parses to the same value. `serde_json` escapes
/// only C0 controls; C1 controls, bidi overrides and invisible characters
/// would reach the terminal raw. Hidden characters can only occur inside
/// JSON strings, where any character may be escaped this way.
pub fn json(serialized: &str) -> String {
    let mut out = String::with_capacity(serialized.len());
    for c in serialized.chars() {
        if is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How many hidden characters `text` holds (what `flags: controls` reports).
pub fn count_hidden(text: &str) -> usize {
    text.chars().filter(|&c| is_hidden(c)).count()
}

/// A window onto a text: at most `lines` lines of at most `line_chars`
/// characters each (counted in the original text, before escaping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Lines shown.
    pub lines: usize,
    /// Characters shown per line.
    pub line_chars: usize,
}

impl Window {
    /// One line, as a table's summary column.
    pub const SUMMARY: Window = Window {
        lines: 1,
        line_chars: 72,
    };
}

/// `n` with thousands separators: `2,310`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// [`render`] of the part of `text` that fits `window`, then — when anything
/// was left out — one tail line saying how much and where to see it:
/// `… 14 more lines, 2,310 chars: proposal-show 3f9a1c2b7e01` (`see` is the
/// command; the counts are of the original text). `escaped` counts the
/// hidden characters of the whole text, shown or not.
pub fn shorten(text: &str, window: Window, see: &str) -> Rendered {
    let total_lines = text.split('\n').count();
    let total_chars = text.chars().count();
    let mut out = String::new();
    let mut shown_chars = 0;
    let mut shown_lines = 0;
    for (i, line) in text.split('\n').take(window.lines).enumerate() {
        if i > 0 {
            out.push('\n');
            shown_chars += 1;
        }
        let part: String = line.chars().take(window.line_chars).collect();
        shown_chars += part.chars().count();
        out.push_str(&render(&part).text);
        shown_lines += 1;
    }
    // Hidden characters left out count too: the flag must not depend on the window.
    let escaped = count_hidden(text);
    let more_lines = total_lines - shown_lines;
    let more_chars = total_chars.saturating_sub(shown_chars);
    if more_chars > 0 {
        if !out.is_empty() {
            out.push(if more_lines > 0 { '\n' } else { ' ' });
        }
        announce(&mut out, more_lines, more_chars, Some(see));
    }
    Rendered { text: out, escaped }
}

/// The one wording of a cut: `… 14 more lines, 2,310 chars: SEE` (without
/// `: SEE` when `see` is `None`).
fn announce(out: &mut String, more_lines: usize, more_chars: usize, see: Option<&str>) {
    let chars = thousands(more_chars);
    let _ = match more_lines {
        0 => write!(out, "… {chars} more chars"),
        1 => write!(out, "… 1 more line, {chars} chars"),
        n => write!(out, "… {n} more lines, {chars} chars"),
    };
    if let Some(see) = see {
        let _ = write!(out, ": {see}");
    }
}

/// The terminal columns `rendered` (text from [`render`] or [`shorten`])
/// takes on one line: wide characters count two, a tab its widest (8).
pub fn columns(rendered: &str) -> usize {
    rendered
        .chars()
        .map(|c| match c {
            '\t' => 8,
            c => unicode_width::UnicodeWidthChar::width(c).unwrap_or(0),
        })
        .sum()
}

/// The fewest columns [`shorten_to_columns`] leaves for text before it
/// drops `: SEE` from its announcement.
const MIN_TEXT_COLUMNS: usize = 16;

/// The first line of `text`, [`render`]ed and cut to at most `line_chars`
/// characters and to at most `columns` terminal columns, announcement
/// included, on one line (`… 3 more lines, 120 chars: SEE` follows after a
/// space). The announcement names `see` when that leaves at least 16
/// columns of text, or the whole window's (else only the counts: a table
/// names the id anyway).
/// When even the bare announcement is wider than `columns`, it is given
/// whole: a cut is never silent. `escaped` counts the whole text's hidden
/// characters, as in [`shorten`].
pub fn shorten_to_columns(text: &str, line_chars: usize, columns: usize, see: &str) -> Rendered {
    let first = text.split('\n').next().unwrap_or_default();
    let more_lines = text.split('\n').count() - 1;
    let total_chars = text.chars().count();
    // The rendered form of each shown character and the columns up to it.
    let mut pieces: Vec<(String, usize)> = Vec::new();
    let mut width = 0;
    for c in first.chars().take(line_chars) {
        let piece = render(c.encode_utf8(&mut [0; 4])).text;
        width += self::columns(&piece);
        if width > columns {
            break;
        }
        pieces.push((piece, width));
    }
    let fit = |see: Option<&str>| {
        (0..=pieces.len()).rev().find_map(|k| {
            let shown = if k == 0 { 0 } else { pieces[k - 1].1 };
            let more_chars = total_chars - k;
            if more_chars == 0 {
                return Some((k, String::new()));
            }
            let mut tail = String::from(if k == 0 { "" } else { " " });
            announce(&mut tail, more_lines, more_chars, see);
            (shown + self::columns(&tail) <= columns).then_some((k, tail))
        })
    };
    let window_chars = first.chars().take(line_chars).count();
    let with_see = fit(Some(see)).filter(|&(k, _)| {
        k == window_chars || (k > 0 && pieces[k - 1].1 >= MIN_TEXT_COLUMNS.min(columns))
    });
    let (k, tail) = with_see.or_else(|| fit(None)).unwrap_or_else(|| {
        let mut tail = String::new();
        announce(&mut tail, more_lines, total_chars, None);
        (0, tail)
    });
    let mut out: String = pieces[..k].iter().map(|(p, _)| p.as_str()).collect();
    out.push_str(&tail);
    Rendered {
        text: out,
        escaped: count_hidden(text),
    }
}

/// How [`render_styled`] shows a line on a colour terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// As is.
    Plain,
    /// Bold (a diff's headers).
    Bold,
    /// Green (added lines).
    Green,
    /// Red (removed lines).
    Red,
}

impl Style {
    /// The SGR sequence that starts the style (none for plain).
    fn start(self) -> &'static str {
        match self {
            Self::Plain => "",
            Self::Bold => "\u{1b}[1m",
            Self::Green => "\u{1b}[32m",
            Self::Red => "\u{1b}[31m",
        }
    }
}

/// [`render`] of `text`, line by line, each escaped line then wrapped in the
/// colour `style` gives it (called once per line, in order, with the escaped
/// line) when `colour` is on.
/// Escaping comes first, so no text can close, open or fake a colour; the
/// only escape sequences in the result are the ones added here.
pub fn render_styled(
    text: &str,
    colour: bool,
    mut style: impl FnMut(&str) -> Style,
) -> Vec<Rendered> {
    text.split('\n')
        .map(|line| {
            let r = render(line);
            match (colour, style(&r.text)) {
                (false, _) | (true, Style::Plain) => r,
                (true, s) => Rendered {
                    text: format!("{}{}\u{1b}[0m", s.start(), r.text),
                    escaped: r.escaped,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn pieces_cut_at_every_hidden_character_and_rejoin_to_render() {
        let text = "a\u{202e}bc\r\n\u{1b}[8m\u{200b}";
        let got: Vec<Piece<'_>> = pieces(text).collect();
        assert_eq!(
            got,
            vec![
                Piece::Shown("a"),
                Piece::Hidden('\u{202e}'),
                Piece::Shown("bc"),
                Piece::Hidden('\r'),
                Piece::Shown("\n"),
                Piece::Hidden('\u{1b}'),
                Piece::Shown("[8m"),
                Piece::Hidden('\u{200b}'),
            ]
        );
        let rejoined: String = got
            .iter()
            .map(|p| match p {
                Piece::Shown(s) => (*s).to_owned(),
                Piece::Hidden(c) => escape(*c),
            })
            .collect();
        assert_eq!(rejoined, render(text).text);
        assert_eq!(pieces("").count(), 0);
    }
    use super::*;

    fn has_raw_control(s: &str) -> bool {
        s.chars().any(|c| c != '\n' && c != '\t' && is_hidden(c))
    }

    #[test]
    fn json_escapes_every_hidden_character_and_keeps_the_value() {
        let value = serde_json::json!({
            "text": "ok\rhidden\u{1b}[8mgone\u{9b}31m\u{202e}txt\u{200b}\u{2066}\u{85}\u{e0041}\u{3164}\n",
            "nested": ["\u{2028}x"],
        });
        let serialized = serde_json::to_string_pretty(&value).unwrap();
        assert!(has_raw_control(&serialized), "serde_json leaves some raw");
        let safe = json(&serialized);
        assert!(!has_raw_control(&safe), "{safe}");
        assert!(safe.contains("\\u009b") && safe.contains("\\udb40\\udc41"));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn hiding_characters_become_visible_escapes() {
        let r = render("ok\rhidden\u{1b}[8mgone\u{202e}txt\u{200b}\u{2066}\u{85}\u{e0041}\u{3164}");
        assert_eq!(
            r.text,
            "ok\\rhidden\\u{1b}[8mgone\\u{202e}txt\\u{200b}\\u{2066}\\u{85}\\u{e0041}\\u{3164}"
        );
        assert_eq!(r.escaped, 8);
        assert!(!has_raw_control(&r.text));
    }

    #[test]
    fn newlines_tabs_and_ordinary_text_stay() {
        let text = "line one\n\tindented — café, 日本, emoji 👍\u{fe0f}";
        let r = render(text);
        assert_eq!(r.text, text);
        assert_eq!(r.escaped, 0);
    }

    #[test]
    fn every_bidi_override_and_isolate_is_escaped() {
        for c in ('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}') {
            assert!(is_hidden(c), "{:x}", u32::from(c));
        }
        for c in ('\u{0}'..='\u{1f}').filter(|c| *c != '\n' && *c != '\t') {
            assert!(is_hidden(c));
        }
        for c in '\u{7f}'..='\u{9f}' {
            assert!(is_hidden(c));
        }
    }

    #[test]
    fn shorten_announces_what_it_leaves_out() {
        let text: String = (1..=40)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let r = shorten(
            &text,
            Window {
                lines: 3,
                line_chars: 80,
            },
            "proposal-show 3f9a1c2b7e01",
        );
        let shown = "line 1\nline 2\nline 3";
        let left = text.chars().count() - shown.chars().count();
        assert_eq!(
            r.text,
            format!("{shown}\n… 37 more lines, {left} chars: proposal-show 3f9a1c2b7e01")
        );
    }

    #[test]
    fn shorten_cuts_a_long_line_and_says_so() {
        let text = "x".repeat(2_400);
        let r = shorten(&text, Window::SUMMARY, "proposal-show abc");
        assert_eq!(
            r.text,
            format!("{} … 2,328 more chars: proposal-show abc", "x".repeat(72))
        );
    }

    #[test]
    fn shorten_counts_hidden_characters_outside_the_window() {
        let r = shorten("first\nsecond\u{1b}[8m", Window::SUMMARY, "s");
        assert_eq!(r.escaped, 1);
        assert!(!has_raw_control(&r.text));
        let whole = shorten("short", Window::SUMMARY, "s");
        assert_eq!(whole.text, "short");
    }

    #[test]
    fn shorten_to_columns_fits_the_width_and_announces_the_rest() {
        let see = "proposal-show 3f9a1c2b7e01";
        // Fits whole: nothing announced.
        assert_eq!(shorten_to_columns("short", 72, 40, see).text, "short");
        // Wide enough for text and the command.
        let text = "x".repeat(100);
        let r = shorten_to_columns(&text, 72, 60, see);
        assert_eq!(r.text, format!("{} … 84 more chars: {see}", "x".repeat(16)));
        assert_eq!(columns(&r.text), 60);
        // Too narrow for 16 columns of text beside the command: counts only.
        let r = shorten_to_columns(&text, 72, 30, see);
        assert_eq!(r.text, format!("{} … 86 more chars", "x".repeat(14)));
        assert_eq!(columns(&r.text), 30);
        // The character window still applies, and more lines are counted.
        let r = shorten_to_columns("abc\ndef", 72, 80, see);
        assert_eq!(r.text, format!("abc … 1 more line, 4 chars: {see}"));
        // No room at all: the bare announcement, never a silent cut.
        assert_eq!(
            shorten_to_columns(&text, 72, 3, see).text,
            "… 100 more chars"
        );
    }

    #[test]
    fn shorten_to_columns_counts_wide_characters_and_escapes() {
        let r = shorten_to_columns(&"日".repeat(50), 72, 40, "s");
        assert!(columns(&r.text) <= 40, "{}", r.text);
        assert!(r.text.starts_with("日日日"), "{}", r.text);
        let r = shorten_to_columns(&"\u{1b}".repeat(50), 72, 40, "s");
        assert!(columns(&r.text) <= 40, "{}", r.text);
        assert!(!has_raw_control(&r.text));
        assert_eq!(r.escaped, 50);
        // An escape is never cut in half.
        assert!(
            r.text.split(' ').next().unwrap().ends_with('}'),
            "{}",
            r.text
        );
    }

    /// With no width limit it says exactly what `shorten` says on one line.
    #[test]
    fn shorten_to_columns_without_a_limit_is_shorten_on_one_line() {
        for text in ["short", &"y".repeat(100), "a\u{1b}b\nc\nd", ""] {
            assert_eq!(
                shorten_to_columns(text, 72, usize::MAX, "see").text,
                shorten(text, Window::SUMMARY, "see")
                    .text
                    .replace('\n', " ")
            );
        }
    }

    #[test]
    fn styles_apply_after_escaping_and_only_when_on() {
        let text = "+added\u{1b}[0m\n-removed\n context";
        let style = |l: &str| match l.chars().next() {
            Some('+') => Style::Green,
            Some('-') => Style::Red,
            _ => Style::Plain,
        };
        let on: Vec<String> = render_styled(text, true, style)
            .into_iter()
            .map(|r| r.text)
            .collect();
        assert_eq!(
            on,
            [
                "\u{1b}[32m+added\\u{1b}[0m\u{1b}[0m",
                "\u{1b}[31m-removed\u{1b}[0m",
                " context"
            ]
        );
        let off: Vec<String> = render_styled(text, false, style)
            .into_iter()
            .map(|r| r.text)
            .collect();
        assert_eq!(off, ["+added\\u{1b}[0m", "-removed", " context"]);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(2_310), "2,310");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
