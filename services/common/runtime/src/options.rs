//! The options this crate reads (`tls`, `grpc`), and the `[oslo_policy]`
//! options shared by the gateway's and the stack engine's enforcers: the
//! two readers are siblings, and keelson-policy stays free of the
//! configuration layer, so the declarations live here, below both.

use crate::config::{Declaration, Opt};

// Mutual TLS between the mesh's processes (gRPC and the controller's RPC):
// on when the three files are set. PEM: this process's certificate chain
// and key, and the CA its peers' chain to.
pub const TLS_CERT_FILE: Opt<Option<String>> =
    Opt::optional_str("keelson", "tls_cert_file", None, "PEM certificate chain of this process (mesh mutual TLS)");
pub const TLS_KEY_FILE: Opt<Option<String>> =
    Opt::optional_str("keelson", "tls_key_file", None, "PEM private key of this process (mesh mutual TLS)");
pub const TLS_CA_FILE: Opt<Option<String>> =
    Opt::optional_str("keelson", "tls_ca_file", None, "PEM CA bundle the mesh's peers chain to");
/// The name clients check servers' certificates against (default: the
/// host of the address they dial), for meshes that dial pod IPs.
pub const TLS_SERVER_NAME: Opt<Option<String>> = Opt::optional_str(
    "keelson",
    "tls_server_name",
    None,
    "name clients check servers' certificates against (default: the host dialled)",
);

/// Heat's own [DEFAULT] option, kept under [orchestration] with Heat's
/// name and default so that it does not mix with Placement's; every
/// gRPC hop's limits derive from it too ([`crate::grpc::WireLimits`]).
pub const MAX_JSON_BODY_SIZE: Opt<i64> =
    Opt::int("orchestration", "max_json_body_size", 1_048_576, "largest Orchestration API request body, in bytes");

/// oslo.policy's file of rule overrides (relative: next to the
/// configuration files); an empty value names none.
pub const POLICY_FILE: Opt<Option<String>> =
    Opt::optional_str("oslo_policy", "policy_file", Some("policy.yaml"), "policy file of rule overrides");
pub const ENFORCE_NEW_DEFAULTS: Opt<bool> =
    Opt::bool("oslo_policy", "enforce_new_defaults", true, "enforce the new (scoped) default rules");
/// oslo.policy 6 always enforces scope; keelson keeps an opt-out.
pub const ENFORCE_SCOPE: Opt<bool> =
    Opt::bool("oslo_policy", "enforce_scope", true, "check token scope (keelson's opt-out of oslo.policy 6's rule)");

pub const OPTIONS: &[&dyn Declaration] = &[
    &TLS_CERT_FILE,
    &TLS_KEY_FILE,
    &TLS_CA_FILE,
    &TLS_SERVER_NAME,
    &MAX_JSON_BODY_SIZE,
    &POLICY_FILE,
    &ENFORCE_NEW_DEFAULTS,
    &ENFORCE_SCOPE,
];
