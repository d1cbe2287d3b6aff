//! Request identity and the access log: every response carries
//! `X-Openstack-Request-Id` (the caller's, when it sent a valid one, else a
//! new `req-<uuid>`), the handler runs inside that request context so gRPC
//! calls propagate it with the W3C `traceparent`, and one line is logged
//! per request: method, path, status, bytes, duration, microversion,
//! request id.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderValue;
use keelson_runtime::context::{RequestContext, REQUEST_ID_HEADER, TRACEPARENT_HEADER};
use tracing::Instrument as _;

use super::metrics::Metrics;

/// The API a listener serves, for the log and metrics labels.
#[derive(Clone)]
pub struct LogState {
    pub api: &'static str,
    pub metrics: Metrics,
}

pub async fn layer(
    axum::extract::State(state): axum::extract::State<LogState>,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let incoming_traceparent = req.headers().get(TRACEPARENT_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut ctx = RequestContext::new(
        req.headers().get(REQUEST_ID_HEADER).and_then(|v| v.to_str().ok()),
        incoming_traceparent.as_deref(),
    );
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!("http.request", api = state.api, method = %method, path = %path, request_id = %ctx.request_id);
    ctx.traceparent = keelson_runtime::telemetry::link(&span, incoming_traceparent.as_deref(), &ctx.traceparent);
    req.extensions_mut().insert(ctx.clone());
    let request_id = ctx.request_id.clone();
    let trace_id = ctx.trace_id().to_string();
    let mut resp = ctx.scope(next.run(req)).instrument(span).await;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let elapsed = started.elapsed();
    let status = resp.status().as_u16();
    let bytes = {
        use axum::body::HttpBody as _;
        resp.body().size_hint().exact().unwrap_or(0)
    };
    let version = resp.headers().get("openstack-api-version").and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
    let label = resp.extensions().get::<RouteLabel>().map(|r| r.0).unwrap_or("unmatched");
    state.metrics.observe(state.api, method.as_str(), label, status, elapsed);
    tracing::info!(
        target: "keelson::access",
        api = state.api,
        %method,
        path = %path,
        status,
        bytes,
        duration_ms = elapsed.as_secs_f64() * 1000.0,
        microversion = %version,
        request_id = %request_id,
        trace_id = %trace_id,
        "{method} {path} {status} {bytes}B {:.2}ms",
        elapsed.as_secs_f64() * 1000.0
    );
    resp
}

/// Set by a router on its responses: the route pattern, so metrics are
/// labelled by route and not by every distinct path.
#[derive(Clone, Copy)]
pub struct RouteLabel(pub &'static str);
