//! Message texts, one function per keyword, worded as Python jsonschema 4.x
//! words them (the `_keywords.py` of 4.26, which reads the same as every 4.2x
//! release for the keywords Placement uses). Placement's clients and its gabbi
//! tests match on these strings, so each one is pinned by a unit test.
//!
//! Values are always interpolated with [`py_repr`], as Python's `{x!r}`.

use serde_json::Value;

use crate::number::PyNum;
use keelson_pyfmt::{repr as py_repr, repr_str};

/// `type`: `'abc' is not of type 'integer'`; a list of types is joined with
/// `, ` (`1.5 is not of type 'integer', 'null'`).
pub(crate) fn not_of_type(instance: &Value, type_names: &[&str]) -> String {
    let reprs: Vec<String> = type_names.iter().map(|t| repr_str(t)).collect();
    format!("{} is not of type {}", py_repr(instance), reprs.join(", "))
}

/// `enum`: `'bogus' is not one of ['none', 'isolate']`.
pub(crate) fn not_one_of(instance: &Value, choices: &Value) -> String {
    format!("{} is not one of {}", py_repr(instance), py_repr(choices))
}

/// `const`: `'x' was expected` (the expected value, not the instance).
pub(crate) fn const_expected(expected: &Value) -> String {
    format!("{} was expected", py_repr(expected))
}

/// `required`: `'name' is a required property`.
pub(crate) fn required_property(name: &str) -> String {
    format!("{} is a required property", repr_str(name))
}

/// `additionalProperties: false` without `patternProperties`:
/// `Additional properties are not allowed ('a', 'b' were unexpected)`.
/// `extras` must already be sorted.
pub(crate) fn additional_properties(extras: &[&str]) -> String {
    let (joined, verb) = extras_msg(extras);
    format!("Additional properties are not allowed ({joined} {verb} unexpected)")
}

/// `additionalProperties: false` next to `patternProperties`:
/// `'x' does not match any of the regexes: '^a$', '^b$'`. Both lists must
/// already be sorted.
pub(crate) fn no_pattern_matches(extras: &[&str], patterns: &[&str]) -> String {
    let verb = if extras.len() == 1 { "does" } else { "do" };
    let joined: Vec<String> = extras.iter().map(|e| repr_str(e)).collect();
    let patterns: Vec<String> = patterns.iter().map(|p| repr_str(p)).collect();
    format!("{} {verb} not match any of the regexes: {}", joined.join(", "), patterns.join(", "))
}

fn extras_msg(extras: &[&str]) -> (String, &'static str) {
    let verb = if extras.len() == 1 { "was" } else { "were" };
    let joined: Vec<String> = extras.iter().map(|e| repr_str(e)).collect();
    (joined.join(", "), verb)
}

fn is_one(limit: PyNum) -> bool {
    limit.py_eq(PyNum::Int(1))
}

fn is_zero(limit: PyNum) -> bool {
    limit.py_eq(PyNum::Int(0))
}

/// `minItems` / `minLength`: `[] should be non-empty` when the limit is 1,
/// else `'ab' is too short`.
pub(crate) fn too_short(instance: &Value, limit: PyNum) -> String {
    let what = if is_one(limit) { "should be non-empty" } else { "is too short" };
    format!("{} {what}", py_repr(instance))
}

/// `maxItems` / `maxLength`: `'' is expected to be empty` when the limit is 0,
/// else `[1, 2] is too long`.
pub(crate) fn too_long(instance: &Value, limit: PyNum) -> String {
    let what = if is_zero(limit) { "is expected to be empty" } else { "is too long" };
    format!("{} {what}", py_repr(instance))
}

/// `minProperties`: `{} should be non-empty` when the limit is 1, else
/// `{'a': 1} does not have enough properties`.
pub(crate) fn too_few_properties(instance: &Value, limit: PyNum) -> String {
    let what = if is_one(limit) { "should be non-empty" } else { "does not have enough properties" };
    format!("{} {what}", py_repr(instance))
}

/// `maxProperties`: `{'a': 1} is expected to be empty` when the limit is 0,
/// else `{...} has too many properties`.
pub(crate) fn too_many_properties(instance: &Value, limit: PyNum) -> String {
    let what = if is_zero(limit) { "is expected to be empty" } else { "has too many properties" };
    format!("{} {what}", py_repr(instance))
}

/// `uniqueItems`: `['a', 'a'] has non-unique elements`.
pub(crate) fn non_unique(instance: &Value) -> String {
    format!("{} has non-unique elements", py_repr(instance))
}

/// `pattern`: `'instance' does not match '^[A-Z0-9_]+$'`.
pub(crate) fn pattern_mismatch(instance: &Value, pattern: &str) -> String {
    format!("{} does not match {}", py_repr(instance), repr_str(pattern))
}

/// `format`: `'harry' is not a 'uuid'`.
pub(crate) fn not_a_format(instance: &Value, format: &str) -> String {
    format!("{} is not a {}", py_repr(instance), repr_str(format))
}

/// `minimum` (`exclusive` for draft 4's boolean `exclusiveMinimum`):
/// `0 is less than the minimum of 1`.
pub(crate) fn below_minimum(instance: &Value, minimum: &Value, exclusive: bool) -> String {
    let cmp = if exclusive { "less than or equal to" } else { "less than" };
    format!("{} is {cmp} the minimum of {}", py_repr(instance), py_repr(minimum))
}

/// `maximum`: `2147483648 is greater than the maximum of 2147483647`.
pub(crate) fn above_maximum(instance: &Value, maximum: &Value, exclusive: bool) -> String {
    let cmp = if exclusive { "greater than or equal to" } else { "greater than" };
    format!("{} is {cmp} the maximum of {}", py_repr(instance), py_repr(maximum))
}

/// `multipleOf`: `7 is not a multiple of 2` (the divisor is `str()`-ed, which
/// for numbers is the same as `repr()`).
pub(crate) fn not_multiple_of(instance: &Value, divisor: &Value) -> String {
    format!("{} is not a multiple of {}", py_repr(instance), py_repr(divisor))
}

/// `anyOf` / `oneOf` with no match: `None is not valid under any of the given schemas`.
pub(crate) fn not_valid_under_any(instance: &Value) -> String {
    format!("{} is not valid under any of the given schemas", py_repr(instance))
}

/// `oneOf` with several matches: the later matching subschemas first, then
/// the first one, as jsonschema lists them.
pub(crate) fn valid_under_each(instance: &Value, schemas: &[&Value]) -> String {
    let reprs: Vec<String> = schemas.iter().map(|s| py_repr(s)).collect();
    format!("{} is valid under each of {}", py_repr(instance), reprs.join(", "))
}

/// `not`: `'x' should not be valid under {'type': 'string'}`.
pub(crate) fn should_not_be_valid(instance: &Value, schema: &Value) -> String {
    format!("{} should not be valid under {}", py_repr(instance), py_repr(schema))
}

/// A `false` (sub)schema: `False schema does not allow 1`.
pub(crate) fn false_schema(instance: &Value) -> String {
    format!("False schema does not allow {}", py_repr(instance))
}

/// `items: false` after `prefixItems`: `Expected at most 1 item but found 2 extra: [2, 3]`
/// (a single extra element is shown on its own, not in a list).
pub(crate) fn too_many_items(prefix: usize, extra: &Value, extra_count: usize) -> String {
    let noun = if prefix == 1 { "item" } else { "items" };
    format!("Expected at most {prefix} {noun} but found {extra_count} extra: {}", py_repr(extra))
}

/// `contains` with no matching element.
pub(crate) fn contains_none(instance: &Value) -> String {
    format!("{} does not contain items matching the given schema", py_repr(instance))
}

/// `maxContains` exceeded.
pub(crate) fn contains_too_many(max: &Value) -> String {
    format!("Too many items match the given schema (expected at most {})", py_repr(max))
}

/// `minContains` not reached.
pub(crate) fn contains_too_few(min: &Value, matched: usize) -> String {
    format!("Too few items match the given schema (expected at least {} but only {matched} matched)", py_repr(min))
}

/// `dependentRequired`: `'b' is a dependency of 'a'`.
pub(crate) fn dependency_missing(missing: &str, property: &str) -> String {
    format!("{} is a dependency of {}", repr_str(missing), repr_str(property))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wording_matches_python_jsonschema() {
        assert_eq!(not_of_type(&json!("abc"), &["integer"]), "'abc' is not of type 'integer'");
        assert_eq!(not_of_type(&json!(1.5), &["integer", "null"]), "1.5 is not of type 'integer', 'null'");
        assert_eq!(required_property("name"), "'name' is a required property");
        assert_eq!(additional_properties(&["foo"]), "Additional properties are not allowed ('foo' was unexpected)");
        assert_eq!(
            additional_properties(&["a", "b"]),
            "Additional properties are not allowed ('a', 'b' were unexpected)"
        );
        assert_eq!(no_pattern_matches(&["x"], &["^a$", "^b$"]), "'x' does not match any of the regexes: '^a$', '^b$'");
        assert_eq!(no_pattern_matches(&["x", "y"], &["^a$"]), "'x', 'y' do not match any of the regexes: '^a$'");
        assert_eq!(too_short(&json!([]), PyNum::Int(1)), "[] should be non-empty");
        assert_eq!(too_short(&json!("a"), PyNum::Int(2)), "'a' is too short");
        assert_eq!(too_long(&json!("ab"), PyNum::Int(1)), "'ab' is too long");
        assert_eq!(too_long(&json!([1]), PyNum::Int(0)), "[1] is expected to be empty");
        assert_eq!(too_few_properties(&json!({}), PyNum::Float(1.0)), "{} should be non-empty");
        assert_eq!(too_few_properties(&json!({}), PyNum::Int(2)), "{} does not have enough properties");
        assert_eq!(too_many_properties(&json!({"a": 1}), PyNum::Int(0)), "{'a': 1} is expected to be empty");
        assert_eq!(below_minimum(&json!(0), &json!(1), false), "0 is less than the minimum of 1");
        assert_eq!(below_minimum(&json!(1), &json!(1), true), "1 is less than or equal to the minimum of 1");
        assert_eq!(
            above_maximum(&json!(3.40282e39), &json!(3.40282e38), false),
            "3.40282e+39 is greater than the maximum of 3.40282e+38"
        );
        assert_eq!(not_a_format(&json!("harry"), "uuid"), "'harry' is not a 'uuid'");
        assert_eq!(too_many_items(1, &json!([2, 3]), 2), "Expected at most 1 item but found 2 extra: [2, 3]");
    }
}
