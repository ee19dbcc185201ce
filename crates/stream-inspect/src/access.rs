//! Who may read a page: the one gate every request passes, and the headers
//! every response carries.
//!
//! The order of the checks is the threat model's: a foreign `Host` is a DNS
//! rebinding (421); a cross-site fetch is another page using the owner's
//! browser (403); a method other than GET or HEAD is refused before anything
//! is read (405); then the token, exchanged once for a cookie, or the cookie
//! (401). Refusals carry a fixed text and nothing read from the store.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq as _;

use crate::App;

/// The cookie that carries the token after the first visit.
pub const COOKIE: &str = "thestream_inspect";

/// The policy of every response: nothing from another origin, no inline
/// script or style, no framing, no form posts.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// A random token: 32 bytes from the operating system's CSPRNG, in hex.
#[derive(Clone)]
pub struct Token(String);

// The token is a credential: never in `Debug`.
impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh token.
    pub fn random() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Self(hex::encode(bytes)))
    }

    /// The token as printed in the URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is the token, in time independent of where they
    /// differ.
    fn matches(&self, candidate: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(candidate.as_bytes()))
    }
}

/// What the gate decided for one request.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Serve it.
    Pass,
    /// The right token in the URL: set the cookie and drop the token from
    /// the address bar.
    Enter,
    /// Refuse with this status.
    Refuse(StatusCode),
}

/// The gate's settings: the token and the `Host` values that name this
/// server.
#[derive(Debug, Clone)]
pub struct Access {
    token: Token,
    hosts: Vec<String>,
}

impl Access {
    /// A gate that accepts `token` and requests naming one of `hosts`
    /// (`127.0.0.1:7878`, `localhost:7878`).
    pub fn new(token: Token, hosts: Vec<String>) -> Self {
        Self { token, hosts }
    }

    /// The one decision.
    fn verdict(&self, method: &Method, uri: &axum::http::Uri, headers: &HeaderMap) -> Verdict {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h))) {
            return Verdict::Refuse(StatusCode::MISDIRECTED_REQUEST);
        }
        if !fetch_site_allowed(headers) {
            return Verdict::Refuse(StatusCode::FORBIDDEN);
        }
        if method != Method::GET && method != Method::HEAD {
            return Verdict::Refuse(StatusCode::METHOD_NOT_ALLOWED);
        }
        if let Some(offered) = query_token(uri) {
            return if uri.path() == "/" && self.token.matches(offered) {
                Verdict::Enter
            } else {
                Verdict::Refuse(StatusCode::UNAUTHORIZED)
            };
        }
        if cookie_token(headers).is_some_and(|c| self.token.matches(c)) {
            Verdict::Pass
        } else {
            Verdict::Refuse(StatusCode::UNAUTHORIZED)
        }
    }
}

/// `Sec-Fetch-Site`: a browser says where a request comes from. Only this
/// origin, or the owner typing the URL (`none`), may read; a client that
/// sends no such header (curl) is not a browser page and passes.
fn fetch_site_allowed(headers: &HeaderMap) -> bool {
    match headers.get("sec-fetch-site").map(HeaderValue::as_bytes) {
        None => true,
        Some(b"same-origin" | b"none") => true,
        Some(_) => false,
    }
}

fn query_token(uri: &axum::http::Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

fn refusal(status: StatusCode) -> Response {
    let text = match status {
        StatusCode::UNAUTHORIZED => {
            "401 unauthorized: open the URL that `thestream inspect` printed\n"
        }
        StatusCode::MISDIRECTED_REQUEST => "421 this server does not answer for that host\n",
        StatusCode::FORBIDDEN => "403 cross-site requests are refused\n",
        StatusCode::METHOD_NOT_ALLOWED => "405 the inspector only reads (GET, HEAD)\n",
        _ => "refused\n",
    };
    let mut response = (status, text).into_response();
    if status == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

fn enter(token: &Token) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/"));
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        token.as_str()
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

/// Sets the headers every response carries, refusals included.
pub fn secure(headers: &mut HeaderMap) {
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// The middleware: the gate, then the headers.
pub async fn gate(
    State(app): State<std::sync::Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    let verdict = app
        .access
        .verdict(request.method(), request.uri(), request.headers());
    let mut response = match verdict {
        Verdict::Pass => next.run(request).await,
        Verdict::Enter => enter(&app.access.token),
        Verdict::Refuse(status) => refusal(status),
    };
    secure(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access() -> Access {
        Access::new(Token("t0k3n".into()), vec!["127.0.0.1:7878".into()])
    }

    fn verdict(method: Method, uri: &str, headers: &[(&str, &str)]) -> Verdict {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(
                header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        access().verdict(&method, &uri.parse().unwrap(), &map)
    }

    const HOST: (&str, &str) = ("host", "127.0.0.1:7878");

    #[test]
    fn each_check_in_order() {
        use StatusCode as S;
        let cookie = ("cookie", "a=b; thestream_inspect=t0k3n");
        // A foreign Host is refused even with the right cookie.
        assert_eq!(
            verdict(Method::GET, "/", &[("host", "evil.example:7878"), cookie]),
            Verdict::Refuse(S::MISDIRECTED_REQUEST)
        );
        assert_eq!(
            verdict(Method::GET, "/", &[cookie]),
            Verdict::Refuse(S::MISDIRECTED_REQUEST)
        );
        for site in ["cross-site", "same-site"] {
            assert_eq!(
                verdict(Method::GET, "/", &[HOST, cookie, ("sec-fetch-site", site)]),
                Verdict::Refuse(S::FORBIDDEN)
            );
        }
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            assert_eq!(
                verdict(m, "/", &[HOST, cookie]),
                Verdict::Refuse(S::METHOD_NOT_ALLOWED)
            );
        }
        assert_eq!(
            verdict(Method::GET, "/", &[HOST]),
            Verdict::Refuse(S::UNAUTHORIZED)
        );
        assert_eq!(
            verdict(
                Method::GET,
                "/",
                &[HOST, ("cookie", "thestream_inspect=t0k3m")]
            ),
            Verdict::Refuse(S::UNAUTHORIZED)
        );
        assert_eq!(
            verdict(Method::GET, "/?token=t0k3n", &[HOST]),
            Verdict::Enter
        );
        assert_eq!(
            verdict(Method::GET, "/?token=wrong", &[HOST, cookie]),
            Verdict::Refuse(S::UNAUTHORIZED)
        );
        // The token is exchanged on `/` only.
        assert_eq!(
            verdict(Method::GET, "/memory?token=t0k3n", &[HOST]),
            Verdict::Refuse(S::UNAUTHORIZED)
        );
        for site in ["same-origin", "none"] {
            assert_eq!(
                verdict(
                    Method::HEAD,
                    "/memory",
                    &[HOST, cookie, ("sec-fetch-site", site)]
                ),
                Verdict::Pass
            );
        }
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        assert_eq!(format!("{:?}", Token("secret-canary".into())), "Token(..)");
    }
}
