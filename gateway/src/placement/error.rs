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

/// How an error body is written, chosen from `Accept` as webob does
/// (requestlog first turns a missing or `*/*` header into JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    Json,
    Html,
    Plain,
}

/// webob's `acceptable_offers(['text/html', 'application/json'])[0]`.
pub fn error_format(accept: Option<&str>) -> ErrorFormat {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() || accept == "*/*" {
        return ErrorFormat::Json;
    }
    // Each range: (type, subtype, q).
    let mut ranges: Vec<(String, String, f32)> = Vec::new();
    for item in accept.split(',') {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let Some((ty, sub)) = media.split_once('/') else { continue };
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").map(str::to_string))
            .next()
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        ranges.push((ty.trim().to_string(), sub.trim().to_string(), q));
    }
    // The q of the most specific range matching an offer.
    let q_for = |ty: &str, sub: &str| -> f32 {
        let mut best: Option<(u8, f32)> = None;
        for (rt, rs, q) in &ranges {
            let specificity = if rt == ty && rs == sub {
                3
            } else if rt == ty && rs == "*" {
                2
            } else if rt == "*" && rs == "*" {
                1
            } else {
                continue;
            };
            if best.is_none_or(|(s, _)| specificity > s) {
                best = Some((specificity, *q));
            }
        }
        best.map(|(_, q)| q).unwrap_or(0.0)
    };
    let html = q_for("text", "html");
    let json = q_for("application", "json");
    if html > 0.0 && html >= json {
        ErrorFormat::Html
    } else if json > 0.0 {
        ErrorFormat::Json
    } else {
        ErrorFormat::Plain
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#x27;")
}

/// Rewrites one of our JSON error bodies as webob's HTML or plain text
/// page: (content type, body). `None` when the body is not an error body.
pub fn reformat(body: &[u8], format: ErrorFormat, accept: &str) -> Option<(&'static str, String)> {
    let doc: serde_json::Value = serde_json::from_slice(body).ok()?;
    let err = doc.get("errors")?.get(0)?;
    let status = err.get("status")?.as_u64()?;
    let title = err.get("title").and_then(|t| t.as_str()).unwrap_or("");
    let detail = err.get("detail").and_then(|d| d.as_str()).unwrap_or("");
    let status_line = format!("{status} {title}");
    // Our JSON names the type JSON where upstream's page names the
    // client's Accept (the version check runs before Accept is looked at).
    let detail = detail.replace("content of type application/json", &format!("content of type {accept}"));
    match format {
        ErrorFormat::Json => None,
        ErrorFormat::Plain => Some(("text/plain; charset=UTF-8", format!("{status_line}\n\n{detail}"))),
        ErrorFormat::Html => {
            // The JSON detail is "explanation\n\n message  "; webob's HTML
            // page puts a <br /> pair between the two.
            let (head, message) = detail.split_once("\n\n").unwrap_or((detail.as_str(), ""));
            let message = html_escape(message.trim_start_matches(' ').trim_end_matches(' '));
            let mut head = html_escape(head).replace("browser (content", "browser\n(content");
            let body = match status {
                // webob's own templates for these three.
                405 | 406 | 415 => {
                    if status == 415 {
                        head = format!("{}\n", head.trim_end());
                    }
                    format!("{head}<br /><br />\n{message}")
                }
                // The trailing lines are webob's (empty) comment slot.
                _ => format!("{head}<br /><br />\n{message}\n\n"),
            };
            let page = format!(
                "<html>\n <head>\n  <title>{status_line}</title>\n </head>\n <body>\n  <h1>{status_line}</h1>\n  {body}\n </body>\n</html>"
            );
            Some(("text/html; charset=UTF-8", page))
        }
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn accept_picks_the_error_format() {
        assert_eq!(error_format(None), ErrorFormat::Json);
        assert_eq!(error_format(Some("*/*")), ErrorFormat::Json);
        assert_eq!(error_format(Some("application/json")), ErrorFormat::Json);
        assert_eq!(error_format(Some("text/html")), ErrorFormat::Html);
        assert_eq!(error_format(Some("application/json, text/html")), ErrorFormat::Html);
        assert_eq!(error_format(Some("text/html;q=0.5, application/json")), ErrorFormat::Json);
        assert_eq!(error_format(Some("text/plain")), ErrorFormat::Plain);
        assert_eq!(error_format(Some("text/*")), ErrorFormat::Html);
    }

    #[test]
    fn html_page() {
        let body = br#"{"errors":[{"status":404,"title":"Not Found","detail":"The resource could not be found.\n\n nope  "}]}"#;
        let (ct, page) = reformat(body, ErrorFormat::Html, "text/html").unwrap();
        assert!(ct.starts_with("text/html"));
        assert!(page.contains("<h1>404 Not Found</h1>"));
        assert!(page.contains("The resource could not be found.<br /><br />\nnope\n"));
    }
}
