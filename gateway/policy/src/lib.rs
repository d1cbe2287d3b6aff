//! An engine for the oslo.policy rule language, answering as oslo.policy
//! 6.0.1 does, so the gateway can authorize Placement and Orchestration API
//! calls (and the stack engine Heat's resource types) with the same
//! defaults, overrides and options as the Python services.
//!
//! ```
//! use keelson_policy::{ContextValues, Credentials, Enforcer, EnforcerConfig, PolicyFile};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let enforcer = Enforcer::placement(EnforcerConfig::default(), PolicyFile::empty())?;
//! let creds = Credentials::from_context(&ContextValues {
//!     user_id: Some("u".into()),
//!     project_id: Some("p".into()),
//!     roles: vec!["admin".into()],
//!     ..ContextValues::default()
//! });
//! let target = creds.default_target();
//! enforcer.authorize("placement:resource_providers:list", &target, &creds)?;
//! # Ok(())
//! # }
//! ```

mod checks;
mod credentials;
mod defaults;
mod enforcer;
mod error;
mod options;
mod parser;
mod policy_file;
mod python;

pub use checks::{Check, NoRules, RuleResolver, MAX_RULE_DEPTH};
pub use credentials::{ContextValues, Credentials, Target, TokenScope};
pub use defaults::{
    keelson_placement_defaults, parse_rule_defaults, placement_defaults, try_heat_defaults, try_placement_defaults,
    DeprecatedRule, RuleDefault, KEELSON_ADMIN_RESOURCE_TYPES, KEELSON_CONSOLE_CONTROLLER, KEELSON_CONSOLE_FLEET,
    KEELSON_CONSOLE_METRICS, KEELSON_CONSOLE_STACKS, KEELSON_PLACEMENT_EXPLAIN,
};
pub use enforcer::{Enforcer, EnforcerConfig, HeatEnforcer};
pub use error::{Denied, PolicyError};
pub use options::OsloPolicyOptions;
pub use parser::{parse_list_rule, parse_rule, Parsed};
pub use policy_file::PolicyFile;
