//! Typed errors: loading problems (`PolicyError`) and refusals (`Denied`).

use std::path::PathBuf;

use crate::credentials::TokenScope;
// Python's `str(list_of_str)`, which oslo uses in the InvalidScope message.
use keelson_pyfmt::repr_str_list as py_list;

/// Why an [`Enforcer`](crate::Enforcer) or its inputs could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The defaults document is not shaped like `placement-policies.json`.
    #[error("invalid policy defaults document: {0}")]
    InvalidDefaults(#[source] serde_json::Error),
    /// Two defaults share a name (oslo's `DuplicatePolicyError`).
    #[error("Policy {0} is already registered")]
    DuplicatePolicy(String),
    /// The policy file exists but could not be read.
    #[error("cannot read policy file {path}: {source}")]
    ReadPolicyFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The policy file is neither valid YAML nor valid JSON.
    #[error("policy file is not valid YAML or JSON: {0}")]
    PolicyFileSyntax(String),
    /// The policy file parsed but is not a map of rule name to rule.
    #[error("invalid policy file: {0}")]
    PolicyFileShape(String),
}

/// Why `authorize` refused a request.
///
/// Placement answers 403 for both [`Denied::NotAuthorized`] and
/// [`Denied::InvalidScope`] (it converts oslo's `InvalidScope` into
/// `PolicyNotAuthorized`); [`Denied::NotRegistered`] is a programming error
/// that Placement lets surface as a 500.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The rule evaluated to false.
    #[error("Policy does not allow {rule} to be performed.")]
    NotAuthorized { rule: String },
    /// The token's scope is not among the rule's `scope_types`.
    #[error(
        "{rule} requires a scope of {}, request was made with {token_scope} scope.",
        py_list(.scope_types)
    )]
    InvalidScope { rule: String, scope_types: Vec<String>, token_scope: TokenScope },
    /// `authorize` was asked about a rule nobody registered.
    #[error("Policy {rule} has not been registered")]
    NotRegistered { rule: String },
}

impl Denied {
    /// The rule that was checked.
    pub fn rule(&self) -> &str {
        match self {
            Denied::NotAuthorized { rule } | Denied::InvalidScope { rule, .. } | Denied::NotRegistered { rule } => rule,
        }
    }

    /// True when the caller should answer 403 (a refusal rather than a bug).
    pub fn is_forbidden(&self) -> bool {
        !matches!(self, Denied::NotRegistered { .. })
    }

    /// The text Placement puts in its 403 body for a refusal:
    /// "Policy does not allow RULE to be performed."
    pub fn forbidden_message(&self) -> String {
        format!("Policy does not allow {} to be performed.", self.rule())
    }
}
