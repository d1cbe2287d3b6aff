//! The operator console: a web page the gateway serves on the Placement
//! listener, and the JSON it draws.
//!
//! The page (`assets/`: HTML, CSS, JavaScript and SVG written for it,
//! built into the binary, naming no other origin) is at
//! `/keelson/console/` and needs no token; its data is under
//! `/keelson/v1/console/...`, authenticated by the listener's own layers
//! (noauth2 or Keystone) and authorized by the `keelson:console:*` policy
//! rules (admin-only by default). Its handlers are thin translations:
//! the fleet from the inventory service, stacks from the stack engines
//! (through the Orchestration API's failover client), the controller's
//! `ctrlstatus` sampled in the background through [`ControllerView`], and
//! the gateway's own metrics. The explain form uses Placement's
//! `GET /keelson/v1/placement/explain` itself.
//!
//! Every answer carries a Content-Security-Policy that allows nothing
//! but this origin, `X-Frame-Options: DENY` and `nosniff`.

pub mod assets;
pub mod controller;
mod fleet;
mod metrics;
mod session;
mod stacks;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use keelson_runtime::{ApiError, RequestContext};

pub use controller::{ControllerHistory, ControllerView, NodeStatus};

use crate::identity::Identity;
use crate::keystone::TokenValidator;
use crate::layers::metrics::Metrics;
use crate::layers::request_log::RouteLabel;
use crate::orchestration::engines::Engines;
use crate::placement::{error, microversion};
use crate::routes::{AllowStyle, Match, Params, RouteTable};

/// Where the page is served.
pub const PAGE_PREFIX: &str = "/keelson/console";
/// Where its data is.
pub const DATA_PREFIX: &str = "/keelson/v1/console";

/// The largest body a console request may have (a login).
const MAX_BODY: usize = 64 * 1024;

/// How the page's users prove who they are.
#[derive(Clone)]
pub enum Login {
    /// noauth2: the page works as `admin`.
    NoAuth2,
    /// Keystone: a token, or a password the gateway exchanges for one.
    Keystone(Arc<TokenValidator>),
}

/// What the console's handlers reach.
pub struct ConsoleState {
    /// The Placement application's clients and policy (the console's
    /// rules are Placement's, beside `keelson:placement:explain`).
    pub placement: crate::placement::State,
    pub engines: Engines,
    /// `None` when no controller is configured.
    pub controller: Option<ControllerHistory>,
    pub metrics: Metrics,
    pub login: Login,
}

/// One request to a console route.
pub struct ConsoleReq {
    pub params: Params,
    /// The decoded query pairs, in order.
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Default (nobody) on the routes that need no token.
    pub identity: Identity,
    pub state: Arc<ConsoleState>,
}

impl ConsoleReq {
    /// Checks a `keelson:console:*` rule for the caller (403 with
    /// Placement's text otherwise).
    pub fn authorize(&self, rule: &str) -> Result<(), ApiError> {
        self.state.placement.policy.check(rule, &[], &self.identity)
    }

    /// The single value of a query parameter; 400 for a repeated one or
    /// one the route does not take.
    pub fn query_params(&self, known: &[&str]) -> Result<std::collections::HashMap<String, String>, ApiError> {
        let mut out = std::collections::HashMap::new();
        for (key, value) in &self.query {
            if !known.contains(&key.as_str()) {
                return Err(ApiError::new(
                    400,
                    "",
                    format!("Invalid query string parameters: unknown parameter {key}"),
                ));
            }
            if out.insert(key.clone(), value.clone()).is_some() {
                return Err(ApiError::new(400, "", format!("Invalid query string parameters: {key} given twice")));
            }
        }
        Ok(out)
    }
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send>>;
pub type Handler = fn(ConsoleReq) -> HandlerFuture;

macro_rules! console_route {
    ($method:ident $pattern:literal => $handler:path) => {{
        let handler: $crate::console::Handler = |req| Box::pin($handler(req));
        $crate::routes::Route::new(&[http::Method::$method], $pattern, handler)
    }};
}
pub(crate) use console_route;

/// The console: its state and its route table.
pub struct Console {
    state: Arc<ConsoleState>,
    routes: RouteTable<Handler>,
}

impl Console {
    pub fn new(state: ConsoleState) -> Console {
        Console { state: Arc::new(state), routes: table() }
    }

    /// Whether the console answers `path`.
    pub fn owns(path: &str) -> bool {
        under(path, PAGE_PREFIX) || under(path, DATA_PREFIX)
    }

    /// The console's requests that need no token: the page, which holds
    /// nothing, and what tells it how to log in.
    pub fn is_anonymous(method: &Method, path: &str) -> bool {
        under(path, PAGE_PREFIX)
            || (method == Method::GET && path == session::SESSION)
            || (method == Method::POST && path == session::LOGIN)
    }

    /// Routes and answers one request, with the console's headers.
    pub async fn handle(&self, req: Request) -> Response {
        let request_id = req.extensions().get::<RequestContext>().map(|c| c.request_id.clone()).unwrap_or_default();
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_string();
        let (mut resp, label) = match self.routes.find(&parts.method, &path) {
            Match::Found(found) => {
                let outcome = match axum::body::to_bytes(Body::new(body), MAX_BODY).await {
                    Err(_) => Err(ApiError::new(413, "", "The request body is too large.")),
                    Ok(body) => {
                        let req = ConsoleReq {
                            params: found.params,
                            query: crate::placement::request::form_urlencoded_pairs(parts.uri.query().unwrap_or("")),
                            identity: parts.extensions.get::<Identity>().cloned().unwrap_or_default(),
                            headers: parts.headers,
                            body,
                            state: self.state.clone(),
                        };
                        (found.handler)(req).await
                    }
                };
                (outcome.unwrap_or_else(|e| render_error(&e, &request_id)), found.template)
            }
            Match::MethodNotAllowed { allow, template } => (
                error::method_not_allowed(parts.method.as_str(), &allow, Some(microversion::MAX), &request_id),
                template,
            ),
            Match::Options { .. } | Match::NotFound => {
                (render_error(&ApiError::new(404, "", ""), &request_id), "unmatched")
            }
        };
        secure(resp.headers_mut());
        resp.extensions_mut().insert(RouteLabel(label));
        resp
    }
}

fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The console's route table.
fn table() -> RouteTable<Handler> {
    let mut table = RouteTable::new(AllowStyle::EveryMatchingRoute, &[]);
    table
        .add(assets::routes())
        .add(session::routes())
        .add(fleet::routes())
        .add(stacks::routes())
        .add(controller::routes())
        .add(metrics::routes());
    table
}

/// An error in Placement's body (the console lives on its listener), with
/// its code.
fn render_error(err: &ApiError, request_id: &str) -> Response {
    if err.http_status >= 500 {
        tracing::error!(target: "keelson::console", request_id, "{}: {}", err.code, err.detail);
    }
    error::render(err, Some(microversion::MAX), request_id)
}

/// The page may load and connect to nothing but this origin, and may not
/// be framed.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'";

fn secure(headers: &mut HeaderMap) {
    headers.insert("content-security-policy", HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.entry(http::header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
}

/// A JSON answer.
pub fn json(body: &serde_json::Value) -> Response {
    let mut resp = (StatusCode::OK, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(Console::owns("/keelson/console"));
        assert!(Console::owns("/keelson/console/app.js"));
        assert!(Console::owns("/keelson/v1/console/fleet"));
        assert!(!Console::owns("/keelson/consoles"));
        assert!(!Console::owns("/keelson/v1/placement/explain"));
        assert!(Console::is_anonymous(&Method::GET, "/keelson/console/"));
        assert!(Console::is_anonymous(&Method::POST, "/keelson/v1/console/login"));
        assert!(Console::is_anonymous(&Method::GET, "/keelson/v1/console/session"));
        assert!(!Console::is_anonymous(&Method::GET, "/keelson/v1/console/fleet"));
        assert!(!Console::is_anonymous(&Method::GET, "/keelson/v1/console/login"));
    }

    #[test]
    fn every_route_is_the_consoles() {
        let t = table();
        for (method, path) in [
            (Method::GET, "/keelson/console/"),
            (Method::GET, "/keelson/console/console.js"),
            (Method::GET, "/keelson/v1/console/fleet"),
            (Method::GET, "/keelson/v1/console/stacks"),
            (Method::GET, "/keelson/v1/console/stacks/p1/s1/graph"),
            (Method::GET, "/keelson/v1/console/stacks/p1/s1/events"),
            (Method::GET, "/keelson/v1/console/controller"),
            (Method::GET, "/keelson/v1/console/metrics"),
            (Method::GET, "/keelson/v1/console/session"),
            (Method::POST, "/keelson/v1/console/login"),
        ] {
            match t.find(&method, path) {
                Match::Found(found) => assert!(Console::owns(found.template), "{path}"),
                _ => panic!("{method} {path} is not routed"),
            }
        }
    }
}
