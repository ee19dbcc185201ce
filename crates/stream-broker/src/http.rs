//! The one HTTP request: credential, headers, timeout, body cap.

use std::fmt;
use std::time::Duration;

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use stream_core::payload::ProviderApi;
use stream_protocol::MAX_PROVIDER_BODY_BYTES;

use crate::BrokerError;
use crate::failure::AttemptError;

/// The `anthropic-version` header sent with every Anthropic request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An API key. `Debug` and `Display` never show it.
pub(crate) struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Reads the key from `env`: present, non-empty, a valid header value. An
/// empty `env` names no variable: a keyless server (docs/design.md §19), so
/// no credential and no auth header.
pub(crate) fn credential(env: &str) -> Result<Option<Secret>, BrokerError> {
    if env.is_empty() {
        return Ok(None);
    }
    let missing = || BrokerError::CredentialMissing {
        env: env.to_owned(),
    };
    let value = std::env::var(env).map_err(|_| missing())?;
    let value = value.trim().to_owned();
    if value.is_empty() || HeaderValue::from_str(&value).is_err() {
        return Err(missing());
    }
    Ok(Some(Secret(value)))
}

pub(crate) fn client(timeout: Duration) -> Result<reqwest::Client, BrokerError> {
    // reqwest is built without a bundled crypto provider: use ring. An error
    // means a provider is already installed for the process, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("thestream/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|_| BrokerError::Client)
}

fn sensitive(value: &str) -> Result<HeaderValue, AttemptError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| AttemptError::CredentialMissing)?;
    header.set_sensitive(true);
    Ok(header)
}

/// Adds the credential (when there is one) and the API's version header.
fn authorize(
    request: reqwest::RequestBuilder,
    api: ProviderApi,
    key: Option<&Secret>,
) -> Result<reqwest::RequestBuilder, AttemptError> {
    Ok(match api {
        ProviderApi::OpenaiChat => match key {
            Some(key) => request.header("authorization", sensitive(&format!("Bearer {}", key.0))?),
            None => request,
        },
        ProviderApi::AnthropicMessages => {
            let request = match key {
                Some(key) => request.header("x-api-key", sensitive(&key.0)?),
                None => request,
            };
            request.header(
                "anthropic-version",
                HeaderValue::from_static(ANTHROPIC_VERSION),
            )
        }
    })
}

/// The model-listing path under the base URL: `/models` for OpenAI-shaped
/// bases (which end in `/v1`), `/v1/models` for Anthropic's.
fn models_path(api: ProviderApi) -> &'static str {
    match api {
        ProviderApi::OpenaiChat => "/models",
        ProviderApi::AnthropicMessages => "/v1/models",
    }
}

/// `GET` the model list (spends no tokens; no run); returns the status.
pub(crate) async fn list_models(
    client: &reqwest::Client,
    base_url: &str,
    api: ProviderApi,
    key: Option<&Secret>,
) -> Result<u16, AttemptError> {
    let url = format!("{}{}", base_url.trim_end_matches('/'), models_path(api));
    let request = authorize(client.get(url), api, key)?;
    let response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            AttemptError::ProviderTimeout
        } else {
            AttemptError::ProviderUnreachable
        }
    })?;
    Ok(response.status().as_u16())
}

/// Performs the one request; returns status and body (at most
/// [`MAX_PROVIDER_BODY_BYTES`], UTF-8).
pub(crate) async fn perform(
    client: &reqwest::Client,
    base_url: &str,
    api: ProviderApi,
    key: Option<&Secret>,
    body: Vec<u8>,
) -> Result<(u16, String), AttemptError> {
    let url = format!(
        "{}{}",
        base_url.trim_end_matches('/'),
        stream_provider::endpoint_path(api)
    );
    let request = client
        .post(url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let request = authorize(request, api, key)?;
    // reqwest's errors can carry the URL; only their kind is kept.
    let mut response = request.body(body).send().await.map_err(|e| {
        if e.is_timeout() {
            AttemptError::ProviderTimeout
        } else {
            AttemptError::ProviderUnreachable
        }
    })?;
    let status = response.status().as_u16();
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_PROVIDER_BODY_BYTES as u64) {
        return Err(AttemptError::ProviderBodyTooLarge { status });
    }
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_PROVIDER_BODY_BYTES {
                    return Err(AttemptError::ProviderBodyTooLarge { status });
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) if e.is_timeout() => return Err(AttemptError::ProviderTimeout),
            Err(_) => return Err(AttemptError::ProviderUnreachable),
        }
    }
    let body =
        String::from_utf8(bytes).map_err(|_| AttemptError::ProviderBodyNotUtf8 { status })?;
    Ok((status, body))
}
