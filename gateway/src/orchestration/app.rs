//! The Orchestration listener: the shared layers of [`crate::layers`]
//! (proxy headers, request id + trace context + access log + metrics,
//! CORS, panic → 500) around heat-api's own pipeline, in its order:
//! version negotiation, authentication, routing, body deserialization,
//! the project check, the route's policy rules, the engine call.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use tonic::transport::Channel;

use super::auth::{self, OrchestrationAuth};
use super::body;
use super::engines::Engines;
use super::fault::{self, Fault};
use super::handlers::Call;
use super::policy::rules_for;
use super::routes::{self, Action, Endpoint, Matched};
use super::urls;
use crate::layers::{self, cors::CorsSettings, request_log::LogState, request_log::RouteLabel};
use crate::routes::RouteTable;

/// What the listener is configured with.
#[derive(Clone)]
pub struct Settings {
    pub auth: OrchestrationAuth,
    /// `[orchestration] max_json_body_size`.
    pub max_json_body_size: usize,
    pub cors: Option<Arc<CorsSettings>>,
}

/// Bodies are read whole (heat-api reports the size of what it refused)
/// but never beyond this many times the JSON limit.
const READ_LIMIT_FACTOR: usize = 16;

struct Dispatch {
    engines: Engines,
    routes: RouteTable<Endpoint>,
    auth: OrchestrationAuth,
    max_json_body_size: usize,
}

/// Builds the Orchestration HTTP application talking to the stack engines
/// over `engines` (one channel per engine).
pub fn app(engines: Vec<Channel>, settings: Settings, log: LogState) -> axum::Router {
    let dispatch = Arc::new(Dispatch {
        engines: Engines::new(engines),
        routes: routes::heat_v1(),
        auth: settings.auth,
        max_json_body_size: settings.max_json_body_size,
    });
    let render_500: layers::fault::RenderInternal = internal_error;
    // axum applies the last `.layer` outermost: listed here innermost first.
    let mut app = axum::Router::new()
        .fallback(handle)
        .with_state(dispatch)
        .layer(from_fn_with_state(render_500, layers::fault::layer));
    if let Some(cors) = settings.cors {
        app = app.layer(from_fn_with_state(cors, layers::cors::layer));
    }
    app.layer(from_fn_with_state(log, layers::request_log::layer))
        .layer(axum::middleware::from_fn(layers::forwarded::layer))
}

fn internal_error(_request_id: &str) -> Response {
    Fault::new(500, "HTTPInternalServerError", "").into_response()
}

/// Where heat-api's version negotiation sends a path.
enum Negotiated<'a> {
    Versions,
    /// v1.0: the rest of the path after the version segment.
    V1(&'a str),
    NotFound,
}

/// `VersionNegotiationFilter`: `/` and `/versions` are the version
/// document, `/v1[.0]/...` is the API, any other version the version
/// document, anything else 404.
fn negotiate(path: &str) -> Negotiated<'_> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let (first, rest) = match trimmed.find('/') {
        Some(i) => (&trimmed[..i], &trimmed[i..]),
        None => (trimmed, ""),
    };
    if first.is_empty() || first == "versions" {
        return Negotiated::Versions;
    }
    let Some(version) = first.strip_prefix('v') else {
        return Negotiated::NotFound;
    };
    // `^v(\d+)\.?(\d+)?`: anything may follow the matched prefix.
    let major: String = version.chars().take_while(char::is_ascii_digit).collect();
    if major.is_empty() {
        return Negotiated::NotFound;
    }
    let after = version[major.len()..].strip_prefix('.').unwrap_or(&version[major.len()..]);
    let minor: String = after.chars().take_while(char::is_ascii_digit).collect();
    let (major, minor) = (major.parse::<u64>().unwrap_or(0), minor.parse::<u64>().unwrap_or(0));
    if major == 1 && minor == 0 {
        Negotiated::V1(rest)
    } else {
        Negotiated::Versions
    }
}

/// `GET /`: the version list (300 Multiple Choices).
fn versions(base: &str) -> Response {
    let body = serde_json::json!({"versions": [{
        "id": "v1.0",
        "status": "CURRENT",
        "links": [{"rel": "self", "href": format!("{base}/v1/")}],
    }]});
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = http::StatusCode::MULTIPLE_CHOICES;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp
}

async fn handle(State(dispatch): State<Arc<Dispatch>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let base = urls::base_url(&parts.headers);
    // WSGI routes on the decoded path.
    let path = urls::unquote(parts.uri.path(), false);
    let rest = match negotiate(&path) {
        Negotiated::Versions => return versions(&base),
        Negotiated::NotFound => return fault::route_not_found(),
        Negotiated::V1(rest) => rest,
    };
    // Pre-signed signal URLs carry their own credential: no authentication.
    if super::presigned::matches(rest) {
        let limit = dispatch.max_json_body_size;
        let read_limit = limit.saturating_mul(READ_LIMIT_FACTOR).max(limit.saturating_add(1));
        let bytes = match axum::body::to_bytes(Body::new(body), read_limit).await {
            Ok(bytes) => bytes,
            Err(_) => {
                let mut resp = body::too_large(read_limit, limit).into_response();
                resp.extensions_mut().insert(RouteLabel("/{kind}/{arn}"));
                return resp;
            }
        };
        let query = parts.uri.query().unwrap_or("");
        let mut resp =
            super::presigned::handle(&dispatch.engines, &parts.method, rest, query, &parts.headers, &bytes, limit)
                .await;
        resp.extensions_mut().insert(RouteLabel("/{kind}/{arn}"));
        return resp;
    }
    let (mut caller, credentials) =
        match dispatch.auth.authenticate(&parts.method, parts.uri.path(), &parts.headers).await {
            Ok(authenticated) => (authenticated.caller, authenticated.credentials),
            Err(refused) => return refused,
        };
    let Some(matched) = Matched::find(&dispatch.routes, &parts.method, rest) else {
        return fault::route_not_found();
    };
    let mut resp = match matched.handler {
        // The method-only answers: no body, project check or policy.
        None if matched.action == Action::Options => fault::options(matched.allow.as_deref().unwrap_or("")),
        None => fault::reject(matched.allow.as_deref().unwrap_or("")),
        Some(handler) => {
            let limit = dispatch.max_json_body_size;
            let read_limit = limit.saturating_mul(READ_LIMIT_FACTOR).max(limit.saturating_add(1));
            let result = match axum::body::to_bytes(Body::new(body), read_limit).await {
                Ok(bytes) => body::decode(&parts.headers, &bytes, limit),
                Err(_) => {
                    let declared = parts
                        .headers
                        .get(http::header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok()?.trim().parse().ok());
                    Err(body::too_large(declared.unwrap_or(read_limit), limit))
                }
            };
            let query = urls::query_pairs(parts.uri.query().unwrap_or(""));
            let authorized = result.and_then(|doc| {
                auth::check_project(&mut caller, matched.param("tenant_id"))?;
                if let (Some(policy), Some(creds)) = (dispatch.auth.policy(), &credentials) {
                    policy.authorize(&rules_for(&matched, &query, doc.as_ref()), &caller, creds)?;
                }
                Ok(doc)
            });
            let outcome = match authorized {
                Ok(doc) => {
                    let call = Call {
                        engines: &dispatch.engines,
                        caller,
                        params: &matched.params,
                        query,
                        body: doc,
                        base: &base,
                    };
                    handler(call).await
                }
                Err(f) => Err(f),
            };
            outcome.unwrap_or_else(Fault::into_response)
        }
    };
    resp.extensions_mut().insert(RouteLabel(matched.pattern));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_negotiation() {
        assert!(matches!(negotiate("/"), Negotiated::Versions));
        assert!(matches!(negotiate("/versions"), Negotiated::Versions));
        assert!(matches!(negotiate("/v1/admin/stacks"), Negotiated::V1("/admin/stacks")));
        assert!(matches!(negotiate("/v1.0/admin/stacks"), Negotiated::V1("/admin/stacks")));
        assert!(matches!(negotiate("/v1"), Negotiated::V1("")));
        assert!(matches!(negotiate("/v2/x"), Negotiated::Versions));
        assert!(matches!(negotiate("/stacks"), Negotiated::NotFound));
    }
}
