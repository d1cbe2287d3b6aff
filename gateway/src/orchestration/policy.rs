//! Heat's authorization of the Orchestration API (`heat/common/policy.py`,
//! `heat/api/openstack/v1/util.py`): Heat 27.0.1's default rules under the
//! operator's `[oslo_policy] policy_file`, one registered rule per route,
//! checked with the target `{"project_id": <the caller's project>}` after
//! the project check. A refusal is Heat's `Forbidden`, and no engine call
//! is made. Only Keystone callers are checked: Heat's noauth flavor makes
//! every caller an admin, and keelson keeps that.

use std::path::PathBuf;

use keelson_policy::{Credentials, Denied, Enforcer, HeatEnforcer, OsloPolicyOptions, PolicyError, Target};
use keelson_proto::orchestration::v1::Caller;
use keelson_runtime::options::{ENFORCE_NEW_DEFAULTS, ENFORCE_SCOPE, POLICY_FILE};
use keelson_runtime::Config;
use serde_json::Value;

use super::fault::Fault;
use super::routes::{Action, Matched};

/// The `[oslo_policy]` options of `config` (shared by Placement's and
/// Heat's enforcers: one policy file may override rules of both).
pub fn oslo_policy_options(config: &Config) -> OsloPolicyOptions {
    let dirs: Vec<PathBuf> = config.files.iter().filter_map(|f| f.parent().map(|p| p.to_path_buf())).collect();
    OsloPolicyOptions::resolve(
        config.get(&POLICY_FILE).as_deref(),
        &dirs,
        config.get(&ENFORCE_NEW_DEFAULTS),
        Some(config.get(&ENFORCE_SCOPE)),
    )
}

/// The Orchestration API's enforcer.
pub struct OrchestrationPolicy {
    enforcer: Enforcer,
}

impl OrchestrationPolicy {
    pub fn from_config(config: &Config) -> Result<Self, PolicyError> {
        let enforcer = oslo_policy_options(config).heat_enforcer(HeatEnforcer::Api)?;
        for w in enforcer.warnings() {
            tracing::warn!(target: "keelson::policy", "{w}");
        }
        Ok(OrchestrationPolicy { enforcer })
    }

    pub fn new(enforcer: Enforcer) -> Self {
        OrchestrationPolicy { enforcer }
    }

    /// Heat's `check_is_admin`: the `context_is_admin` rule with an empty
    /// target (by default the `admin` role in the admin project).
    pub fn is_admin(&self, creds: &Credentials) -> bool {
        self.enforcer.authorize("context_is_admin", &Target::new(), creds).is_ok()
    }

    /// Checks each rule of `rules` against the caller's project; the first
    /// refusal is Heat's `Forbidden` naming that rule.
    pub fn authorize(&self, rules: &[String], caller: &Caller, creds: &Credentials) -> Result<(), Fault> {
        let mut target = Target::new();
        target.insert("project_id".into(), Value::String(caller.project_id.clone()));
        for rule in rules {
            if let Err(denied) = self.enforcer.authorize(rule, &target, creds) {
                return Err(refusal(&denied));
            }
        }
        Ok(())
    }
}

/// The credentials Heat's context hands to oslo.policy: oslo.context's
/// values plus Heat's compatibility keys (`user`, `tenant`, `is_admin`).
pub fn heat_credentials(identity: &keelson_policy::ContextValues, is_admin: bool) -> Credentials {
    let mut creds = Credentials::from_context(identity);
    creds.insert("user", identity.user_id.clone().map_or(Value::Null, Value::String));
    creds.insert("tenant", identity.project_id.clone().map_or(Value::Null, Value::String));
    creds.insert("is_admin", is_admin);
    creds
}

/// Heat's answer to a refused rule (also to a token of the wrong scope,
/// which Heat re-raises as the same `Forbidden`).
fn refusal(denied: &Denied) -> Fault {
    if !denied.is_forbidden() {
        // A route naming a rule nobody registered: a bug, never a grant.
        tracing::error!(target: "keelson::policy", "{denied}");
        return Fault::new(500, "PolicyNotRegistered", "");
    }
    Fault::new(403, "Forbidden", forbidden_message(denied.rule()))
}

/// `heat.common.exception.Forbidden(action=...)`'s text.
pub fn forbidden_message(action: &str) -> String {
    format!("You are not authorized to use {action}.")
}

/// The values `StackController._extract_bool_param` reads as true: only
/// "true" in any case (anything but true/false is the engine's 400).
fn query_true(query: &[(String, String)], name: &str) -> bool {
    // webob's `params.get` answers the last value of a repeated key.
    query.iter().rev().find(|(k, _)| k == name).is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
}

/// The stack actions of `POST .../actions` (`ActionController.ACTIONS`).
const STACK_ACTIONS: &[&str] = &["suspend", "resume", "check", "cancel_update", "cancel_without_rollback"];

/// `InstantiationData.no_change()` of a PATCH: no template, environment,
/// parameters, files or other argument than `existing`.
fn patch_changes_nothing(body: Option<&Value>) -> bool {
    let Some(Value::Object(data)) = body else {
        return true;
    };
    data.iter().all(|(k, v)| {
        k == "existing"
            || match v {
                Value::Null => true,
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::String(s) => k != "template" && k != "template_url" && s.is_empty(),
                _ => false,
            }
    })
}

/// The registered rules heat-api checks for a routed request, in its
/// order. Empty when heat-api checks none before answering (an actions
/// body that names no single known action is the engine's 400).
pub fn rules_for(matched: &Matched, query: &[(String, String)], body: Option<&Value>) -> Vec<String> {
    use Action::*;
    let one = |r: &str| vec![r.to_string()];
    match matched.action {
        ValidateTemplate => one("stacks:validate_template"),
        ListResourceTypes => one("stacks:list_resource_types"),
        ResourceSchema => one("stacks:resource_schema"),
        GenerateTemplate => one("stacks:generate_template"),
        ListTemplateVersions => one("stacks:list_template_versions"),
        ListTemplateFunctions => one("stacks:list_template_functions"),
        ListStacks if query_true(query, "global_tenant") => {
            vec!["stacks:index".into(), "stacks:global_index".into()]
        }
        ListStacks => one("stacks:index"),
        ListStacksDetail => one("stacks:detail"),
        CreateStack => one("stacks:create"),
        PreviewStack => one("stacks:preview"),
        Lookup => one("stacks:lookup"),
        ShowStack => one("stacks:show"),
        GetTemplate => one("stacks:template"),
        GetEnvironment => one("stacks:environment"),
        GetFiles => one("stacks:files"),
        UpdateStack => one("stacks:update"),
        UpdateStackPatch if patch_changes_nothing(body) => one("stacks:update_no_change"),
        UpdateStackPatch => one("stacks:update_patch"),
        PreviewUpdate => one("stacks:preview_update"),
        PreviewUpdatePatch => one("stacks:preview_update_patch"),
        DeleteStack => one("stacks:delete"),
        AbandonStack => one("stacks:abandon"),
        ExportStack => one("stacks:export"),
        StackSnapshot => one("stacks:snapshot"),
        ShowSnapshot => one("stacks:show_snapshot"),
        DeleteSnapshot => one("stacks:delete_snapshot"),
        ListSnapshots => one("stacks:list_snapshots"),
        RestoreSnapshot => one("stacks:restore_snapshot"),
        ListOutputs => one("stacks:list_outputs"),
        ShowOutput => one("stacks:show_output"),
        ListResources => one("resource:index"),
        ShowResource => one("resource:show"),
        ResourceMetadata => one("resource:metadata"),
        SignalResource => one("resource:signal"),
        MarkUnhealthy => one("resource:mark_unhealthy"),
        ListEvents => one("events:index"),
        ShowEvent => one("events:show"),
        StackAction => match body {
            Some(Value::Object(m)) if m.len() == 1 => m
                .keys()
                .find(|k| STACK_ACTIONS.contains(&k.as_str()))
                .map(|k| vec![format!("actions:{k}")])
                .unwrap_or_default(),
            _ => Vec::new(),
        },
        BuildInfo => one("build_info:build_info"),
        ListServices => one("service:index"),
        ListSoftwareConfigs if query_true(query, "global_tenant") => {
            vec!["software_configs:index".into(), "software_configs:global_index".into()]
        }
        ListSoftwareConfigs => one("software_configs:index"),
        CreateSoftwareConfig => one("software_configs:create"),
        ShowSoftwareConfig => one("software_configs:show"),
        DeleteSoftwareConfig => one("software_configs:delete"),
        ListSoftwareDeployments => one("software_deployments:index"),
        SoftwareDeploymentMetadata => one("software_deployments:metadata"),
        CreateSoftwareDeployment => one("software_deployments:create"),
        ShowSoftwareDeployment => one("software_deployments:show"),
        UpdateSoftwareDeployment => one("software_deployments:update"),
        DeleteSoftwareDeployment => one("software_deployments:delete"),
        Reject | Options => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::routes::heat_v1;
    use super::*;
    use http::Method;
    use keelson_policy::{ContextValues, PolicyFile};
    use serde_json::json;

    fn identity(project: &str, roles: &[&str]) -> ContextValues {
        ContextValues {
            user_id: Some("u".into()),
            project_id: Some(project.into()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..ContextValues::default()
        }
    }

    fn policy(file: &str) -> OrchestrationPolicy {
        let overrides = PolicyFile::parse(file).unwrap();
        OrchestrationPolicy::new(Enforcer::heat(HeatEnforcer::Api, true, true, overrides).unwrap())
    }

    fn rules(method: Method, path: &str, query: &[(&str, &str)], body: Option<Value>) -> Vec<String> {
        let matched = Matched::find(&heat_v1(), &method, path).unwrap();
        let query: Vec<(String, String)> = query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        rules_for(&matched, &query, body.as_ref())
    }

    #[test]
    fn each_route_names_heats_rule() {
        assert_eq!(rules(Method::GET, "/p/stacks", &[], None), ["stacks:index"]);
        assert_eq!(
            rules(Method::GET, "/p/stacks", &[("global_tenant", "True")], None),
            ["stacks:index", "stacks:global_index"]
        );
        assert_eq!(rules(Method::GET, "/p/stacks", &[("global_tenant", "no")], None), ["stacks:index"]);
        assert_eq!(
            rules(Method::PATCH, "/p/stacks/s/1", &[], Some(json!({"existing": true}))),
            ["stacks:update_no_change"]
        );
        assert_eq!(
            rules(Method::PATCH, "/p/stacks/s/1", &[], Some(json!({"parameters": {"a": 1}}))),
            ["stacks:update_patch"]
        );
        assert_eq!(rules(Method::POST, "/p/stacks/s/1/actions", &[], Some(json!({"check": null}))), ["actions:check"]);
        assert!(
            rules(Method::POST, "/p/stacks/s/1/actions", &[], Some(json!({"check": null, "resume": null}))).is_empty()
        );
        assert_eq!(
            rules(Method::GET, "/p/software_deployments/metadata/x", &[], None),
            ["software_deployments:metadata"]
        );
        assert_eq!(rules(Method::GET, "/p/services", &[], None), ["service:index"]);
    }

    #[test]
    fn heat_defaults_for_member_reader_admin() {
        let p = policy("{}");
        let caller = |project: &str| Caller { project_id: project.into(), ..Caller::default() };
        let member = heat_credentials(&identity("A", &["member", "reader"]), false);
        let reader = heat_credentials(&identity("A", &["reader"]), false);
        let admin_ids = identity("A", &["admin", "member", "reader"]);
        let admin = heat_credentials(&admin_ids, true);
        let r = |s: &str| vec![s.to_string()];
        assert!(p.authorize(&r("stacks:create"), &caller("A"), &member).is_ok());
        let refused = p.authorize(&r("stacks:create"), &caller("A"), &reader).unwrap_err();
        assert_eq!((refused.status, refused.error_type.as_str()), (403, "Forbidden"));
        assert_eq!(refused.message, "You are not authorized to use stacks:create.");
        assert!(p.authorize(&r("stacks:index"), &caller("A"), &reader).is_ok());
        assert!(p.authorize(&r("stacks:global_index"), &caller("A"), &admin).is_err());
        assert!(p.authorize(&r("service:index"), &caller("A"), &member).is_err());
        assert!(p.authorize(&r("service:index"), &caller("A"), &admin).is_ok());
        // keystonemiddleware's default: a token is of the admin project.
        let mut admin_project = admin_ids.clone();
        admin_project.is_admin_project = true;
        assert!(p.is_admin(&Credentials::from_context(&admin_project)));
        let mut elsewhere = admin_ids;
        elsewhere.is_admin_project = false;
        assert!(!p.is_admin(&Credentials::from_context(&elsewhere)));
        let stack_user = heat_credentials(&identity("A", &["heat_stack_user"]), false);
        assert!(p.authorize(&r("stacks:create"), &caller("A"), &stack_user).is_err());
        assert!(p.authorize(&r("resource:signal"), &caller("A"), &stack_user).is_ok());
        let opened = policy(r#"{"stacks:global_index": "rule:project_admin", "stacks:index": "!"}"#);
        assert!(opened.authorize(&r("stacks:global_index"), &caller("A"), &admin).is_ok());
        assert!(opened.authorize(&r("stacks:index"), &caller("A"), &admin).is_err());
    }
}
