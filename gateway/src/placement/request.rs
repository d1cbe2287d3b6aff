//! What a handler sees of a request, and what it may answer.

use std::collections::HashMap;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use keelson_runtime::ApiError;
use serde_json::{Map, Value};

use super::json_text::JsonText;
use super::microversion::Microversion;
use super::{error, State};
use crate::identity::Identity;

/// A handler's failure.
#[derive(Debug)]
pub enum PlacementError {
    /// An API error rendered in Placement's error body.
    Api(ApiError),
    /// 415: the body is not `application/json`.
    UnsupportedMediaType(String),
    /// 406: the `Accept` header excludes JSON.
    NotAcceptable(String),
}

impl From<ApiError> for PlacementError {
    fn from(e: ApiError) -> Self {
        PlacementError::Api(e)
    }
}

impl From<tonic::Status> for PlacementError {
    fn from(s: tonic::Status) -> Self {
        PlacementError::Api(ApiError::from_status(&s, error::UNDEFINED_CODE))
    }
}

pub type HandlerResult = Result<Response, PlacementError>;

/// Shorthands for the errors handlers raise most.
pub fn bad_request(detail: impl Into<String>) -> PlacementError {
    ApiError::new(400, "", detail).into()
}
pub fn not_found(detail: impl Into<String>) -> PlacementError {
    ApiError::new(404, "", detail).into()
}
pub fn conflict(code: &str, detail: impl Into<String>) -> PlacementError {
    ApiError::new(409, code, detail).into()
}

/// One request on its way through a handler.
pub struct Req {
    pub method: Method,
    pub path: String,
    /// Path parameters by the names of the route pattern (`{uuid}` …).
    pub params: HashMap<&'static str, String>,
    pub raw_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub version: Microversion,
    pub creds: Identity,
    pub request_id: String,
    pub state: State,
}

impl Req {
    /// A path parameter (always present: the route matched it).
    pub fn param(&self, name: &str) -> &str {
        self.params.get(name).map(String::as_str).unwrap_or("")
    }

    pub fn at_least(&self, major: u16, minor: u16) -> bool {
        self.version.at_least(major, minor)
    }

    /// 415 unless the body is declared `application/json` (upstream's
    /// `require_content`, checked before policy).
    pub fn require_content(&self) -> Result<(), PlacementError> {
        let content_type = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
            .unwrap_or_default();
        if content_type == "application/json" {
            Ok(())
        } else {
            Err(PlacementError::UnsupportedMediaType(if content_type.is_empty() {
                "None".to_string()
            } else {
                content_type
            }))
        }
    }

    /// The JSON body validated against the named schema of
    /// `request-schemas.json` (call [`Req::require_content`] first).
    pub fn json_body(&self, schema: &str) -> Result<Value, PlacementError> {
        let data: Value = serde_json::from_slice(&self.body).map_err(|e| {
            bad_request(format!("Malformed JSON: {}", keelson_pyfmt::json_loads_bytes_error(&self.body, &e)))
        })?;
        super::handlers::validate(schema, &data)
            .map_err(|msg| bad_request(format!("JSON does not validate: {msg}")))?;
        Ok(data)
    }

    /// The query string as a dict (a repeated key keeps its last value, as
    /// `dict(req.GET)` does upstream).
    pub fn query_dict(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in self.query_pairs() {
            out.insert(k, Value::String(v));
        }
        out
    }

    /// Every `key=value` of the query string, in order, decoded.
    pub fn query_pairs(&self) -> Vec<(String, String)> {
        form_urlencoded_pairs(&self.raw_query)
    }

    /// All values of one query key, in order.
    pub fn query_all(&self, key: &str) -> Vec<String> {
        self.query_pairs().into_iter().filter(|(k, _)| k == key).map(|(_, v)| v).collect()
    }

    /// The query dict validated against the named schema.
    pub fn validated_query(&self, schema: &str) -> Result<Map<String, Value>, PlacementError> {
        let q = self.query_dict();
        super::handlers::validate(schema, &Value::Object(q.clone()))
            .map_err(|msg| bad_request(format!("Invalid query string parameters: {msg}")))?;
        Ok(q)
    }

    /// The path prefix the API is mounted under behind a proxy
    /// (`X-Forwarded-Prefix`, upstream's SCRIPT_NAME).
    pub fn prefix(&self) -> &str {
        self.headers
            .get("x-forwarded-prefix")
            .and_then(|v| v.to_str().ok())
            .map(|p| p.trim().trim_end_matches('/'))
            .unwrap_or("")
    }

    /// A link as upstream writes it in bodies: the path under the prefix.
    pub fn link(&self, path: &str) -> String {
        format!("{}{path}", self.prefix())
    }

    /// An absolute URL, as webob makes every `Location` header absolute.
    pub fn absolute_url(&self, path: &str) -> String {
        let header =
            |name: &str| self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
        let scheme = header("x-forwarded-proto").unwrap_or("http");
        let host = header("x-forwarded-host").or_else(|| header("host")).unwrap_or("localhost");
        format!("{scheme}://{host}{}{path}", self.prefix())
    }

    /// A `Location` header value for `path`.
    pub fn location(&self, path: &str) -> HeaderValue {
        HeaderValue::from_str(&self.absolute_url(path)).unwrap_or(HeaderValue::from_static("/"))
    }

    /// Checks a policy rule for this request's credentials.
    pub fn authorize(&self, rule: &str, target: &[(&str, &str)]) -> Result<(), PlacementError> {
        self.state.policy.check(rule, target, &self.creds).map_err(PlacementError::Api)
    }
}

/// A path parameter as the route matched it, percent-decoded (`+` stays
/// itself: it is a space only in a query).
pub fn decode_path_param(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let pairs = form_urlencoded_pairs(&format!("x={}", s.replace('+', "%2B")));
    pairs.into_iter().next().map(|(_, v)| v).unwrap_or_else(|| s.to_string())
}

/// Decodes `application/x-www-form-urlencoded` pairs (`+` is a space).
pub fn form_urlencoded_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
                match (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON response.
pub fn json(status: StatusCode, body: &Value) -> Response {
    let mut resp = (status, body.to_string()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A JSON response written as [`JsonText`].
pub fn json_text_response(status: StatusCode, body: JsonText) -> Response {
    let mut resp = (status, body.into_bytes()).into_response();
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// An empty response (204 and friends): no content type.
pub fn empty(status: StatusCode) -> Response {
    status.into_response()
}

/// Adds `Last-Modified` and `Cache-Control: no-cache` to a GET answer from
/// 1.15 on. `last_modified` is the newest change of what is returned, or
/// now when nothing says.
pub fn cache_headers(req: &Req, mut resp: Response, last_modified: Option<chrono::NaiveDateTime>) -> Response {
    if req.at_least(1, 15) {
        let when = last_modified.unwrap_or_else(keelson_runtime::clock::now);
        let text = when.format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().insert(http::header::LAST_MODIFIED, v);
        }
        resp.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    resp
}

/// A protobuf timestamp as the naive UTC time the headers use.
pub fn to_naive(ts: &Option<prost_types::Timestamp>) -> Option<chrono::NaiveDateTime> {
    ts.as_ref().and_then(|t| chrono::DateTime::from_timestamp(t.seconds, 0)).map(|d| d.naive_utc())
}

/// The newest of several timestamps.
pub fn newest<'a>(
    items: impl IntoIterator<Item = &'a Option<prost_types::Timestamp>>,
) -> Option<chrono::NaiveDateTime> {
    items.into_iter().filter_map(to_naive).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        assert_eq!(
            form_urlencoded_pairs("a=1&b=x+y&c=%21T&a=2&d"),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y".into()),
                ("c".into(), "!T".into()),
                ("a".into(), "2".into()),
                ("d".into(), "".into())
            ]
        );
        assert_eq!(percent_decode("in%3Aa%2Cb"), "in:a,b");
        assert_eq!(percent_decode("100%"), "100%");
    }
}
