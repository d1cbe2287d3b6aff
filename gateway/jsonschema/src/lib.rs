//! JSON Schema validation that reports errors the way OpenStack Placement
//! does.
//!
//! Placement validates request bodies and query strings with Python's
//! `jsonschema` (4.x, with a `FormatChecker` that knows `uuid`) and returns
//! the text of the raised `ValidationError` in its 400 responses. Clients and
//! the upstream gabbi tests match on that text, so this crate reproduces it:
//!
//! * the same choice of error when several keywords fail
//!   (`jsonschema.exceptions.best_match`),
//! * the same message wording per keyword (`_keywords.py` of jsonschema 4.26),
//! * values rendered as Python `repr` ([`py_repr`]),
//! * `str(exc)` with the pretty-printed schema and instance
//!   (`Display` of [`ValidationError`]).
//!
//! ```
//! use keelson_jsonschema::{Validator, placement};
//! use serde_json::json;
//!
//! let validator = Validator::new(&json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string"}},
//!     "required": ["name"],
//!     "additionalProperties": false,
//! })).unwrap();
//! let err = validator.validate(&json!({"nmae": "x"})).unwrap_err();
//! assert_eq!(err.message(), "'name' is a required property");
//! assert!(placement::body_error_text(&err).starts_with("JSON does not validate: 'name' is"));
//! ```

mod best_match;
mod compile;
mod error;
mod format;
mod messages;
mod number;
mod pformat;
pub mod placement;
mod pyregex;
mod types;
mod validate;

use serde_json::Value;

pub use error::{CompileError, PathElement, ValidationError};
pub use format::{is_uuid_like, Format};
pub use pformat::pformat;
pub use placement::placement_schema;
pub use pyregex::compile_python_regex;
pub use types::JsonType;

/// A compiled schema, reusable for any number of instances (it is `Send` and
/// `Sync`, so one copy can serve every request).
#[derive(Debug)]
pub struct Validator {
    compiled: compile::Compiled,
    schema: Value,
}

impl Validator {
    /// Compile `schema`. `$ref`s must point into the same document
    /// (`#/definitions/...`, `#/$defs/...`, `#`).
    pub fn new(schema: &Value) -> Result<Validator, CompileError> {
        Ok(Validator { compiled: compile::compile(schema)?, schema: schema.clone() })
    }

    /// The schema this validator was compiled from.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Validate `instance`; on failure return the error Python's
    /// `jsonschema.validate` would raise.
    pub fn validate(&self, instance: &Value) -> Result<(), ValidationError> {
        let errors = self.evaluator().errors(instance);
        match best_match::best_match(&self.compiled, errors) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Whether `instance` is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.evaluator().is_valid(self.compiled.root, instance)
    }

    /// Every top-level error, in the order Python's `iter_errors` yields them
    /// (an `anyOf`/`oneOf` failure is one error; its sub-errors are not listed).
    pub fn iter_errors(&self, instance: &Value) -> Vec<ValidationError> {
        self.evaluator()
            .errors(instance)
            .into_iter()
            .map(|e| best_match::into_public(&self.compiled, e, Vec::new(), Vec::new()))
            .collect()
    }

    fn evaluator(&self) -> validate::Evaluator<'_> {
        validate::Evaluator { compiled: &self.compiled }
    }
}

/// One-shot convenience: compile `schema` and validate `instance`.
pub fn validate(schema: &Value, instance: &Value) -> Result<Result<(), ValidationError>, CompileError> {
    Ok(Validator::new(schema)?.validate(instance))
}

#[cfg(test)]
mod tests {
    #[test]
    fn validators_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::Validator>();
        assert_send_sync::<super::ValidationError>();
    }
}
