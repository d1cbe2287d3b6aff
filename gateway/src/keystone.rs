//! Keystone token validation, in place of keystonemiddleware's auth_token.
//!
//! The gateway authenticates as its service user (`[keystone_authtoken]`
//! password credentials), then validates each caller's token with
//! `GET /v3/auth/tokens` (`X-Subject-Token`). What Keystone answers is
//! cached for `token_cache_time` seconds; the token's own expiry is checked
//! on every use, cached or not, so the cache never lets an expired token
//! through. An `X-Service-Token` is validated the same way: one holding a
//! role of `service_token_roles` lets an expired user token through (a long
//! operation that began with a valid one), and with
//! `service_token_roles_required` one without such a role is refused.
//!
//! Outcomes follow keystonemiddleware: a missing, unknown, expired or
//! revoked token is 401; Keystone unreachable, or refusing the service user,
//! is 503 (both deferred to the application under `delay_auth_decision`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use http::{HeaderMap, Method, StatusCode};
use keelson_openstack::http::Answer;
use keelson_openstack::{HttpClient, TlsSettings};
use keelson_runtime::config::Opt;
use keelson_runtime::Config;
use serde_json::Value;

use crate::identity::Identity;
use crate::options::{
    AUTH_URL, CAFILE, CERTFILE, DELAY_AUTH_DECISION, HTTP_CONNECT_TIMEOUT, HTTP_REQUEST_MAX_RETRIES, INSECURE, KEYFILE,
    PASSWORD, PROJECT_DOMAIN_ID, PROJECT_DOMAIN_NAME, PROJECT_ID, PROJECT_NAME, SERVICE_TOKEN_ROLES,
    SERVICE_TOKEN_ROLES_REQUIRED, SERVICE_TYPE, TOKEN_CACHE_TIME, USERNAME, USER_DOMAIN_ID, USER_DOMAIN_NAME,
    WWW_AUTHENTICATE_URI,
};

/// Why a request could not be authenticated.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no token in the request")]
    NoToken,
    #[error("token refused: {0}")]
    InvalidToken(String),
    #[error("service token refused: {0}")]
    InvalidServiceToken(String),
    /// Keystone cannot be asked: unreachable, failing, or refusing the
    /// service user. keystonemiddleware answers 503 then.
    #[error("keystone is unavailable: {0}")]
    Unavailable(String),
    /// `[keystone_authtoken]` cannot work as written (at startup).
    #[error("{0}")]
    Config(String),
}

impl AuthError {
    /// 503 rather than 401: the caller's token was never judged.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, AuthError::Unavailable(_))
    }
}

/// How long a validation stays cached (`token_cache_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheTime {
    /// `-1` (any negative value): every request asks Keystone.
    Off,
    /// `0`: memcached's and keystonemiddleware's in-process cache read a
    /// zero lifetime as "no time limit"; the token's expiry still applies.
    Unlimited,
    For(Duration),
}

impl CacheTime {
    fn from_seconds(s: i64) -> Self {
        match s {
            ..0 => CacheTime::Off,
            0 => CacheTime::Unlimited,
            n => CacheTime::For(Duration::from_secs(n.unsigned_abs())),
        }
    }

    fn fresh(self, stored: Instant, now: Instant) -> bool {
        match self {
            CacheTime::Off => false,
            CacheTime::Unlimited => true,
            CacheTime::For(ttl) => now.duration_since(stored) < ttl,
        }
    }
}

/// A user or project named by id or by name within a domain, as
/// keystoneauth's password plugin takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DomainRef {
    Id(String),
    Name(String),
}

impl DomainRef {
    fn json(&self) -> Value {
        match self {
            DomainRef::Id(id) => serde_json::json!({"id": id}),
            DomainRef::Name(name) => serde_json::json!({"name": name}),
        }
    }
}

/// `[keystone_authtoken]` settings keelson uses.
#[derive(Debug, Clone)]
pub struct KeystoneSettings {
    /// The identity v3 root, e.g. `http://keystone:5000/v3`, whether
    /// `auth_url` was written with its `/v3` or without.
    pub identity_v3: String,
    pub www_authenticate_uri: String,
    pub username: String,
    pub password: String,
    pub project_name: Option<String>,
    pub project_id: Option<String>,
    user_domain: DomainRef,
    project_domain: DomainRef,
    pub cache_time: CacheTime,
    pub service_token_roles: Vec<String>,
    pub service_token_roles_required: bool,
    pub delay_auth_decision: bool,
    /// Needed to honour application credentials' access rules.
    pub service_type: Option<String>,
    pub timeout: Duration,
    pub connect_retries: u32,
    /// `cafile`, `certfile`, `keyfile`, `insecure`: how Keystone's https is
    /// verified and what the gateway presents.
    pub tls: TlsSettings,
}

/// Keystone's requests wait this long when `http_connect_timeout` is unset
/// (keystoneauth would wait forever; a hung Keystone must not hang every
/// request with it).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

impl KeystoneSettings {
    pub fn from_config(config: &Config) -> Result<Self, AuthError> {
        let www_authenticate_uri = config.get(&WWW_AUTHENTICATE_URI);
        let auth_url = config
            .get(&AUTH_URL)
            .or_else(|| www_authenticate_uri.clone())
            .ok_or_else(|| AuthError::Config("[keystone_authtoken] auth_url is not set".into()))?;
        if !(auth_url.starts_with("http://") || auth_url.starts_with("https://")) {
            return Err(AuthError::Config(format!(
                "[keystone_authtoken] auth_url {auth_url}: not an http:// or https:// URL"
            )));
        }
        let domain = |id: &Opt<Option<String>>, name: &Opt<String>| match config.get(id) {
            Some(id) => DomainRef::Id(id),
            None => DomainRef::Name(config.get(name)),
        };
        let project_id = config.get(&PROJECT_ID);
        Ok(KeystoneSettings {
            // keystoneauth's default for the 401 header is the auth_url as
            // written.
            www_authenticate_uri: www_authenticate_uri.unwrap_or_else(|| auth_url.clone()),
            identity_v3: identity_v3(&auth_url),
            username: config.get(&USERNAME).unwrap_or_default(),
            password: config.get(&PASSWORD).unwrap_or_default(),
            project_name: if project_id.is_some() { None } else { Some(config.get(&PROJECT_NAME)) },
            project_id,
            user_domain: domain(&USER_DOMAIN_ID, &USER_DOMAIN_NAME),
            project_domain: domain(&PROJECT_DOMAIN_ID, &PROJECT_DOMAIN_NAME),
            cache_time: CacheTime::from_seconds(config.get(&TOKEN_CACHE_TIME)),
            service_token_roles: {
                let r = config.get(&SERVICE_TOKEN_ROLES);
                // An empty list is the default's.
                if r.is_empty() {
                    SERVICE_TOKEN_ROLES.default_value()
                } else {
                    r
                }
            },
            service_token_roles_required: config.get(&SERVICE_TOKEN_ROLES_REQUIRED),
            delay_auth_decision: config.get(&DELAY_AUTH_DECISION),
            service_type: config.get(&SERVICE_TYPE),
            timeout: config
                .get(&HTTP_CONNECT_TIMEOUT)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s.unsigned_abs()))
                .unwrap_or(DEFAULT_TIMEOUT),
            connect_retries: config.get(&HTTP_REQUEST_MAX_RETRIES).clamp(0, 10) as u32,
            tls: TlsSettings {
                ca_file: config.get(&CAFILE).map(Into::into),
                cert_file: config.get(&CERTFILE).map(Into::into),
                key_file: config.get(&KEYFILE).map(Into::into),
                insecure: config.get(&INSECURE),
            },
        })
    }

    /// The client of this Keystone: its timeout, retries and TLS settings
    /// (the files are read now).
    pub fn http_client(&self) -> Result<HttpClient, AuthError> {
        HttpClient::new(self.timeout, self.connect_retries)
            .with_tls(&self.tls)
            .map_err(|e| AuthError::Config(format!("[keystone_authtoken] {e}")))
    }
}

impl KeystoneSettings {
    /// The service user's password authentication, for keelson-openstack
    /// sessions (heat-api-cfn's `ec2tokens` calls).
    pub fn service_auth(&self) -> keelson_openstack::AuthMethod {
        use keelson_openstack::{DomainRef as Domain, ProjectRef, Scope, UserRef};
        let domain = |d: &DomainRef| match d {
            DomainRef::Id(id) => Domain::Id(id.clone()),
            DomainRef::Name(name) => Domain::Name(name.clone()),
        };
        let project = match (&self.project_id, &self.project_name) {
            (Some(id), _) => ProjectRef::Id(id.clone()),
            (None, name) => {
                ProjectRef::Name { name: name.clone().unwrap_or_default(), domain: domain(&self.project_domain) }
            }
        };
        keelson_openstack::AuthMethod::Password {
            user: UserRef::Name { name: self.username.clone(), domain: domain(&self.user_domain) },
            password: self.password.clone(),
            scope: Scope::Project(project),
        }
    }
}

/// The identity v3 root for an `auth_url`: keystoneauth discovers it from
/// the unversioned root, and deployments write either form.
fn identity_v3(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        base.to_string()
    } else {
        format!("{}/v3", base.strip_suffix("/v2.0").unwrap_or(base))
    }
}

/// One access rule of an application credential.
#[derive(Debug, Clone)]
struct AccessRule {
    service: String,
    method: String,
    path: String,
}

/// What one validated token says.
#[derive(Debug, Clone)]
struct TokenInfo {
    user_id: String,
    user_domain_id: Option<String>,
    project_id: Option<String>,
    project_domain_id: Option<String>,
    domain_id: Option<String>,
    system_all: bool,
    roles: Vec<String>,
    /// Keystone includes it only when an admin project is configured;
    /// keystonemiddleware (and oslo.context) default it to true.
    is_admin_project: bool,
    expires_at: Option<DateTime<Utc>>,
    /// `Some` for an application credential restricted by access rules.
    access_rules: Option<Vec<AccessRule>>,
    /// The catalog's service types (fetched only when access rules can be
    /// checked, i.e. `service_type` is set).
    catalog_types: Vec<String>,
}

impl TokenInfo {
    fn expired(&self) -> bool {
        self.expires_at.is_some_and(|e| e <= Utc::now())
    }
}

struct Cached {
    info: TokenInfo,
    stored: Instant,
}

/// Validated tokens kept at most; past it, stale entries go, and if that is
/// not enough, all (re-validating costs one Keystone call each).
const CACHE_MAX: usize = 10_000;

/// Validates tokens against one Keystone.
pub struct TokenValidator {
    settings: KeystoneSettings,
    http: HttpClient,
    cache: Mutex<HashMap<String, Cached>>,
    /// The service user's own token and when to renew it.
    service_token: tokio::sync::Mutex<Option<(String, Instant)>>,
    /// The role-less service token warning is logged once, not per request.
    lax_service_warned: AtomicBool,
}

impl TokenValidator {
    /// A validator of `settings`' Keystone; an unusable TLS file refuses it.
    pub fn new(settings: KeystoneSettings) -> Result<Self, AuthError> {
        Ok(TokenValidator {
            http: settings.http_client()?,
            settings,
            cache: Mutex::new(HashMap::new()),
            service_token: tokio::sync::Mutex::new(None),
            lax_service_warned: AtomicBool::new(false),
        })
    }

    /// The `WWW-Authenticate` value of a 401.
    pub fn www_authenticate(&self) -> String {
        format!("Keystone uri=\"{}\"", self.settings.www_authenticate_uri)
    }

    /// The caller of one request, from its `X-Auth-Token` and
    /// `X-Service-Token` alone (keystonemiddleware's `process_request`).
    /// `Ok(None)`: no valid user, and `delay_auth_decision` leaves the
    /// answer to the application. `Err`: the request is refused.
    pub async fn identify(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Option<Identity>, AuthError> {
        let header = |name: &str| {
            headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
        };
        let delay = self.settings.delay_auth_decision;

        // The service token first: its role decides whether an expired user
        // token may pass.
        let service_header = header("x-service-token");
        let mut allow_expired = false;
        let mut service: Option<TokenInfo> = None;
        let mut service_error: Option<AuthError> = None;
        if let Some(token) = &service_header {
            match self.fetch(token, false).await.and_then(|info| self.unexpired(info, false)) {
                Ok(info) => {
                    // Exact names, as keystonemiddleware's set intersection.
                    let role_ok = info.roles.iter().any(|r| self.settings.service_token_roles.contains(r));
                    allow_expired = role_ok;
                    if role_ok || !self.settings.service_token_roles_required {
                        if !role_ok && !self.lax_service_warned.swap(true, Ordering::Relaxed) {
                            tracing::warn!(target: "keelson::auth",
                                "a valid token was sent as a service token without a service role; accepted as service_token_roles_required is false");
                        }
                        service = Some(info);
                    } else {
                        service_error = Some(AuthError::InvalidServiceToken(format!(
                            "none of the roles {:?} (service_token_roles_required)",
                            self.settings.service_token_roles
                        )));
                    }
                }
                Err(e) if e.is_unavailable() && !delay => return Err(e),
                Err(AuthError::InvalidToken(why)) => service_error = Some(AuthError::InvalidServiceToken(why)),
                Err(e) => service_error = Some(e),
            }
        }

        let user = match header("x-auth-token").or_else(|| header("x-storage-token")) {
            None => Err(AuthError::NoToken),
            Some(token) => match self.fetch(&token, allow_expired).await {
                Ok(info) => self
                    .unexpired(info, allow_expired)
                    .and_then(|info| self.check_access_rules(info, method, path, service_header.is_some())),
                Err(e) if e.is_unavailable() && !delay => return Err(e),
                Err(e) => Err(e),
            },
        };

        match (user, service_error) {
            (Ok(user), None) => Ok(Some(identity(&user, service.as_ref()))),
            // Deferred: the user's identity still goes down when only the
            // service token failed, without the service's.
            (Ok(user), Some(e)) if delay => {
                tracing::info!(target: "keelson::auth", "{e}; deferred (delay_auth_decision)");
                Ok(Some(identity(&user, None)))
            }
            (Err(e), _) if delay => {
                tracing::info!(target: "keelson::auth", "{e}; deferred (delay_auth_decision)");
                Ok(None)
            }
            (Ok(_), Some(e)) | (Err(e), _) => Err(e),
        }
    }

    /// Refuses an expired token unless a service token allows it.
    fn unexpired(&self, info: TokenInfo, allow_expired: bool) -> Result<TokenInfo, AuthError> {
        if !allow_expired && info.expired() {
            return Err(AuthError::InvalidToken("expired".into()));
        }
        Ok(info)
    }

    /// keystonemiddleware's `validate_allowed_request`: an application
    /// credential restricted by access rules passes only for a rule naming
    /// this service, method and path (or, in a chain of requests, with a
    /// service token), and only when `service_type` says which service this
    /// is and the token's catalog has it.
    fn check_access_rules(
        &self,
        info: TokenInfo,
        method: &Method,
        path: &str,
        has_service_token: bool,
    ) -> Result<TokenInfo, AuthError> {
        let Some(rules) = &info.access_rules else { return Ok(info) };
        let refuse = |why: &str| Err(AuthError::InvalidToken(format!("application credential access rules: {why}")));
        let Some(mine) = &self.settings.service_type else {
            return refuse("[keystone_authtoken] service_type is not set");
        };
        if !info.catalog_types.iter().any(|t| t == mine) {
            return refuse("service_type is not in the token's catalog");
        }
        if has_service_token {
            return Ok(info);
        }
        if rules.iter().any(|r| r.method == method.as_str() && &r.service == mine && path_matches(path, &r.path)) {
            Ok(info)
        } else {
            refuse("no rule allows this request")
        }
    }

    /// What Keystone says of a token, from the cache while fresh.
    async fn fetch(&self, token: &str, allow_expired: bool) -> Result<TokenInfo, AuthError> {
        let key = cache_key(token);
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = cache.get(&key) {
                if self.settings.cache_time.fresh(c.stored, Instant::now()) {
                    return Ok(c.info.clone());
                }
            }
        }
        let info = self.validate(token, allow_expired).await?;
        if self.settings.cache_time != CacheTime::Off {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= CACHE_MAX {
                let now = Instant::now();
                let ttl = self.settings.cache_time;
                cache.retain(|_, c| ttl.fresh(c.stored, now) && !c.info.expired());
                if cache.len() >= CACHE_MAX {
                    cache.clear();
                }
            }
            cache.insert(key, Cached { info: info.clone(), stored: Instant::now() });
        }
        Ok(info)
    }

    /// `GET /v3/auth/tokens`, as keystonemiddleware's identity server does.
    async fn validate(&self, token: &str, allow_expired: bool) -> Result<TokenInfo, AuthError> {
        let mut query = Vec::new();
        // The catalog is only needed to check access rules.
        if self.settings.service_type.is_none() {
            query.push("nocatalog");
        }
        if allow_expired {
            query.push("allow_expired=1");
        }
        let uri = if query.is_empty() {
            format!("{}/auth/tokens", self.settings.identity_v3)
        } else {
            format!("{}/auth/tokens?{}", self.settings.identity_v3, query.join("&"))
        };
        // On a 401 our own token may have expired or been revoked: once more
        // with a fresh one.
        let mut refused: Option<String> = None;
        for attempt in 0..2 {
            let service = self.service_token(refused.as_deref()).await?;
            let headers = [
                ("x-auth-token", service.as_str()),
                ("x-subject-token", token),
                // Access rules are understood (and enforced in
                // check_access_rules); without this Keystone refuses such
                // tokens outright.
                ("openstack-identity-access-rules", "1"),
            ];
            let Answer { status, body, .. } = self.send(Method::GET, &uri, &headers, None).await?;
            match status {
                StatusCode::OK => {
                    return parse_token(&body).map_err(|e| {
                        tracing::warn!(target: "keelson::auth", "invalid token contents from Keystone: {e}");
                        AuthError::InvalidToken(format!("invalid token contents: {e}"))
                    });
                }
                StatusCode::NOT_FOUND => return Err(AuthError::InvalidToken("unknown, expired or revoked".into())),
                StatusCode::UNAUTHORIZED if attempt == 0 => {
                    tracing::info!(target: "keelson::auth", "Keystone refused the service user's token; authenticating again");
                    refused = Some(service);
                }
                other => {
                    let text = String::from_utf8_lossy(&body);
                    tracing::warn!(target: "keelson::auth", "token validation answered {other}: {text}");
                    return Err(AuthError::Unavailable(format!("token validation answered {other}")));
                }
            }
        }
        Err(AuthError::Unavailable("Keystone refused the service user's token twice".into()))
    }

    /// The service user's token, authenticating again when it is near its
    /// expiry or Keystone refused it (`refused`; requests that raced on the
    /// same refusal reuse the one new token).
    async fn service_token(&self, refused: Option<&str>) -> Result<String, AuthError> {
        let mut slot = self.service_token.lock().await;
        if let Some((token, renew_at)) = slot.as_ref() {
            if *renew_at > Instant::now() && refused != Some(token.as_str()) {
                return Ok(token.clone());
            }
        }
        let s = &self.settings;
        let project = match (&s.project_id, &s.project_name) {
            (Some(id), _) => serde_json::json!({"id": id}),
            (None, name) => serde_json::json!({"name": name, "domain": s.project_domain.json()}),
        };
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": s.username, "password": s.password, "domain": s.user_domain.json()}}},
            "scope": {"project": project}
        }});
        let url = format!("{}/auth/tokens?nocatalog", s.identity_v3);
        let Answer { status, headers, body } = self.send(Method::POST, &url, &[], Some(&body)).await?;
        if status != StatusCode::CREATED {
            tracing::warn!(target: "keelson::auth", "service user {} could not authenticate: {status} {}", s.username, String::from_utf8_lossy(&body));
            return Err(AuthError::Unavailable(format!("service user authentication answered {status}")));
        }
        let token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| AuthError::Unavailable("no X-Subject-Token in Keystone's answer".into()))?;
        let expires_at = parse_token(&body).ok().and_then(|i| i.expires_at);
        // Renew a minute before expiry (half the lifetime for short-lived
        // tokens) so a validation in flight never carries an expired token.
        let left =
            expires_at.map(|e| (e - Utc::now()).to_std().unwrap_or(Duration::ZERO)).unwrap_or(Duration::from_secs(600));
        *slot = Some((token.clone(), Instant::now() + left - (left / 2).min(Duration::from_secs(60))));
        Ok(token)
    }

    /// A project-scoped token for a user's password (the console's login),
    /// asked of the Keystone this gateway validates tokens with.
    pub async fn password_token(&self, login: &PasswordLogin) -> Result<IssuedToken, LoginError> {
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": login.username, "password": login.password, "domain": {"name": login.user_domain}}}},
            "scope": {"project": {"name": login.project, "domain": {"name": login.project_domain}}}
        }});
        let url = format!("{}/auth/tokens?nocatalog", self.settings.identity_v3);
        let Answer { status, headers, body } =
            self.send(Method::POST, &url, &[], Some(&body)).await.map_err(LoginError::Unavailable)?;
        if status.is_client_error() {
            return Err(LoginError::Refused);
        }
        if status != StatusCode::CREATED {
            tracing::warn!(target: "keelson::auth", "a console login answered {status}");
            return Err(LoginError::Unavailable(AuthError::Unavailable(format!("Keystone answered {status}"))));
        }
        let token = headers
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| LoginError::Unavailable(AuthError::Unavailable("no X-Subject-Token".into())))?;
        let expires_at = parse_token(&body).ok().and_then(|i| i.expires_at).map(|e| e.to_rfc3339());
        Ok(IssuedToken { token, expires_at })
    }

    /// One request to Keystone within the timeout; a connection that cannot
    /// be made is retried `http_request_max_retries` times with
    /// keystoneauth's backoff (0.5 s, doubling), a failed TLS handshake is
    /// not.
    async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, AuthError> {
        self.http.send(method, url, headers, body).await.map_err(|e| AuthError::Unavailable(e.message().to_string()))
    }
}

/// What a console user gives to log in with a password.
#[derive(Debug, Clone)]
pub struct PasswordLogin {
    pub username: String,
    pub password: String,
    pub project: String,
    pub user_domain: String,
    pub project_domain: String,
}

/// A token Keystone issued, and when it expires (RFC 3339).
#[derive(Debug, Clone)]
pub struct IssuedToken {
    pub token: String,
    pub expires_at: Option<String>,
}

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Keystone refused the credentials (a 4xx).
    #[error("the credentials were refused")]
    Refused,
    #[error(transparent)]
    Unavailable(AuthError),
}

/// oslo.context's values for a user token (and a valid service token), as
/// keystonemiddleware's `X-*` headers carry them.
fn identity(user: &TokenInfo, service: Option<&TokenInfo>) -> Identity {
    let mut identity = Identity {
        user_id: Some(user.user_id.clone()),
        user_domain_id: user.user_domain_id.clone(),
        project_id: user.project_id.clone(),
        project_domain_id: user.project_domain_id.clone(),
        domain_id: user.domain_id.clone(),
        system_scope: user.system_all.then(|| "all".to_string()),
        roles: user.roles.clone(),
        is_admin_project: user.is_admin_project,
        ..Identity::default()
    };
    if let Some(s) = service {
        identity.service_user_id = Some(s.user_id.clone());
        identity.service_user_domain_id = s.user_domain_id.clone();
        identity.service_project_id = s.project_id.clone();
        identity.service_project_domain_id = s.project_domain_id.clone();
        identity.service_roles = s.roles.clone();
    }
    identity
}

/// Tokens are cached under their digest, never in the clear.
fn cache_key(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// keystonemiddleware's `_path_matches`: `{name}` and `*` match one path
/// segment, `**` any run of characters.
fn path_matches(path: &str, pattern: &str) -> bool {
    let mut re = String::from("^");
    let mut rest = pattern;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("**") {
            re.push_str(".*");
            rest = &rest[2..];
        } else if c == '*' {
            re.push_str("[^/]+");
            rest = &rest[1..];
        } else if let (true, Some(end)) = (c == '{', rest.find('}')) {
            re.push_str("[^/]+");
            rest = &rest[end + 1..];
        } else {
            re.push_str(&regex::escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
        }
    }
    re.push('$');
    regex::Regex::new(&re).is_ok_and(|r| r.is_match(path))
}

/// A v3 token body (`{"token": {...}}`) as the fields policy needs.
fn parse_token(body: &[u8]) -> Result<TokenInfo, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let t = v.get("token").filter(|t| t.is_object()).ok_or("no token object")?;
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let user_id = s(&t["user"]["id"]).ok_or("token without user id")?;
    let expires_at = match t.get("expires_at").and_then(Value::as_str) {
        Some(e) => {
            Some(DateTime::parse_from_rfc3339(e).map_err(|err| format!("expires_at {e}: {err}"))?.with_timezone(&Utc))
        }
        None => None,
    };
    let access_rules = t["application_credential"]["access_rules"].as_array().map(|rules| {
        rules
            .iter()
            .map(|r| AccessRule {
                service: s(&r["service"]).unwrap_or_default(),
                method: s(&r["method"]).unwrap_or_default(),
                path: s(&r["path"]).unwrap_or_default(),
            })
            .collect()
    });
    Ok(TokenInfo {
        user_id,
        user_domain_id: s(&t["user"]["domain"]["id"]),
        project_id: s(&t["project"]["id"]),
        project_domain_id: s(&t["project"]["domain"]["id"]),
        domain_id: s(&t["domain"]["id"]),
        system_all: t["system"]["all"].as_bool().unwrap_or(false),
        roles: t["roles"].as_array().map(|r| r.iter().filter_map(|x| s(&x["name"])).collect()).unwrap_or_default(),
        is_admin_project: t["is_admin_project"].as_bool().unwrap_or(true),
        expires_at,
        access_rules,
        catalog_types: t["catalog"]
            .as_array()
            .map(|c| c.iter().filter_map(|e| s(&e["type"])).collect())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> TokenInfo {
        parse_token(v.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn project_token() {
        // As keystone 30 answers GET /v3/auth/tokens?nocatalog.
        let info = parse(serde_json::json!({"token": {
            "methods": ["password"],
            "user": {"domain": {"id": "default", "name": "Default"}, "id": "u1", "name": "admin", "password_expires_at": null},
            "audit_ids": ["bWa1JzjBQjypHDjrumQsRg"],
            "expires_at": "2999-01-01T00:00:00.000000Z", "issued_at": "2026-11-30T15:38:33.000000Z",
            "project": {"domain": {"id": "default", "name": "Default"}, "id": "p1", "name": "admin"},
            "is_domain": false,
            "roles": [{"id": "r", "name": "admin"}, {"id": "s", "name": "reader"}]
        }}));
        assert_eq!(info.user_id, "u1");
        assert_eq!(info.user_domain_id.as_deref(), Some("default"));
        assert_eq!(info.project_id.as_deref(), Some("p1"));
        assert_eq!(info.project_domain_id.as_deref(), Some("default"));
        assert_eq!(info.roles, vec!["admin", "reader"]);
        assert!(!info.system_all && info.domain_id.is_none() && info.access_rules.is_none());
        assert!(info.is_admin_project);
        assert!(!info.expired());
        let id = identity(&info, None);
        assert_eq!(id.system_scope, None);
        assert_eq!(id.project_id.as_deref(), Some("p1"));
    }

    #[test]
    fn system_and_domain_tokens() {
        let system = parse(serde_json::json!({"token": {
            "user": {"id": "u", "domain": {"id": "default"}}, "roles": [{"id": "x", "name": "reader"}],
            "system": {"all": true}, "expires_at": "2999-01-01T00:00:00.000000Z"}}));
        let id = identity(&system, None);
        assert_eq!(id.system_scope.as_deref(), Some("all"));
        assert_eq!(id.project_id, None);
        let domain = parse(serde_json::json!({"token": {
            "user": {"id": "u"}, "roles": [], "domain": {"id": "d1", "name": "D"}, "is_admin_project": false,
            "expires_at": "2999-01-01T00:00:00Z"}}));
        let id = identity(&domain, Some(&system));
        assert_eq!(id.domain_id.as_deref(), Some("d1"));
        assert!(!id.is_admin_project);
        assert_eq!(id.service_roles, vec!["reader"]);
    }

    #[test]
    fn expiry_and_bad_bodies() {
        let expired = parse(serde_json::json!({"token": {"user": {"id": "u"}, "expires_at": "2000-01-01T00:00:00Z"}}));
        assert!(expired.expired());
        assert!(parse_token(b"{}").is_err());
        assert!(parse_token(b"not json").is_err());
        assert!(parse_token(br#"{"token": {"user": {}}}"#).is_err());
        assert!(parse_token(br#"{"token": {"user": {"id": "u"}, "expires_at": "soon"}}"#).is_err());
    }

    #[test]
    fn application_credential_access_rules() {
        let info = parse(serde_json::json!({"token": {
            "user": {"id": "u"}, "expires_at": "2999-01-01T00:00:00Z",
            "application_credential": {"id": "a", "name": "n", "restricted": true,
                "access_rules": [{"id": "1", "service": "placement", "method": "GET", "path": "/resource_providers/*"}]},
            "catalog": [{"type": "identity", "endpoints": []}, {"type": "placement", "endpoints": []}]}}));
        let rules = info.access_rules.as_ref().unwrap();
        assert_eq!(rules[0].path, "/resource_providers/*");
        assert_eq!(info.catalog_types, vec!["identity", "placement"]);
        let unrestricted = parse(serde_json::json!({"token": {"user": {"id": "u"},
            "application_credential": {"id": "a", "name": "n", "restricted": true}}}));
        assert!(unrestricted.access_rules.is_none());
    }

    #[test]
    fn access_rule_paths() {
        assert!(path_matches("/resource_providers/abc", "/resource_providers/*"));
        assert!(!path_matches("/resource_providers/abc/traits", "/resource_providers/*"));
        assert!(path_matches("/resource_providers/abc/traits", "/resource_providers/**"));
        assert!(path_matches("/resource_providers/abc/traits", "/resource_providers/{uuid}/traits"));
        assert!(!path_matches("/resource_providers", "/resource_providers/*"));
        assert!(path_matches("/v2.1/x", "/v2.1/*"));
        assert!(!path_matches("/v2x1/x", "/v2.1/*"));
    }

    #[test]
    fn auth_url_forms() {
        assert_eq!(identity_v3("http://k:5000"), "http://k:5000/v3");
        assert_eq!(identity_v3("http://k:5000/"), "http://k:5000/v3");
        assert_eq!(identity_v3("http://k:5000/v3/"), "http://k:5000/v3");
        assert_eq!(identity_v3("http://k/identity"), "http://k/identity/v3");
        assert_eq!(identity_v3("http://k/identity/v2.0"), "http://k/identity/v3");
    }

    #[test]
    fn cache_time_values() {
        let now = Instant::now();
        let earlier = now - Duration::from_secs(5);
        assert!(!CacheTime::from_seconds(-1).fresh(now, now));
        assert!(CacheTime::from_seconds(0).fresh(earlier, now));
        assert!(CacheTime::from_seconds(10).fresh(earlier, now));
        assert!(!CacheTime::from_seconds(2).fresh(earlier, now));
    }

    fn settings(pairs: &str) -> Result<KeystoneSettings, AuthError> {
        let mut config = Config::default();
        config.merge_text(&format!("[keystone_authtoken]\n{pairs}"), std::path::Path::new("test.conf")).unwrap();
        KeystoneSettings::from_config(&config)
    }

    #[test]
    fn settings_from_config() {
        let s = settings("auth_url = http://k:5000/v3\nusername = placement\nuser_domain_id = default\n").unwrap();
        assert_eq!(s.identity_v3, "http://k:5000/v3");
        assert_eq!(s.www_authenticate_uri, "http://k:5000/v3");
        assert_eq!(s.user_domain, DomainRef::Id("default".into()));
        assert_eq!(s.project_domain, DomainRef::Name("Default".into()));
        assert_eq!(s.project_name.as_deref(), Some("service"));
        assert_eq!(s.cache_time, CacheTime::For(Duration::from_secs(300)));
        // keystonemiddleware 13's defaults.
        assert!(s.service_token_roles_required);
        assert_eq!(s.service_token_roles, vec!["service"]);
        assert!(!s.delay_auth_decision);
        assert!(matches!(settings("auth_url = ftp://k:5000"), Err(AuthError::Config(_))));
        // https, with keystonemiddleware's TLS options.
        let s = settings("auth_url = https://k:5000\ncafile = /etc/keystone-ca.pem\ninsecure = true\n").unwrap();
        assert_eq!(s.identity_v3, "https://k:5000/v3");
        let tls =
            TlsSettings { ca_file: Some("/etc/keystone-ca.pem".into()), insecure: true, ..TlsSettings::default() };
        assert_eq!(s.tls, tls);
        // A TLS file that cannot be read refuses the start (insecure needs no CA).
        assert!(TokenValidator::new(s).is_ok());
        let s = settings("auth_url = https://k:5000\ncafile = /etc/keystone-ca.pem\n").unwrap();
        let e = TokenValidator::new(s).err().unwrap();
        assert!(matches!(&e, AuthError::Config(m) if m.starts_with("[keystone_authtoken] cannot read CA file")), "{e}");
        assert!(matches!(settings("username = x"), Err(AuthError::Config(_))));
    }

    /// A stand-in Keystone: the service user's token is "svc"; subject
    /// tokens "user", "service" (with the service role), "old" (expired:
    /// only with allow_expired=1); anything else is unknown. Counts the
    /// validations it answers.
    async fn fake_keystone() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use axum::routing::get;
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        let token = |roles: &[&str], expires: &str| {
            let roles: Vec<Value> = roles.iter().map(|r| serde_json::json!({"id": r, "name": r})).collect();
            serde_json::json!({"token": {"user": {"id": "u", "domain": {"id": "default"}},
                "project": {"id": "p", "domain": {"id": "default"}}, "roles": roles, "expires_at": expires}})
            .to_string()
        };
        let issue = move || async move {
            let body = token(&["service"], "2999-01-01T00:00:00.000000Z");
            (StatusCode::CREATED, [("x-subject-token", "svc")], body)
        };
        let validate = move |uri: http::Uri, headers: HeaderMap| {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, Ordering::SeqCst);
                let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                if h("x-auth-token") != "svc" {
                    return (StatusCode::UNAUTHORIZED, String::new());
                }
                let allow_expired = uri.query().unwrap_or("").contains("allow_expired=1");
                match h("x-subject-token").as_str() {
                    "user" => (StatusCode::OK, token(&["member", "reader"], "2999-01-01T00:00:00Z")),
                    "service" => (StatusCode::OK, token(&["service"], "2999-01-01T00:00:00Z")),
                    "old" if allow_expired => (StatusCode::OK, token(&["admin"], "2000-01-01T00:00:00Z")),
                    _ => (StatusCode::NOT_FOUND, String::new()),
                }
            }
        };
        let app = axum::Router::new().route("/v3/auth/tokens", get(validate).post(issue));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, count)
    }

    fn validator(url: &str, extra: &str) -> TokenValidator {
        TokenValidator::new(settings(&format!("auth_url = {url}\nusername = placement\n{extra}")).unwrap()).unwrap()
    }

    fn request(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    async fn who(v: &TokenValidator, pairs: &[(&'static str, &'static str)]) -> Result<Option<Identity>, AuthError> {
        v.identify(&Method::GET, "/resource_providers", &request(pairs)).await
    }

    #[tokio::test]
    async fn validation_decisions() {
        let (url, count) = fake_keystone().await;
        let v = validator(&url, "");
        let id = who(&v, &[("x-auth-token", " user ")]).await.unwrap().unwrap();
        assert_eq!(id.roles, vec!["member", "reader"]);
        assert_eq!(id.project_id.as_deref(), Some("p"));
        // Cached: Keystone is asked once.
        who(&v, &[("x-auth-token", "user")]).await.unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(matches!(who(&v, &[]).await, Err(AuthError::NoToken)));
        assert!(matches!(who(&v, &[("x-auth-token", "nope")]).await, Err(AuthError::InvalidToken(_))));
        // An expired token passes only beside a service token with the
        // service role, which also fills the service fields.
        assert!(matches!(who(&v, &[("x-auth-token", "old")]).await, Err(AuthError::InvalidToken(_))));
        let id = who(&v, &[("x-auth-token", "old"), ("x-service-token", "service")]).await.unwrap().unwrap();
        assert_eq!(id.service_roles, vec!["service"]);
        // (Both tokens are refused here, the role-less service token and
        // the expired user token it cannot excuse.)
        assert!(matches!(
            who(&v, &[("x-auth-token", "old"), ("x-service-token", "user")]).await,
            Err(AuthError::InvalidToken(_))
        ));
        assert!(matches!(
            who(&v, &[("x-auth-token", "user"), ("x-service-token", "user")]).await,
            Err(AuthError::InvalidServiceToken(_))
        ));
        assert!(matches!(
            who(&v, &[("x-auth-token", "user"), ("x-service-token", "nope")]).await,
            Err(AuthError::InvalidServiceToken(_))
        ));
        // service_token_roles_required = false: a role-less service token
        // passes, but allows no expired user token.
        let lax = validator(&url, "service_token_roles_required = false");
        assert!(who(&lax, &[("x-auth-token", "user"), ("x-service-token", "user")]).await.unwrap().is_some());
        assert!(who(&lax, &[("x-auth-token", "old"), ("x-service-token", "user")]).await.is_err());
        // delay_auth_decision: no identity instead of a refusal.
        let delayed = validator(&url, "delay_auth_decision = true");
        assert!(who(&delayed, &[("x-auth-token", "nope")]).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn cache_off_and_keystone_down() {
        let (url, count) = fake_keystone().await;
        let v = validator(&url, "token_cache_time = -1");
        for _ in 0..2 {
            who(&v, &[("x-auth-token", "user")]).await.unwrap();
        }
        assert_eq!(count.load(Ordering::SeqCst), 2);
        // Nothing listening: 503's error, after the connection retries.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let down = validator(&format!("http://127.0.0.1:{port}"), "http_request_max_retries = 0");
        let e = who(&down, &[("x-auth-token", "user")]).await.unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        // ... unless the application decides.
        let down =
            validator(&format!("http://127.0.0.1:{port}"), "http_request_max_retries = 0\ndelay_auth_decision = true");
        assert!(who(&down, &[("x-auth-token", "user")]).await.unwrap().is_none());
    }
}
