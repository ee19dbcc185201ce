//! A provider's own words about our request: the known "this request is
//! unsupported" messages (one table) and the bounded, escaped form in which
//! an error body may be shown to the operator.

use stream_core::payload::RunFailureReason;

use crate::status_reason;

/// At most this many characters of an error body are ever shown.
pub const MAX_PROVIDER_WORDS_CHARS: usize = 300;

/// A known message by which a server says the request itself cannot be
/// served as configured: retrying the same request cannot help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    /// llama-server without `--jinja` refuses any request with tools.
    JinjaRequired,
    /// The model or server does not support tool calls.
    NoTools,
    /// The model has no (usable) chat template.
    ChatTemplate,
    /// The prompt does not fit the server's context window.
    ContextTooSmall,
}

/// The table: a lowercase fragment of the server's message, what it means.
const KNOWN: [(&str, Unsupported); 7] = [
    ("requires --jinja", Unsupported::JinjaRequired),
    ("does not support tools", Unsupported::NoTools),
    ("does not support tool", Unsupported::NoTools),
    ("chat template", Unsupported::ChatTemplate),
    (
        "exceeds the available context",
        Unsupported::ContextTooSmall,
    ),
    ("context size", Unsupported::ContextTooSmall),
    ("context length", Unsupported::ContextTooSmall),
];

impl Unsupported {
    /// Every known meaning.
    pub const ALL: [Self; 4] = [
        Self::JinjaRequired,
        Self::NoTools,
        Self::ChatTemplate,
        Self::ContextTooSmall,
    ];

    /// What the operator can do about it (docs/providers.md).
    pub fn hint(self) -> &'static str {
        match self {
            Self::JinjaRequired => "start llama-server with --jinja",
            Self::NoTools => "use a model whose chat template supports tools (docs/providers.md)",
            Self::ChatTemplate => "pass --chat-template-file with a template that supports tools",
            Self::ContextTooSmall => "raise -c (the server's context size)",
        }
    }
}

/// The known message `body` carries, if any (case-insensitive).
pub fn unsupported_request(body: &str) -> Option<Unsupported> {
    let lower = body.to_lowercase();
    KNOWN
        .iter()
        .find(|(fragment, _)| lower.contains(fragment))
        .map(|&(_, meaning)| meaning)
}

/// The failure a provider's answer stands for, or `None` for 2xx: the one
/// rule, refining [`status_reason`] by the body. A 5xx that says the request
/// itself is unsupported ([`unsupported_request`]) is a rejection, not a
/// transient failure: the same request would be refused again.
pub fn response_reason(status: u16, body: &str) -> Option<RunFailureReason> {
    let reason = status_reason(status)?;
    match reason {
        RunFailureReason::ProviderTransient
            if (500..=599).contains(&status) && unsupported_request(body).is_some() =>
        {
            Some(RunFailureReason::ProviderRejected)
        }
        other => Some(other),
    }
}

/// An error body (status >= 400) as it may be shown: its first
/// [`MAX_PROVIDER_WORDS_CHARS`] characters, every hidden character escaped
/// (`stream_core::terminal::render`) and line breaks and tabs written as
/// `\n`, `\r`, `\t`, so it stays on one log line.
///
/// This is not model text: the provider wrote it, about our request, before
/// any completion. It can still quote the request (a server that echoes the
/// prompt back in an error would leak it into the log): the bound limits how
/// much, the escaping keeps it from forging log lines or terminal output.
/// Only what fits the bound is at risk (docs/providers.md).
pub fn provider_words(body: &str) -> String {
    let mut cut: String = body.chars().take(MAX_PROVIDER_WORDS_CHARS).collect();
    let truncated = cut.len() < body.len();
    cut = cut
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t");
    let mut shown = stream_core::terminal::render(&cut).text;
    if truncated {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunFailureReason as R;

    const JINJA: &str = r#"{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}"#;

    #[test]
    fn known_messages_table() {
        for (body, expected) in [
            (JINJA, Some(Unsupported::JinjaRequired)),
            (
                r#"{"error":"registry.ollama.ai/library/gemma:2b does not support tools"}"#,
                Some(Unsupported::NoTools),
            ),
            (
                "this model does not have a Chat Template",
                Some(Unsupported::ChatTemplate),
            ),
            (
                "the request exceeds the available context size, try increasing it",
                Some(Unsupported::ContextTooSmall),
            ),
            (
                "This model's maximum context length is 4096 tokens",
                Some(Unsupported::ContextTooSmall),
            ),
            (r#"{"error":"overloaded"}"#, None),
            ("", None),
        ] {
            assert_eq!(unsupported_request(body), expected, "{body}");
        }
        for meaning in Unsupported::ALL {
            assert!(!meaning.hint().is_empty());
        }
    }

    #[test]
    fn an_unsupported_5xx_is_rejected_and_anything_else_keeps_its_status_reason() {
        assert_eq!(response_reason(500, JINJA), Some(R::ProviderRejected));
        assert_eq!(response_reason(503, JINJA), Some(R::ProviderRejected));
        assert_eq!(response_reason(500, "{}"), Some(R::ProviderTransient));
        assert_eq!(response_reason(429, JINJA), Some(R::ProviderTransient));
        assert_eq!(response_reason(400, JINJA), Some(R::ProviderRejected));
        assert_eq!(response_reason(200, JINJA), None);
        for status in [0, 100, 200, 301, 404, 408, 500, 529, 600] {
            if status_reason(status) != Some(R::ProviderTransient) || !(500..=599).contains(&status)
            {
                assert_eq!(response_reason(status, JINJA), status_reason(status));
            }
        }
    }

    #[test]
    fn provider_words_are_bounded_escaped_and_on_one_line() {
        assert_eq!(provider_words(JINJA), JINJA);
        let long = "é".repeat(1000);
        let shown = provider_words(&long);
        assert_eq!(shown.chars().count(), MAX_PROVIDER_WORDS_CHARS + 1);
        assert!(shown.ends_with('…'));
        let shown = provider_words("a\nb\tc\u{1b}[31md\u{202e}e\\n");
        assert!(!shown.contains('\n') && !shown.contains('\u{1b}') && !shown.contains('\u{202e}'));
        assert!(shown.starts_with("a\\nb\\tc"), "{shown}");
        assert!(shown.ends_with("e\\\\n"), "{shown}");
    }
}
