//! CloudFormation's error bodies, as heat-api-cfn writes them
//! (`heat/api/aws/exception.py`, serialized by Heat's XML serializer):
//! `<ErrorResponse><Error><Type>Sender</Type><Code>…</Code><Message>…`
//! with the error's HTTP status, and the engine's errors mapped as
//! `map_remote_error` maps them.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use keelson_runtime::ApiError;

/// One CloudFormation error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfnFault {
    pub status: u16,
    pub code: &'static str,
    pub explanation: &'static str,
    pub detail: Option<String>,
    /// `Sender` (the caller's fault) or `Server`.
    pub err_type: &'static str,
}

impl CfnFault {
    const fn sender(status: u16, code: &'static str, explanation: &'static str) -> Self {
        CfnFault { status, code, explanation, detail: None, err_type: "Sender" }
    }

    pub fn incomplete_signature() -> Self {
        Self::sender(400, "IncompleteSignature", "The request signature does not conform to AWS standards")
    }

    pub fn missing_authentication_token() -> Self {
        Self::sender(403, "MissingAuthenticationToken", "Does not contain a valid AWS Access Key or certificate")
    }

    pub fn invalid_client_token_id() -> Self {
        Self::sender(403, "InvalidClientTokenId", "The certificate or AWS Key ID provided does not exist")
    }

    pub fn signature_does_not_match() -> Self {
        Self::sender(
            403,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided",
        )
    }

    pub fn access_denied() -> Self {
        Self::sender(403, "AccessDenied", "User is not authorized to perform action")
    }

    pub fn invalid_parameter_value(detail: Option<String>) -> Self {
        CfnFault { detail, ..Self::sender(400, "InvalidParameterValue", "A bad or out-of-range value was supplied") }
    }

    pub fn request_limit_exceeded() -> Self {
        Self::sender(400, "RequestLimitExceeded", "Payload exceeds maximum allowed size")
    }

    pub fn service_unavailable() -> Self {
        CfnFault { err_type: "Server", ..Self::sender(503, "ServiceUnavailable", "Service temporarily unavailable") }
    }

    pub fn internal_failure(detail: Option<String>) -> Self {
        CfnFault {
            detail,
            err_type: "Server",
            ..Self::sender(500, "InternalFailure", "The request processing has failed due to an internal error")
        }
    }

    /// Heat's `map_remote_error`: the engine's error by its type.
    pub fn from_engine(status: &tonic::Status) -> Self {
        let err = ApiError::from_status(status, "");
        let detail = (!err.detail.is_empty()).then(|| err.detail.clone());
        match err.code.as_str() {
            "AttributeError"
            | "ValueError"
            | "InvalidTenant"
            | "EntityNotFound"
            | "ResourceActionNotSupported"
            | "ResourceNotFound"
            | "ResourceNotAvailable"
            | "StackValidationFailed"
            | "InvalidSchemaError"
            | "InvalidTemplateReference"
            | "InvalidTemplateVersion"
            | "InvalidTemplateSection"
            | "UnknownUserParameter"
            | "UserParameterMissing"
            | "MissingCredentialError"
            | "ResourcePropertyConflict"
            | "PropertyUnspecifiedError"
            | "NotSupported"
            | "InvalidBreakPointHook"
            | "PhysicalResourceIDAmbiguity" => Self::invalid_parameter_value(detail),
            "Forbidden" | "NotAuthorized" => CfnFault { detail, ..Self::access_denied() },
            "StackExists" => CfnFault {
                detail,
                ..Self::sender(400, "AlreadyExists", "Resource with the name requested already exists")
            },
            "ActionInProgress" => CfnFault {
                detail,
                ..Self::sender(
                    400,
                    "InvalidAction",
                    "Cannot perform action on stack while other actions are in progress",
                )
            },
            "RequestLimitExceeded" => CfnFault { detail, ..Self::request_limit_exceeded() },
            _ => {
                tracing::error!(target: "keelson::cfn", "engine call failed: {status}");
                Self::internal_failure(detail)
            }
        }
    }

    /// `explanation[:detail]`.
    pub fn message(&self) -> String {
        match &self.detail {
            Some(d) => format!("{}:{d}", self.explanation),
            None => self.explanation.to_string(),
        }
    }

    pub fn into_response(self) -> Response {
        let body = format!(
            "<ErrorResponse><Error><Type>{}</Type><Code>{}</Code><Message>{}</Message></Error></ErrorResponse>",
            self.err_type,
            self.code,
            xml_escape(&self.message())
        );
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/xml"));
        resp
    }
}

/// lxml's text escaping.
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_as_heat_writes_them() {
        let f = CfnFault::invalid_client_token_id();
        assert_eq!(f.message(), "The certificate or AWS Key ID provided does not exist");
        assert_eq!(f.status, 403);
        let f = CfnFault::invalid_parameter_value(Some("The Resource (x) could not be found in Stack s.".into()));
        assert_eq!(
            f.message(),
            "A bad or out-of-range value was supplied:The Resource (x) could not be found in Stack s."
        );
        assert_eq!(xml_escape("a<b>&c"), "a&lt;b&gt;&amp;c");
    }
}
