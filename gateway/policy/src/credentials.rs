//! Who is asking (credentials) and what they are asking about (target).
//!
//! oslo.policy takes both as plain Python dicts, so both are JSON maps here:
//! values may be strings, lists of strings, `None`, booleans or nested maps,
//! and checks compare their Python `str()` forms.

use serde_json::{Map, Value};

/// Attributes of the object being acted on (`%(key)s` substitutions read it).
pub type Target = Map<String, Value>;

/// The credential dict a check is evaluated against.
///
/// Build one with [`Credentials::from_context`] (the shape oslo.context's
/// `RequestContext.to_policy_values()` produces, which is what Placement
/// hands to oslo.policy) or key by key with [`Credentials::with`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Credentials {
    values: Map<String, Value>,
}

impl Credentials {
    /// An empty credential dict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder-style [`Credentials::insert`].
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.insert(key, value);
        self
    }

    /// Sets one credential attribute (a string, list of strings, `None`...).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        self.values.insert(key.into(), value.into());
    }

    /// The raw value of one attribute, as stored.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// All attributes.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.values
    }

    /// The credentials of a request context, keyed exactly like oslo.context's
    /// `to_policy_values()` (absent attributes are present as `None`, which
    /// matters because checks compare `str(None)`).
    pub fn from_context(ctx: &ContextValues) -> Self {
        let opt = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
        let list = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
        let mut creds = Self::new();
        creds.insert("user_id", opt(&ctx.user_id));
        creds.insert("user_domain_id", opt(&ctx.user_domain_id));
        creds.insert("system_scope", opt(&ctx.system_scope));
        creds.insert("domain_id", opt(&ctx.domain_id));
        creds.insert("project_id", opt(&ctx.project_id));
        creds.insert("project_domain_id", opt(&ctx.project_domain_id));
        creds.insert("roles", list(&ctx.roles));
        creds.insert("is_admin_project", ctx.is_admin_project);
        creds.insert("service_user_id", opt(&ctx.service_user_id));
        creds.insert("service_user_domain_id", opt(&ctx.service_user_domain_id));
        creds.insert("service_project_id", opt(&ctx.service_project_id));
        creds.insert("service_project_domain_id", opt(&ctx.service_project_domain_id));
        creds.insert("service_roles", list(&ctx.service_roles));
        creds
    }

    /// The target Placement uses when a handler passes none
    /// (`RequestContext.can`): `{'project_id': ..., 'user_id': ...}`.
    pub fn default_target(&self) -> Target {
        let mut target = Target::new();
        for key in ["project_id", "user_id"] {
            target.insert(key.to_owned(), self.get(key).cloned().unwrap_or(Value::Null));
        }
        target
    }

    /// Attribute lookup as oslo.policy sees it during enforcement: oslo copies
    /// a truthy `system_scope` into `creds['system']` before evaluating.
    pub(crate) fn lookup(&self, key: &str) -> Option<&Value> {
        if key == "system" {
            if let Some(scope) = self.system_alias() {
                return Some(scope);
            }
        }
        self.values.get(key)
    }

    fn system_alias(&self) -> Option<&Value> {
        self.values.get("system_scope").filter(|v| crate::python::py_truthy(v))
    }
}

impl From<Map<String, Value>> for Credentials {
    fn from(values: Map<String, Value>) -> Self {
        Self { values }
    }
}

/// The request-context attributes that become credentials (oslo.context's
/// `RequestContext` fields used by `to_policy_values()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextValues {
    pub user_id: Option<String>,
    pub user_domain_id: Option<String>,
    /// `"all"` for a system-scoped token (`OpenStack-System-Scope: all`).
    pub system_scope: Option<String>,
    pub domain_id: Option<String>,
    pub project_id: Option<String>,
    pub project_domain_id: Option<String>,
    pub roles: Vec<String>,
    /// oslo.context defaults this to `True`.
    pub is_admin_project: bool,
    pub service_user_id: Option<String>,
    pub service_user_domain_id: Option<String>,
    pub service_project_id: Option<String>,
    pub service_project_domain_id: Option<String>,
    pub service_roles: Vec<String>,
}

impl Default for ContextValues {
    fn default() -> Self {
        Self {
            user_id: None,
            user_domain_id: None,
            system_scope: None,
            domain_id: None,
            project_id: None,
            project_domain_id: None,
            roles: Vec::new(),
            is_admin_project: true,
            service_user_id: None,
            service_user_domain_id: None,
            service_project_id: None,
            service_project_domain_id: None,
            service_roles: Vec::new(),
        }
    }
}

/// The kind of token the credentials describe, decided as oslo.policy does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenScope {
    System,
    Domain,
    Project,
}

impl TokenScope {
    /// `system` if `creds['system']` (or `system_scope`) is truthy, else
    /// `domain` if `domain_id` is truthy, else `project`.
    pub fn of(creds: &Credentials) -> Self {
        let truthy = |key: &str| creds.lookup(key).is_some_and(crate::python::py_truthy);
        if truthy("system") {
            TokenScope::System
        } else if truthy("domain_id") {
            TokenScope::Domain
        } else {
            TokenScope::Project
        }
    }

    /// The name used in `scope_types`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::System => "system",
            TokenScope::Domain => "domain",
            TokenScope::Project => "project",
        }
    }
}

impl std::fmt::Display for TokenScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_shape_and_scope() {
        let project = Credentials::from_context(&ContextValues {
            user_id: Some("u".into()),
            project_id: Some("p".into()),
            roles: vec!["member".into()],
            ..ContextValues::default()
        });
        assert_eq!(project.as_map().len(), 13);
        assert_eq!(project.get("system_scope"), Some(&Value::Null));
        assert_eq!(project.get("is_admin_project"), Some(&Value::Bool(true)));
        assert_eq!(TokenScope::of(&project), TokenScope::Project);
        assert_eq!(project.lookup("system"), None);
        let target = project.default_target();
        assert_eq!(target.get("project_id"), Some(&Value::from("p")));

        let system =
            Credentials::from_context(&ContextValues { system_scope: Some("all".into()), ..ContextValues::default() });
        assert_eq!(TokenScope::of(&system), TokenScope::System);
        assert_eq!(system.lookup("system"), Some(&Value::from("all")));

        let domain = Credentials::new().with("domain_id", "d");
        assert_eq!(TokenScope::of(&domain), TokenScope::Domain);
        // An empty system scope is falsy in Python, so it is not a system token.
        let empty = Credentials::new().with("system_scope", "");
        assert_eq!(TokenScope::of(&empty), TokenScope::Project);
    }
}
