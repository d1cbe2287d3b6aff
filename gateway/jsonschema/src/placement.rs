//! Placement's own request schemas and error wording.
//!
//! `data/placement-request-schemas.json` holds every module-level schema of
//! `placement.schemas.*` from openstack-placement 16.0.0, keyed `module.NAME`
//! (extracted data; handlers pick one per microversion). They are compiled on
//! first use and then shared for the life of the process.
//!
//! Placement wraps the validator's `str(exc)` in one of two sentences
//! (`placement/util.py`): `extract_json` says `JSON does not validate: ...`
//! for bodies and `validate_query_params` says
//! `Invalid query string parameters: ...` for `dict(req.GET)`. webob then
//! turns that detail into the error body (it prefixes its explanation and
//! replaces newlines with spaces); that part belongs to the HTTP layer.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::error::{CompileError, ValidationError};
use crate::Validator;

/// The extracted `placement.schemas.*` document.
const SCHEMAS_JSON: &str = include_str!("../data/placement-request-schemas.json");

/// Every Placement schema, compiled; plus any that failed (none should: a
/// unit test compiles them all).
struct Registry {
    validators: HashMap<String, Validator>,
    names: Vec<String>,
    failures: Vec<(String, CompileError)>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut registry = Registry { validators: HashMap::new(), names: Vec::new(), failures: Vec::new() };
        let document: Value = match serde_json::from_str(SCHEMAS_JSON) {
            Ok(v) => v,
            Err(_) => return registry,
        };
        let Some(schemas) = document.get("schemas").and_then(Value::as_object) else {
            return registry;
        };
        for (name, schema) in schemas {
            registry.names.push(name.clone());
            match Validator::new(schema) {
                Ok(v) => {
                    registry.validators.insert(name.clone(), v);
                }
                Err(e) => registry.failures.push((name.clone(), e)),
            }
        }
        registry
    })
}

/// The compiled Placement schema called `name` (e.g.
/// `allocation.POST_ALLOCATIONS_V1_38`), or `None` if there is no such schema.
pub fn placement_schema(name: &str) -> Option<&'static Validator> {
    registry().validators.get(name)
}

/// Names of all Placement schemas, in the order of the extracted file.
pub fn placement_schema_names() -> impl Iterator<Item = &'static str> {
    registry().names.iter().map(String::as_str)
}

/// Schemas that failed to compile, with the reason (expected empty).
pub fn placement_schema_failures() -> &'static [(String, CompileError)] {
    &registry().failures
}

/// The detail `extract_json` raises for an invalid body:
/// `JSON does not validate: {str(exc)}`.
pub fn body_error_text(error: &ValidationError) -> String {
    format!("JSON does not validate: {error}")
}

/// The detail `validate_query_params` raises for invalid query parameters:
/// `Invalid query string parameters: {str(exc)}`.
pub fn query_error_text(error: &ValidationError) -> String {
    format!("Invalid query string parameters: {error}")
}

/// Build the instance Placement validates query strings against,
/// `dict(req.GET)`: each key once, at its first position, with its *last*
/// value (webob's `MultiDict.__getitem__`), always a string.
pub fn query_instance<'a, I>(pairs: I) -> Value
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut map = Map::new();
    for (key, value) in pairs {
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_compiles() {
        assert!(placement_schema_failures().is_empty(), "{:?}", placement_schema_failures());
        let names: Vec<&str> = placement_schema_names().collect();
        assert_eq!(names.len(), 53);
        for name in names {
            assert!(placement_schema(name).is_some(), "{name}");
        }
        assert!(placement_schema("allocation.POST_ALLOCATIONS_V1_38").is_some());
        assert!(placement_schema("no.SUCH").is_none());
    }

    #[test]
    fn query_instance_keeps_first_position_and_last_value() {
        let v = query_instance([("b", "1"), ("a", "2"), ("b", "3")]);
        assert_eq!(serde_json::to_string(&v).unwrap_or_default(), r#"{"b":"3","a":"2"}"#);
    }
}
