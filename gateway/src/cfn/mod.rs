//! heat-api-cfn (port 8000): what instances use of Heat's CloudFormation
//! API. `PUT /v1/waitcondition/<arn>` and `POST /v1/signal/<arn>`, the
//! pre-signed URLs Heat gives wait condition handles and CFN_SIGNAL
//! deployments, authenticated as Heat's `ec2authtoken` middleware does
//! (`heat/api/aws/ec2token.py`, [`ec2`]): the AWS signature version 2 of
//! the request is checked by Keystone's `POST /v3/ec2tokens`, which
//! answers a token of the stack user whose EC2 credential signed it. The
//! signal then goes to an engine as that user; errors are CloudFormation's
//! XML bodies ([`fault`]).
//!
//! The listener runs in Keystone mode only (`[heat_api_cfn]`, keelson's
//! `[keelson] cfn_listen`); it shares the REST listeners' connection loop
//! and layers.

pub mod ec2;
pub mod fault;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode};
use keelson_proto::orchestration::v1 as pb;
use tonic::transport::Channel;

use crate::layers::{self, request_log::LogState, request_log::RouteLabel};
use crate::orchestration::engines::Engines;
use crate::orchestration::urls;
use ec2::Ec2Auth;
use fault::CfnFault;

/// What the heat-api-cfn listener is configured with.
#[derive(Clone)]
pub struct CfnSettings {
    pub ec2: Arc<Ec2Auth>,
    /// `[orchestration] max_json_body_size`.
    pub max_json_body_size: usize,
}

struct Dispatch {
    engines: Engines,
    settings: CfnSettings,
}

/// The heat-api-cfn application over the stack engines `engines`.
pub fn app(engines: Vec<Channel>, settings: CfnSettings, log: LogState) -> axum::Router {
    let dispatch = Arc::new(Dispatch { engines: Engines::new(engines), settings });
    let render_500: layers::fault::RenderInternal = |_| CfnFault::internal_failure(None).into_response();
    axum::Router::new()
        .fallback(handle)
        .with_state(dispatch)
        .layer(from_fn_with_state(render_500, layers::fault::layer))
        .layer(from_fn_with_state(log, layers::request_log::layer))
        .layer(axum::middleware::from_fn(layers::forwarded::layer))
}

/// Bodies past this many times the JSON limit are not read at all.
const READ_LIMIT_FACTOR: usize = 16;

async fn handle(State(dispatch): State<Arc<Dispatch>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let limit = dispatch.settings.max_json_body_size;
    let read_limit = limit.saturating_mul(READ_LIMIT_FACTOR).max(limit.saturating_add(1));
    let Ok(bytes) = axum::body::to_bytes(Body::new(body), read_limit).await else {
        return CfnFault::request_limit_exceeded().into_response();
    };
    // heat-api-cfn authenticates every request before routing it.
    let caller = match dispatch.settings.ec2.authenticate(&parts.method, &parts.uri, &parts.headers, &bytes).await {
        Ok(caller) => caller,
        Err(fault) => return labelled(fault.into_response(), "ec2"),
    };
    let path = urls::unquote(parts.uri.path(), false);
    let route = if let Some(arn) = path.strip_prefix("/v1/waitcondition/").filter(|_| parts.method == Method::PUT) {
        Some((arn.to_string(), true))
    } else {
        path.strip_prefix("/v1/signal/").filter(|_| parts.method == Method::POST).map(|arn| (arn.to_string(), false))
    };
    let Some((arn, wait_condition)) = route else {
        return labelled(not_found(), "unrouted");
    };
    if bytes.len() > limit {
        return labelled(CfnFault::request_limit_exceeded().into_response(), "signal");
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return labelled(malformed_body(), "signal");
    };
    if !text.trim().is_empty() && serde_json::from_str::<serde_json::Value>(text).is_err() {
        return labelled(malformed_body(), "signal");
    }
    let request = pb::CfnSignalRequest { caller: Some(caller), arn, wait_condition, body_json: text.to_string() };
    let resp = match dispatch.engines.call(request, |mut c, r| async move { c.cfn_signal(r).await }).await {
        Ok(reply) => {
            let body = reply.into_inner().body_json;
            let body = if body.trim().is_empty() { "null".to_string() } else { body };
            let mut resp = Response::new(Body::from(body));
            resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
        Err(status) => CfnFault::from_engine(&status).into_response(),
    };
    labelled(resp, if wait_condition { "/v1/waitcondition/{arn}" } else { "/v1/signal/{arn}" })
}

fn labelled(mut resp: Response, route: &'static str) -> Response {
    resp.extensions_mut().insert(RouteLabel(route));
    resp
}

/// routes' no-match: webob's 404.
fn not_found() -> Response {
    let mut resp = Response::new(Body::from("404 Not Found\n\nThe resource could not be found.\n\n   "));
    *resp.status_mut() = StatusCode::NOT_FOUND;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=UTF-8"));
    resp
}

/// Heat's JSON deserializer refusing a body: webob's 400.
fn malformed_body() -> Response {
    let text = "400 Bad Request\n\nThe server could not comply with the request since it is either malformed or otherwise incorrect.\n\n Malformed JSON in request body.  ";
    let mut resp = Response::new(Body::from(text));
    *resp.status_mut() = StatusCode::BAD_REQUEST;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=UTF-8"));
    resp
}
