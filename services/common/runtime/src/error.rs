//! Typed API errors that cross the gRPC hop unchanged.
//!
//! A domain error becomes an [`ApiError`] (HTTP status, upstream code,
//! upstream text); on the wire it is a `tonic::Status` whose details hold an
//! encoded `keelson.common.v1.ErrorDetail`, so a code such as
//! `placement.concurrent_update` reaches the REST client exactly as the
//! service produced it.
//!
//! Both travel in the response's HTTP/2 trailers, whose size every hop
//! bounds ([`crate::grpc::WireLimits::header_list`]): the detail carries
//! the whole text (up to [`crate::grpc::WireLimits::error_detail`]), and
//! `grpc-message` only a summary of it, so a long text (400 unknown trait
//! names, a stack name of 8,000 characters) still reaches the caller.

use keelson_proto::common::v1::ErrorDetail;
use prost::Message as _;

/// An error as an API reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{http_status} {code}: {detail}")]
pub struct ApiError {
    pub http_status: u16,
    pub code: String,
    pub detail: String,
}

impl ApiError {
    pub fn new(http_status: u16, code: impl Into<String>, detail: impl Into<String>) -> Self {
        ApiError { http_status, code: code.into(), detail: detail.into() }
    }

    /// Encodes the error as a gRPC status carrying an `ErrorDetail`.
    pub fn to_status(&self) -> tonic::Status {
        let grpc_code = match self.http_status {
            400 | 422 => tonic::Code::InvalidArgument,
            401 => tonic::Code::Unauthenticated,
            403 => tonic::Code::PermissionDenied,
            404 => tonic::Code::NotFound,
            409 => tonic::Code::Aborted,
            412 => tonic::Code::FailedPrecondition,
            503 => tonic::Code::Unavailable,
            504 => tonic::Code::DeadlineExceeded,
            _ => tonic::Code::Internal,
        };
        let limits = crate::grpc::WireLimits::current();
        let detail = ErrorDetail {
            code: self.code.clone(),
            detail: cut(&self.detail, limits.error_detail),
            http_status: self.http_status.into(),
        };
        let summary = cut(&self.detail, crate::grpc::STATUS_MESSAGE_SUMMARY);
        tonic::Status::with_details(grpc_code, summary, detail.encode_to_vec().into())
    }

    /// Decodes a gRPC status; a status without our detail (a transport
    /// failure, a peer that is not keelson) maps to 503/500 with
    /// `default_code`.
    pub fn from_status(status: &tonic::Status, default_code: &str) -> Self {
        if let Ok(d) = ErrorDetail::decode(status.details()) {
            // Not an HTTP status (0 or past u16): read as no detail at all.
            if let Some(http_status) = u16::try_from(d.http_status).ok().filter(|s| *s != 0) {
                return ApiError { http_status, code: d.code, detail: d.detail };
            }
        }
        let http_status = match status.code() {
            // Unknown without our detail is the transport's: the service
            // went away mid-call (h2 reset, closed connection). The client
            // may retry, as for a refused connection.
            tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Cancelled
            | tonic::Code::Unknown => 503,
            // The peer lacks the method: another release of it, as while a
            // rolling upgrade replaces the services; retrying gets a
            // matching one soon.
            tonic::Code::Unimplemented => 503,
            tonic::Code::InvalidArgument => 400,
            tonic::Code::NotFound => 404,
            tonic::Code::PermissionDenied => 403,
            tonic::Code::Unauthenticated => 401,
            tonic::Code::Aborted | tonic::Code::AlreadyExists => 409,
            _ => 500,
        };
        ApiError { http_status, code: default_code.to_string(), detail: status.message().to_string() }
    }
}

/// `text` when it has at most `max` bytes; else its first `max` bytes (at
/// a character boundary) and a note of how many were left out.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        e.to_status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_survives_the_status_round_trip() {
        let e = ApiError::new(409, "placement.concurrent_update", "resource provider generation conflict");
        let back = ApiError::from_status(&e.to_status(), "placement.undefined_code");
        assert_eq!(back, e);
        assert_eq!(e.to_status().code(), tonic::Code::Aborted);
    }

    #[test]
    fn long_texts_cross_whole_with_a_short_summary() {
        let long = format!("No such trait(s): {}", vec!["CUSTOM_NOPE_0123456789"; 400].join(", "));
        let e = ApiError::new(400, "placement.undefined_code", long.clone());
        let status = e.to_status();
        assert!(status.message().len() < crate::grpc::STATUS_MESSAGE_SUMMARY + 32);
        assert!(status
            .message()
            .ends_with(&format!("… ({} more bytes)", long.len() - crate::grpc::STATUS_MESSAGE_SUMMARY)));
        assert_eq!(ApiError::from_status(&status, "x"), e);
    }

    #[test]
    fn cut_keeps_character_boundaries() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("aé", 2), "a… (2 more bytes)");
    }

    #[test]
    fn foreign_status_maps_by_code() {
        let s = tonic::Status::unavailable("connection refused");
        let e = ApiError::from_status(&s, "placement.undefined_code");
        assert_eq!(e.http_status, 503);
        assert_eq!(e.code, "placement.undefined_code");
        // What tonic reports when the service dies mid-call.
        let s = tonic::Status::unknown("transport error");
        assert_eq!(ApiError::from_status(&s, "placement.undefined_code").http_status, 503);
        let s = tonic::Status::internal("bug");
        assert_eq!(ApiError::from_status(&s, "placement.undefined_code").http_status, 500);
    }
}
