//! The options the stack engine reads: Heat's own `[DEFAULT]` options,
//! kept under `[orchestration]` with Heat's names and defaults so that
//! they do not mix with Placement's; the signal and software-deployment
//! options; Heat's notifications (oslo.messaging's options); and the
//! mesh addresses the engine needs. `[orchestration] max_json_body_size`
//! and `[oslo_policy]` are keelson-runtime's (the gateway reads them too).

use std::time::Duration;

use keelson_runtime::config::{Declaration, Opt};
use keelson_runtime::Config;

const O: &str = "orchestration";

/// Accepted for heat.conf's sake; keelson runs one engine per process
/// (scale with processes).
pub const NUM_ENGINE_WORKERS: Opt<i64> =
    Opt::int(O, "num_engine_workers", 2, "Heat's engine processes per host (unused: one engine per process)");
pub const MAX_TEMPLATE_SIZE: Opt<i64> =
    Opt::int(O, "max_template_size", 524_288, "largest template, in bytes of its text form");
pub const MAX_RESOURCES_PER_STACK: Opt<i64> =
    Opt::int(O, "max_resources_per_stack", 1000, "resources in a root stack's whole tree (negative: no limit)");
pub const MAX_STACKS_PER_TENANT: Opt<i64> =
    Opt::int(O, "max_stacks_per_tenant", 512, "stacks a project may own (-1: no limit; admins: none)");
pub const MAX_SNAPSHOTS_PER_STACK: Opt<i64> =
    Opt::int(O, "max_snapshots_per_stack", 32, "snapshots a stack may have (negative: no limit; admins: none)");
pub const MAX_NESTED_STACK_DEPTH: Opt<i64> = Opt::int(O, "max_nested_stack_depth", 5, "deepest stack nesting");
pub const MAX_EVENTS_PER_STACK: Opt<i64> =
    Opt::int(O, "max_events_per_stack", 1000, "events kept per stack (older ones are purged)");
pub const ENABLE_STACK_ABANDON: Opt<bool> = Opt::bool(O, "enable_stack_abandon", false, "allow abandoning stacks");
pub const ENABLE_STACK_ADOPT: Opt<bool> = Opt::bool(O, "enable_stack_adopt", false, "allow adopting stacks");
pub const HIDDEN_STACK_TAGS: Opt<Vec<String>> = Opt::list(
    O,
    "hidden_stack_tags",
    &["data-processing-cluster"],
    "stacks with these tags are left out of lists unless show_hidden",
);
/// Seconds; a value below 1 takes the default.
pub const ENGINE_LIFE_CHECK_TIMEOUT: Opt<i64> =
    Opt::int(O, "engine_life_check_timeout", 2, "seconds the lock holder's liveness probe may take");
/// Seconds; a value below 1 takes the default.
pub const PERIODIC_INTERVAL: Opt<i64> =
    Opt::int(O, "periodic_interval", 5, "seconds between heartbeats and watchdog passes");
/// keelson's own: an IN_PROGRESS stack with no live lock holder and no
/// change for this long is re-triggered by the watchdog. Seconds; a value
/// below 1 takes the default.
pub const STALL_TIMEOUT: Opt<i64> =
    Opt::int(O, "stall_timeout", 30, "seconds before the watchdog re-triggers a stalled stack");
pub const ACTION_RETRY_LIMIT: Opt<i64> =
    Opt::int(O, "action_retry_limit", 5, "retries of a resource action that failed with a retryable error");
pub const CLIENT_RETRY_LIMIT: Opt<i64> =
    Opt::int(O, "client_retry_limit", 2, "retries of a call to a service that failed to connect");
/// Heat's clients wait as long as the service takes; a bound is kept, long
/// enough for Nova's POST /servers under a burst of boots (a call that
/// times out may still have made what it asked for).
pub const CLIENT_TIMEOUT: Opt<i64> = Opt::int(
    O,
    "client_timeout",
    300,
    "seconds a call to another OpenStack service may take, answer included (below 1: the default)",
);
/// keelson's own, off by default as Heat has none: an operator whose Nova
/// or Neutron cannot take a burst of boots bounds the servers an engine
/// has building at once, from POST /servers until ACTIVE or ERROR. (A
/// bound below what the cloud builds in parallel makes the stack slower:
/// 16 took 580 s where Heat took 406 s for the same 100 servers.)
pub const MAX_CONCURRENT_SERVER_BUILDS: Opt<i64> = Opt::int(
    O,
    "max_concurrent_server_builds",
    0,
    "servers an engine has building at once, from Nova's POST /servers until ACTIVE or ERROR (below 1: no bound)",
);
/// At least 1.
pub const MAX_CONCURRENT_CHECKS: Opt<i64> =
    Opt::int(O, "max_concurrent_checks", 64, "check_resource tasks an engine runs at once");

// Signals and software deployments (Heat's names where Heat has them): the
// public URLs embedded in what instances receive (default: the gateway's
// own Orchestration endpoint), the pre-signed URLs' lifetime in seconds
// (0: no expiry) and key (default: generated, stored in the database), the
// default transports.
pub const HEAT_WAITCONDITION_SERVER_URL: Opt<Option<String>> = Opt::optional_str(
    "DEFAULT",
    "heat_waitcondition_server_url",
    None,
    "base of pre-signed wait condition URLs (default: <public_endpoint>/v1/waitcondition)",
);
pub const HEAT_METADATA_SERVER_URL: Opt<Option<String>> = Opt::optional_str(
    "DEFAULT",
    "heat_metadata_server_url",
    None,
    "base of pre-signed signal URLs (default: the public endpoint)",
);
pub const PUBLIC_ENDPOINT: Opt<Option<String>> = Opt::optional_str(
    O,
    "public_endpoint",
    None,
    "the Orchestration API as instances reach it (default: http:// + orchestration_listen)",
);
pub const SIGNAL_URL_LIFETIME: Opt<i64> =
    Opt::int(O, "signal_url_lifetime", 86_400, "seconds a pre-signed URL works (0: until its resource is gone)");
pub const SIGNAL_SIGNING_KEY: Opt<Option<String>> =
    Opt::optional_str(O, "signal_signing_key", None, "key of pre-signed URLs (default: generated, stored)");
pub const DEFAULT_DEPLOYMENT_SIGNAL_TRANSPORT: Opt<String> =
    Opt::str(O, "default_deployment_signal_transport", "CFN_SIGNAL", "how software deployments signal unless they say");
pub const DEFAULT_SOFTWARE_CONFIG_TRANSPORT: Opt<String> = Opt::str(
    O,
    "default_software_config_transport",
    "POLL_SERVER_HEAT",
    "how servers fetch software config unless they say",
);
pub const CLIENTS_HEAT_URL: Opt<Option<String>> = Opt::optional_str(
    "clients_heat",
    "url",
    None,
    "the API base of signal endpoints (http://host:8004/v1/%(tenant_id)s)",
);

// Heat's notifications (oslo.messaging's options): off unless `driver` is
// messagingv2 or messaging; the broker from `transport_url` here or in
// [DEFAULT].
pub const NOTIFICATION_DRIVER: Opt<Vec<String>> =
    Opt::list("oslo_messaging_notifications", "driver", &[], "notification drivers (messagingv2 or messaging: on)");
pub const NOTIFICATION_TRANSPORT_URL: Opt<Option<String>> = Opt::optional_str(
    "oslo_messaging_notifications",
    "transport_url",
    None,
    "the notifications' broker (default: [DEFAULT] transport_url)",
);
/// An empty list is the default's.
pub const NOTIFICATION_TOPICS: Opt<Vec<String>> =
    Opt::list("oslo_messaging_notifications", "topics", &["notifications"], "routing key prefixes of notifications");
pub const TRANSPORT_URL: Opt<Option<String>> =
    Opt::optional_str("DEFAULT", "transport_url", None, "the message broker (rabbit://user:pass@host:port/vhost)");
pub const CONTROL_EXCHANGE: Opt<String> =
    Opt::str("DEFAULT", "control_exchange", "heat", "the exchange notifications are published to");
// The publisher's connection (oslo.messaging's rabbit driver options): the
// heartbeat timeout asked of the broker, and the reconnection back-off
// (doubling from the interval up to the maximum); seconds, a negative value
// counts as zero.
pub const HEARTBEAT_TIMEOUT_THRESHOLD: Opt<i64> = Opt::int(
    "oslo_messaging_rabbit",
    "heartbeat_timeout_threshold",
    60,
    "seconds of broker silence before the connection is dropped (0: no heartbeat)",
);
pub const RABBIT_RETRY_INTERVAL: Opt<i64> =
    Opt::int("oslo_messaging_rabbit", "rabbit_retry_interval", 1, "seconds before the first reconnection attempt");
pub const RABBIT_INTERVAL_MAX: Opt<i64> =
    Opt::int("oslo_messaging_rabbit", "rabbit_interval_max", 30, "longest wait between reconnection attempts");

// Heat's identity model (`heat/common/config.py`, `[DEFAULT]`; the
// trustee's keystoneauth password options in `[trustee]`; Keystone's URL
// in `[clients_keystone]`). Without `[clients_keystone] auth_uri` the
// engine talks to no Keystone: no trusts, no stack-domain users (noauth).
pub const DEFERRED_AUTH_METHOD: Opt<String> = Opt::str(
    "DEFAULT",
    "deferred_auth_method",
    "trusts",
    "how deferred operations act for the user: trusts (a Keystone trust per stack) or password (none stored)",
)
.choices(&["trusts", "password"]);
/// Empty: the trustor's own roles (as its token lists them).
pub const TRUSTS_DELEGATED_ROLES: Opt<Vec<String>> =
    Opt::list("DEFAULT", "trusts_delegated_roles", &[], "roles a stack's trust delegates (empty: all of the user's)");
pub const AUTH_ENCRYPTION_KEY: Opt<String> = Opt::str(
    "DEFAULT",
    "auth_encryption_key",
    "notgood but just long enough i t",
    "key the stored credentials (trust ids) and secret resource data are encrypted with",
);
pub const STACK_USER_DOMAIN_ID: Opt<Option<String>> =
    Opt::optional_str("DEFAULT", "stack_user_domain_id", None, "the domain of stack users and projects (by id)");
pub const STACK_USER_DOMAIN_NAME: Opt<Option<String>> =
    Opt::optional_str("DEFAULT", "stack_user_domain_name", None, "the domain of stack users and projects (by name)");
pub const STACK_DOMAIN_ADMIN: Opt<Option<String>> =
    Opt::optional_str("DEFAULT", "stack_domain_admin", None, "the admin user of the stack user domain");
pub const STACK_DOMAIN_ADMIN_PASSWORD: Opt<Option<String>> =
    Opt::optional_str("DEFAULT", "stack_domain_admin_password", None, "the stack user domain admin's password");
pub const HEAT_STACK_USER_ROLE: Opt<String> =
    Opt::str("DEFAULT", "heat_stack_user_role", "heat_stack_user", "the role stack users are given");
pub const CLIENTS_KEYSTONE_AUTH_URI: Opt<Option<String>> = Opt::optional_str(
    "clients_keystone",
    "auth_uri",
    None,
    "Keystone's public endpoint (unversioned or /v3), as the engine and instances reach it",
);
// Which catalog endpoints the engine's clients use (Heat's `[clients]`,
// `[clients_<client>]` and `region_name_for_services`): keystoneauth's
// interface names, in either form.
const ENDPOINT_TYPES: &[&str] = &["publicURL", "internalURL", "adminURL", "public", "internal", "admin"];
pub const CLIENTS_ENDPOINT_TYPE: Opt<String> =
    Opt::str("clients", "endpoint_type", "publicURL", "the catalog endpoints the clients use").choices(ENDPOINT_TYPES);
pub const CLIENTS_NOVA_ENDPOINT_TYPE: Opt<Option<String>> =
    Opt::optional_str("clients_nova", "endpoint_type", None, "Nova's endpoint type (default: [clients]'s)");
pub const CLIENTS_NEUTRON_ENDPOINT_TYPE: Opt<Option<String>> =
    Opt::optional_str("clients_neutron", "endpoint_type", None, "Neutron's endpoint type (default: [clients]'s)");
pub const CLIENTS_GLANCE_ENDPOINT_TYPE: Opt<Option<String>> =
    Opt::optional_str("clients_glance", "endpoint_type", None, "Glance's endpoint type (default: [clients]'s)");
pub const CLIENTS_CINDER_ENDPOINT_TYPE: Opt<Option<String>> =
    Opt::optional_str("clients_cinder", "endpoint_type", None, "Cinder's endpoint type (default: [clients]'s)");
pub const REGION_NAME_FOR_SERVICES: Opt<Option<String>> = Opt::optional_str(
    "DEFAULT",
    "region_name_for_services",
    None,
    "the region whose endpoints the clients use (default: the first of each service)",
);
/// Heat's TLS options of a client group (`ca_file`, `cert_file`,
/// `key_file`, `insecure`: keystoneauth's `verify` and `cert`).
pub struct ClientTlsOptions {
    pub ca_file: Opt<Option<String>>,
    pub cert_file: Opt<Option<String>>,
    pub key_file: Opt<Option<String>>,
    /// In a `[clients_<client>]` group it counts only where it is set.
    pub insecure: Opt<bool>,
}

const fn client_tls_options(group: &'static str, per_client: bool) -> ClientTlsOptions {
    let (ca, cert, key, insecure) = if per_client {
        (
            "this client's CA file (default: [clients]'s)",
            "this client's PEM certificate (default: [clients]'s)",
            "this client's PEM private key (default: [clients]'s)",
            "do not verify this client's servers (unset: [clients]'s)",
        )
    } else {
        (
            "PEM CA certificates the services' https must chain to (default: the system's)",
            "PEM client certificate (chain) the clients present (alone: with the key in it)",
            "the client certificate's PEM private key",
            "do not verify the services' https certificates",
        )
    };
    ClientTlsOptions {
        ca_file: Opt::optional_str(group, "ca_file", None, ca),
        cert_file: Opt::optional_str(group, "cert_file", None, cert),
        key_file: Opt::optional_str(group, "key_file", None, key),
        insecure: Opt::bool(group, "insecure", false, insecure),
    }
}

pub const CLIENTS_TLS: ClientTlsOptions = client_tls_options("clients", false);
pub const CLIENTS_KEYSTONE_TLS: ClientTlsOptions = client_tls_options("clients_keystone", true);
pub const CLIENTS_NOVA_TLS: ClientTlsOptions = client_tls_options("clients_nova", true);
pub const CLIENTS_NEUTRON_TLS: ClientTlsOptions = client_tls_options("clients_neutron", true);
pub const CLIENTS_GLANCE_TLS: ClientTlsOptions = client_tls_options("clients_glance", true);
pub const CLIENTS_CINDER_TLS: ClientTlsOptions = client_tls_options("clients_cinder", true);
/// The service clients' own TLS options, by Heat's client name (Keystone's
/// are the sessions' own: [`CLIENTS_KEYSTONE_TLS`]).
pub const CLIENT_TLS: &[(&str, &ClientTlsOptions)] = &[
    ("nova", &CLIENTS_NOVA_TLS),
    ("neutron", &CLIENTS_NEUTRON_TLS),
    ("glance", &CLIENTS_GLANCE_TLS),
    ("cinder", &CLIENTS_CINDER_TLS),
];

/// The per-client options, by Heat's client name.
pub const CLIENT_ENDPOINT_TYPES: &[(&str, &Opt<Option<String>>)] = &[
    ("nova", &CLIENTS_NOVA_ENDPOINT_TYPE),
    ("neutron", &CLIENTS_NEUTRON_ENDPOINT_TYPE),
    ("glance", &CLIENTS_GLANCE_ENDPOINT_TYPE),
    ("cinder", &CLIENTS_CINDER_ENDPOINT_TYPE),
];
const TRUSTEE: &str = "trustee";
pub const TRUSTEE_AUTH_TYPE: Opt<String> =
    Opt::str(TRUSTEE, "auth_type", "password", "how the trustee authenticates (password)")
        .choices(&["password", "v3password"]);
pub const TRUSTEE_AUTH_URL: Opt<Option<String>> =
    Opt::optional_str(TRUSTEE, "auth_url", None, "Keystone for the trustee (default: [clients_keystone] auth_uri)");
pub const TRUSTEE_USERNAME: Opt<Option<String>> =
    Opt::optional_str(TRUSTEE, "username", None, "the trustee (heat's service user)");
pub const TRUSTEE_USER_ID: Opt<Option<String>> = Opt::optional_str(TRUSTEE, "user_id", None, "the trustee, by id");
pub const TRUSTEE_PASSWORD: Opt<Option<String>> =
    Opt::optional_str(TRUSTEE, "password", None, "the trustee's password");
pub const TRUSTEE_USER_DOMAIN_ID: Opt<Option<String>> =
    Opt::optional_str(TRUSTEE, "user_domain_id", None, "the trustee's domain (by id)");
pub const TRUSTEE_USER_DOMAIN_NAME: Opt<Option<String>> =
    Opt::optional_str(TRUSTEE, "user_domain_name", None, "the trustee's domain (by name)");
/// keelson's: where instances reach heat-api-cfn (pre-signed URLs and the
/// CFN metadata API); Heat finds it in the catalog.
pub const HEAT_API_CFN_PUBLIC: Opt<Option<String>> = Opt::optional_str(
    "heat_api_cfn",
    "public_endpoint",
    None,
    "heat-api-cfn as instances reach it (default: http:// + its listener's address)",
);
pub const HEAT_API_CFN_BIND_HOST: Opt<String> =
    Opt::str("heat_api_cfn", "bind_host", "0.0.0.0", "address heat-api-cfn listens on");
pub const HEAT_API_CFN_BIND_PORT: Opt<i64> =
    Opt::int("heat_api_cfn", "bind_port", 8000, "port heat-api-cfn listens on").min(0).max(65535);
/// keelson's: the heat-api-cfn listener as one address (wins over
/// `[heat_api_cfn] bind_host`/`bind_port`).
pub const CFN_LISTEN: Opt<Option<String>> = Opt::optional_str(
    "keelson",
    "cfn_listen",
    None,
    "where heat-api-cfn listens, host:port (default: [heat_api_cfn] bind_host:bind_port)",
);

/// Where heat-api-cfn listens: `[keelson] cfn_listen`, else Heat's
/// `[heat_api_cfn] bind_host:bind_port`.
pub fn cfn_listen(config: &Config) -> String {
    match config.get(&CFN_LISTEN).filter(|v| !v.trim().is_empty()) {
        Some(addr) => addr,
        None => format!("{}:{}", config.get(&HEAT_API_CFN_BIND_HOST), config.get(&HEAT_API_CFN_BIND_PORT)),
    }
}

/// The inventory service: with it (set explicitly, not empty) the engine
/// offers the OS::Placement::* resource types.
pub const INVENTORY_ENDPOINT: Opt<Option<String>> = Opt::optional_str(
    "keelson",
    "inventory_endpoint",
    Some("http://127.0.0.1:50051"),
    "where services reach the inventory service",
);
/// Where the gateway serves the Orchestration API (the default public
/// endpoint derives from it).
pub const ORCHESTRATION_LISTEN: Opt<String> =
    Opt::str("keelson", "orchestration_listen", "0.0.0.0:8004", "where the Orchestration API listens");

pub const OPTIONS: &[&dyn Declaration] = &[
    &NUM_ENGINE_WORKERS,
    &MAX_TEMPLATE_SIZE,
    &MAX_RESOURCES_PER_STACK,
    &MAX_STACKS_PER_TENANT,
    &MAX_SNAPSHOTS_PER_STACK,
    &MAX_NESTED_STACK_DEPTH,
    &MAX_EVENTS_PER_STACK,
    &ENABLE_STACK_ABANDON,
    &ENABLE_STACK_ADOPT,
    &HIDDEN_STACK_TAGS,
    &ENGINE_LIFE_CHECK_TIMEOUT,
    &PERIODIC_INTERVAL,
    &STALL_TIMEOUT,
    &ACTION_RETRY_LIMIT,
    &CLIENT_RETRY_LIMIT,
    &CLIENT_TIMEOUT,
    &MAX_CONCURRENT_CHECKS,
    &MAX_CONCURRENT_SERVER_BUILDS,
    &HEAT_WAITCONDITION_SERVER_URL,
    &HEAT_METADATA_SERVER_URL,
    &PUBLIC_ENDPOINT,
    &SIGNAL_URL_LIFETIME,
    &SIGNAL_SIGNING_KEY,
    &DEFAULT_DEPLOYMENT_SIGNAL_TRANSPORT,
    &DEFAULT_SOFTWARE_CONFIG_TRANSPORT,
    &CLIENTS_HEAT_URL,
    &NOTIFICATION_DRIVER,
    &NOTIFICATION_TRANSPORT_URL,
    &NOTIFICATION_TOPICS,
    &TRANSPORT_URL,
    &CONTROL_EXCHANGE,
    &HEARTBEAT_TIMEOUT_THRESHOLD,
    &RABBIT_RETRY_INTERVAL,
    &RABBIT_INTERVAL_MAX,
    &INVENTORY_ENDPOINT,
    &ORCHESTRATION_LISTEN,
    &DEFERRED_AUTH_METHOD,
    &TRUSTS_DELEGATED_ROLES,
    &AUTH_ENCRYPTION_KEY,
    &STACK_USER_DOMAIN_ID,
    &STACK_USER_DOMAIN_NAME,
    &STACK_DOMAIN_ADMIN,
    &STACK_DOMAIN_ADMIN_PASSWORD,
    &HEAT_STACK_USER_ROLE,
    &CLIENTS_KEYSTONE_AUTH_URI,
    &CLIENTS_ENDPOINT_TYPE,
    &CLIENTS_NOVA_ENDPOINT_TYPE,
    &CLIENTS_NEUTRON_ENDPOINT_TYPE,
    &CLIENTS_GLANCE_ENDPOINT_TYPE,
    &CLIENTS_CINDER_ENDPOINT_TYPE,
    &REGION_NAME_FOR_SERVICES,
    &CLIENTS_TLS.ca_file,
    &CLIENTS_TLS.cert_file,
    &CLIENTS_TLS.key_file,
    &CLIENTS_TLS.insecure,
    &CLIENTS_KEYSTONE_TLS.ca_file,
    &CLIENTS_KEYSTONE_TLS.cert_file,
    &CLIENTS_KEYSTONE_TLS.key_file,
    &CLIENTS_KEYSTONE_TLS.insecure,
    &CLIENTS_NOVA_TLS.ca_file,
    &CLIENTS_NOVA_TLS.cert_file,
    &CLIENTS_NOVA_TLS.key_file,
    &CLIENTS_NOVA_TLS.insecure,
    &CLIENTS_NEUTRON_TLS.ca_file,
    &CLIENTS_NEUTRON_TLS.cert_file,
    &CLIENTS_NEUTRON_TLS.key_file,
    &CLIENTS_NEUTRON_TLS.insecure,
    &CLIENTS_GLANCE_TLS.ca_file,
    &CLIENTS_GLANCE_TLS.cert_file,
    &CLIENTS_GLANCE_TLS.key_file,
    &CLIENTS_GLANCE_TLS.insecure,
    &CLIENTS_CINDER_TLS.ca_file,
    &CLIENTS_CINDER_TLS.cert_file,
    &CLIENTS_CINDER_TLS.key_file,
    &CLIENTS_CINDER_TLS.insecure,
    &TRUSTEE_AUTH_TYPE,
    &TRUSTEE_AUTH_URL,
    &TRUSTEE_USERNAME,
    &TRUSTEE_USER_ID,
    &TRUSTEE_PASSWORD,
    &TRUSTEE_USER_DOMAIN_ID,
    &TRUSTEE_USER_DOMAIN_NAME,
    &HEAT_API_CFN_PUBLIC,
    &HEAT_API_CFN_BIND_HOST,
    &HEAT_API_CFN_BIND_PORT,
    &CFN_LISTEN,
];

/// An option in seconds whose value below 1 takes the default.
pub fn positive_seconds(config: &Config, opt: &Opt<i64>) -> Duration {
    let n = config.get(opt);
    Duration::from_secs(if n > 0 { n } else { opt.default_value() }.unsigned_abs())
}

/// An option's default in seconds (the settings' own defaults).
pub(crate) fn default_seconds(opt: &Opt<i64>) -> Duration {
    Duration::from_secs(opt.default_value().unsigned_abs())
}

/// `max_concurrent_server_builds` as a bound: None below 1 (no bound).
pub(crate) fn server_build_bound(n: i64) -> Option<usize> {
    (n > 0).then(|| keelson_runtime::config::clamp_usize(n))
}
