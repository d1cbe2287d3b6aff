//! `GET /`: the version document. No token needed.

use http::StatusCode;
use serde_json::json;

use crate::placement::handlers::Route;
use crate::placement::microversion::{MAX, MIN};
use crate::placement::request::{cache_headers, json, HandlerResult, Req};
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![route!(GET "/" => home), route!(GET "" => home)]
}

async fn home(req: Req) -> HandlerResult {
    let body = json!({
        "versions": [{
            "id": format!("v{MIN}"),
            "max_version": MAX.to_string(),
            "min_version": MIN.to_string(),
            "status": "CURRENT",
            "links": [{"rel": "self", "href": ""}],
        }]
    });
    // From 1.15 the document is never cached; it has no modification time.
    Ok(cache_headers(&req, json(StatusCode::OK, &body), None))
}
