//! Secrets of the channel: the bot token (part of every Bot API URL) and the
//! webhook secret. Neither has `Display`; `Debug` prints a placeholder.

use std::fmt;

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// A secret did not have the form Telegram gives it. Never carries the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretFormatError {
    /// A bot token must be `<digits>:<[A-Za-z0-9_-]+>`.
    #[error("the bot token does not have the form <bot-id>:<secret>")]
    BotToken,
    /// A webhook secret must be 1–256 characters of `[A-Za-z0-9_-]`.
    #[error("the webhook secret must be 1-256 characters of [A-Za-z0-9_-]")]
    WebhookSecret,
}

/// The bot token. It is part of every Bot API URL, so it is kept out of
/// logs, errors and `Debug` output: the only way to read it is
/// [`BotToken::expose`], used when a URL is built.
#[derive(Clone, PartialEq, Eq)]
pub struct BotToken(String);

impl BotToken {
    /// Checks the form `<digits>:<[A-Za-z0-9_-]+>`, which also keeps the
    /// token from changing the shape of a URL.
    pub fn new(token: impl Into<String>) -> Result<Self, SecretFormatError> {
        let token = token.into();
        let ok = match token.split_once(':') {
            Some((id, secret)) => {
                (1..=20).contains(&id.len())
                    && id.bytes().all(|b| b.is_ascii_digit())
                    && (1..=256).contains(&secret.len())
                    && secret
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            }
            None => false,
        };
        if ok {
            Ok(Self(token))
        } else {
            Err(SecretFormatError::BotToken)
        }
    }

    /// The token itself, for building a URL. Never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for BotToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BotToken(<redacted>)")
    }
}

/// The webhook secret Telegram sends back in `X-Telegram-Bot-Api-Secret-Token`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(String);

impl WebhookSecret {
    /// Checks Telegram's alphabet and length.
    pub fn new(secret: impl Into<String>) -> Result<Self, SecretFormatError> {
        let secret = secret.into();
        let ok = (1..=256).contains(&secret.len())
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(secret))
        } else {
            Err(SecretFormatError::WebhookSecret)
        }
    }

    /// The secret, for `setWebhook`. Never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the secret, in time independent of where the
    /// two differ and of their lengths (both sides are hashed first).
    pub fn verify(&self, presented: &[u8]) -> bool {
        let ours = Sha256::digest(self.0.as_bytes());
        let theirs = Sha256::digest(presented);
        bool::from(ours.as_slice().ct_eq(theirs.as_slice()))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_form_is_checked_and_debug_is_redacted() {
        let token = BotToken::new("123456:canary-token-ABC_def").unwrap();
        assert_eq!(format!("{token:?}"), "BotToken(<redacted>)");
        for bad in [
            "",
            "123456",
            ":abc",
            "12a:abc",
            "123:ab/c",
            "123:a b",
            "123:abc?x=1",
        ] {
            assert_eq!(
                BotToken::new(bad),
                Err(SecretFormatError::BotToken),
                "{bad}"
            );
        }
    }

    #[test]
    fn webhook_secret_verifies_exactly() {
        let secret = WebhookSecret::new("s3cr3t_-X").unwrap();
        assert!(secret.verify(b"s3cr3t_-X"));
        assert!(!secret.verify(b"s3cr3t_-Y"));
        assert!(!secret.verify(b"s3cr3t_-X "));
        assert!(!secret.verify(b""));
        assert_eq!(format!("{secret:?}"), "WebhookSecret(<redacted>)");
        assert!(WebhookSecret::new("has space").is_err());
        assert!(WebhookSecret::new("x".repeat(257)).is_err());
    }
}
