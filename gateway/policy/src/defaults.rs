//! Rules registered in code (oslo's `RuleDefault`) and Placement's set of them.

use serde::Deserialize;

use crate::error::PolicyError;

/// A rule's default, as a service registers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleDefault {
    pub name: String,
    pub check_str: String,
    /// Token scopes allowed to use the rule; empty means any scope.
    pub scope_types: Vec<String>,
    /// The default this rule replaced, still honoured when
    /// `enforce_new_defaults` is off.
    pub deprecated_rule: Option<DeprecatedRule>,
    pub description: Option<String>,
}

/// The previous default of a rule (oslo's `DeprecatedRule`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DeprecatedRule {
    pub name: String,
    pub check_str: String,
}

impl RuleDefault {
    /// A rule usable from any token scope, with no deprecated default.
    pub fn new(name: impl Into<String>, check_str: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            check_str: check_str.into(),
            scope_types: Vec::new(),
            deprecated_rule: None,
            description: None,
        }
    }

    /// Restricts the rule to tokens of these scopes (`system`, `domain`, `project`).
    pub fn with_scope_types<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scope_types = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Records the default this rule replaced.
    pub fn with_deprecated(mut self, name: impl Into<String>, check_str: impl Into<String>) -> Self {
        self.deprecated_rule = Some(DeprecatedRule { name: name.into(), check_str: check_str.into() });
        self
    }
}

/// One rule as stored in `policies.json` (extra fields are ignored).
#[derive(Deserialize)]
struct WireRule {
    name: String,
    check_str: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    scope_types: Option<Vec<String>>,
    #[serde(default)]
    deprecated_rule: Option<DeprecatedRule>,
}

#[derive(Deserialize)]
struct WireFile {
    rules: Vec<WireRule>,
}

impl From<WireRule> for RuleDefault {
    fn from(w: WireRule) -> Self {
        Self {
            name: w.name,
            check_str: w.check_str,
            scope_types: w.scope_types.unwrap_or_default(),
            deprecated_rule: w.deprecated_rule,
            description: w.description,
        }
    }
}

/// Placement's registered defaults, extracted from `placement.policies.list_rules()`
/// of openstack-placement 16.0.0.
const PLACEMENT_POLICIES: &str = include_str!("../data/placement-policies.json");

/// Heat's registered defaults, extracted from `heat.policies.list_rules()`
/// of openstack-heat 27.0.1 by `tools/gen_heat_policies.py`.
const HEAT_POLICIES: &str = include_str!("../data/heat-policies.json");

/// The resource types keelson adds that Heat's own list would name had it
/// the plugins: they write Placement's data for any project, which
/// Placement itself allows to admins only, so they are admin-level types as
/// upstream makes OS::Nova::Flavor or the quotas.
pub const KEELSON_ADMIN_RESOURCE_TYPES: &[&str] = &["OS::Placement::ResourceProvider", "OS::Placement::Allocation"];

/// Parses a rules document shaped like `placement-policies.json`
/// (`{"rules": [{name, check_str, scope_types, deprecated_rule}, ...]}`).
pub fn parse_rule_defaults(json: &str) -> Result<Vec<RuleDefault>, PolicyError> {
    let file: WireFile = serde_json::from_str(json).map_err(PolicyError::InvalidDefaults)?;
    Ok(file.rules.into_iter().map(RuleDefault::from).collect())
}

/// The 38 Placement default rules, in registration order.
pub fn try_placement_defaults() -> Result<Vec<RuleDefault>, PolicyError> {
    parse_rule_defaults(PLACEMENT_POLICIES)
}

/// The 38 Placement default rules, in registration order.
///
/// The data is embedded at build time and checked by this crate's tests; were
/// it ever unreadable this returns no rules, so every `authorize` call fails
/// closed with `NotRegistered` instead of panicking.
pub fn placement_defaults() -> Vec<RuleDefault> {
    try_placement_defaults().unwrap_or_default()
}

/// The rule of keelson's own Placement extension `GET
/// /keelson/v1/placement/explain`: it shows every provider and trait of the
/// fleet, so it is admin-only, like upstream's admin-level rules.
pub const KEELSON_PLACEMENT_EXPLAIN: &str = "keelson:placement:explain";

/// The rules of the operator console's data (`/keelson/v1/console/...`):
/// the whole fleet, every project's stacks, the controller's state and the
/// gateway's metrics, so each is admin-only.
pub const KEELSON_CONSOLE_FLEET: &str = "keelson:console:fleet";
pub const KEELSON_CONSOLE_STACKS: &str = "keelson:console:stacks";
pub const KEELSON_CONSOLE_CONTROLLER: &str = "keelson:console:controller";
pub const KEELSON_CONSOLE_METRICS: &str = "keelson:console:metrics";

/// The rules keelson adds to Placement's: `rule:admin_api`, project scope.
pub fn keelson_placement_defaults() -> Vec<RuleDefault> {
    [
        KEELSON_PLACEMENT_EXPLAIN,
        KEELSON_CONSOLE_FLEET,
        KEELSON_CONSOLE_STACKS,
        KEELSON_CONSOLE_CONTROLLER,
        KEELSON_CONSOLE_METRICS,
    ]
    .into_iter()
    .map(|name| RuleDefault::new(name, "rule:admin_api").with_scope_types(["project"]))
    .collect()
}

/// Heat's 100 default rules in registration order, then keelson's
/// `resource_types:<type>` rules (`rule:project_admin`, project scope, as
/// Heat's admin-level types).
pub fn try_heat_defaults() -> Result<Vec<RuleDefault>, PolicyError> {
    let mut rules = parse_rule_defaults(HEAT_POLICIES)?;
    rules.extend(
        KEELSON_ADMIN_RESOURCE_TYPES.iter().map(|t| {
            RuleDefault::new(format!("resource_types:{t}"), "rule:project_admin").with_scope_types(["project"])
        }),
    );
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_data_parses() {
        let rules = try_placement_defaults().expect("embedded data parses");
        assert_eq!(rules.len(), 38);
        assert_eq!(placement_defaults(), rules);
        let service = rules.iter().find(|r| r.name == "service_api").expect("service_api");
        assert_eq!(service.check_str, "role:service");
        assert_eq!(service.scope_types, vec!["project".to_owned()]);
        assert_eq!(
            service.deprecated_rule,
            Some(DeprecatedRule { name: "rule:admin_api".into(), check_str: "role:admin".into() })
        );
        let reader = rules.iter().find(|r| r.name == "project_reader_api").expect("reader");
        assert!(reader.scope_types.is_empty());
    }

    #[test]
    fn keelson_placement_rules_follow_upstreams() {
        let upstream = try_placement_defaults().expect("embedded data parses");
        for rule in keelson_placement_defaults() {
            assert!(upstream.iter().all(|r| r.name != rule.name), "{} shadows an upstream rule", rule.name);
        }
    }

    #[test]
    fn heat_data_parses() {
        let rules = try_heat_defaults().expect("embedded data parses");
        assert_eq!(rules.len(), 100 + KEELSON_ADMIN_RESOURCE_TYPES.len());
        let find = |name: &str| rules.iter().find(|r| r.name == name).expect(name).clone();
        assert_eq!(find("stacks:global_index").check_str, "rule:deny_everybody");
        let create = find("stacks:create");
        assert_eq!(create.check_str, "role:member and project_id:%(project_id)s");
        assert_eq!(create.scope_types, vec!["project".to_owned()]);
        assert_eq!(create.deprecated_rule.map(|d| d.check_str), Some("rule:deny_stack_user".to_owned()));
        assert_eq!(find("resource_types:OS::Nova::Flavor").check_str, "rule:project_admin");
        let allocation = find("resource_types:OS::Placement::Allocation");
        assert_eq!(allocation.check_str, "rule:project_admin");
        assert_eq!(allocation.scope_types, vec!["project".to_owned()]);
    }
}
