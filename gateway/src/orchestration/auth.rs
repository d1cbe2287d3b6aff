//! Who is calling the Orchestration API, and may they name this project.
//!
//! `noauth` is Heat's noauth paste flavor (`heat/common/noauth.py`): every
//! caller is trusted, project = `X-Auth-Project`, user = `X-Auth-User`
//! (both default `admin`), role `admin`, and no policy is checked.
//! `keystone` validates `X-Auth-Token` with [`TokenValidator`], answering
//! as keystonemiddleware, and authorizes each route with Heat's policy
//! ([`OrchestrationPolicy`]).

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use keelson_proto::orchestration::v1::Caller;

use keelson_policy::Credentials;

use super::fault::{self, Fault};
use super::policy::{heat_credentials, OrchestrationPolicy};
use crate::keystone::TokenValidator;

/// How callers are authenticated (`[orchestration] auth_strategy`) and
/// authorized.
#[derive(Clone)]
pub enum OrchestrationAuth {
    NoAuth,
    Keystone { validator: Arc<TokenValidator>, policy: Arc<OrchestrationPolicy> },
}

/// An authenticated caller and, in Keystone mode, what Heat's policy
/// checks them with.
pub struct Authenticated {
    pub caller: Caller,
    /// None under noauth: every caller is admin and nothing is checked.
    pub credentials: Option<Credentials>,
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
}

/// The caller under Heat's noauth flavor.
pub fn noauth_caller(headers: &HeaderMap) -> Caller {
    let user = header(headers, "x-auth-user").unwrap_or_else(|| "admin".to_string());
    let project = header(headers, "x-auth-project").unwrap_or_else(|| "admin".to_string());
    Caller {
        project_id: project,
        user_id: user.clone(),
        user_name: user,
        roles: vec!["admin".to_string()],
        is_admin: true,
        auth_token: header(headers, "x-auth-token").unwrap_or_default(),
        path_project_id: String::new(),
    }
}

impl OrchestrationAuth {
    /// Keystone callers authorized by `policy`.
    pub fn keystone(validator: TokenValidator, policy: OrchestrationPolicy) -> Self {
        OrchestrationAuth::Keystone { validator: Arc::new(validator), policy: Arc::new(policy) }
    }

    /// The policy requests are checked with (None under noauth).
    pub fn policy(&self) -> Option<&OrchestrationPolicy> {
        match self {
            OrchestrationAuth::NoAuth => None,
            OrchestrationAuth::Keystone { policy, .. } => Some(policy),
        }
    }

    /// The caller of a request, or the response that refuses it.
    pub async fn authenticate(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Authenticated, Response> {
        let (validator, policy) = match self {
            OrchestrationAuth::NoAuth => {
                return Ok(Authenticated { caller: noauth_caller(headers), credentials: None })
            }
            OrchestrationAuth::Keystone { validator, policy } => (validator, policy),
        };
        match validator.identify(method, path, headers).await {
            Ok(Some(identity)) if identity.user_id.is_some() && identity.project_id.is_some() => {
                // Heat's `is_admin` is its `context_is_admin` rule.
                let is_admin = policy.is_admin(&keelson_policy::Credentials::from_context(&identity));
                let credentials = heat_credentials(&identity, is_admin);
                let user_id = identity.user_id.unwrap_or_default();
                let caller = Caller {
                    project_id: identity.project_id.unwrap_or_default(),
                    // The validated token's user name is not kept; its id
                    // stands in (never a client-sent header).
                    user_name: user_id.clone(),
                    user_id,
                    is_admin,
                    roles: identity.roles,
                    auth_token: header(headers, "x-auth-token").unwrap_or_default(),
                    path_project_id: String::new(),
                };
                Ok(Authenticated { caller, credentials: Some(credentials) })
            }
            // No user (delayed decision) or no project scope: Heat's
            // context cannot be built, the request is not authenticated.
            Ok(_) => Err(keystone_unauthorized(&validator.www_authenticate())),
            Err(e) if e.is_unavailable() => {
                tracing::warn!(target: "keelson::auth", "cannot validate tokens: {e}");
                Err(fault::keystone_unavailable())
            }
            Err(e) => {
                tracing::info!(target: "keelson::auth", "{e}");
                Err(keystone_unauthorized(&validator.www_authenticate()))
            }
        }
    }
}

/// keystonemiddleware's 401 (its own JSON body, `WWW-Authenticate`).
fn keystone_unauthorized(www_authenticate: &str) -> Response {
    let body = serde_json::json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}});
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::UNAUTHORIZED;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(www_authenticate) {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// Heat's project check (`heat/api/openstack/v1/util.py`): the path's
/// `{tenant_id}` must be the caller's project; an admin is silently
/// re-targeted to its own project instead. Records the path's project in
/// the caller.
pub fn check_project(caller: &mut Caller, path_tenant: &str) -> Result<(), Fault> {
    caller.path_project_id = path_tenant.to_string();
    if caller.project_id == path_tenant || (caller.is_admin && !caller.project_id.is_empty()) {
        Ok(())
    } else {
        Err(Fault::forbidden())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noauth_defaults_to_admin() {
        let c = noauth_caller(&HeaderMap::new());
        assert_eq!((c.project_id.as_str(), c.user_id.as_str(), c.is_admin), ("admin", "admin", true));
        assert_eq!(c.roles, vec!["admin"]);
        let mut h = HeaderMap::new();
        h.insert("x-auth-project", "p1".parse().unwrap());
        h.insert("x-auth-user", "bob".parse().unwrap());
        h.insert("x-auth-token", "tok".parse().unwrap());
        let c = noauth_caller(&h);
        assert_eq!((c.project_id.as_str(), c.user_name.as_str(), c.auth_token.as_str()), ("p1", "bob", "tok"));
    }

    #[test]
    fn project_check() {
        let mut member =
            Caller { project_id: "p1".into(), user_id: "u".into(), roles: vec!["member".into()], ..Caller::default() };
        assert!(check_project(&mut member, "p1").is_ok());
        assert_eq!(check_project(&mut member, "p2").unwrap_err(), Fault::forbidden());
        assert_eq!(member.path_project_id, "p2");
        let mut admin = Caller { project_id: "p1".into(), is_admin: true, ..Caller::default() };
        assert!(check_project(&mut admin, "p2").is_ok());
        assert_eq!(admin.project_id, "p1");
    }
}
