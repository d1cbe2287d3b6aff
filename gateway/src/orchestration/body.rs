//! Request bodies as heat-api's `JSONRequestDeserializer` reads them: only
//! a non-empty body whose content type is JSON (a missing or `text/plain`
//! type counts as JSON) and that starts with `{` is a body at all; it must
//! fit in `max_json_body_size` and parse, with Python's `json` error texts.

use http::HeaderMap;

use super::fault::Fault;

/// Whether heat-api would deserialize this body (`is_json_content_type`).
fn is_json_body(headers: &HeaderMap, body: &[u8]) -> bool {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default();
    let content_type = if content_type.is_empty() || content_type.starts_with("text/plain") {
        "application/json"
    } else {
        &content_type
    };
    matches!(content_type, "application/json" | "json") && body.starts_with(b"{")
}

/// The request's JSON document, `None` when heat-api would see no body.
pub fn decode(headers: &HeaderMap, body: &[u8], max_size: usize) -> Result<Option<serde_json::Value>, Fault> {
    if body.is_empty() || !is_json_body(headers, body) {
        return Ok(None);
    }
    if body.len() > max_size {
        return Err(too_large(body.len(), max_size));
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| Fault::bad_request(keelson_pyfmt::json_loads_bytes_error(body, &e)))
}

/// `RequestLimitExceeded` for a body of `len` bytes.
pub fn too_large(len: usize, max_size: usize) -> Fault {
    Fault::new(
        400,
        "RequestLimitExceeded",
        format!(
            "Request limit exceeded: JSON body size ({len} bytes) exceeds maximum allowed size ({max_size} bytes)."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(content_type: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(ct) = content_type {
            h.insert(http::header::CONTENT_TYPE, ct.parse().unwrap());
        }
        h
    }

    #[test]
    fn which_bodies_count() {
        let doc = br#"{"a": 1}"#;
        for ct in [None, Some("text/plain"), Some("application/json"), Some("application/json; charset=UTF-8")] {
            assert_eq!(decode(&headers(ct), doc, 100).unwrap(), Some(serde_json::json!({"a": 1})), "{ct:?}");
        }
        assert_eq!(decode(&headers(Some("application/yaml")), doc, 100).unwrap(), None);
        assert_eq!(decode(&headers(None), b"[1]", 100).unwrap(), None);
        assert_eq!(decode(&headers(None), b"", 100).unwrap(), None);
    }

    #[test]
    fn errors_read_as_heat_api_writes_them() {
        let e = decode(&headers(Some("application/json")), b"{not json", 100).unwrap_err();
        assert_eq!(
            e,
            Fault::bad_request("Expecting property name enclosed in double quotes: line 1 column 2 (char 1)")
        );
        let e = decode(&headers(None), &[b'{'; 11], 10).unwrap_err();
        assert_eq!(e.error_type, "RequestLimitExceeded");
        assert_eq!(
            e.message,
            "Request limit exceeded: JSON body size (11 bytes) exceeds maximum allowed size (10 bytes)."
        );
        let e = decode(&headers(None), b"{\"a\": 1} x", 100).unwrap_err();
        assert_eq!(e.message, "Extra data: line 1 column 10 (char 9)");
        let e = decode(&headers(None), b"{", 100).unwrap_err();
        assert_eq!(e.message, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
        let e = decode(&headers(None), b"{\"a\": 1", 100).unwrap_err();
        assert_eq!(e.message, "Expecting ',' delimiter: line 1 column 8 (char 7)");
        let e = decode(&headers(None), b"{\n \"a\" 1}", 100).unwrap_err();
        assert_eq!(e.message, "Expecting ':' delimiter: line 2 column 6 (char 7)");
    }
}
