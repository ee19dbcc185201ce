//! Digests spelled as 64 lowercase hex digits: the one hex table, the
//! macro every id type of [`crate::ids`] is made by, and [`Sha256Hex`], which
//! both `canon` (hashing) and `ids` (derivations) name, so neither needs
//! the other for it.

/// An identifier was not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} must be 64 lowercase hex digits")]
pub struct IdError {
    /// Which identifier type refused the value.
    pub kind: &'static str,
}

pub(crate) fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub(crate) const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The 32 bytes that 64 lowercase hex digits spell. Only for digits already
/// checked (an id's, which `parse` checks and `from_bytes` makes; a packed
/// part's, which its reader checks): another byte decodes to garbage, never
/// a panic. Every id, part key and packed id goes through here, so it is a
/// table, not the `hex` crate's checked loop (a quarter of a snapshot's
/// split was hex conversion).
pub(crate) fn checked_hex_bytes(digits: &[u8]) -> [u8; 32] {
    let nibble = |d: u8| match d {
        b'0'..=b'9' => d - b'0',
        _ => d.wrapping_sub(b'a').wrapping_add(10) & 0x0f,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0]) << 4 | nibble(pair[1]);
    }
    out
}

/// The 64 lowercase hex digits of a digest.
pub(crate) fn hex_digits(bytes: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX_DIGITS[usize::from(b >> 4)];
        pair[1] = HEX_DIGITS[usize::from(b & 0x0f)];
    }
    out
}

/// [`hex_digits`] as a string.
pub(crate) fn hex_string(bytes: &[u8; 32]) -> String {
    hex_digits(bytes).into_iter().map(char::from).collect()
}

/// A 64-hex id type: parsing, raw bytes, display, a short `Debug`, serde.
macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Parses 64 lowercase hex digits.
            pub fn parse(s: &str) -> Result<Self, $crate::hex_id::IdError> {
                if $crate::hex_id::is_hex64(s) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err($crate::hex_id::IdError { kind: stringify!($name) })
                }
            }

            /// Wraps a raw 32-byte digest.
            pub fn from_bytes(bytes: [u8; 32]) -> Self {
                Self($crate::hex_id::hex_string(&bytes))
            }

            /// The raw 32-byte digest: the inverse of `from_bytes`.
            pub fn to_bytes(&self) -> [u8; 32] {
                $crate::hex_id::checked_hex_bytes(self.0.as_bytes())
            }

            /// The 64 lowercase hex digits.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The first `n` hex digits, for display only.
            pub fn short(&self, n: usize) -> &str {
                &self.0[..n.min(self.0.len())]
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.short(12))
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::hex_id::IdError;
            fn from_str(s: &str) -> Result<Self, $crate::hex_id::IdError> {
                Self::parse(s)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use hex_id;

hex_id!(
    /// A SHA-256 digest of content.
    Sha256Hex
);

impl Sha256Hex {
    /// The digits, for an id type derived from this digest.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The table conversions are the `hex` crate's, both ways.
        #[test]
        fn hex_conversions_are_the_hex_crates(raw in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let digits = hex::encode(raw);
            proptest::prop_assert_eq!(hex_string(&raw), digits.clone());
            proptest::prop_assert_eq!(checked_hex_bytes(digits.as_bytes()), raw);
        }
    }
}
