//! Splitting a reply into Telegram messages.
//!
//! Telegram bounds a message's text at 4,096 UTF-16 code units (an emoji
//! outside the Basic Multilingual Plane counts 2), while a reply is bounded
//! at 4,096 Unicode scalar values: a valid reply may need several messages.
//! [`split_message`] cuts only between grapheme clusters (so never inside
//! a surrogate pair, a combining sequence or an emoji ZWJ sequence), at the
//! last paragraph break, else line break, else whitespace in the second
//! half of the window, else as late as the bound allows. Parts that would
//! be whitespace only (Telegram refuses them as empty) are left out.

use unicode_segmentation::UnicodeSegmentation;

/// Telegram's bound on one message's text, in UTF-16 code units.
pub const MAX_MESSAGE_UTF16: usize = 4096;

/// The length of `s` in UTF-16 code units, the unit Telegram counts.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// `text` as consecutive parts of at most `max_utf16` UTF-16 code units
/// each, none of them whitespace only. Concatenated, the parts are `text`
/// less the whitespace at the cuts. `max_utf16` below 2 is treated as 2
/// (room for any one character).
pub fn split_message(text: &str, max_utf16: usize) -> Vec<&str> {
    let max = max_utf16.max(2);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (part, next) = if utf16_len(rest) <= max {
            (rest, "")
        } else {
            rest.split_at(cut(rest, max))
        };
        if !part.trim().is_empty() {
            parts.push(part);
        }
        rest = next;
    }
    parts
}

/// Where to cut `s` (longer than `max`): a byte index in `1..s.len()`.
fn cut(s: &str, max: usize) -> usize {
    // The grapheme boundaries that fit, and the last one.
    let mut fits = 0usize;
    let mut units = 0usize;
    let mut boundaries: Vec<usize> = Vec::new();
    for (start, grapheme) in s.grapheme_indices(true) {
        let len = utf16_len(grapheme);
        if units + len > max {
            break;
        }
        units += len;
        fits = start + grapheme.len();
        boundaries.push(fits);
    }
    if fits == 0 {
        // One grapheme cluster longer than a whole message (e.g. thousands
        // of combining marks): cut it between scalar values, the only
        // option left, never inside a surrogate pair.
        return hard_cut(s, max);
    }
    let window = &s[..fits];
    let floor = window.len() / 2;
    // Cut after the separator, so the break stays with the earlier part.
    let after = |found: Option<(usize, &str)>| {
        found
            .map(|(i, sep)| i + sep.len())
            .filter(|&i| i > floor && boundaries.binary_search(&i).is_ok())
    };
    after(window.rmatch_indices("\n\n").next())
        .or_else(|| after(window.rmatch_indices('\n').next()))
        .or_else(|| {
            after(
                window
                    .char_indices()
                    .rev()
                    .find(|(_, c)| c.is_whitespace())
                    .map(|(i, c)| (i, &window[i..i + c.len_utf8()])),
            )
        })
        .unwrap_or(fits)
}

fn hard_cut(s: &str, max: usize) -> usize {
    let mut units = 0usize;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            // `max` is at least 2, so the first character always fits.
            return if i == 0 { c.len_utf8() } else { i };
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, max: usize) -> Vec<&str> {
        let parts = split_message(text, max);
        for part in &parts {
            assert!(utf16_len(part) <= max, "part over the bound");
            assert!(!part.trim().is_empty(), "whitespace-only part");
        }
        let joined: String = parts.concat();
        let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().concat();
        assert_eq!(squeeze(&joined), squeeze(text), "text lost or changed");
        parts
    }

    #[test]
    fn a_short_text_is_one_part() {
        assert_eq!(check("Paris.", 4096), ["Paris."]);
        assert_eq!(split_message("", 4096), Vec::<&str>::new());
        assert_eq!(split_message(" \n\t ", 4096), Vec::<&str>::new());
    }

    #[test]
    fn emoji_count_two_and_are_never_split() {
        // 3,000 emoji: 3,000 scalar values (a valid reply), 6,000 UTF-16 units.
        let text = "😀".repeat(3000);
        let parts = check(&text, MAX_MESSAGE_UTF16);
        assert_eq!(parts.len(), 2);
        assert_eq!(utf16_len(parts[0]), 4096);
        assert_eq!(parts[0].chars().count(), 2048);
    }

    #[test]
    fn grapheme_clusters_stay_whole() {
        // A family emoji is 7 scalar values, 11 UTF-16 units, one cluster.
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        let text = family.repeat(10);
        for part in check(&text, 25) {
            assert_eq!(part.len() % family.len(), 0, "a cluster was cut");
        }
        // e + combining acute.
        let text = "e\u{301}".repeat(10);
        for part in check(&text, 5) {
            assert!(!part.starts_with('\u{301}'));
        }
    }

    #[test]
    fn breaks_prefer_paragraph_then_line_then_word() {
        let text = "aaaa bbbb\ncccc\n\ndddd eeee";
        assert_eq!(check(text, 20), ["aaaa bbbb\ncccc\n\n", "dddd eeee"]);
        let text = "aaaa bbbb\ncccc dddd eeee";
        assert_eq!(check(text, 16), ["aaaa bbbb\n", "cccc dddd eeee"]);
        let text = "aaaa bbbb cccc dddd";
        assert_eq!(check(text, 12), ["aaaa bbbb ", "cccc dddd"]);
        let text = "abcdefghij";
        assert_eq!(check(text, 4), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn a_break_too_early_is_not_taken() {
        // The only space is in the first quarter: cut at the bound instead.
        let text = format!("ab {}", "c".repeat(30));
        let parts = check(&text, 16);
        assert_eq!(utf16_len(parts[0]), 16);
    }

    #[test]
    fn whitespace_runs_at_a_cut_leave_no_empty_part() {
        let text = format!("{}{}{}", "a".repeat(10), " ".repeat(30), "b".repeat(10));
        let parts = check(&text, 12);
        assert_eq!(parts[0].trim(), "a".repeat(10));
    }

    #[test]
    fn one_oversized_cluster_is_cut_between_scalar_values() {
        let text = format!("a{}", "\u{301}".repeat(20));
        check(&text, 8);
        let text = "😀".repeat(3);
        assert_eq!(check(&text, 3), ["😀", "😀", "😀"]);
    }
}
