//! Keystone token validation, in place of keystonemiddleware's auth_token.
//!
//! The gateway authenticates as its service user (`[keystone_authtoken]`
//! password credentials), then validates each caller's token with
//! `GET /v3/auth/tokens` (`X-Subject-Token`). Validated tokens are cached
//! for `token_cache_time` seconds (never past their expiry), so a busy
//! gateway asks Keystone once per token, not once per request. An
//! `X-Service-Token` is validated the same way and its roles are checked
//! against `service_token_roles`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use keelson_common::Config;
use serde_json::Value;

use crate::placement::auth::Identity;

/// Why a token was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no token in the request")]
    NoToken,
    #[error("token is invalid, expired or revoked")]
    InvalidToken,
    #[error("service token lacks the required roles")]
    ServiceRoles,
    #[error("keystone is unreachable or misconfigured: {0}")]
    Keystone(String),
}

/// `[keystone_authtoken]` settings keelson uses.
#[derive(Debug, Clone)]
pub struct KeystoneSettings {
    pub auth_url: String,
    pub www_authenticate_uri: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub user_domain_name: String,
    pub project_domain_name: String,
    pub cache_ttl: Duration,
    pub service_token_roles: Vec<String>,
    pub service_token_roles_required: bool,
}

impl KeystoneSettings {
    pub fn from_config(config: &Config) -> Result<Self, AuthError> {
        let get = |name: &str| config.get_str("keystone_authtoken", name);
        let auth_url = get("auth_url")
            .or_else(|| get("www_authenticate_uri"))
            .ok_or_else(|| AuthError::Keystone("[keystone_authtoken] auth_url is not set".into()))?;
        Ok(KeystoneSettings {
            www_authenticate_uri: get("www_authenticate_uri").unwrap_or_else(|| auth_url.clone()),
            auth_url: auth_url.trim_end_matches('/').to_string(),
            username: get("username").unwrap_or_default(),
            password: get("password").unwrap_or_default(),
            project_name: get("project_name").unwrap_or_else(|| "service".into()),
            user_domain_name: get("user_domain_name").unwrap_or_else(|| "Default".into()),
            project_domain_name: get("project_domain_name").unwrap_or_else(|| "Default".into()),
            cache_ttl: Duration::from_secs(config.get_int("keystone_authtoken", "token_cache_time").unwrap_or(300).max(0) as u64),
            service_token_roles: {
                let r = config.get_list("keystone_authtoken", "service_token_roles");
                if r.is_empty() {
                    vec!["service".into()]
                } else {
                    r
                }
            },
            service_token_roles_required: config.get_bool("keystone_authtoken", "service_token_roles_required"),
        })
    }
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
}

struct Cached {
    info: TokenInfo,
    until: Instant,
}

/// Validates tokens against one Keystone.
pub struct TokenValidator {
    settings: KeystoneSettings,
    client: Client<HttpConnector, Full<Bytes>>,
    cache: Mutex<HashMap<String, Cached>>,
    service_token: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl TokenValidator {
    pub fn new(settings: KeystoneSettings) -> Self {
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        TokenValidator { settings, client, cache: Mutex::new(HashMap::new()), service_token: tokio::sync::Mutex::new(None) }
    }

    /// The `WWW-Authenticate` value of a 401.
    pub fn www_authenticate(&self) -> String {
        format!("Keystone uri=\"{}\"", self.settings.www_authenticate_uri)
    }

    /// The identity of the request's token (and service token).
    pub async fn identify(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let token = headers.get("x-auth-token").and_then(|v| v.to_str().ok()).ok_or(AuthError::NoToken)?;
        let user = self.validate(token).await?;
        let mut identity = Identity {
            user_id: Some(user.user_id.clone()),
            user_domain_id: user.user_domain_id.clone(),
            project_id: user.project_id.clone(),
            project_domain_id: user.project_domain_id.clone(),
            domain_id: user.domain_id.clone(),
            system_scope: user.system_all.then(|| "all".to_string()),
            roles: user.roles.clone(),
            ..Identity::default()
        };
        if let Some(service) = headers.get("x-service-token").and_then(|v| v.to_str().ok()) {
            let s = self.validate(service).await?;
            let has_role = s.roles.iter().any(|r| self.settings.service_token_roles.iter().any(|w| w.eq_ignore_ascii_case(r)));
            if !has_role && self.settings.service_token_roles_required {
                return Err(AuthError::ServiceRoles);
            }
            identity.service_user_id = Some(s.user_id);
            identity.service_user_domain_id = s.user_domain_id;
            identity.service_project_id = s.project_id;
            identity.service_project_domain_id = s.project_domain_id;
            identity.service_roles = s.roles;
        }
        Ok(identity)
    }

    async fn validate(&self, token: &str) -> Result<TokenInfo, AuthError> {
        let key = cache_key(token);
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = cache.get(&key) {
                if c.until > Instant::now() {
                    return Ok(c.info.clone());
                }
            }
        }
        // Retry once with a fresh service token: ours may have expired.
        for attempt in 0..2 {
            let service = self.service_token(attempt > 0).await?;
            let req = Request::builder()
                .method(Method::GET)
                .uri(format!("{}/v3/auth/tokens", self.settings.auth_url))
                .header("x-auth-token", service)
                .header("x-subject-token", token)
                .header("accept", "application/json")
                .body(Full::new(Bytes::new()))
                .map_err(|e| AuthError::Keystone(e.to_string()))?;
            let (status, body) = self.send(req).await?;
            match status {
                StatusCode::OK => {
                    let (info, expires) = parse_token(&body)?;
                    let ttl_end = Instant::now() + self.settings.cache_ttl;
                    let until = expires.map(|e| e.min(ttl_end)).unwrap_or(ttl_end);
                    let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                    if cache.len() > 10_000 {
                        let now = Instant::now();
                        cache.retain(|_, c| c.until > now);
                    }
                    cache.insert(key, Cached { info: info.clone(), until });
                    return Ok(info);
                }
                StatusCode::UNAUTHORIZED if attempt == 0 => continue,
                StatusCode::NOT_FOUND | StatusCode::UNAUTHORIZED => return Err(AuthError::InvalidToken),
                other => return Err(AuthError::Keystone(format!("token validation answered {other}"))),
            }
        }
        Err(AuthError::InvalidToken)
    }

    async fn service_token(&self, refresh: bool) -> Result<String, AuthError> {
        let mut slot = self.service_token.lock().await;
        if let (false, Some((token, until))) = (refresh, slot.as_ref()) {
            if *until > Instant::now() {
                return Ok(token.clone());
            }
        }
        let s = &self.settings;
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": s.username, "password": s.password, "domain": {"name": s.user_domain_name}}}},
            "scope": {"project": {"name": s.project_name, "domain": {"name": s.project_domain_name}}}
        }});
        let req = Request::builder()
            .method(Method::POST)
            .uri(format!("{}/v3/auth/tokens", s.auth_url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| AuthError::Keystone(e.to_string()))?;
        let resp = self.client.request(req).await.map_err(|e| AuthError::Keystone(e.to_string()))?;
        if resp.status() != StatusCode::CREATED {
            return Err(AuthError::Keystone(format!("service user authentication answered {}", resp.status())));
        }
        let token = resp
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| AuthError::Keystone("no X-Subject-Token in Keystone's answer".into()))?;
        let bytes = resp.into_body().collect().await.map_err(|e| AuthError::Keystone(e.to_string()))?.to_bytes();
        let expires = parse_token(&bytes).ok().and_then(|(_, e)| e);
        // Renew a minute early so an in-flight validation never uses a
        // token that expires under it.
        let until = expires.map(|e| e.checked_sub(Duration::from_secs(60)).unwrap_or(e)).unwrap_or_else(|| Instant::now() + Duration::from_secs(600));
        *slot = Some((token.clone(), until));
        Ok(token)
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes), AuthError> {
        let resp = tokio::time::timeout(Duration::from_secs(10), self.client.request(req))
            .await
            .map_err(|_| AuthError::Keystone("timed out".into()))?
            .map_err(|e| AuthError::Keystone(e.to_string()))?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(|e| AuthError::Keystone(e.to_string()))?.to_bytes();
        Ok((status, body))
    }
}

fn cache_key(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn parse_token(body: &[u8]) -> Result<(TokenInfo, Option<Instant>), AuthError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| AuthError::Keystone(format!("bad token body: {e}")))?;
    let t = &v["token"];
    let s = |v: &Value| v.as_str().map(str::to_owned);
    let user_id = s(&t["user"]["id"]).ok_or_else(|| AuthError::Keystone("token without user".into()))?;
    let info = TokenInfo {
        user_id,
        user_domain_id: s(&t["user"]["domain"]["id"]),
        project_id: s(&t["project"]["id"]),
        project_domain_id: s(&t["project"]["domain"]["id"]),
        domain_id: s(&t["domain"]["id"]),
        system_all: t["system"]["all"].as_bool().unwrap_or(false),
        roles: t["roles"].as_array().map(|r| r.iter().filter_map(|x| s(&x["name"])).collect()).unwrap_or_default(),
    };
    let expires = s(&t["expires_at"]).and_then(|e| chrono::DateTime::parse_from_rfc3339(&e).ok()).map(|e| {
        let left = (e.with_timezone(&chrono::Utc) - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Instant::now() + left
    });
    if expires.is_some_and(|e| e <= Instant::now()) {
        return Err(AuthError::InvalidToken);
    }
    Ok((info, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_body_parsing() {
        let body = serde_json::json!({"token": {
            "user": {"id": "u1", "domain": {"id": "default"}},
            "project": {"id": "p1", "domain": {"id": "default"}},
            "roles": [{"id": "r", "name": "admin"}, {"id": "s", "name": "reader"}],
            "expires_at": "2999-01-01T00:00:00.000000Z"
        }});
        let (info, exp) = parse_token(body.to_string().as_bytes()).unwrap();
        assert_eq!(info.user_id, "u1");
        assert_eq!(info.project_id.as_deref(), Some("p1"));
        assert_eq!(info.roles, vec!["admin", "reader"]);
        assert!(exp.is_some());
        let expired = serde_json::json!({"token": {"user": {"id": "u"}, "expires_at": "2000-01-01T00:00:00Z"}});
        assert!(matches!(parse_token(expired.to_string().as_bytes()), Err(AuthError::InvalidToken)));
    }
}
