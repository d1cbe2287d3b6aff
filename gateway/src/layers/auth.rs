//! Authentication: who is calling. `noauth2` reads the token as
//! `user[:project]` (upstream's test mode, keelson's all-in-one default);
//! `keystone` validates tokens against Keystone v3. `GET /` (the version
//! document) needs no token in either mode.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};

use crate::keystone::TokenValidator;
use crate::placement::auth::{noauth2, Identity};

#[derive(Clone)]
pub enum Authenticator {
    NoAuth2,
    Keystone(Arc<TokenValidator>),
}

fn is_root(path: &str) -> bool {
    path.is_empty() || path == "/"
}

/// The 401 webob answers when noauth2 finds no token.
fn noauth_unauthorized() -> Response {
    let body = serde_json::json!({
        "message": "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.<br /><br />\n\n\n",
        "code": "401 Unauthorized",
        "title": "Unauthorized",
    });
    let mut resp = (StatusCode::UNAUTHORIZED, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The 401 keystonemiddleware answers for a missing or invalid token.
fn keystone_unauthorized(www_authenticate: &str) -> Response {
    let body = serde_json::json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}});
    let mut resp = (StatusCode::UNAUTHORIZED, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(v) = HeaderValue::from_str(www_authenticate) {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
    resp
}

pub async fn layer(State(auth): State<Authenticator>, mut req: Request, next: Next) -> Response {
    if is_root(req.uri().path()) {
        return next.run(req).await;
    }
    match &auth {
        Authenticator::NoAuth2 => match noauth2(req.headers()) {
            Some(identity) => {
                req.extensions_mut().insert(identity);
            }
            None => return noauth_unauthorized(),
        },
        Authenticator::Keystone(validator) => match validator.identify(req.headers()).await {
            Ok(identity) => {
                req.extensions_mut().insert(identity);
            }
            Err(e) => {
                tracing::info!(target: "keelson::auth", "token refused: {e}");
                return keystone_unauthorized(&validator.www_authenticate());
            }
        },
    }
    next.run(req).await
}

/// Upstream's PlacementKeystoneContext: outside `/`, a request without a
/// user is 401.
pub async fn require_user(req: Request, next: Next) -> Response {
    let has_user = req.extensions().get::<Identity>().is_some_and(|i| i.user_id.is_some());
    if !has_user && !is_root(req.uri().path()) {
        return noauth_unauthorized();
    }
    next.run(req).await
}
