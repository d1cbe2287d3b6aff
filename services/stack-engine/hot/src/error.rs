//! The error type every fallible operation of this crate returns.

/// A template or environment is invalid: Heat's exception type name (the
/// REST error body's `type`) and its message. Always a 400 unless the type
/// is "NotFound".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{type_name}: {message}")]
pub struct TemplateError {
    pub type_name: &'static str,
    pub message: String,
}

impl TemplateError {
    pub fn new(type_name: &'static str, message: impl Into<String>) -> Self {
        TemplateError { type_name, message: message.into() }
    }
    /// Heat's `InvalidTemplate` ("The template is invalid" family).
    pub fn invalid_template(message: impl Into<String>) -> Self {
        Self::new("InvalidTemplate", message)
    }
    pub fn validation_failed(message: impl Into<String>) -> Self {
        Self::new("StackValidationFailed", message)
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
