//! What a call to an OpenStack service can meet. The variants are the
//! facts callers act on (a delete treats `NotFound` as done, an
//! authentication answers `Unauthorized`), each with the service's own
//! message (`{"error": {"message": ...}}` for Keystone).

use http::StatusCode;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OsError {
    /// 400.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 401: no, a wrong or an expired credential.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// 403.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 404.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409.
    #[error("conflict: {0}")]
    Conflict(String),
    /// The service could not be asked: refused connection, timeout, 5xx.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// Any other status.
    #[error("{status}: {message}")]
    Unexpected { status: u16, message: String },
    /// An answer that is not what the API documents.
    #[error("invalid answer: {0}")]
    InvalidResponse(String),
    /// No endpoint of that service type, interface and region in the catalog.
    #[error("no endpoint for {0} in the service catalog")]
    EndpointNotFound(String),
    /// The answer's body went past the client's bound.
    #[error("answer too large: {0}")]
    AnswerTooLarge(String),
}

impl OsError {
    /// The error an HTTP answer with `status` and `body` stands for.
    pub fn from_status(status: StatusCode, body: &[u8]) -> OsError {
        let message = error_message(body);
        match status.as_u16() {
            500..=599 => OsError::Unavailable(format!("{status}: {message}")),
            _ => OsError::of_status(status, message),
        }
    }

    /// The error of an answer with `status`, carrying `message` as it is
    /// (a client that words its errors itself, as swiftclient does).
    pub fn of_status(status: StatusCode, message: String) -> OsError {
        match status.as_u16() {
            400 => OsError::BadRequest(message),
            401 => OsError::Unauthorized(message),
            403 => OsError::Forbidden(message),
            404 => OsError::NotFound(message),
            409 => OsError::Conflict(message),
            500..=599 => OsError::Unavailable(message),
            other => OsError::Unexpected { status: other, message },
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, OsError::NotFound(_))
    }

    pub fn is_unauthorized(&self) -> bool {
        matches!(self, OsError::Unauthorized(_))
    }

    /// The service's own message, as the error carries it.
    pub fn message(&self) -> &str {
        match self {
            OsError::BadRequest(m)
            | OsError::Unauthorized(m)
            | OsError::Forbidden(m)
            | OsError::NotFound(m)
            | OsError::Conflict(m)
            | OsError::Unavailable(m)
            | OsError::InvalidResponse(m)
            | OsError::EndpointNotFound(m)
            | OsError::AnswerTooLarge(m) => m,
            OsError::Unexpected { message, .. } => message,
        }
    }
}

/// The message of an OpenStack error body: Keystone's `{"error":
/// {"message"}}`, the `{"<kind>": {"message"}}` of Nova and Cinder, or the
/// text itself (cut to 1 KiB).
fn error_message(body: &[u8]) -> String {
    if let Ok(serde_json::Value::Object(doc)) = serde_json::from_slice::<serde_json::Value>(body) {
        for value in doc.values() {
            if let Some(m) = value.get("message").and_then(serde_json::Value::as_str) {
                return m.to_string();
            }
        }
    }
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(1024);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_messages() {
        let body = br#"{"error": {"code": 404, "message": "EC2 access key not found.", "title": "Not Found"}}"#;
        let e = OsError::from_status(StatusCode::NOT_FOUND, body);
        assert_eq!(e, OsError::NotFound("EC2 access key not found.".into()));
        assert!(e.is_not_found());
        assert_eq!(e.message(), "EC2 access key not found.");
        assert!(OsError::from_status(StatusCode::UNAUTHORIZED, b"").is_unauthorized());
        assert!(matches!(OsError::from_status(StatusCode::BAD_GATEWAY, b"down"), OsError::Unavailable(_)));
        assert_eq!(
            OsError::from_status(StatusCode::IM_A_TEAPOT, b"tea"),
            OsError::Unexpected { status: 418, message: "tea".into() }
        );
    }
}
