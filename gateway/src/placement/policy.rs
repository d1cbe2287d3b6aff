//! Authorization with oslo.policy semantics: Placement's 38 default rules,
//! the operator's `policy_file` overrides and the `[oslo_policy]` options.

use keelson_policy::{Credentials, Enforcer, PolicyError, PolicyFile, Target};
use keelson_runtime::options::{ENFORCE_NEW_DEFAULTS, ENFORCE_SCOPE, POLICY_FILE};
use keelson_runtime::{ApiError, Config};

use crate::identity::Identity;

/// The policy enforcer of one gateway.
pub struct Policy {
    enforcer: Enforcer,
}

impl Policy {
    /// Builds the enforcer from `[oslo_policy]`. A relative `policy_file`
    /// is looked up next to the configuration files, as oslo.config does.
    pub fn from_config(config: &Config) -> Result<Policy, PolicyError> {
        let file = config.get(&POLICY_FILE).map(std::path::PathBuf::from);
        let search: Vec<std::path::PathBuf> =
            config.files.iter().filter_map(|f| f.parent().map(|p| p.to_path_buf())).collect();
        let located = file.as_deref().and_then(|f| PolicyFile::locate(f, &search));
        let enforcer = Enforcer::placement_from_options(
            located.as_deref(),
            config.get(&ENFORCE_NEW_DEFAULTS),
            config.get(&ENFORCE_SCOPE),
        )?;
        for w in enforcer.warnings() {
            tracing::warn!(target: "keelson::policy", "{w}");
        }
        Ok(Policy { enforcer })
    }

    /// Checks `rule` for `identity`. An empty target means upstream's
    /// default target: the caller's own project and user.
    pub fn authorize(
        &self,
        rule: &str,
        target: &[(&str, &str)],
        identity: &Identity,
    ) -> Result<(), keelson_policy::Denied> {
        let creds = Credentials::from_context(identity);
        let mut t: Target = creds.default_target();
        for (k, v) in target {
            t.insert((*k).to_string(), serde_json::Value::String((*v).to_string()));
        }
        self.enforcer.authorize(rule, &t, &creds)
    }

    /// [`Policy::authorize`] with the refusal as Placement's error: 403
    /// with upstream's text (a scope refusal names only the rule), and a
    /// rule nobody registered a defect (500).
    pub fn check(&self, rule: &str, target: &[(&str, &str)], identity: &Identity) -> Result<(), ApiError> {
        self.authorize(rule, target, identity).map_err(|denied| {
            let detail = match denied {
                keelson_policy::Denied::InvalidScope { .. } => rule.to_string(),
                keelson_policy::Denied::NotRegistered { .. } => {
                    tracing::error!(target: "keelson::policy", "policy rule {rule} is not registered");
                    return ApiError::new(500, "", "An unexpected error occurred in the server.");
                }
                _ => format!("Policy does not allow {rule} to be performed."),
            };
            ApiError::new(403, "", detail)
        })
    }
}
