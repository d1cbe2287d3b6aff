//! `GET /keelson/v1/console/metrics`: the gateway's request counters and
//! latency histograms (the series `/metrics` exposes, both listeners'),
//! as JSON; the page turns two readings into rates and latencies.

use axum::response::Response;
use keelson_runtime::ApiError;
use serde_json::json;

use super::{console_route, json, ConsoleReq};
use crate::layers::metrics::bucket_bounds;
use crate::routes::Route;

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![console_route!(GET "/keelson/v1/console/metrics" => metrics)]
}

async fn metrics(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_METRICS)?;
    req.query_params(&[])?;
    Ok(json(&json!({
        "at": chrono::Utc::now().timestamp_millis(),
        "buckets": bucket_bounds(),
        "series": req.state.metrics.snapshot(),
    })))
}
