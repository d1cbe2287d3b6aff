//! Errors as Heat reports them: an exception type name (part of the REST
//! contract: heatclient and the integration tests match on it), the HTTP
//! status heat-api's fault middleware gives that type, and the message.
//!
//! On the gRPC hop an [`EngineError`] travels as a
//! `keelson.common.v1.ErrorDetail` whose `code` is the type name, so the
//! gateway can rebuild Heat's error body exactly.

use keelson_common::ApiError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{type_name}: {message}")]
pub struct EngineError {
    /// Heat's exception class name, e.g. `StackValidationFailed`.
    pub type_name: String,
    pub http_status: u16,
    pub message: String,
}

impl EngineError {
    pub fn new(type_name: impl Into<String>, http_status: u16, message: impl Into<String>) -> Self {
        EngineError { type_name: type_name.into(), http_status, message: message.into() }
    }

    /// 400 with the given Heat type.
    pub fn bad_request(type_name: &str, message: impl Into<String>) -> Self {
        Self::new(type_name, 400, message)
    }

    /// 400 `StackValidationFailed`.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new("StackValidationFailed", 400, message)
    }

    /// 400 `NotSupported`.
    pub fn not_supported(message: impl Into<String>) -> Self {
        Self::new("NotSupported", 400, message)
    }

    /// 404 `EntityNotFound`: "The Stack (x) could not be found."
    pub fn entity_not_found(entity: &str, name: &str) -> Self {
        Self::new("EntityNotFound", 404, format!("The {entity} ({name}) could not be found."))
    }

    pub fn stack_not_found(name: &str) -> Self {
        Self::entity_not_found("Stack", name)
    }

    /// 404 `ResourceNotFound`: "The Resource (r) could not be found in Stack s."
    pub fn resource_not_found(resource: &str, stack: &str) -> Self {
        Self::new("ResourceNotFound", 404, format!("The Resource ({resource}) could not be found in Stack {stack}."))
    }

    /// 409 `StackExists`.
    pub fn stack_exists(name: &str) -> Self {
        Self::new("StackExists", 409, format!("The Stack ({name}) already exists."))
    }

    /// 409 `ActionInProgress`.
    pub fn action_in_progress(stack: &str, action: &str) -> Self {
        Self::new("ActionInProgress", 409, format!("Stack {stack} already has an action ({action}) in progress."))
    }

    /// 403 `Forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new("Forbidden", 403, message)
    }

    /// 500 for what the client cannot fix (database down, a bug); the
    /// message is logged, not shown.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("InternalError", 500, message)
    }
}

impl From<keelson_common::db::DbError> for EngineError {
    fn from(e: keelson_common::db::DbError) -> Self {
        EngineError::internal(format!("database: {e}"))
    }
}

impl From<keelson_hot::TemplateError> for EngineError {
    fn from(e: keelson_hot::TemplateError) -> Self {
        EngineError::new(e.type_name, 400, e.message)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        ApiError::new(e.http_status, e.type_name, e.message)
    }
}

impl From<EngineError> for tonic::Status {
    fn from(e: EngineError) -> Self {
        ApiError::from(e).to_status()
    }
}

impl EngineError {
    /// Decodes an error that crossed a gRPC hop (see [`ApiError::from_status`]).
    pub fn from_status(status: &tonic::Status) -> Self {
        let e = ApiError::from_status(status, "InternalError");
        EngineError::new(e.code, e.http_status, e.detail)
    }
}
