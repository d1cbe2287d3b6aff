//! The Placement listener: the layer stack of [`crate::layers`] around the
//! microversion negotiation and the route table.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State as AxumState};
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use http::HeaderValue;
use keelson_runtime::{ApiError, RequestContext};

use super::error;
use super::handlers::{self, Handler};
use super::microversion::{self, Microversion, VersionError};
use super::request::{decode_path_param, PlacementError, Req};
use super::State;
use crate::console::Console;
use crate::identity::Identity;
use crate::layers::auth::{Anonymous, AuthState, Authenticator};
use crate::layers::{self, cors::CorsSettings, request_log::LogState};
use crate::routes::{Match, RouteTable};

/// Request bodies larger than this are refused (Placement's largest,
/// POST /allocations for many consumers, stays far below it); every gRPC
/// hop behind the edge is sized from it.
const MAX_BODY: usize = keelson_runtime::grpc::PLACEMENT_MAX_BODY_SIZE;

struct Dispatch {
    state: State,
    routes: RouteTable<Handler>,
    console: Option<Arc<Console>>,
}

/// Builds the Placement HTTP application; with `console`, the listener
/// also serves the operator console (under the same layers, its page
/// without a token).
pub fn app(
    state: State,
    auth: Authenticator,
    cors: Option<Arc<CorsSettings>>,
    log: LogState,
    console: Option<Arc<Console>>,
) -> axum::Router {
    let anonymous: Anonymous = if console.is_some() { Console::is_anonymous } else { layers::auth::only_root };
    let dispatch = Arc::new(Dispatch { state, routes: handlers::table(), console });
    let render_500: layers::fault::RenderInternal = internal_error;
    // axum applies the last `.layer` outermost: listed here innermost first.
    let mut app = axum::Router::new()
        .fallback(handle)
        .with_state(dispatch)
        .layer(from_fn_with_state(render_500, layers::fault::layer))
        .layer(from_fn_with_state(anonymous, layers::auth::require_user))
        .layer(from_fn_with_state(AuthState { authenticator: auth, anonymous }, layers::auth::layer));
    if let Some(cors) = cors {
        app = app.layer(from_fn_with_state(cors, layers::cors::layer));
    }
    app.layer(from_fn_with_state(log, layers::request_log::layer))
        .layer(axum::middleware::from_fn(layers::forwarded::layer))
}

fn internal_error(request_id: &str) -> Response {
    let err = ApiError::new(500, "", "An unexpected error occurred in the server.");
    error::render(&err, None, request_id)
}

fn add_version_headers(resp: &mut Response, version: Microversion) {
    if let Ok(v) = HeaderValue::from_str(&format!("placement {version}")) {
        resp.headers_mut().insert("openstack-api-version", v);
    }
    resp.headers_mut().insert(http::header::VARY, HeaderValue::from_static("openstack-api-version"));
}

async fn handle(AxumState(dispatch): AxumState<Arc<Dispatch>>, req: Request) -> Response {
    // keelson's console: no microversion, its own routes.
    if let Some(console) = dispatch.console.as_ref().filter(|_| Console::owns(req.uri().path())) {
        return console.handle(req).await;
    }
    let accept = req.headers().get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let format = crate::webob::error_format(accept.as_deref());
    let resp = negotiate_and_route(dispatch, req).await;
    if format == crate::webob::ErrorFormat::Json || resp.status().as_u16() < 400 {
        return resp;
    }
    // webob writes error pages as HTML or plain text when Accept asks so.
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    match crate::webob::reformat(&bytes, format, accept.as_deref().unwrap_or("")) {
        Some((content_type, page)) => {
            parts.headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(page))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

async fn negotiate_and_route(dispatch: Arc<Dispatch>, req: Request) -> Response {
    let request_id = req.extensions().get::<RequestContext>().map(|c| c.request_id.clone()).unwrap_or_default();
    let headers = req.headers();
    let versions = headers.get_all("openstack-api-version").iter().filter_map(|v| v.to_str().ok());
    let version = match microversion::negotiate(versions) {
        Ok(v) => v,
        Err(VersionError::Malformed(msg)) => {
            let detail = error::detail_text(400, &format!("Invalid microversion: {msg}"));
            return error::render_with_detail(400, "", detail, None, &request_id, None);
        }
        Err(VersionError::Unacceptable(msg)) => {
            let detail = format!(
                "The resource could not be generated that was acceptable to your browser (content of type application/json. \n\n Invalid microversion: {msg}"
            );
            let mut extra = serde_json::Map::new();
            extra.insert("max_version".into(), microversion::MAX.to_string().into());
            extra.insert("min_version".into(), microversion::MIN.to_string().into());
            return error::render_with_detail(406, "", detail, None, &request_id, Some(extra));
        }
    };
    let mut resp = route(&dispatch, req, version, &request_id).await;
    add_version_headers(&mut resp, version);
    resp
}

async fn route(dispatch: &Dispatch, req: Request, version: Microversion, request_id: &str) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    // Upstream's handler refuses a body without a type before routing.
    let content_length = parts.headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    let has_body = content_length.and_then(|v| v.trim().parse::<u64>().ok()).is_some_and(|n| n > 0);
    let has_type = parts.headers.get(http::header::CONTENT_TYPE).is_some_and(|v| !v.as_bytes().is_empty());
    if has_body && !has_type {
        let err = ApiError::new(400, "", "content-type header required when content-length > 0");
        return error::render(&err, Some(version), request_id);
    }
    let found = match dispatch.routes.find(&parts.method, &path) {
        Match::Found(found) => found,
        Match::MethodNotAllowed { allow, .. } => {
            return error::method_not_allowed(parts.method.as_str(), &allow, Some(version), request_id);
        }
        // Placement declares no groups, so no OPTIONS answer either.
        Match::Options { .. } | Match::NotFound => {
            return error::render(&ApiError::new(404, "", ""), Some(version), request_id)
        }
    };
    // Upstream's `check_accept` guards only the GETs that answer a JSON
    // body: not the version document, not the bodiless trait check, and
    // no write.
    let checks_accept = parts.method == http::Method::GET && !matches!(found.template, "/" | "" | "/traits/{name}");
    if let Some(accept) =
        parts.headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()).filter(|_| checks_accept)
    {
        if !accepts_json(accept) {
            return error::not_acceptable(accept, Some(version), request_id);
        }
    }
    let body = match axum::body::to_bytes(Body::new(body), MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return error::render(&ApiError::new(413, "", "The request body is too large."), Some(version), request_id);
        }
    };
    let creds = parts.extensions.get::<Identity>().cloned().unwrap_or_default();
    let req = Req {
        method: parts.method,
        path,
        params: found.params.into_iter().map(|(name, value)| (name, decode_path_param(&value))).collect(),
        raw_query: parts.uri.query().unwrap_or("").to_string(),
        headers: parts.headers,
        body,
        version,
        creds,
        request_id: request_id.to_string(),
        state: dispatch.state.clone(),
    };
    let mut resp = match (found.handler)(req).await {
        Ok(resp) => resp,
        Err(PlacementError::Api(e)) => {
            if e.http_status >= 500 {
                tracing::error!(target: "keelson::placement", request_id, "{}: {}", e.code, e.detail);
            }
            error::render(&e, Some(version), request_id)
        }
        Err(PlacementError::UnsupportedMediaType(ct)) => error::unsupported_media_type(&ct, Some(version), request_id),
        Err(PlacementError::NotAcceptable(accept)) => error::not_acceptable(&accept, Some(version), request_id),
    };
    resp.extensions_mut().insert(layers::request_log::RouteLabel(found.template));
    resp
}

/// Whether an `Accept` header admits `application/json` (webob's
/// acceptable_offers: `*/*`, `application/*` or the type itself, q > 0).
fn accepts_json(accept: &str) -> bool {
    if accept.trim().is_empty() {
        return true;
    }
    accept.split(',').any(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q_zero = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()).is_some_and(|q| q <= 0.0)
        });
        !q_zero && (media == "application/json" || media == "application/*" || media == "*/*")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert!(accepts_json("application/json"));
        assert!(accepts_json("text/html, */*;q=0.1"));
        assert!(!accepts_json("text/html"));
        assert!(!accepts_json("application/json;q=0"));
    }
}
