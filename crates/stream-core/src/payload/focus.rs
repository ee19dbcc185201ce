//! The focus declaration contract, focuses v1 (docs/design.md §18).
//!
//! A focus declaration is what `propose_focus` carries. It is evidence only:
//! nothing compiles, approves or activates it in this build.

use serde::{Deserialize, Serialize};

use crate::bounds;
use crate::event::{PayloadInvalid, SourceName};
use crate::string_literal;
use crate::text::BoundedText;
use crate::{False, Unchecked};

string_literal!(
    /// `scope.chat`: a focus applies to the chat it was proposed in.
    OriginChat = "origin"
);

/// An array that must be empty (`requestedPermissions.tools`, `.proposals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EmptyList;

impl Serialize for EmptyList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        s.serialize_seq(Some(0))?.end()
    }
}

impl<'de> Deserialize<'de> for EmptyList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<serde::de::IgnoredAny>::deserialize(d)?;
        if items.is_empty() {
            Ok(EmptyList)
        } else {
            Err(serde::de::Error::custom("expected an empty array"))
        }
    }
}

/// `identity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusIdentity {
    /// Slug of 3–64 `[a-z0-9-]`.
    pub id: String,
    /// At least 1.
    pub version: u32,
}

/// `lineage.parent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusParent {
    /// Slug of the parent focus.
    pub id: String,
    /// Its version, at least 1.
    pub version: u32,
}

/// `lineage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusLineage {
    /// The focus this one refines, or null. Required: a complete declaration
    /// says `"parent": null` rather than leaving it out.
    #[serde(deserialize_with = "required_nullable")]
    pub parent: Option<FocusParent>,
}

/// A field that must be present and may be `null` (serde otherwise treats
/// a missing `Option` field as `None`).
fn required_nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// A field that may be absent but, when present, is not `null`.
fn present_not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `scope`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusScope {
    /// Always `origin`.
    pub chat: OriginChat,
}

/// One subscription: a source and the event types wanted from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusSubscription {
    /// Source name.
    pub source: SourceName,
    /// Event types, 1–16, each 1–128 characters.
    pub types: Vec<BoundedText<1, { bounds::EVENT_TYPE_MAX }>>,
}

/// `budgets`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusBudgets {
    /// 1–1,000.
    pub max_runs_per_day: u32,
    /// 1–32,000.
    pub max_output_tokens_per_run: u32,
    /// 1–365.
    pub max_days: u32,
}

/// `requestedPermissions`: a focus may request nothing in v1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusPermissions {
    /// Must be `[]`.
    pub tools: EmptyList,
    /// Must be `[]`.
    pub proposals: EmptyList,
    /// Must be `false`.
    pub external_actions: False,
}

/// How a focus retires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetirementRule {
    /// After `days` days.
    AfterDays,
    /// Only by hand.
    Manual,
}

/// `retirement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusRetirement {
    /// The rule.
    pub rule: RetirementRule,
    /// Required for `after-days` (1–365), forbidden for `manual`; never `null`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_not_null"
    )]
    pub days: Option<u32>,
}

/// One complete strict focus declaration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusDeclaration {
    /// Identity and version.
    pub identity: FocusIdentity,
    /// Lineage.
    pub lineage: FocusLineage,
    /// Scope.
    pub scope: FocusScope,
    /// What the focus is for, 1–2,000 characters.
    pub objective: BoundedText<1, { bounds::OBJECTIVE_MAX }>,
    /// At most 16 subscriptions.
    pub subscriptions: Vec<FocusSubscription>,
    /// Budgets.
    pub budgets: FocusBudgets,
    /// Requested permissions (none in v1).
    pub requested_permissions: FocusPermissions,
    /// Retirement rule.
    pub retirement: FocusRetirement,
}

fn is_slug(s: &str) -> bool {
    (bounds::SLUG_MIN..=bounds::SLUG_MAX).contains(&s.len())
        && s.bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

fn in_range(value: u32, lo: u32, hi: u32, field: &'static str) -> Result<(), PayloadInvalid> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(PayloadInvalid::new(field, "out of range"))
    }
}

impl FocusDeclaration {
    /// The rules serde cannot express, each refusal naming its field.
    pub fn validate(&self) -> Result<(), PayloadInvalid> {
        if !is_slug(&self.identity.id) {
            return Err(PayloadInvalid::new(
                "identity.id",
                "must be a slug of 3-64 [a-z0-9-]",
            ));
        }
        if self.identity.version < 1 {
            return Err(PayloadInvalid::new(
                "identity.version",
                "must be at least 1",
            ));
        }
        if let Some(parent) = &self.lineage.parent {
            if !is_slug(&parent.id) {
                return Err(PayloadInvalid::new("lineage.parent.id", "must be a slug"));
            }
            if parent.version < 1 {
                return Err(PayloadInvalid::new(
                    "lineage.parent.version",
                    "must be at least 1",
                ));
            }
        }
        if self.subscriptions.len() > bounds::SUBSCRIPTIONS_MAX {
            return Err(PayloadInvalid::new("subscriptions", "at most 16"));
        }
        for sub in &self.subscriptions {
            if sub.types.is_empty() || sub.types.len() > bounds::SUBSCRIPTION_TYPES_MAX {
                return Err(PayloadInvalid::new("subscriptions.types", "1-16 types"));
            }
        }
        in_range(
            self.budgets.max_runs_per_day,
            1,
            bounds::RUNS_PER_DAY_MAX,
            "budgets.maxRunsPerDay",
        )?;
        in_range(
            self.budgets.max_output_tokens_per_run,
            1,
            bounds::OUTPUT_TOKENS_PER_RUN_MAX,
            "budgets.maxOutputTokensPerRun",
        )?;
        in_range(
            self.budgets.max_days,
            1,
            bounds::DAYS_MAX,
            "budgets.maxDays",
        )?;
        match (self.retirement.rule, self.retirement.days) {
            (RetirementRule::AfterDays, Some(days)) => {
                in_range(days, 1, bounds::DAYS_MAX, "retirement.days")
            }
            (RetirementRule::AfterDays, None) => Err(PayloadInvalid::new(
                "retirement.days",
                "required for after-days",
            )),
            (RetirementRule::Manual, Some(_)) => Err(PayloadInvalid::new(
                "retirement.days",
                "forbidden for manual",
            )),
            (RetirementRule::Manual, None) => Ok(()),
        }
    }
}

/// Authority a focus proposal does not have: every flag literally false.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusAuthority {
    /// May not activate.
    pub activation: False,
    /// May not widen data access.
    pub data_expansion: False,
    /// May not act outside.
    pub external_actions: False,
    /// May not start training.
    pub training: False,
    /// May not promote an adapter.
    pub adapter_promotion: False,
}

/// Dependency resolution that no approval compiler has performed yet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FocusResolution {
    /// Event references: unchecked.
    pub events: Unchecked,
    /// Sources: unchecked.
    pub sources: Unchecked,
    /// Capabilities: unchecked.
    pub capabilities: Unchecked,
    /// Lineage: unchecked.
    pub lineage: Unchecked,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn sample() -> Value {
        json!({
            "identity": {"id": "spring-garden", "version": 1},
            "lineage": {"parent": null},
            "scope": {"chat": "origin"},
            "objective": "Plan the spring garden.",
            "subscriptions": [],
            "budgets": {"maxRunsPerDay": 5, "maxOutputTokensPerRun": 800, "maxDays": 30},
            "requestedPermissions": {"tools": [], "proposals": [], "externalActions": false},
            "retirement": {"rule": "manual"},
        })
    }

    fn parses(value: Value) -> bool {
        serde_json::from_value::<FocusDeclaration>(value).is_ok_and(|d| d.validate().is_ok())
    }

    #[test]
    fn a_complete_declaration_parses_and_round_trips() {
        let decl: FocusDeclaration = serde_json::from_value(sample()).unwrap();
        decl.validate().unwrap();
        assert_eq!(serde_json::to_value(&decl).unwrap(), sample());
    }

    #[test]
    fn lineage_parent_must_be_present_even_when_null() {
        let mut v = sample();
        v["lineage"] = json!({});
        assert!(!parses(v));
    }

    #[test]
    fn retirement_days_is_never_null() {
        let mut v = sample();
        v["retirement"] = json!({"rule": "manual", "days": null});
        assert!(!parses(v));
        let mut v = sample();
        v["retirement"] = json!({"rule": "after-days", "days": null});
        assert!(!parses(v));
        let mut v = sample();
        v["retirement"] = json!({"rule": "after-days", "days": 30});
        assert!(parses(v));
    }
}
