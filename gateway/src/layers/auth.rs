//! Authentication: who is calling. `noauth2` reads the token as
//! `user[:project]` (upstream's test mode, keelson's all-in-one default);
//! `keystone` validates tokens against Keystone v3 (crate::keystone), with
//! keystonemiddleware's answers: 401 with `WWW-Authenticate` for a bad
//! token, 503 when Keystone cannot be asked. `GET /` (the version document)
//! needs no token in either mode, nor what the API composing the layers
//! declares [`Anonymous`] (the console's page and its login).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};

use crate::identity::{noauth2, Identity};
use crate::keystone::TokenValidator;
use crate::webob::{error_format, ErrorFormat};

#[derive(Clone)]
pub enum Authenticator {
    NoAuth2,
    Keystone(Arc<TokenValidator>),
}

/// The requests, besides `/`, that an API serves without a token: they go
/// past authentication with no identity.
pub type Anonymous = fn(&http::Method, &str) -> bool;

/// No request besides `/` (upstream Placement's).
pub fn only_root(_: &http::Method, _: &str) -> bool {
    false
}

/// The authentication layer's state.
#[derive(Clone)]
pub struct AuthState {
    pub authenticator: Authenticator,
    pub anonymous: Anonymous,
}

fn is_root(path: &str) -> bool {
    path.is_empty() || path == "/"
}

fn needs_no_token(anonymous: Anonymous, req: &Request) -> bool {
    is_root(req.uri().path()) || anonymous(req.method(), req.uri().path())
}

/// A webob `HTTPException` page, written as webob writes it for the
/// request's `Accept` (Placement's request log, outside authentication,
/// has already made a missing or `*/*` header JSON).
fn webob_page(status: StatusCode, explanation: &str, detail: &str, accept: Option<&str>) -> Response {
    let title = status.canonical_reason().unwrap_or("");
    let status_line = format!("{} {title}", status.as_u16());
    let (content_type, body) = match error_format(accept) {
        ErrorFormat::Json => (
            "application/json",
            serde_json::json!({"message": format!("{explanation}<br /><br />\n{detail}\n\n"), "code": status_line, "title": title})
                .to_string(),
        ),
        ErrorFormat::Html => (
            "text/html; charset=UTF-8",
            format!(
                "<html>\n <head>\n  <title>{status_line}</title>\n </head>\n <body>\n  <h1>{status_line}</h1>\n  {explanation}<br /><br />\n{detail}\n\n\n </body>\n</html>"
            ),
        ),
        ErrorFormat::Plain => ("text/plain; charset=UTF-8", format!("{status_line}\n\n{explanation}\n\n {detail}  ")),
    };
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn accept(req: &Request) -> Option<&str> {
    req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok())
}

/// webob's bare `HTTPUnauthorized()`: what noauth2 answers without a token,
/// and Placement's context without a user.
fn webob_unauthorized(accept: Option<&str>) -> Response {
    const EXPLANATION: &str = "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.";
    webob_page(StatusCode::UNAUTHORIZED, EXPLANATION, "", accept)
}

/// The 401 keystonemiddleware answers for a missing or invalid token
/// (its own JSON body, whatever the `Accept`).
fn keystone_unauthorized(www_authenticate: &str) -> Response {
    let body = serde_json::json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}});
    let mut resp = (StatusCode::UNAUTHORIZED, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    add_www_authenticate(&mut resp, www_authenticate);
    resp
}

fn add_www_authenticate(resp: &mut Response, www_authenticate: &str) {
    if let Ok(v) = HeaderValue::from_str(www_authenticate) {
        resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, v);
    }
}

/// The 503 keystonemiddleware raises when Keystone cannot be asked:
/// `HTTPServiceUnavailable('The Keystone service is temporarily unavailable.')`.
fn keystone_unavailable(accept: Option<&str>) -> Response {
    webob_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The server is currently unavailable. Please try again at a later time.",
        "The Keystone service is temporarily unavailable.",
        accept,
    )
}

pub async fn layer(State(state): State<AuthState>, mut req: Request, next: Next) -> Response {
    if needs_no_token(state.anonymous, &req) {
        return next.run(req).await;
    }
    match &state.authenticator {
        Authenticator::NoAuth2 => match noauth2(req.headers()) {
            Some(identity) => {
                req.extensions_mut().insert(identity);
            }
            None => return webob_unauthorized(accept(&req)),
        },
        Authenticator::Keystone(validator) => {
            match validator.identify(req.method(), req.uri().path(), req.headers()).await {
                Ok(Some(identity)) => {
                    req.extensions_mut().insert(identity);
                }
                // delay_auth_decision: the application decides (without a
                // user, require_user answers 401).
                Ok(None) => {}
                Err(e) if e.is_unavailable() => {
                    tracing::warn!(target: "keelson::auth", "cannot validate tokens: {e}");
                    return keystone_unavailable(accept(&req));
                }
                Err(e) => {
                    tracing::info!(target: "keelson::auth", "{e}");
                    return keystone_unauthorized(&validator.www_authenticate());
                }
            }
            // auth_token's process_response: every 401 on the way out
            // tells where to authenticate.
            let mut resp = next.run(req).await;
            if resp.status() == StatusCode::UNAUTHORIZED {
                add_www_authenticate(&mut resp, &validator.www_authenticate());
            }
            return resp;
        }
    }
    next.run(req).await
}

/// Upstream's PlacementKeystoneContext: outside `/` (and the
/// [`Anonymous`] requests), a request without a user is 401.
pub async fn require_user(State(anonymous): State<Anonymous>, req: Request, next: Next) -> Response {
    let has_user = req.extensions().get::<Identity>().is_some_and(|i| i.user_id.is_some());
    if !has_user && !needs_no_token(anonymous, &req) {
        return webob_unauthorized(accept(&req));
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(resp: Response) -> (String, String) {
        let ct = resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16).await.unwrap();
        (ct, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn webob_pages() {
        // As webob 1.8 renders HTTPServiceUnavailable('The Keystone service
        // is temporarily unavailable.') and HTTPUnauthorized() per Accept.
        let (ct, text) = body(keystone_unavailable(Some("application/json"))).await;
        assert_eq!(ct, "application/json");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"message": "The server is currently unavailable. Please try again at a later time.<br /><br />\nThe Keystone service is temporarily unavailable.\n\n", "code": "503 Service Unavailable", "title": "Service Unavailable"})
        );
        // Placement's request log turned these into JSON.
        for accept in [None, Some("*/*")] {
            assert_eq!(body(keystone_unavailable(accept)).await, (ct.clone(), text.clone()));
        }
        let (ct, text) = body(keystone_unavailable(Some("text/plain"))).await;
        assert_eq!(ct, "text/plain; charset=UTF-8");
        assert_eq!(text, "503 Service Unavailable\n\nThe server is currently unavailable. Please try again at a later time.\n\n The Keystone service is temporarily unavailable.  ");
        let (ct, text) = body(keystone_unavailable(Some("text/html"))).await;
        assert_eq!(ct, "text/html; charset=UTF-8");
        assert_eq!(text, "<html>\n <head>\n  <title>503 Service Unavailable</title>\n </head>\n <body>\n  <h1>503 Service Unavailable</h1>\n  The server is currently unavailable. Please try again at a later time.<br /><br />\nThe Keystone service is temporarily unavailable.\n\n\n </body>\n</html>");

        let explanation = "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.";
        let (ct, text) = body(webob_unauthorized(None)).await;
        assert_eq!(ct, "application/json");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"message": format!("{explanation}<br /><br />\n\n\n"), "code": "401 Unauthorized", "title": "Unauthorized"})
        );
        let (_, text) = body(webob_unauthorized(Some("text/plain"))).await;
        assert_eq!(text, format!("401 Unauthorized\n\n{explanation}\n\n   "));
        let (_, text) = body(webob_unauthorized(Some("text/html"))).await;
        assert!(
            text.ends_with(&format!("<h1>401 Unauthorized</h1>\n  {explanation}<br /><br />\n\n\n\n </body>\n</html>"))
        );
    }

    #[tokio::test]
    async fn unauthorized_is_keystonemiddlewares() {
        let resp = keystone_unauthorized("Keystone uri=\"http://k/v3\"");
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(resp.headers()[http::header::WWW_AUTHENTICATE], "Keystone uri=\"http://k/v3\"");
        let (ct, text) = body(resp).await;
        assert_eq!(ct, "application/json");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
        );
    }
}
