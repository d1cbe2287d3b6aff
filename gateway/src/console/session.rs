//! How the page logs in: under noauth2 it works as `admin`; under Keystone
//! it sends a token, or a password that the gateway exchanges for one with
//! the Keystone of `[keystone_authtoken]`. The page keeps the token in
//! `sessionStorage` only.

use axum::response::Response;
use keelson_runtime::ApiError;
use serde_json::{json, Value};

use super::{console_route, json, ConsoleReq, Login};
use crate::keystone::{LoginError, PasswordLogin};
use crate::routes::Route;

pub const SESSION: &str = "/keelson/v1/console/session";
pub const LOGIN: &str = "/keelson/v1/console/login";

/// The longest field a login takes (Keystone's names are at most 255).
const MAX_FIELD: usize = 4096;

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![
        console_route!(GET "/keelson/v1/console/session" => session),
        console_route!(POST "/keelson/v1/console/login" => login),
    ]
}

/// What the page needs to know before it asks for anything.
async fn session(req: ConsoleReq) -> Result<Response, ApiError> {
    let strategy = match req.state.login {
        Login::NoAuth2 => "noauth2",
        Login::Keystone(_) => "keystone",
    };
    Ok(json(&json!({"auth_strategy": strategy})))
}

/// `{"username", "password", "project"[, "user_domain", "project_domain"]}`
/// → `{"token", "expires_at"}`.
async fn login(req: ConsoleReq) -> Result<Response, ApiError> {
    let Login::Keystone(validator) = &req.state.login else {
        return Err(ApiError::new(400, "", "noauth2 needs no login: send the token admin."));
    };
    let content_type = req.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if content_type.split(';').next().map(str::trim) != Some("application/json") {
        return Err(ApiError::new(415, "", "The login is a JSON document (application/json)."));
    }
    let body: Value =
        serde_json::from_slice(&req.body).map_err(|e| ApiError::new(400, "", format!("Malformed JSON: {e}")))?;
    let field = |name: &str, default: Option<&str>| -> Result<String, ApiError> {
        let value = match body.get(name) {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            None | Some(Value::Null) => default.ok_or_else(|| ApiError::new(400, "", format!("{name} is required")))?,
            Some(Value::String(_)) if default.is_some() => default.unwrap_or_default(),
            Some(_) => return Err(ApiError::new(400, "", format!("{name} must be a non-empty string"))),
        };
        if value.len() > MAX_FIELD {
            return Err(ApiError::new(400, "", format!("{name} is longer than {MAX_FIELD} bytes")));
        }
        Ok(value.to_string())
    };
    let login = PasswordLogin {
        username: field("username", None)?,
        password: field("password", None)?,
        project: field("project", None)?,
        user_domain: field("user_domain", Some("Default"))?,
        project_domain: field("project_domain", Some("Default"))?,
    };
    match validator.password_token(&login).await {
        Ok(issued) => Ok(json(&json!({"token": issued.token, "expires_at": issued.expires_at}))),
        Err(LoginError::Refused) => Err(ApiError::new(401, "", "The request you have made requires authentication.")),
        Err(LoginError::Unavailable(e)) => {
            tracing::warn!(target: "keelson::console", "login: {e}");
            Err(ApiError::new(503, "", "The Keystone service is temporarily unavailable."))
        }
    }
}
