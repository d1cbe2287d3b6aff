//! The `[oslo_policy]` options every keelson enforcer is built from.

use std::path::{Path, PathBuf};

use crate::enforcer::{Enforcer, HeatEnforcer};
use crate::error::PolicyError;
use crate::policy_file::PolicyFile;

/// `[oslo_policy] policy_file`, `enforce_new_defaults` and
/// `enforce_scope`, resolved as oslo.config does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsloPolicyOptions {
    /// The located file: a relative `policy_file` is looked up next to the
    /// configuration files.
    pub policy_file: Option<PathBuf>,
    pub enforce_new_defaults: bool,
    /// oslo.policy 6 always enforces scope; keelson keeps an opt-out
    /// (`enforce_scope = false`).
    pub enforce_scope: bool,
}

impl Default for OsloPolicyOptions {
    fn default() -> Self {
        OsloPolicyOptions { policy_file: None, enforce_new_defaults: true, enforce_scope: true }
    }
}

impl OsloPolicyOptions {
    /// From the raw option values: `policy_file` as written, the
    /// directories of the configuration files, `enforce_new_defaults`,
    /// and `enforce_scope` when it is set at all.
    pub fn resolve(
        policy_file: Option<&str>,
        config_dirs: &[PathBuf],
        enforce_new_defaults: bool,
        enforce_scope: Option<bool>,
    ) -> Self {
        OsloPolicyOptions {
            policy_file: policy_file.and_then(|f| PolicyFile::locate(Path::new(f), config_dirs)),
            enforce_new_defaults,
            enforce_scope: enforce_scope.unwrap_or(true),
        }
    }

    /// One of Heat's two enforcers under these options.
    pub fn heat_enforcer(&self, purpose: HeatEnforcer) -> Result<Enforcer, PolicyError> {
        Enforcer::heat_from_options(purpose, self.policy_file.as_deref(), self.enforce_new_defaults, self.enforce_scope)
    }
}
