//! The error type every fallible operation of this crate returns.

/// Which Heat exception a template error is. Each kind knows its Heat
/// exception class name (the REST error body's `type`); callers decide on
/// the kind, never on the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TemplateErrorKind {
    /// `InvalidTemplate` ("The template is invalid" family).
    InvalidTemplate,
    StackValidationFailed,
    /// heat-api's `HTTPBadRequest` (unparseable documents).
    BadRequest,
    InvalidSchemaError,
    InvalidTemplateReference,
    InvalidTemplateSection,
    InvalidTemplateVersion,
    NotFound,
    NotSupported,
    RequestLimitExceeded,
    UnknownUserParameter,
    UserParameterMissing,
    /// `CircularDependencyException`.
    CircularDependency,
}

impl TemplateErrorKind {
    /// Heat's exception class name for this kind.
    pub fn heat_type(self) -> &'static str {
        match self {
            TemplateErrorKind::InvalidTemplate => "InvalidTemplate",
            TemplateErrorKind::StackValidationFailed => "StackValidationFailed",
            TemplateErrorKind::BadRequest => "HTTPBadRequest",
            TemplateErrorKind::InvalidSchemaError => "InvalidSchemaError",
            TemplateErrorKind::InvalidTemplateReference => "InvalidTemplateReference",
            TemplateErrorKind::InvalidTemplateSection => "InvalidTemplateSection",
            TemplateErrorKind::InvalidTemplateVersion => "InvalidTemplateVersion",
            TemplateErrorKind::NotFound => "NotFound",
            TemplateErrorKind::NotSupported => "NotSupported",
            TemplateErrorKind::RequestLimitExceeded => "RequestLimitExceeded",
            TemplateErrorKind::UnknownUserParameter => "UnknownUserParameter",
            TemplateErrorKind::UserParameterMissing => "UserParameterMissing",
            TemplateErrorKind::CircularDependency => "CircularDependencyException",
        }
    }

    /// Every kind, for the decoders that map a Heat type name back.
    pub const ALL: [TemplateErrorKind; 13] = [
        TemplateErrorKind::InvalidTemplate,
        TemplateErrorKind::StackValidationFailed,
        TemplateErrorKind::BadRequest,
        TemplateErrorKind::InvalidSchemaError,
        TemplateErrorKind::InvalidTemplateReference,
        TemplateErrorKind::InvalidTemplateSection,
        TemplateErrorKind::InvalidTemplateVersion,
        TemplateErrorKind::NotFound,
        TemplateErrorKind::NotSupported,
        TemplateErrorKind::RequestLimitExceeded,
        TemplateErrorKind::UnknownUserParameter,
        TemplateErrorKind::UserParameterMissing,
        TemplateErrorKind::CircularDependency,
    ];
}

/// A template or environment is invalid: which Heat exception, and its
/// message. Always a 400 on the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.heat_type())]
pub struct TemplateError {
    pub kind: TemplateErrorKind,
    pub message: String,
}

impl TemplateError {
    pub fn new(kind: TemplateErrorKind, message: impl Into<String>) -> Self {
        TemplateError { kind, message: message.into() }
    }
    /// Heat's exception class name (the REST error body's `type`).
    pub fn type_name(&self) -> &'static str {
        self.kind.heat_type()
    }
    /// Heat's `InvalidTemplate` ("The template is invalid" family).
    pub fn invalid_template(message: impl Into<String>) -> Self {
        Self::new(TemplateErrorKind::InvalidTemplate, message)
    }
    pub fn validation_failed(message: impl Into<String>) -> Self {
        Self::new(TemplateErrorKind::StackValidationFailed, message)
    }
    /// Prefix the message with a location path, as Heat's
    /// StackValidationFailed(path=...) does: "a.b.c: message".
    pub fn at_path(mut self, path: &str) -> Self {
        if !path.is_empty() {
            self.message = format!("{path}: {}", self.message);
        }
        self
    }
}
