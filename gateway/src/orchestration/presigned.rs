//! Pre-signed signal URLs (heat-api-cfn's `PUT /v1/waitcondition/<arn>`
//! and `POST /v1/signal/<arn>`): instances that hold no token signal
//! through them. These requests skip authentication entirely (noauth or
//! Keystone): the URL's signature is the credential, and it is the
//! ENGINE that checks it (the gateway never sees the key); a modified or
//! expired URL is refused with 403.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use keelson_proto::orchestration::v1 as pb;

use super::engines::Engines;
use super::fault::Fault;
use super::handlers::engine_fault;
use super::urls;

/// Whether `rest` (the decoded path under `/v1`) is a pre-signed URL.
pub fn matches(rest: &str) -> bool {
    rest.starts_with("/waitcondition/arn:") || rest.starts_with("/signal/arn:")
}

/// Forwards the request to an engine; answers its document (200), or its
/// error as a Heat fault body.
pub async fn handle(
    engines: &Engines,
    method: &Method,
    rest: &str,
    raw_query: &str,
    headers: &HeaderMap,
    body: &[u8],
    limit: usize,
) -> Response {
    if body.len() > limit {
        let declared = headers.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse().ok());
        return super::body::too_large(declared.unwrap_or(body.len()), limit).into_response();
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Fault::new(400, "HTTPBadRequest", "The request body is not UTF-8.").into_response();
    };
    let mut query: Vec<pb::QueryParam> = Vec::new();
    for (key, value) in urls::query_pairs(raw_query) {
        match query.iter_mut().find(|p| p.key == key) {
            Some(p) => p.values.push(value),
            None => query.push(pb::QueryParam { key, values: vec![value] }),
        }
    }
    let req = pb::PresignedSignalRequest {
        method: method.as_str().to_string(),
        path: rest.to_string(),
        query,
        body_json: text.to_string(),
    };
    match engines.call(req, |mut c, r| async move { c.presigned_signal(r).await }).await {
        Ok(reply) => {
            let body = reply.into_inner().body_json;
            let body = if body.trim().is_empty() { "null".to_string() } else { body };
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() = StatusCode::OK;
            resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
        Err(status) => engine_fault(&status).into_response(),
    }
}
