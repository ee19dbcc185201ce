//! The one rule from an HTTP status to a failure reason, shared by the worker
//! (which rejects a non-2xx answer) and the parent (which decides retries
//! from the status it saw itself).

use stream_core::payload::RunFailureReason;

/// The failure a provider's HTTP `status` stands for, or `None` for 2xx.
///
/// Retrying the same request can help only when the server says so: 408
/// (timeout), 425 (too early, RFC 8470), 429 (rate limit) and 5xx
/// (including Anthropic's 529 overloaded) are transient. Every other 3xx and
/// 4xx — redirects are never followed, 409 is about the request itself — is
/// a rejection. A final 1xx or a number outside 100–599 is not an HTTP
/// answer at all: malformed.
pub fn status_reason(status: u16) -> Option<RunFailureReason> {
    match status {
        200..=299 => None,
        408 | 425 | 429 | 500..=599 => Some(RunFailureReason::ProviderTransient),
        300..=499 => Some(RunFailureReason::ProviderRejected),
        0..=199 | 600..=u16::MAX => Some(RunFailureReason::ProviderMalformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunFailureReason as R;

    #[test]
    fn status_reason_table() {
        for (status, expected) in [
            (0, Some(R::ProviderMalformed)),
            (99, Some(R::ProviderMalformed)),
            (100, Some(R::ProviderMalformed)),
            (101, Some(R::ProviderMalformed)),
            (199, Some(R::ProviderMalformed)),
            (200, None),
            (201, None),
            (204, None),
            (299, None),
            (300, Some(R::ProviderRejected)),
            (301, Some(R::ProviderRejected)),
            (307, Some(R::ProviderRejected)),
            (399, Some(R::ProviderRejected)),
            (400, Some(R::ProviderRejected)),
            (401, Some(R::ProviderRejected)),
            (403, Some(R::ProviderRejected)),
            (404, Some(R::ProviderRejected)),
            (407, Some(R::ProviderRejected)),
            (408, Some(R::ProviderTransient)),
            (409, Some(R::ProviderRejected)),
            (413, Some(R::ProviderRejected)),
            (422, Some(R::ProviderRejected)),
            (424, Some(R::ProviderRejected)),
            (425, Some(R::ProviderTransient)),
            (426, Some(R::ProviderRejected)),
            (429, Some(R::ProviderTransient)),
            (499, Some(R::ProviderRejected)),
            (500, Some(R::ProviderTransient)),
            (502, Some(R::ProviderTransient)),
            (503, Some(R::ProviderTransient)),
            (529, Some(R::ProviderTransient)),
            (599, Some(R::ProviderTransient)),
            (600, Some(R::ProviderMalformed)),
            (999, Some(R::ProviderMalformed)),
            (u16::MAX, Some(R::ProviderMalformed)),
        ] {
            assert_eq!(status_reason(status), expected, "status {status}");
        }
    }
}
