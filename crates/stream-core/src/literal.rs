//! Literal wire fields: unit types that serialize to exactly one JSON value
//! and refuse every other on input.
//!
//! `"publicationEligible": false` is a [`False`], not a `bool` that happens to
//! be false: a payload claiming `true` does not parse.

/// Declares a unit struct that (de)serializes as exactly one string.
#[macro_export]
macro_rules! string_literal {
    ($(#[$doc:meta])* $name:ident = $value:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $name {
            /// The one wire value.
            pub const VALUE: &'static str = $value;
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                if s == $value {
                    Ok($name)
                } else {
                    Err(::serde::de::Error::custom(concat!("expected the literal \"", $value, "\"")))
                }
            }
        }
    };
}

macro_rules! bool_literal {
    ($(#[$doc:meta])* $name:ident = $value:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bool($value)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                if <bool as ::serde::Deserialize>::deserialize(d)? == $value {
                    Ok($name)
                } else {
                    Err(::serde::de::Error::custom(concat!("expected the literal ", stringify!($value))))
                }
            }
        }
    };
}

bool_literal!(
    /// The literal `false`.
    False = false
);
bool_literal!(
    /// The literal `true`.
    True = true
);

string_literal!(
    /// `"proposalState": "agent-proposed"`.
    AgentProposed = "agent-proposed"
);
string_literal!(
    /// `"authority": "human"`.
    HumanAuthority = "human"
);
string_literal!(
    /// A dependency resolution that nothing has checked yet.
    Unchecked = "unchecked"
);
string_literal!(
    /// The normalized path of the one materializable document.
    MemoryPath = "memory.md"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_accept_only_their_value() {
        assert!(serde_json::from_str::<False>("false").is_ok());
        assert!(serde_json::from_str::<False>("true").is_err());
        assert!(serde_json::from_str::<False>("0").is_err());
        assert!(serde_json::from_str::<AgentProposed>("\"agent-proposed\"").is_ok());
        assert!(serde_json::from_str::<AgentProposed>("\"accepted\"").is_err());
        assert_eq!(serde_json::to_string(&HumanAuthority).unwrap(), "\"human\"");
    }
}
