//! A Keystone v3 session: how it authenticates, the token it holds and
//! renews, its service catalog, and authenticated calls to any service.
//!
//! One [`Session`] per identity the caller acts as (the service user, the
//! stack-user domain admin, a stack's trust, an instance's stack user). The
//! token is obtained on first use, kept with what Keystone said of it
//! ([`AccessInfo`]), and obtained again a minute before it expires (half
//! its life for short-lived tokens), or at once when a service refuses it
//! with 401. A session over a token it cannot renew
//! ([`AuthMethod::Existing`]) just carries it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{json, Value};

use crate::error::OsError;
use crate::http::{Answer, HttpClient, Payload};

/// Which of a service's catalog endpoints a client picks: keystoneauth's
/// `interface`, by the client's name (`nova`, `neutron`, ...) with a
/// default for the others, and `region_name` (none: the first endpoint of
/// the interface, whatever its region). Heat's `[clients] endpoint_type`,
/// `[clients_<client>] endpoint_type` and `region_name_for_services`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointChoice {
    interface: String,
    by_client: BTreeMap<String, String>,
    region: Option<String>,
}

impl Default for EndpointChoice {
    fn default() -> Self {
        EndpointChoice { interface: "public".into(), by_client: BTreeMap::new(), region: None }
    }
}

impl EndpointChoice {
    /// Every client on `interface` (`public` or keystoneauth's older
    /// `publicURL` form), in `region` when one is given.
    pub fn new(interface: &str, region: Option<String>) -> EndpointChoice {
        EndpointChoice {
            interface: interface_name(interface),
            by_client: BTreeMap::new(),
            region: region.filter(|r| !r.is_empty()),
        }
    }

    /// `client` uses `interface` instead of the default.
    pub fn with_client(mut self, client: &str, interface: &str) -> EndpointChoice {
        self.by_client.insert(client.to_string(), interface_name(interface));
        self
    }

    pub fn interface(&self, client: &str) -> &str {
        self.by_client.get(client).unwrap_or(&self.interface)
    }

    pub fn region(&self) -> Option<&str> {
        self.region.as_deref()
    }
}

/// The catalog's interface name for an endpoint type: `publicURL`,
/// `internalURL` and `adminURL` are keystoneauth's older names of
/// `public`, `internal` and `admin`.
pub fn interface_name(endpoint_type: &str) -> String {
    endpoint_type.strip_suffix("URL").unwrap_or(endpoint_type).to_string()
}

/// A domain by id or by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRef {
    Id(String),
    Name(String),
}

impl DomainRef {
    fn json(&self) -> Value {
        match self {
            DomainRef::Id(id) => json!({"id": id}),
            DomainRef::Name(name) => json!({"name": name}),
        }
    }
}

/// A user by id, or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserRef {
    Id(String),
    Name { name: String, domain: DomainRef },
}

/// A project by id, or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectRef {
    Id(String),
    Name { name: String, domain: DomainRef },
}

/// What a token is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Unscoped,
    Project(ProjectRef),
    Domain(DomainRef),
    /// A trust: the token acts for the trustor (with impersonation) in the
    /// trust's project with the trust's roles.
    Trust(String),
}

impl Scope {
    fn json(&self) -> Option<Value> {
        Some(match self {
            Scope::Unscoped => return None,
            Scope::Project(ProjectRef::Id(id)) => json!({"project": {"id": id}}),
            Scope::Project(ProjectRef::Name { name, domain }) => {
                json!({"project": {"name": name, "domain": domain.json()}})
            }
            Scope::Domain(d) => json!({"domain": d.json()}),
            Scope::Trust(id) => json!({"OS-TRUST:trust": {"id": id}}),
        })
    }
}

/// How a session obtains its token (keystoneauth's plugins).
#[derive(Clone, PartialEq, Eq)]
pub enum AuthMethod {
    /// `password` method.
    Password { user: UserRef, password: String, scope: Scope },
    /// `token` method: a new token (re-scoped) from an existing one.
    Token { token: String, scope: Scope },
    /// A token used as it is (a caller's validated token): never renewed.
    Existing { token: String },
}

impl std::fmt::Debug for AuthMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a password or a token in a log line.
        match self {
            AuthMethod::Password { user, scope, .. } => {
                f.debug_struct("Password").field("user", user).field("scope", scope).finish_non_exhaustive()
            }
            AuthMethod::Token { scope, .. } => f.debug_struct("Token").field("scope", scope).finish_non_exhaustive(),
            AuthMethod::Existing { .. } => f.write_str("Existing"),
        }
    }
}

impl AuthMethod {
    /// The `POST /v3/auth/tokens` body; None for a token used as it is.
    fn request_body(&self) -> Option<Value> {
        let (identity, scope) = match self {
            AuthMethod::Password { user, password, scope } => {
                let user = match user {
                    UserRef::Id(id) => json!({"id": id, "password": password}),
                    UserRef::Name { name, domain } => {
                        json!({"name": name, "domain": domain.json(), "password": password})
                    }
                };
                (json!({"methods": ["password"], "password": {"user": user}}), scope)
            }
            AuthMethod::Token { token, scope } => (json!({"methods": ["token"], "token": {"id": token}}), scope),
            AuthMethod::Existing { .. } => return None,
        };
        let mut auth = json!({"identity": identity});
        if let (Some(scope), Value::Object(map)) = (scope.json(), &mut auth) {
            map.insert("scope".into(), scope);
        }
        Some(json!({"auth": auth}))
    }
}

/// One endpoint of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub interface: String,
    pub region: String,
    pub url: String,
}

/// One service of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub service_type: String,
    pub endpoints: Vec<Endpoint>,
}

/// What Keystone said of a token (the `token` document of a v3 answer).
#[derive(Debug, Clone, PartialEq)]
pub struct AccessInfo {
    pub token: String,
    pub expires_at: Option<DateTime<Utc>>,
    pub user_id: String,
    pub user_domain_id: Option<String>,
    pub project_id: Option<String>,
    pub project_name: Option<String>,
    pub project_domain_id: Option<String>,
    pub domain_id: Option<String>,
    pub role_names: Vec<String>,
    pub role_ids: Vec<String>,
    /// Set for a trust-scoped token.
    pub trust_id: Option<String>,
    /// The trustor when the trust impersonates.
    pub trustor_user_id: Option<String>,
    pub catalog: Vec<CatalogEntry>,
}

impl AccessInfo {
    /// Parses Keystone's `{"token": {...}}` for the token `token` (the
    /// `X-Subject-Token` of the answer).
    pub fn parse(token: &str, body: &Value) -> Result<AccessInfo, OsError> {
        let t = body.get("token").filter(|t| t.is_object()).ok_or_else(|| invalid("no token document"))?;
        let s = |v: &Value| v.as_str().map(str::to_owned);
        let user_id = s(&t["user"]["id"]).ok_or_else(|| invalid("a token without a user id"))?;
        let expires_at = match t.get("expires_at").and_then(Value::as_str) {
            Some(e) => Some(
                DateTime::parse_from_rfc3339(e)
                    .map_err(|err| invalid(&format!("expires_at {e}: {err}")))?
                    .with_timezone(&Utc),
            ),
            None => None,
        };
        let roles = t["roles"].as_array().cloned().unwrap_or_default();
        let trust = &t["OS-TRUST:trust"];
        let catalog = t["catalog"]
            .as_array()
            .map(|services| {
                services
                    .iter()
                    .map(|svc| CatalogEntry {
                        service_type: s(&svc["type"]).unwrap_or_default(),
                        endpoints: svc["endpoints"]
                            .as_array()
                            .map(|eps| {
                                eps.iter()
                                    .map(|e| Endpoint {
                                        interface: s(&e["interface"]).unwrap_or_default(),
                                        region: s(&e["region_id"]).or_else(|| s(&e["region"])).unwrap_or_default(),
                                        url: s(&e["url"]).unwrap_or_default(),
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(AccessInfo {
            token: token.to_string(),
            expires_at,
            user_id,
            user_domain_id: s(&t["user"]["domain"]["id"]),
            project_id: s(&t["project"]["id"]),
            project_name: s(&t["project"]["name"]),
            project_domain_id: s(&t["project"]["domain"]["id"]),
            domain_id: s(&t["domain"]["id"]),
            role_names: roles.iter().filter_map(|r| s(&r["name"])).collect(),
            role_ids: roles.iter().filter_map(|r| s(&r["id"])).collect(),
            trust_id: s(&trust["id"]),
            trustor_user_id: s(&trust["trustor_user"]["id"]),
            catalog,
        })
    }

    /// The URL of `service_type`'s `interface` endpoint, in `region` when
    /// given (the first such endpoint, as keystoneauth picks).
    pub fn endpoint(&self, service_type: &str, interface: &str, region: Option<&str>) -> Result<String, OsError> {
        self.catalog
            .iter()
            .filter(|c| c.service_type == service_type)
            .flat_map(|c| c.endpoints.iter())
            .find(|e| e.interface == interface && region.is_none_or(|r| r.is_empty() || e.region == r))
            .map(|e| e.url.trim_end_matches('/').to_string())
            .ok_or_else(|| OsError::EndpointNotFound(format!("{service_type} ({interface})")))
    }

    /// When to obtain the next token: a minute before expiry, or half the
    /// remaining life of a short-lived token.
    fn renew_at(&self, now: Instant) -> Instant {
        let left = self
            .expires_at
            .map(|e| (e - Utc::now()).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(Duration::from_secs(600));
        now + left - (left / 2).min(Duration::from_secs(60))
    }
}

fn invalid(what: &str) -> OsError {
    OsError::InvalidResponse(what.to_string())
}

struct Held {
    access: Arc<AccessInfo>,
    renew_at: Instant,
}

/// A Keystone v3 session. Cheap to share behind an `Arc`.
pub struct Session {
    http: HttpClient,
    /// The identity v3 root (`http://keystone:5000/v3`).
    identity_v3: String,
    method: AuthMethod,
    held: tokio::sync::Mutex<Option<Held>>,
    choice: EndpointChoice,
    /// Version documents by endpoint, asked once per session (as
    /// keystoneauth's discovery cache): a service client connects for
    /// every action, and asking the version each time doubles the calls.
    discovered: std::sync::Mutex<std::collections::HashMap<String, Value>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("identity_v3", &self.identity_v3).field("method", &self.method).finish()
    }
}

/// The identity v3 root for an `auth_url` written with or without its
/// version (keystoneauth discovers it from either).
pub fn identity_v3(auth_url: &str) -> String {
    let base = auth_url.trim_end_matches('/');
    if base.ends_with("/v3") {
        base.to_string()
    } else {
        format!("{}/v3", base.strip_suffix("/v2.0").unwrap_or(base))
    }
}

impl Session {
    /// A session authenticating at `auth_url` (the identity endpoint, with
    /// or without `/v3`) with `method`.
    pub fn new(http: HttpClient, auth_url: &str, method: AuthMethod) -> Session {
        Session {
            http,
            identity_v3: identity_v3(auth_url),
            method,
            held: tokio::sync::Mutex::new(None),
            choice: EndpointChoice::default(),
            discovered: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The version document of `endpoint`: the one this session already
    /// read, else what `fetch` reads (kept when it succeeds).
    pub async fn version_document<F, Fut>(&self, endpoint: &str, fetch: F) -> Result<Value, OsError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Value, OsError>>,
    {
        let cached = self.discovered.lock().unwrap_or_else(|p| p.into_inner()).get(endpoint).cloned();
        if let Some(doc) = cached {
            return Ok(doc);
        }
        let doc = fetch().await?;
        let mut known = self.discovered.lock().unwrap_or_else(|p| p.into_inner());
        // Bounded: a session talks to a handful of endpoints.
        if known.len() >= 64 {
            known.clear();
        }
        known.insert(endpoint.to_string(), doc.clone());
        Ok(doc)
    }

    /// The session's clients pick their endpoints as `choice` says.
    pub fn with_endpoint_choice(mut self, choice: EndpointChoice) -> Session {
        self.choice = choice;
        self
    }

    pub fn identity_v3(&self) -> &str {
        &self.identity_v3
    }

    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// The session's token and what Keystone says of it, obtained or
    /// renewed when needed.
    pub async fn access(&self) -> Result<Arc<AccessInfo>, OsError> {
        let mut held = self.held.lock().await;
        if let Some(h) = held.as_ref() {
            if h.renew_at > Instant::now() {
                return Ok(h.access.clone());
            }
        }
        let access = Arc::new(self.authenticate().await?);
        *held = Some(Held { access: access.clone(), renew_at: access.renew_at(Instant::now()) });
        Ok(access)
    }

    /// Forgets `token` (a service refused it): the next call authenticates
    /// again. Calls that raced on the same refusal share the new token.
    pub async fn invalidate(&self, token: &str) {
        let mut held = self.held.lock().await;
        if held.as_ref().is_some_and(|h| h.access.token == token) {
            *held = None;
        }
    }

    async fn authenticate(&self) -> Result<AccessInfo, OsError> {
        let Some(body) = self.method.request_body() else {
            let AuthMethod::Existing { token } = &self.method else {
                return Err(invalid("no authentication body"));
            };
            // Validate it once, for what the token carries (its user,
            // project, roles, expiry): the token validates itself.
            let url = format!("{}/auth/tokens", self.identity_v3);
            let answer = self
                .http
                .send(Method::GET, &url, &[("x-auth-token", token), ("x-subject-token", token)], None)
                .await?
                .success()?;
            return AccessInfo::parse(token, &answer.json()?);
        };
        let url = format!("{}/auth/tokens", self.identity_v3);
        let answer = self.http.send(Method::POST, &url, &[], Some(&body)).await?.success()?;
        let token = answer
            .header("x-subject-token")
            .map(str::to_owned)
            .ok_or_else(|| invalid("no X-Subject-Token in Keystone's answer"))?;
        let access = AccessInfo::parse(&token, &answer.json()?)?;
        tracing::debug!(target: "keelson::openstack", user = access.user_id, trust = ?access.trust_id, "authenticated");
        Ok(access)
    }

    /// An authenticated call to `url` (absolute); a 401 is answered once
    /// more with a fresh token (the held one may have been revoked).
    pub async fn call(&self, method: Method, url: &str, body: Option<&Value>) -> Result<Answer, OsError> {
        self.call_with(method, url, &[], body).await
    }

    /// [`Session::call`] with extra headers.
    pub async fn call_with(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, OsError> {
        self.call_over(&self.http, method, url, headers, body).await
    }

    /// [`Session::call_with`] as the client named `client` (`nova`,
    /// `neutron`, ...) makes it: over that client's TLS settings
    /// ([`HttpClient::for_client`]). Keystone's own calls use the session's.
    pub async fn client_call(
        &self,
        client: &str,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, OsError> {
        self.call_over(&self.http.for_client(client), method, url, headers, body).await
    }

    async fn call_over(
        &self,
        http: &HttpClient,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, OsError> {
        let payload = match body {
            Some(doc) => Payload::Json(doc),
            None => Payload::Empty,
        };
        self.answer_over(http, method, url, headers, payload).await?.success()
    }

    /// [`Session::client_call`] with any [`Payload`], answering whatever
    /// status the service gave (after the one retry of a 401 with a
    /// fresh token): for a client that reads an error answer's headers
    /// itself (Swift's).
    pub async fn client_answer(
        &self,
        client: &str,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
    ) -> Result<Answer, OsError> {
        self.answer_over(&self.http.for_client(client), method, url, headers, body).await
    }

    async fn answer_over(
        &self,
        http: &HttpClient,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Payload<'_>,
    ) -> Result<Answer, OsError> {
        let mut answer = None;
        for attempt in 0..2 {
            let access = self.access().await?;
            let mut all: Vec<(&str, &str)> = vec![("x-auth-token", access.token.as_str())];
            all.extend_from_slice(headers);
            let got = http.send_payload(method.clone(), url, &all, body).await?;
            if got.status == http::StatusCode::UNAUTHORIZED
                && attempt == 0
                && !matches!(self.method, AuthMethod::Existing { .. })
            {
                self.invalidate(&access.token).await;
                answer = Some(got);
                continue;
            }
            return Ok(got);
        }
        answer.ok_or_else(|| OsError::Unauthorized("the service refused a fresh token".into()))
    }

    /// A call to Keystone itself: `path` under the identity v3 root.
    pub async fn identity_call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer, OsError> {
        let url = format!("{}{}", self.identity_v3, path);
        self.call(method, &url, body).await
    }

    /// The URL of a service from this session's catalog.
    pub async fn endpoint(&self, service_type: &str, interface: &str, region: Option<&str>) -> Result<String, OsError> {
        self.access().await?.endpoint(service_type, interface, region)
    }

    /// The `service_type` endpoint the client named `client` uses, as the
    /// session's [`EndpointChoice`] picks it.
    pub async fn client_endpoint(&self, client: &str, service_type: &str) -> Result<String, OsError> {
        self.endpoint(service_type, self.choice.interface(client), self.choice.region()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_bodies() {
        let password = AuthMethod::Password {
            user: UserRef::Name { name: "heat".into(), domain: DomainRef::Id("default".into()) },
            password: "secret".into(),
            scope: Scope::Trust("t1".into()),
        };
        assert_eq!(
            password.request_body(),
            Some(json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": {"name": "heat", "domain": {"id": "default"}, "password": "secret"}}},
                "scope": {"OS-TRUST:trust": {"id": "t1"}}}}))
        );
        assert!(!format!("{password:?}").contains("secret"));
        let domain_admin = AuthMethod::Password {
            user: UserRef::Id("u".into()),
            password: "p".into(),
            scope: Scope::Domain(DomainRef::Name("heat".into())),
        };
        assert_eq!(domain_admin.request_body().unwrap()["auth"]["scope"], json!({"domain": {"name": "heat"}}));
        let token = AuthMethod::Token { token: "tok".into(), scope: Scope::Unscoped };
        assert_eq!(
            token.request_body(),
            Some(json!({"auth": {"identity": {"methods": ["token"], "token": {"id": "tok"}}}}))
        );
        assert_eq!(AuthMethod::Existing { token: "x".into() }.request_body(), None);
    }

    #[test]
    fn access_info_and_catalog() {
        let body = json!({"token": {
            "user": {"id": "trustor", "domain": {"id": "default"}},
            "project": {"id": "p1", "name": "demo", "domain": {"id": "default"}},
            "roles": [{"id": "r1", "name": "member"}, {"id": "r2", "name": "reader"}],
            "expires_at": "2999-01-01T00:00:00.000000Z",
            "OS-TRUST:trust": {"id": "t1", "impersonation": true, "trustor_user": {"id": "trustor"}, "trustee_user": {"id": "heat"}},
            "catalog": [{"type": "orchestration", "endpoints": [
                {"interface": "internal", "region_id": "RegionOne", "url": "http://i:8004/v1/p1"},
                {"interface": "public", "region_id": "RegionTwo", "url": "http://two:8004/v1/p1"},
                {"interface": "public", "region_id": "RegionOne", "url": "http://one:8004/v1/p1/"}]}]}});
        let a = AccessInfo::parse("tok", &body).unwrap();
        assert_eq!((a.user_id.as_str(), a.project_id.as_deref()), ("trustor", Some("p1")));
        assert_eq!(a.role_names, ["member", "reader"]);
        assert_eq!(a.role_ids, ["r1", "r2"]);
        assert_eq!((a.trust_id.as_deref(), a.trustor_user_id.as_deref()), (Some("t1"), Some("trustor")));
        assert_eq!(a.endpoint("orchestration", "public", Some("RegionOne")).unwrap(), "http://one:8004/v1/p1");
        assert_eq!(a.endpoint("orchestration", "public", None).unwrap(), "http://two:8004/v1/p1");
        assert!(matches!(a.endpoint("compute", "public", None), Err(OsError::EndpointNotFound(_))));
        assert!(AccessInfo::parse("t", &json!({})).is_err());
        assert!(AccessInfo::parse("t", &json!({"token": {"user": {"id": "u"}, "expires_at": "soon"}})).is_err());
        let now = Instant::now();
        assert!(a.renew_at(now) > now + Duration::from_secs(3600));
    }

    #[test]
    fn auth_url_forms() {
        assert_eq!(identity_v3("http://k:5000"), "http://k:5000/v3");
        assert_eq!(identity_v3("http://k:5000/v3/"), "http://k:5000/v3");
        assert_eq!(identity_v3("http://k/identity/v2.0"), "http://k/identity/v3");
    }

    /// A session renews its token after a 401, once.
    #[tokio::test]
    async fn a_refused_token_is_renewed_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let issued = Arc::new(AtomicUsize::new(0));
        let counter = issued.clone();
        let issue = move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                let body = json!({"token": {"user": {"id": "u"}, "expires_at": "2999-01-01T00:00:00Z"}});
                (http::StatusCode::CREATED, [("x-subject-token", format!("tok{n}"))], body.to_string())
            }
        };
        // Only the second token is accepted.
        let resource = |headers: http::HeaderMap| async move {
            match headers.get("x-auth-token").and_then(|v| v.to_str().ok()) {
                Some("tok1") => (http::StatusCode::OK, "{\"ok\": true}"),
                _ => (http::StatusCode::UNAUTHORIZED, "{}"),
            }
        };
        let app = axum::Router::new()
            .route("/v3/auth/tokens", axum::routing::post(issue))
            .route("/v3/thing", axum::routing::get(resource));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let method =
            AuthMethod::Password { user: UserRef::Id("u".into()), password: "p".into(), scope: Scope::Unscoped };
        let session = Session::new(HttpClient::default(), &url, method);
        let answer = session.identity_call(Method::GET, "/thing", None).await.unwrap();
        assert_eq!(answer.json().unwrap(), json!({"ok": true}));
        assert_eq!(issued.load(Ordering::SeqCst), 2);
        // Refused again: the error, not a loop.
        let e = session.call(Method::GET, &format!("{url}/v3/missing"), None).await.unwrap_err();
        assert!(matches!(e, OsError::NotFound(_)), "{e}");
    }
}
