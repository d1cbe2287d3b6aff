//! The OpenStack Orchestration API v1 (Heat) on port 8004.
//!
//! This listener answers the version document; the stack API itself is
//! served by the stack engine (see ARCHITECTURE.md).

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode};

/// `GET /`: Heat's version list (300 Multiple Choices, as heat-api).
pub async fn versions(headers: HeaderMap) -> Response {
    let host = headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost:8004");
    let body = serde_json::json!({"versions": [{
        "id": "v1.0",
        "status": "CURRENT",
        "links": [{"rel": "self", "href": format!("http://{host}/v1/")}],
    }]});
    let mut resp = (StatusCode::MULTIPLE_CHOICES, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The orchestration application.
pub fn app() -> axum::Router {
    axum::Router::new().route("/", axum::routing::get(versions))
}
