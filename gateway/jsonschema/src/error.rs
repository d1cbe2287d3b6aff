//! Error types: schemas that cannot be compiled, and instances that fail.
//!
//! [`ValidationError`]'s `Display` reproduces Python's `str(ValidationError)`
//! (message, failing keyword and schema, instance, both pretty-printed),
//! because that whole text is what Placement embeds in its 400 responses and
//! what clients and the gabbi tests match against.

use std::fmt;

use serde_json::Value;

use crate::pformat::{pformat, WIDTH};
use keelson_pyfmt::repr_str;

/// A schema that cannot be turned into a [`Validator`](crate::Validator).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A keyword's value has the wrong shape (e.g. `"minLength": "x"`).
    #[error("invalid value for '{keyword}' at {location}: {reason}")]
    InvalidKeyword { keyword: String, location: String, reason: String },
    /// A `pattern` / `patternProperties` regex the regex engine rejects.
    #[error("invalid regex {pattern:?} at {location}: {reason}")]
    InvalidRegex { pattern: String, location: String, reason: String },
    /// A `type` name that is not one of the seven JSON Schema types.
    #[error("unknown type {name:?} at {location}")]
    UnknownType { name: String, location: String },
    /// A `$ref` that is not a JSON pointer into the same document, or whose
    /// target does not exist.
    #[error("unresolvable $ref {reference:?} at {location}")]
    UnresolvableRef { reference: String, location: String },
    /// A keyword this implementation deliberately does not evaluate; better
    /// to refuse the schema than to silently accept everything.
    #[error("unsupported keyword '{keyword}' at {location}")]
    UnsupportedKeyword { keyword: String, location: String },
    /// A schema that is neither an object nor a boolean.
    #[error("a schema must be an object or a boolean, at {location}")]
    NotASchema { location: String },
}

/// One step of an instance or schema path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathElement {
    Index(usize),
    Key(String),
}

impl PathElement {
    /// Python `repr()` of the step, as used inside `schema['a'][0]`.
    pub fn py_repr(&self) -> String {
        match self {
            PathElement::Index(i) => i.to_string(),
            PathElement::Key(k) => repr_str(k),
        }
    }
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Index(i) => write!(f, "{i}"),
            PathElement::Key(k) => f.write_str(k),
        }
    }
}

impl From<&str> for PathElement {
    fn from(key: &str) -> Self {
        PathElement::Key(key.to_owned())
    }
}

impl From<usize> for PathElement {
    fn from(index: usize) -> Self {
        PathElement::Index(index)
    }
}

/// The error Python's `jsonschema.validate` would raise for an instance:
/// the best match among all failures, with the same message, paths, schema
/// and instance. (Boxed inside so that `Result<(), ValidationError>` stays
/// one pointer wide.)
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationError {
    inner: Box<Details>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Details {
    pub(crate) message: String,
    pub(crate) keyword: Option<String>,
    pub(crate) schema: Value,
    pub(crate) instance: Value,
    pub(crate) relative_path: Vec<PathElement>,
    pub(crate) absolute_path: Vec<PathElement>,
    pub(crate) relative_schema_path: Vec<PathElement>,
    pub(crate) absolute_schema_path: Vec<PathElement>,
}

impl From<Details> for ValidationError {
    fn from(details: Details) -> Self {
        ValidationError { inner: Box::new(details) }
    }
}

impl ValidationError {
    /// The one-line message (`exc.message`), e.g. `'name' is a required property`.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// The failing keyword (`exc.validator`); `None` for a `false` schema.
    pub fn keyword(&self) -> Option<&str> {
        self.inner.keyword.as_deref()
    }

    /// The (sub)schema that holds the failing keyword (`exc.schema`).
    pub fn schema(&self) -> &Value {
        &self.inner.schema
    }

    /// The part of the instance that failed (`exc.instance`).
    pub fn instance(&self) -> &Value {
        &self.inner.instance
    }

    /// Where the failing part sits in the whole instance (`exc.absolute_path`).
    pub fn path(&self) -> &[PathElement] {
        &self.inner.absolute_path
    }

    /// Path relative to the enclosing `anyOf`/`oneOf` when the error was
    /// picked from one's sub-errors, else the same as [`path`](Self::path).
    /// Python prints this one in `str(exc)`.
    pub fn relative_path(&self) -> &[PathElement] {
        &self.inner.relative_path
    }

    /// Keyword path through the schema to the failing keyword
    /// (`exc.absolute_schema_path`).
    pub fn schema_path(&self) -> &[PathElement] {
        &self.inner.absolute_schema_path
    }

    /// Schema path relative to the enclosing `anyOf`/`oneOf`, as printed.
    pub fn relative_schema_path(&self) -> &[PathElement] {
        &self.inner.relative_schema_path
    }

    /// The instance location as a JSON path (`exc.json_path`), e.g. `$.a[0]`.
    pub fn json_path(&self) -> String {
        let mut out = String::from("$");
        for step in &self.inner.absolute_path {
            match step {
                PathElement::Index(i) => out.push_str(&format!("[{i}]")),
                PathElement::Key(k) if is_json_path_identifier(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                PathElement::Key(k) => {
                    out.push_str("['");
                    out.push_str(&k.replace('\\', "\\\\").replace('\'', "\\'"));
                    out.push_str("']");
                }
            }
        }
        out
    }
}

fn is_json_path_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `_utils.format_as_index`: `schema['properties']['total']`, `instance[0]`.
fn format_as_index(container: &str, indices: &[PathElement]) -> String {
    let mut out = container.to_owned();
    for index in indices {
        out.push('[');
        out.push_str(&index.py_repr());
        out.push(']');
    }
    out
}

/// Pretty-print for the verbose form: continuation lines are indented by four
/// spaces, as the dedented template in jsonschema leaves them.
fn pretty(value: &Value) -> String {
    pformat(value, WIDTH).replace('\n', "\n    ")
}

/// Python's `str(ValidationError)`:
///
/// ```text
/// {message}
///
/// Failed validating {keyword!r} in {schema path without its last step}:
///     {pformat(schema)}
///
/// On {instance path}:
///     {pformat(instance)}
/// ```
impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keyword = match &self.inner.keyword {
            Some(k) => repr_str(k),
            None => "None".to_owned(),
        };
        let schema_steps = match self.inner.relative_schema_path.split_last() {
            Some((_, rest)) => rest,
            None => &[],
        };
        write!(
            f,
            "{}\n\nFailed validating {} in {}:\n    {}\n\nOn {}:\n    {}",
            self.inner.message,
            keyword,
            format_as_index("schema", schema_steps),
            pretty(&self.inner.schema),
            format_as_index("instance", &self.inner.relative_path),
            pretty(&self.inner.instance),
        )
    }
}

impl std::error::Error for ValidationError {}
