//! CORS as oslo.middleware does it, active only when `[cors]
//! allowed_origin` is configured: preflight `OPTIONS` requests from an
//! allowed origin are answered here; simple requests get the
//! `Access-Control-*` headers added. Requests from other origins pass
//! through untouched (no CORS headers), as upstream.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use keelson_runtime::Config;

use crate::options::{
    CORS_ALLOWED_ORIGIN, CORS_ALLOW_CREDENTIALS, CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, CORS_EXPOSE_HEADERS,
    CORS_MAX_AGE,
};

/// `[cors]` options.
#[derive(Debug, Clone)]
pub struct CorsSettings {
    pub allowed_origin: Vec<String>,
    pub allow_credentials: bool,
    pub expose_headers: Vec<String>,
    pub max_age: Option<i64>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
}

impl CorsSettings {
    /// `None` when CORS is not configured.
    pub fn from_config(config: &Config) -> Option<Arc<CorsSettings>> {
        let allowed_origin = config.get(&CORS_ALLOWED_ORIGIN);
        if allowed_origin.is_empty() {
            return None;
        }
        Some(Arc::new(CorsSettings {
            allowed_origin,
            allow_credentials: config.get(&CORS_ALLOW_CREDENTIALS),
            expose_headers: config.get(&CORS_EXPOSE_HEADERS),
            max_age: config.get(&CORS_MAX_AGE),
            allow_methods: config.get(&CORS_ALLOW_METHODS),
            allow_headers: config.get(&CORS_ALLOW_HEADERS),
        }))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        self.allowed_origin.iter().any(|o| o == "*" || o == origin)
    }
}

fn set(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        headers.insert(name, v);
    }
}

pub async fn layer(State(cors): State<Arc<CorsSettings>>, req: Request, next: Next) -> Response {
    let origin = req.headers().get(http::header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_owned);
    // oslo.middleware answers every OPTIONS request itself once CORS is
    // configured: 200, with the preflight headers only when they apply.
    if req.method() == Method::OPTIONS {
        let allowed = origin.as_deref().filter(|o| cors.origin_allowed(o));
        return allowed
            .and_then(|o| preflight(&cors, o, req.headers()))
            .unwrap_or_else(|| StatusCode::OK.into_response());
    }
    let Some(origin) = origin.filter(|o| cors.origin_allowed(o)) else {
        return next.run(req).await;
    };
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    set(h, "access-control-allow-origin", &origin);
    if cors.allow_credentials {
        set(h, "access-control-allow-credentials", "true");
    }
    if !cors.expose_headers.is_empty() {
        set(h, "access-control-expose-headers", &cors.expose_headers.join(","));
    }
    h.append(http::header::VARY, HeaderValue::from_static("Origin"));
    resp
}

/// Answers a preflight request; `None` when it is not one we accept (the
/// answer is then a plain 200 without CORS headers, as oslo's).
fn preflight(cors: &CorsSettings, origin: &str, headers: &HeaderMap) -> Option<Response> {
    let method = headers.get("access-control-request-method").and_then(|v| v.to_str().ok())?;
    if !cors.allow_methods.iter().any(|m| m.eq_ignore_ascii_case(method)) {
        return None;
    }
    let requested: Vec<String> = headers
        .get("access-control-request-headers")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    let allowed_lower: Vec<String> = cors.allow_headers.iter().map(|h| h.to_ascii_lowercase()).collect();
    if requested.iter().any(|r| !allowed_lower.contains(&r.to_ascii_lowercase())) {
        return None;
    }
    let mut resp = StatusCode::OK.into_response();
    let h = resp.headers_mut();
    set(h, "access-control-allow-origin", origin);
    if cors.allow_credentials {
        set(h, "access-control-allow-credentials", "true");
    }
    if let Some(age) = cors.max_age {
        set(h, "access-control-max-age", &age.to_string());
    }
    set(h, "access-control-allow-methods", method);
    if !requested.is_empty() {
        set(h, "access-control-allow-headers", &requested.join(","));
    }
    h.append(http::header::VARY, HeaderValue::from_static("Origin"));
    Some(resp)
}
