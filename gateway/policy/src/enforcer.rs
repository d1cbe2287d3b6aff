//! The enforcer: registered defaults + file overrides -> effective rules,
//! then scope and rule checks per request (oslo's `Enforcer`).
//!
//! The effective rule set is computed once at construction, as oslo's
//! `load_rules` does on first use; rebuild the enforcer to pick up a changed
//! policy file.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::checks::{Check, RuleResolver};
use crate::credentials::{Credentials, Target, TokenScope};
use crate::defaults::{keelson_placement_defaults, try_heat_defaults, try_placement_defaults, RuleDefault};
use crate::error::{Denied, PolicyError};
use crate::parser::parse_rule;
use crate::policy_file::PolicyFile;

/// The `[oslo_policy]` options that change evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnforcerConfig {
    /// Refuse tokens whose scope is not in a rule's `scope_types`.
    /// oslo.policy 6.x always does this (the option no longer exists there);
    /// turning it off restores the old log-only behaviour.
    pub enforce_scope: bool,
    /// When false, a rule whose default changed also accepts its deprecated
    /// default (`new or old`) unless the operator overrode it.
    pub enforce_new_defaults: bool,
    /// `policy_default_rule`: what `rule:X` falls back to when X is unknown,
    /// if a rule of that name exists.
    pub default_rule: Option<String>,
    /// A fallback given as a check rather than a rule name (oslo's
    /// `default_rule` when a service passes a check object, as Heat passes
    /// `!` to its API enforcer and `@` to its resource-type enforcer).
    /// When set it wins over `default_rule`.
    pub default_check: Option<Check>,
}

impl Default for EnforcerConfig {
    fn default() -> Self {
        Self {
            enforce_scope: true,
            enforce_new_defaults: true,
            default_rule: Some("default".to_owned()),
            default_check: None,
        }
    }
}

/// Authorizes actions against registered rules and operator overrides.
#[derive(Debug, Clone)]
pub struct Enforcer {
    config: EnforcerConfig,
    registered: HashMap<String, RuleDefault>,
    rules: HashMap<String, Check>,
    warnings: Vec<String>,
}

impl Enforcer {
    /// Registers `defaults`, applies `overrides` and computes the effective
    /// rules. Fails only if two defaults share a name.
    pub fn new<I>(config: EnforcerConfig, defaults: I, overrides: PolicyFile) -> Result<Self, PolicyError>
    where
        I: IntoIterator<Item = RuleDefault>,
    {
        let mut warnings: Vec<String> = overrides.warnings().to_vec();
        let mut registered: HashMap<String, RuleDefault> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        for default in defaults {
            if registered.contains_key(&default.name) {
                return Err(PolicyError::DuplicatePolicy(default.name));
            }
            order.push(default.name.clone());
            registered.insert(default.name.clone(), default);
        }

        let file_rules = overrides.rules();
        let mut rules: HashMap<String, Check> = file_rules.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for name in &order {
            let Some(default) = registered.get(name) else {
                continue;
            };
            if rules.contains_key(name) {
                continue;
            }
            let check = effective_default(&config, default, file_rules, &mut warnings);
            rules.insert(name.clone(), check);
        }

        let mut enforcer = Self { config, registered, rules, warnings };
        enforcer.check_rules();
        Ok(enforcer)
    }

    /// Placement's defaults, then keelson's own Placement rules, with the
    /// given overrides (errors only if the embedded defaults were
    /// unreadable, which the tests rule out).
    pub fn placement(config: EnforcerConfig, overrides: PolicyFile) -> Result<Self, PolicyError> {
        let mut defaults = try_placement_defaults()?;
        defaults.extend(keelson_placement_defaults());
        Self::new(config, defaults, overrides)
    }

    /// Placement's enforcer from `[oslo_policy]` settings. `policy_file` is
    /// the located file (see [`PolicyFile::locate`]); `None` or a path that
    /// does not exist means defaults only, as oslo.policy behaves. A file
    /// that exists but cannot be read or parsed is an error.
    pub fn placement_from_options(
        policy_file: Option<&Path>,
        enforce_new_defaults: bool,
        enforce_scope: bool,
    ) -> Result<Self, PolicyError> {
        let config = EnforcerConfig { enforce_scope, enforce_new_defaults, ..EnforcerConfig::default() };
        let (overrides, note) = overrides_from(policy_file)?;
        let mut enforcer = Self::placement(config, overrides)?;
        enforcer.warnings.extend(note);
        Ok(enforcer)
    }

    /// Heat's enforcer for `purpose`, with Heat's defaults (and keelson's
    /// resource-type rules) under the operator's overrides. Heat builds two
    /// with different fallbacks for rules nobody defined: the API's denies
    /// (`!`), the resource types' allows (`@`, a type without a rule is
    /// usable by everyone).
    pub fn heat(
        purpose: HeatEnforcer,
        enforce_new_defaults: bool,
        enforce_scope: bool,
        overrides: PolicyFile,
    ) -> Result<Self, PolicyError> {
        let config = EnforcerConfig {
            enforce_scope,
            enforce_new_defaults,
            default_rule: None,
            default_check: Some(match purpose {
                HeatEnforcer::Api => Check::False,
                HeatEnforcer::ResourceTypes => Check::True,
            }),
        };
        Self::new(config, try_heat_defaults()?, overrides)
    }

    /// [`Enforcer::heat`] from `[oslo_policy]` settings, reading the policy
    /// file as [`Enforcer::placement_from_options`] does.
    pub fn heat_from_options(
        purpose: HeatEnforcer,
        policy_file: Option<&Path>,
        enforce_new_defaults: bool,
        enforce_scope: bool,
    ) -> Result<Self, PolicyError> {
        let (overrides, note) = overrides_from(policy_file)?;
        let mut enforcer = Self::heat(purpose, enforce_new_defaults, enforce_scope, overrides)?;
        enforcer.warnings.extend(note);
        Ok(enforcer)
    }

    /// Checks that the registered rule `name` allows the action: the token's
    /// scope must be in the rule's `scope_types` (when scope is enforced),
    /// then the effective rule must pass.
    pub fn authorize(&self, name: &str, target: &Target, creds: &Credentials) -> Result<(), Denied> {
        let Some(default) = self.registered.get(name) else {
            return Err(Denied::NotRegistered { rule: name.to_owned() });
        };
        self.check_scope(default, creds)?;
        if self.evaluate_named(name, target, creds) {
            Ok(())
        } else {
            Err(Denied::NotAuthorized { rule: name.to_owned() })
        }
    }

    /// oslo's `enforce`: like [`Enforcer::authorize`] but without requiring
    /// registration; an unknown rule is simply false.
    pub fn enforce(&self, name: &str, target: &Target, creds: &Credentials) -> bool {
        if let Some(default) = self.registered.get(name) {
            if self.check_scope(default, creds).is_err() {
                return false;
            }
        }
        self.evaluate_named(name, target, creds)
    }

    /// The effective check for a rule (after overrides and deprecations).
    pub fn rule(&self, name: &str) -> Option<&Check> {
        self.rules.get(name)
    }

    /// The registered default for a rule.
    pub fn registered(&self, name: &str) -> Option<&RuleDefault> {
        self.registered.get(name)
    }

    /// Problems found while loading (unparsable rules, undefined references,
    /// cycles, overridden deprecated names) for the caller to log.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The options this enforcer was built with.
    pub fn config(&self) -> &EnforcerConfig {
        &self.config
    }

    fn check_scope(&self, default: &RuleDefault, creds: &Credentials) -> Result<(), Denied> {
        if !self.config.enforce_scope || default.scope_types.is_empty() {
            return Ok(());
        }
        let token_scope = TokenScope::of(creds);
        if default.scope_types.iter().any(|s| s == token_scope.as_str()) {
            return Ok(());
        }
        Err(Denied::InvalidScope { rule: default.name.clone(), scope_types: default.scope_types.clone(), token_scope })
    }

    fn evaluate_named(&self, name: &str, target: &Target, creds: &Credentials) -> bool {
        self.resolve(name).is_some_and(|check| check.evaluate(target, creds, self))
    }

    /// Logs (as warnings) references to undefined rules and reference
    /// cycles, as oslo's `check_rules` does.
    fn check_rules(&mut self) {
        let mut names: Vec<&String> = self.rules.keys().collect();
        names.sort();
        let mut undefined = Vec::new();
        let mut cyclic = Vec::new();
        for name in names {
            let check = &self.rules[name];
            if check.referenced_rules().iter().any(|r| !self.rules.contains_key(*r)) {
                undefined.push(name.clone());
            }
            if self.reaches_cycle(check, &mut Vec::new()) {
                cyclic.push(name.clone());
            }
        }
        if !undefined.is_empty() {
            self.warnings.push(format!("Policies {undefined:?} reference a rule that is not defined."));
        }
        if !cyclic.is_empty() {
            self.warnings.push(format!("Policies {cyclic:?} are part of a cyclical reference."));
        }
    }

    fn reaches_cycle<'a>(&'a self, check: &'a Check, path: &mut Vec<&'a str>) -> bool {
        for name in check.referenced_rules() {
            if path.contains(&name) {
                return true;
            }
            if let Some(next) = self.rules.get(name) {
                path.push(name);
                let found = self.reaches_cycle(next, path);
                path.pop();
                if found {
                    return true;
                }
            }
        }
        false
    }
}

/// Which of Heat's two enforcers (`heat/common/policy.py`): the API's
/// `Enforcer` or the engine's `ResourceEnforcer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeatEnforcer {
    Api,
    ResourceTypes,
}

/// The overrides of a located policy file: none (with a note to log) when
/// the file does not exist, as oslo.policy behaves.
fn overrides_from(policy_file: Option<&Path>) -> Result<(PolicyFile, Option<String>), PolicyError> {
    Ok(match policy_file {
        Some(path) if path.exists() => (PolicyFile::load(path)?, None),
        Some(path) => (PolicyFile::empty(), Some(format!("The policy file {} could not be found.", path.display()))),
        None => (PolicyFile::empty(), None),
    })
}

/// `rule:NAME` lookup with oslo's `Rules.__missing__` fallback to the
/// default rule.
impl RuleResolver for Enforcer {
    fn resolve(&self, name: &str) -> Option<&Check> {
        self.rules.get(name).or_else(|| {
            if let Some(check) = &self.config.default_check {
                return Some(check);
            }
            self.config.default_rule.as_deref().and_then(|fallback| self.rules.get(fallback))
        })
    }
}

/// The check used for a registered rule the file does not override,
/// following oslo's `_handle_deprecated_rule`.
fn effective_default(
    config: &EnforcerConfig,
    default: &RuleDefault,
    file_rules: &BTreeMap<String, Check>,
    warnings: &mut Vec<String>,
) -> Check {
    let mut parse = |text: &str| {
        let parsed = parse_rule(text);
        warnings.extend(parsed.warnings.into_iter().map(|w| format!("default rule {}: {w}", default.name)));
        parsed.check
    };
    let new_check = parse(&default.check_str);
    let Some(deprecated) = &default.deprecated_rule else {
        return new_check;
    };
    let old_check = parse(&deprecated.check_str);

    // An operator who overrode the rule under its old name keeps that
    // override, unless it is just the old default or points at the new name.
    if deprecated.name != default.name {
        if let Some(file_check) = file_rules.get(&deprecated.name) {
            warnings.push(format!(
                "Policy \"{}\":\"{}\" was deprecated in favor of \"{}\":\"{}\"; \
                 the deprecated name is overridden in the policy file",
                deprecated.name, deprecated.check_str, default.name, default.check_str
            ));
            let points_to_new = *file_check == Check::Rule(default.name.clone());
            if *file_check != old_check && !points_to_new && !file_rules.contains_key(&default.name) {
                return file_check.clone();
            }
        }
    }

    if !config.enforce_new_defaults
        && deprecated.check_str != default.check_str
        && !file_rules.contains_key(&default.name)
    {
        return Check::Or(vec![new_check, old_check]);
    }
    new_check
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn project_creds(roles: &[&str], project: &str) -> Credentials {
        Credentials::new()
            .with("user_id", "u")
            .with("project_id", project)
            .with("roles", json!(roles))
            .with("system_scope", Value::Null)
    }

    fn system_creds(roles: &[&str]) -> Credentials {
        Credentials::new()
            .with("user_id", "u")
            .with("project_id", Value::Null)
            .with("roles", json!(roles))
            .with("system_scope", "all")
    }

    fn defaults() -> Vec<RuleDefault> {
        vec![
            RuleDefault::new("admin_api", "role:admin").with_scope_types(["project"]),
            RuleDefault::new("thing:read", "role:reader and project_id:%(project_id)s")
                .with_scope_types(["project"])
                .with_deprecated("old:thing:read", "role:admin"),
            RuleDefault::new("system:audit", "role:reader").with_scope_types(["system"]),
            RuleDefault::new("anywhere", "@"),
        ]
    }

    fn enforcer(config: EnforcerConfig, file: &str) -> Enforcer {
        let overrides = PolicyFile::parse(file).expect("policy file");
        Enforcer::new(config, defaults(), overrides).expect("enforcer")
    }

    fn legacy() -> EnforcerConfig {
        EnforcerConfig { enforce_new_defaults: false, ..EnforcerConfig::default() }
    }

    #[test]
    fn defaults_of_the_config() {
        let config = EnforcerConfig::default();
        assert!(config.enforce_scope);
        assert!(config.enforce_new_defaults);
        assert_eq!(config.default_rule.as_deref(), Some("default"));
    }

    #[test]
    fn deprecated_rule_is_ored_only_without_new_defaults() {
        let admin_elsewhere = project_creds(&["admin"], "p2");
        let target: Target = json!({"project_id": "p1"}).as_object().cloned().unwrap_or_default();

        let strict = enforcer(EnforcerConfig::default(), "{}");
        assert_eq!(
            strict.authorize("thing:read", &target, &admin_elsewhere),
            Err(Denied::NotAuthorized { rule: "thing:read".into() })
        );
        assert_eq!(
            strict.rule("thing:read").map(ToString::to_string).as_deref(),
            Some("(role:reader and project_id:%(project_id)s)")
        );

        let relaxed = enforcer(legacy(), "{}");
        assert_eq!(relaxed.authorize("thing:read", &target, &admin_elsewhere), Ok(()));
        assert_eq!(
            relaxed.rule("thing:read").map(ToString::to_string).as_deref(),
            Some("((role:reader and project_id:%(project_id)s) or role:admin)")
        );
        // The new default still works on its own.
        assert_eq!(relaxed.authorize("thing:read", &target, &project_creds(&["reader"], "p1")), Ok(()));

        // An override of the rule itself wins over both defaults.
        let overridden = enforcer(legacy(), "thing:read: role:auditor\n");
        assert!(overridden.authorize("thing:read", &target, &admin_elsewhere).is_err());
        assert_eq!(overridden.rule("thing:read"), Some(&Check::Role("auditor".into())));
    }

    #[test]
    fn override_of_deprecated_name_is_honoured() {
        let target = Target::new();
        // Overriding the old name replaces the new default, whatever the option.
        for config in [EnforcerConfig::default(), legacy()] {
            let e = enforcer(config, "old:thing:read: role:auditor\n");
            assert_eq!(e.rule("thing:read"), Some(&Check::Role("auditor".into())));
            assert_eq!(e.authorize("thing:read", &target, &project_creds(&["auditor"], "x")), Ok(()));
            assert!(!e.warnings().is_empty());
        }
        // ...unless the override just restates the old default or points at the new name.
        let e = enforcer(EnforcerConfig::default(), "old:thing:read: role:admin\n");
        assert_eq!(
            e.rule("thing:read").map(ToString::to_string).as_deref(),
            Some("(role:reader and project_id:%(project_id)s)")
        );
        let e = enforcer(legacy(), "old:thing:read: rule:thing:read\n");
        assert!(matches!(e.rule("thing:read"), Some(Check::Or(_))));
    }

    #[test]
    fn scope_is_enforced_both_ways() {
        let e = enforcer(EnforcerConfig::default(), "");
        let target = Target::new();
        // A system-scoped admin on a project-scoped rule.
        assert_eq!(
            e.authorize("admin_api", &target, &system_creds(&["admin"])),
            Err(Denied::InvalidScope {
                rule: "admin_api".into(),
                scope_types: vec!["project".into()],
                token_scope: TokenScope::System,
            })
        );
        // A project-scoped reader on a system-scoped rule.
        let denied = e
            .authorize("system:audit", &target, &project_creds(&["reader"], "p"))
            .expect_err("project token on system rule");
        assert!(denied.is_forbidden());
        assert_eq!(
            denied.to_string(),
            "system:audit requires a scope of ['system'], request was made with project scope."
        );
        assert_eq!(denied.forbidden_message(), "Policy does not allow system:audit to be performed.");
        assert_eq!(e.authorize("system:audit", &target, &system_creds(&["reader"])), Ok(()));
        // Rules without scope_types accept any token.
        assert_eq!(e.authorize("anywhere", &target, &system_creds(&[])), Ok(()));
        // A domain token is neither system nor project.
        let domain = Credentials::new().with("domain_id", "d").with("roles", json!(["admin"]));
        assert!(matches!(
            e.authorize("admin_api", &target, &domain),
            Err(Denied::InvalidScope { token_scope: TokenScope::Domain, .. })
        ));
        // With scope enforcement off the rule alone decides.
        let lax = enforcer(EnforcerConfig { enforce_scope: false, ..EnforcerConfig::default() }, "");
        assert_eq!(lax.authorize("admin_api", &target, &system_creds(&["admin"])), Ok(()));
        assert!(!e.enforce("admin_api", &target, &system_creds(&["admin"])));
    }

    #[test]
    fn registration_and_unknown_rules() {
        let e = enforcer(EnforcerConfig::default(), "extra: '@'\nuses_missing: rule:nowhere\n");
        let creds = project_creds(&["admin"], "p");
        let target = Target::new();
        assert_eq!(
            e.authorize("not:registered", &target, &creds),
            Err(Denied::NotRegistered { rule: "not:registered".into() })
        );
        assert!(!Denied::NotRegistered { rule: "x".into() }.is_forbidden());
        // oslo's authorize requires registration even for file-only rules;
        // enforce does not.
        assert!(e.authorize("extra", &target, &creds).is_err());
        assert!(e.enforce("extra", &target, &creds));
        assert!(!e.enforce("not:registered", &target, &creds));
        // rule:X with X unknown is false, and reported at load.
        assert!(!e.enforce("uses_missing", &target, &creds));
        assert!(e.warnings().iter().any(|w| w.contains("not defined")));
    }

    #[test]
    fn default_rule_fallback() {
        let e = enforcer(EnforcerConfig::default(), "default: role:admin\nuses_missing: rule:nowhere\n");
        let target = Target::new();
        assert!(e.enforce("uses_missing", &target, &project_creds(&["admin"], "p")));
        assert!(!e.enforce("uses_missing", &target, &project_creds(&["member"], "p")));
        assert!(e.enforce("unknown:name", &target, &project_creds(&["admin"], "p")));
        let no_fallback = enforcer(
            EnforcerConfig { default_rule: None, default_check: None, ..EnforcerConfig::default() },
            "default: role:admin\nuses_missing: rule:nowhere\n",
        );
        assert!(!no_fallback.enforce("uses_missing", &target, &project_creds(&["admin"], "p")));
    }

    #[test]
    fn cycles_fail_closed_and_are_reported() {
        let e = enforcer(EnforcerConfig::default(), "a: rule:b\nb: rule:a or role:x\n");
        // oslo recurses into rule:a before trying role:x and dies; we deny.
        assert!(!e.enforce("a", &Target::new(), &project_creds(&["member"], "p")));
        assert!(!e.enforce("a", &Target::new(), &project_creds(&["x"], "p")));
        assert!(e.warnings().iter().any(|w| w.contains("cyclical")));
    }

    #[test]
    fn duplicate_defaults_are_rejected() {
        let dup = vec![RuleDefault::new("a", "@"), RuleDefault::new("a", "!")];
        assert!(matches!(
            Enforcer::new(EnforcerConfig::default(), dup, PolicyFile::empty()),
            Err(PolicyError::DuplicatePolicy(name)) if name == "a"
        ));
    }

    #[test]
    fn options_with_missing_or_bad_file() {
        let e = Enforcer::placement_from_options(Some(Path::new("/nonexistent/policy.yaml")), false, true)
            .expect("missing file means defaults");
        assert!(!e.config().enforce_new_defaults);
        assert!(e.warnings().iter().any(|w| w.contains("could not be found")));
        assert!(e.registered("placement:reshaper:reshape").is_some());

        let dir = std::env::temp_dir().join(format!("keelson-policy-enf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, "- just\n- a list\n").expect("write");
        assert!(matches!(
            Enforcer::placement_from_options(Some(&bad), true, true),
            Err(PolicyError::PolicyFileShape(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn heat_api_denies_unknown_rules_and_resource_types_allow_them() {
        let member = project_creds(&["member", "reader"], "p1");
        let admin = project_creds(&["admin", "member", "reader"], "p1");
        let own: Target = json!({"project_id": "p1"}).as_object().cloned().unwrap_or_default();
        let other: Target = json!({"project_id": "p2"}).as_object().cloned().unwrap_or_default();
        let api = Enforcer::heat(HeatEnforcer::Api, true, true, PolicyFile::empty()).expect("heat");
        assert_eq!(api.authorize("stacks:create", &own, &member), Ok(()));
        assert!(api.authorize("stacks:create", &other, &member).is_err());
        assert!(api.authorize("stacks:global_index", &own, &admin).is_err());
        // `!` for a rule the file references but nobody defined.
        assert!(!api.enforce("nothing:here", &own, &admin));
        let file =
            PolicyFile::parse(r#"{"stacks:global_index": "rule:project_admin", "stacks:index": "rule:missing"}"#)
                .expect("file");
        let opened = Enforcer::heat(HeatEnforcer::Api, true, true, file).expect("heat");
        assert_eq!(opened.authorize("stacks:global_index", &own, &admin), Ok(()));
        assert!(opened.authorize("stacks:index", &own, &admin).is_err());

        let types = Enforcer::heat(HeatEnforcer::ResourceTypes, true, true, PolicyFile::empty()).expect("heat");
        let allocation = "resource_types:OS::Placement::Allocation";
        assert_eq!(types.authorize(allocation, &Target::new(), &admin), Ok(()));
        assert_eq!(
            types.authorize(allocation, &Target::new(), &member),
            Err(Denied::NotAuthorized { rule: allocation.into() })
        );
        assert!(types.enforce("resource_types:OS::Heat::None", &Target::new(), &member));
        // Legacy defaults (enforce_new_defaults = False) add the old
        // `deny_stack_user`: a member of another project's path still fails
        // the new rule but passes the old one.
        let legacy = Enforcer::heat(HeatEnforcer::Api, false, true, PolicyFile::empty()).expect("heat");
        assert_eq!(legacy.authorize("stacks:create", &other, &member), Ok(()));
        let stack_user = project_creds(&["heat_stack_user"], "p1");
        assert!(legacy.authorize("stacks:create", &own, &stack_user).is_err());
    }
}
