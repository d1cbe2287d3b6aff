//! Placement's error body (rewrite pack §2.2):
//! `{"errors": [{"status", "title", "detail", "code", "request_id"}]}`.
//!
//! The detail text is part of the contract (Nova parses some of it), so it
//! is built the way upstream's WSGI stack builds it: the status's standard
//! explanation, a blank line, then the handler's message.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use keelson_runtime::ApiError;
use serde_json::json;

use super::microversion::Microversion;

pub const UNDEFINED_CODE: &str = "placement.undefined_code";

/// The reason phrase used as `title`.
pub fn title(status: u16) -> &'static str {
    StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error")
}

fn explanation(status: u16) -> &'static str {
    match status {
        400 => "The server could not comply with the request since it is either malformed or otherwise incorrect.",
        401 => "This server could not verify that you are authorized to access the document you requested. Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.",
        403 => "Access was denied to this resource.",
        404 => "The resource could not be found.",
        409 => "There was a conflict when trying to complete your request.",
        500 => "The server has either erred or is incapable of performing the requested operation.",
        501 => "The server has not implemented the requested operation.",
        503 => "The server is currently unavailable. Please try again at a later time.",
        _ => "",
    }
}

/// The `detail` member for a message of a given status.
pub fn detail_text(status: u16, message: &str) -> String {
    // webob flattens the message's own newlines into spaces.
    format!("{}\n\n {}  ", explanation(status), message.replace('\n', " "))
}

/// Renders an error for a request at `version` (`None` when the version
/// is not known yet, e.g. a bad version header: no `code` then).
pub fn render(err: &ApiError, version: Option<Microversion>, request_id: &str) -> Response {
    let detail = detail_text(err.http_status, &err.detail);
    render_with_detail(err.http_status, &err.code, detail, version, request_id, None)
}

/// Renders with a detail text already in its final form (405, 406, 415
/// have their own templates upstream).
pub fn render_with_detail(
    status: u16,
    code: &str,
    detail: String,
    version: Option<Microversion>,
    request_id: &str,
    extra: Option<serde_json::Map<String, serde_json::Value>>,
) -> Response {
    let mut error = serde_json::Map::new();
    error.insert("status".into(), json!(status));
    error.insert("title".into(), json!(title(status)));
    error.insert("detail".into(), json!(detail));
    if version.is_some_and(|v| v.at_least(1, 23)) {
        error.insert("code".into(), json!(if code.is_empty() { UNDEFINED_CODE } else { code }));
    }
    error.insert("request_id".into(), json!(request_id));
    if let Some(extra) = extra {
        error.extend(extra);
    }
    let body = json!({ "errors": [serde_json::Value::Object(error)] });
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (status, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// 405 with its own template and the `Allow` header.
pub fn method_not_allowed(method: &str, allow: &str, version: Option<Microversion>, request_id: &str) -> Response {
    let detail =
        format!("The method {method} is not allowed for this resource. \n\n The method specified is not allowed for this resource.");
    let mut resp = render_with_detail(405, "", detail, version, request_id, None);
    if let Ok(v) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(http::header::ALLOW, v);
    }
    resp
}

/// 415 for a body that is not JSON.
pub fn unsupported_media_type(content_type: &str, version: Option<Microversion>, request_id: &str) -> Response {
    let detail = format!(
        "The request media type {content_type} is not supported by this server. \n\n The media type {content_type} is not supported, use application/json"
    );
    render_with_detail(415, "", detail, version, request_id, None)
}

/// 406 for an `Accept` header that excludes JSON.
pub fn not_acceptable(accept: &str, version: Option<Microversion>, request_id: &str) -> Response {
    let detail = format!(
        "The resource could not be generated that was acceptable to your browser (content of type {accept}. \n\n Only application/json is provided"
    );
    render_with_detail(406, "", detail, version, request_id, None)
}
