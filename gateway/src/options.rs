//! The options the gateway reads: its authentication, the Keystone
//! client, CORS, the REST listeners' connection limits, and how it
//! reaches the services. The `[oslo_policy]` options and `[orchestration]
//! max_json_body_size` are keelson-runtime's (the stack engine reads them
//! too).

use keelson_runtime::config::{Declaration, Opt};

/// Placement's authentication: Keystone tokens, or noauth2 (the
/// `X-Auth-Token` names the user; `admin` is the admin).
pub const AUTH_STRATEGY: Opt<String> =
    Opt::str("api", "auth_strategy", "keystone", "Placement API authentication").choices(&["keystone", "noauth2"]);
/// The Orchestration API's own strategy (Heat's names); unset, it follows
/// `[api] auth_strategy` (noauth2 there is noauth here).
pub const ORCHESTRATION_AUTH_STRATEGY: Opt<String> =
    Opt::str("orchestration", "auth_strategy", "keystone", "Orchestration API authentication (unset: as [api])")
        .choices(&["keystone", "noauth"]);

pub const CANDIDATES_ENDPOINT: Opt<String> = Opt::str(
    "keelson",
    "candidates_endpoint",
    "http://127.0.0.1:50052",
    "where the gateway reaches the candidates service",
);
/// How long the gateway holds and redials a call to a service whose port
/// refuses connections (a restart), in seconds; 0: answer 503 at once.
pub const REDIAL_TIMEOUT: Opt<f64> =
    Opt::float("keelson", "redial_timeout", 10.0, "seconds a call to a restarting service is held and redialed");

// Issue 15, connection limits of the REST listeners (Placement and
// Orchestration alike, each listener on its own); a value below 1 takes
// the default.
/// Seconds a client may take to send a request head.
pub const HEADER_READ_TIMEOUT: Opt<i64> =
    Opt::int("api", "header_read_timeout", 30, "seconds a client may take to send a request head");
/// Seconds a connection may stay open with no request in progress.
pub const IDLE_TIMEOUT: Opt<i64> =
    Opt::int("api", "idle_timeout", 75, "seconds a connection may stay open with no request in progress");
/// Connections served at once (more wait in the accept backlog).
pub const MAX_CONNECTIONS: Opt<i64> =
    Opt::int("api", "max_connections", 1000, "connections served at once per REST listener");

// oslo.middleware's CORS options (active when allowed_origin is set).
pub const CORS_ALLOWED_ORIGIN: Opt<Vec<String>> =
    Opt::list("cors", "allowed_origin", &[], "origins allowed to share responses (unset: CORS off)");
pub const CORS_ALLOW_CREDENTIALS: Opt<bool> =
    Opt::bool("cors", "allow_credentials", true, "whether the actual request can include credentials");
pub const CORS_EXPOSE_HEADERS: Opt<Vec<String>> = Opt::list(
    "cors",
    "expose_headers",
    &["X-Auth-Token", "X-Openstack-Request-Id", "X-Subject-Token", "X-Service-Token", "OpenStack-API-Version"],
    "headers exposed to the API",
);
/// An empty value sends no `Access-Control-Max-Age`.
pub const CORS_MAX_AGE: Opt<Option<i64>> =
    Opt::optional_int("cors", "max_age", Some(3600), "seconds a preflight answer may be cached");
pub const CORS_ALLOW_METHODS: Opt<Vec<String>> = Opt::list(
    "cors",
    "allow_methods",
    &["GET", "PUT", "POST", "DELETE", "PATCH"],
    "methods the actual request may use",
);
pub const CORS_ALLOW_HEADERS: Opt<Vec<String>> = Opt::list(
    "cors",
    "allow_headers",
    &[
        "X-Auth-Token",
        "X-Openstack-Request-Id",
        "X-Identity-Status",
        "X-Roles",
        "X-Service-Catalog",
        "X-User-Id",
        "X-Tenant-Id",
        "OpenStack-API-Version",
    ],
    "headers the actual request may carry",
);

// keystonemiddleware's options.
const KA: &str = "keystone_authtoken";
pub const WWW_AUTHENTICATE_URI: Opt<Option<String>> =
    Opt::optional_str(KA, "www_authenticate_uri", None, "Keystone URI in 401 answers (default: auth_url)");
pub const TOKEN_CACHE_TIME: Opt<i64> =
    Opt::int(KA, "token_cache_time", 300, "seconds a validated token is cached (-1: never)");
pub const SERVICE_TOKEN_ROLES: Opt<Vec<String>> =
    Opt::list(KA, "service_token_roles", &["service"], "a service token needs one of these roles (empty: service)");
pub const SERVICE_TOKEN_ROLES_REQUIRED: Opt<bool> =
    Opt::bool(KA, "service_token_roles_required", true, "a service token without those roles is refused");
pub const DELAY_AUTH_DECISION: Opt<bool> =
    Opt::bool(KA, "delay_auth_decision", false, "pass unauthenticated requests on with X-Identity-Status");
pub const SERVICE_TYPE: Opt<Option<String>> =
    Opt::optional_str(KA, "service_type", None, "this service's type, for application credentials' access rules");
/// Unset, keelson waits 30 s (keystoneauth would wait forever).
pub const HTTP_CONNECT_TIMEOUT: Opt<Option<i64>> =
    Opt::optional_int(KA, "http_connect_timeout", None, "seconds a request to Keystone may take");
pub const HTTP_REQUEST_MAX_RETRIES: Opt<i64> =
    Opt::int(KA, "http_request_max_retries", 3, "retries of a request to Keystone that failed to connect");
// keystonemiddleware's TLS options for its Keystone connection.
pub const CAFILE: Opt<Option<String>> =
    Opt::optional_str(KA, "cafile", None, "PEM CA certificates Keystone's https must chain to (default: the system's)");
pub const CERTFILE: Opt<Option<String>> =
    Opt::optional_str(KA, "certfile", None, "PEM client certificate presented to Keystone, if it asks for one");
pub const KEYFILE: Opt<Option<String>> = Opt::optional_str(KA, "keyfile", None, "the client certificate's PEM key");
pub const INSECURE: Opt<bool> = Opt::bool(KA, "insecure", false, "do not verify Keystone's https certificate");
// keystoneauth's password plugin options, which keystonemiddleware
// registers only at run time (auth_type = password).
pub const AUTH_URL: Opt<Option<String>> =
    Opt::optional_str(KA, "auth_url", None, "Keystone's URL (default: www_authenticate_uri)");
pub const USERNAME: Opt<Option<String>> = Opt::optional_str(KA, "username", None, "the service user");
pub const PASSWORD: Opt<Option<String>> = Opt::optional_str(KA, "password", None, "the service user's password");
pub const PROJECT_NAME: Opt<String> =
    Opt::str(KA, "project_name", "service", "the service user's project (unless project_id is set)");
pub const PROJECT_ID: Opt<Option<String>> = Opt::optional_str(KA, "project_id", None, "the service user's project");
pub const USER_DOMAIN_NAME: Opt<String> =
    Opt::str(KA, "user_domain_name", "Default", "the service user's domain (unless user_domain_id is set)");
pub const USER_DOMAIN_ID: Opt<Option<String>> =
    Opt::optional_str(KA, "user_domain_id", None, "the service user's domain");
pub const PROJECT_DOMAIN_NAME: Opt<String> =
    Opt::str(KA, "project_domain_name", "Default", "the project's domain (unless project_domain_id is set)");
pub const PROJECT_DOMAIN_ID: Opt<Option<String>> =
    Opt::optional_str(KA, "project_domain_id", None, "the project's domain");

pub const OPTIONS: &[&dyn Declaration] = &[
    &AUTH_STRATEGY,
    &ORCHESTRATION_AUTH_STRATEGY,
    &CANDIDATES_ENDPOINT,
    &REDIAL_TIMEOUT,
    &HEADER_READ_TIMEOUT,
    &IDLE_TIMEOUT,
    &MAX_CONNECTIONS,
    &CORS_ALLOWED_ORIGIN,
    &CORS_ALLOW_CREDENTIALS,
    &CORS_EXPOSE_HEADERS,
    &CORS_MAX_AGE,
    &CORS_ALLOW_METHODS,
    &CORS_ALLOW_HEADERS,
    &WWW_AUTHENTICATE_URI,
    &TOKEN_CACHE_TIME,
    &SERVICE_TOKEN_ROLES,
    &SERVICE_TOKEN_ROLES_REQUIRED,
    &DELAY_AUTH_DECISION,
    &SERVICE_TYPE,
    &HTTP_CONNECT_TIMEOUT,
    &HTTP_REQUEST_MAX_RETRIES,
    &CAFILE,
    &CERTFILE,
    &KEYFILE,
    &INSECURE,
    &AUTH_URL,
    &USERNAME,
    &PASSWORD,
    &PROJECT_NAME,
    &PROJECT_ID,
    &USER_DOMAIN_NAME,
    &USER_DOMAIN_ID,
    &PROJECT_DOMAIN_NAME,
    &PROJECT_DOMAIN_ID,
];

#[cfg(test)]
mod tests {
    use keelson_runtime::config::contract_check;

    #[test]
    fn placement_options_match_the_contract() {
        let check = contract_check(super::OPTIONS);
        assert_eq!(check.mismatches, Vec::<String>::new());
        assert_eq!(
            check.not_in_contract,
            [
                "[api] header_read_timeout",
                "[api] idle_timeout",
                "[api] max_connections",
                "[keystone_authtoken] auth_url",
                "[keystone_authtoken] username",
                "[keystone_authtoken] password",
                "[keystone_authtoken] project_name",
                "[keystone_authtoken] project_id",
                "[keystone_authtoken] user_domain_name",
                "[keystone_authtoken] user_domain_id",
                "[keystone_authtoken] project_domain_name",
                "[keystone_authtoken] project_domain_id",
            ]
        );
    }
}
