//! Property validation and coercion with upstream's rules and texts
//! (`heat/engine/properties.py`, `heat/engine/constraints.py`): unknown
//! keys first, then every schema property in declaration order; each value
//! coerced to its type, then checked against its constraints.

use serde_json::{Map, Number, Value};

use super::schema::{ConstraintKind, NestedSchema, PropertySchema, PropertyType, ResourceSchema};
use crate::error::EngineError;

/// Validated properties: every schema property present (Null when neither
/// given nor defaulted), values coerced to their schema types.
pub type Properties = Map<String, Value>;

/// A validation failure below the resource: the path inside `properties`
/// and upstream's message.
#[derive(Debug, Clone, PartialEq)]
struct Failure {
    path: Vec<String>,
    message: String,
}

impl Failure {
    fn new(message: impl Into<String>) -> Self {
        Failure { path: Vec::new(), message: message.into() }
    }
    fn under(mut self, key: &str) -> Self {
        self.path.insert(0, key.to_string());
        self
    }
}

/// Validates `given` (the resource's resolved `properties`, Null = none)
/// against `schema`. Values the engine could not resolve yet are passed as
/// Null and never fail a type or constraint check.
///
/// Errors are `StackValidationFailed` with upstream's text, e.g.
/// `Property error: resources.r.properties.length: Value 'x' is not an integer`.
pub fn validate_properties(
    schema: &ResourceSchema,
    resource_name: &str,
    given: &Value,
) -> Result<Properties, EngineError> {
    validate_section(&schema.properties, resource_name, "properties", given)
}

/// Validates a resource's resolved `update_policy` section against the
/// plugin's policy schema (upstream `Properties(..., section=UPDATE_POLICY)`),
/// e.g. `Property error: resources.g.update_policy.batch_create.pause_time:
/// -1 is out of range (min: 0, max: None)`.
pub fn validate_update_policy(
    schemas: &[PropertySchema],
    resource_name: &str,
    given: &Value,
) -> Result<Properties, EngineError> {
    validate_section(schemas, resource_name, "update_policy", given)
}

/// One section of a resource (`properties`, `update_policy`) against its
/// schema; a missing section is an empty map.
fn validate_section(
    schemas: &[PropertySchema],
    resource_name: &str,
    section: &str,
    given: &Value,
) -> Result<Properties, EngineError> {
    let empty = Map::new();
    let data = match given {
        Value::Null => &empty,
        Value::Object(m) => m,
        other => {
            let message = format!("\"{}\" is not a map", py_str(other));
            return Err(section_error(resource_name, section, &[], &message));
        }
    };
    validate_map(schemas, data).map_err(|f| section_error(resource_name, section, &f.path, &f.message))
}

/// Heat's `Property error: resources.<name>.properties.<path>: <message>`.
pub(crate) fn property_error(resource_name: &str, path: &[String], message: &str) -> EngineError {
    section_error(resource_name, "properties", path, message)
}

fn section_error(resource_name: &str, section: &str, path: &[String], message: &str) -> EngineError {
    let mut full = vec!["resources".to_string(), resource_name.to_string(), section.to_string()];
    full.extend(path.iter().cloned());
    EngineError::validation(format!("Property error: {}: {}", format_path(&full), message))
}

/// `HeatExceptionWithPath` path text: `a.b[0].c`.
fn format_path(items: &[String]) -> String {
    let mut out = String::new();
    for item in items {
        if !item.is_empty() && item.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{item}]"));
        } else if out.is_empty() {
            out.push_str(item);
        } else {
            out.push('.');
            out.push_str(item);
        }
    }
    out
}

fn validate_map(schemas: &[PropertySchema], data: &Map<String, Value>) -> Result<Properties, Failure> {
    for key in data.keys() {
        if !schemas.iter().any(|s| s.name == key) {
            return Err(Failure::new(format!("Unknown Property {key}")));
        }
    }
    let mut out = Properties::new();
    for prop in schemas {
        let value = match data.get(prop.name) {
            Some(v) => coerce_and_check(prop, v).map_err(|f| f.under(prop.name))?,
            None => match &prop.default {
                Some(d) => coerce(prop, d).map_err(|f| f.under(prop.name))?,
                // Not assigned: no path below `properties`, as upstream.
                None if prop.required => return Err(Failure::new(format!("Property {} not assigned", prop.name))),
                None => Value::Null,
            },
        };
        out.insert(prop.name.to_string(), value);
    }
    Ok(out)
}

fn coerce_and_check(prop: &PropertySchema, value: &Value) -> Result<Value, Failure> {
    if value.is_null() {
        // Unresolved (or explicit null): upstream substitutes the default
        // or the type's empty value and does not check constraints.
        return match &prop.default {
            Some(d) => coerce(prop, d),
            None => Ok(empty_value(prop.kind)),
        };
    }
    let coerced = coerce(prop, value)?;
    check_constraints(prop, &coerced)?;
    Ok(coerced)
}

fn empty_value(kind: PropertyType) -> Value {
    match kind {
        PropertyType::String => Value::String(String::new()),
        PropertyType::Integer | PropertyType::Number => Value::from(0),
        PropertyType::Boolean => Value::Bool(false),
        PropertyType::Map => Value::Object(Map::new()),
        PropertyType::List => Value::Array(Vec::new()),
        PropertyType::Any => Value::Null,
    }
}

/// Converts `value` to the property's type (upstream `Property.get_value`).
fn coerce(prop: &PropertySchema, value: &Value) -> Result<Value, Failure> {
    match prop.kind {
        PropertyType::String => coerce_string(value),
        PropertyType::Integer => coerce_integer(value),
        PropertyType::Number => str_to_num(value).map_err(Failure::new),
        PropertyType::Boolean => coerce_bool(value),
        PropertyType::Map => match value {
            Value::Object(m) => match &prop.schema {
                Some(NestedSchema::MapKeys(keys)) => validate_map(keys, m).map(Value::Object),
                _ => Ok(value.clone()),
            },
            other => Err(Failure::new(format!("\"{}\" is not a map", py_str(other)))),
        },
        PropertyType::List => match value {
            Value::Array(items) => match &prop.schema {
                Some(NestedSchema::ListItems(item)) => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| coerce_and_check(item, v).map_err(|f| f.under(&i.to_string())))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array),
                _ => Ok(value.clone()),
            },
            other => Err(Failure::new(format!("\"{}\" is not a list", py_repr(other)))),
        },
        PropertyType::Any => Ok(value.clone()),
    }
}

fn coerce_string(value: &Value) -> Result<Value, Failure> {
    match value {
        Value::String(_) => Ok(value.clone()),
        Value::Bool(_) => Ok(Value::String(py_str(value))),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(Value::String(n.to_string())),
        Value::Null => Ok(Value::String(String::new())),
        other => Err(Failure::new(format!("Value must be a string; got {}", py_repr(other)))),
    }
}

/// An Integer property holds a 64-bit signed integer: Python's `int()`
/// has no bound, but every integer the engine computes with does, so a
/// value past it is refused in the range constraint's words rather than
/// saturated or wrapped (a `count` of 2**63 must not become anything else).
fn integer_out_of_range(value: &str) -> Failure {
    Failure::new(format!("{value} is out of range (min: {}, max: {})", i64::MIN, i64::MAX))
}

fn coerce_integer(value: &Value) -> Result<Value, Failure> {
    match value {
        Value::Number(n) => {
            if n.is_i64() {
                return Ok(value.clone());
            }
            if n.is_u64() {
                return Err(integer_out_of_range(&n.to_string()));
            }
            // int(1.7) == 1; documents hold no NaN or infinity.
            let f = n.as_f64().unwrap_or(0.0).trunc();
            // -2**63 is exact in f64; 2**63 is the first value past i64.
            if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
                // Exact: a whole number within i64 (checked just above).
                #[allow(clippy::cast_possible_truncation)]
                let whole = f as i64;
                Ok(Value::from(whole))
            } else {
                Err(integer_out_of_range(&py_str(value)))
            }
        }
        Value::Bool(b) => Ok(Value::from(i64::from(*b))),
        Value::String(s) => match parse_py_int(s) {
            Some(i) => Ok(Value::from(i)),
            None if is_py_int_literal(s) => Err(integer_out_of_range(s.trim())),
            None => Err(Failure::new(format!("Value '{s}' is not an integer"))),
        },
        Value::Array(_) => Err(Failure::new(int_type_error("list"))),
        Value::Object(_) => Err(Failure::new(int_type_error("dict"))),
        Value::Null => Ok(Value::from(0)),
    }
}

fn int_type_error(type_name: &str) -> String {
    format!("int() argument must be a string, a bytes-like object or a real number, not '{type_name}'")
}

/// Python `int(str)`: surrounding whitespace, a sign, digits with single
/// underscores between them; None too when the integer is past i64.
pub(crate) fn parse_py_int(s: &str) -> Option<i64> {
    if !is_py_int_literal(s) {
        return None;
    }
    let t = s.trim();
    let unsigned = t.strip_prefix('+').unwrap_or(t);
    // Parsed with its sign, so -2**63 is representable.
    unsigned.replace('_', "").parse::<i64>().ok()
}

/// Whether Python's `int()` accepts `s` (whatever its magnitude).
fn is_py_int_literal(s: &str) -> bool {
    let t = s.trim();
    let digits = t.strip_prefix('-').or_else(|| t.strip_prefix('+')).unwrap_or(t);
    !(digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__"))
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
}

/// Upstream `Schema.str_to_num`: numbers (and booleans) unchanged, strings
/// through `int()` then `float()`.
fn str_to_num(value: &Value) -> Result<Value, String> {
    match value {
        Value::Number(_) | Value::Bool(_) => Ok(value.clone()),
        Value::String(s) => {
            if let Some(i) = parse_py_int(s) {
                return Ok(Value::from(i));
            }
            let t = s.trim().replace('_', "");
            t.parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("could not convert string to float: {}", py_repr(value)))
        }
        Value::Array(_) => Err(int_type_error("list")),
        Value::Object(_) => Err(int_type_error("dict")),
        Value::Null => Ok(Value::from(0)),
    }
}

fn coerce_bool(value: &Value) -> Result<Value, Failure> {
    match value {
        Value::Bool(_) => Ok(value.clone()),
        Value::String(s) => {
            let normalised = s.to_lowercase();
            match normalised.as_str() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(Failure::new(format!("\"{normalised}\" is not a valid boolean"))),
            }
        }
        Value::Null => Ok(Value::Bool(false)),
        other => Err(Failure::new(format!("\"{}\" is not a valid boolean", py_str(other)))),
    }
}

fn check_constraints(prop: &PropertySchema, value: &Value) -> Result<(), Failure> {
    for c in &prop.constraints {
        let error = match &c.kind {
            ConstraintKind::Range { min, max } => check_range(value, min.as_ref(), max.as_ref()),
            ConstraintKind::Length { min, max } => check_length(value, *min, *max),
            ConstraintKind::AllowedValues(allowed) => check_allowed(prop.kind, value, allowed),
            ConstraintKind::AllowedPattern(pattern) => check_pattern(value, pattern),
            // The service-free ones here; those that ask a service once
            // the whole stack validated (see `constraints`).
            ConstraintKind::Custom(name) => super::constraints::local_refusal(name, value),
        };
        if let Some(message) = error {
            return Err(Failure::new(c.description.map(str::to_string).unwrap_or(message)));
        }
    }
    Ok(())
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::String(_) => str_to_num(v).ok().and_then(|n| n.as_f64()),
        _ => None,
    }
}

fn bound_text(b: Option<&Value>) -> String {
    b.map(py_str).unwrap_or_else(|| "None".to_string())
}

fn check_range(value: &Value, min: Option<&Value>, max: Option<&Value>) -> Option<String> {
    let v = as_f64(value)?;
    let below = min.and_then(as_f64).is_some_and(|m| v < m);
    let above = max.and_then(as_f64).is_some_and(|m| v > m);
    (below || above)
        .then(|| format!("{} is out of range (min: {}, max: {})", py_str(value), bound_text(min), bound_text(max)))
}

fn check_length(value: &Value, min: Option<u64>, max: Option<u64>) -> Option<String> {
    let len = match value {
        Value::String(s) => s.chars().count(),
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => return None,
    } as u64;
    let bad = min.is_some_and(|m| len < m) || max.is_some_and(|m| len > m);
    let text = |b: Option<u64>| b.map(|v| v.to_string()).unwrap_or_else(|| "None".into());
    bad.then(|| format!("length ({len}) is out of range (min: {}, max: {})", text(min), text(max)))
}

fn check_allowed(kind: PropertyType, value: &Value, allowed: &[Value]) -> Option<String> {
    let same = |a: &Value, b: &Value| match kind {
        PropertyType::String => py_str(a) == py_str(b),
        PropertyType::Integer | PropertyType::Number => match (as_f64(a), as_f64(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
        _ => a == b,
    };
    let ok = match value {
        Value::Array(items) => items.iter().all(|v| allowed.contains(v)),
        v => allowed.iter().any(|a| same(v, a)),
    };
    (!ok).then(|| {
        let list: Vec<String> = allowed.iter().map(py_json_dumps).collect();
        format!("{} is not an allowed value [{}]", py_json_dumps(value), list.join(", "))
    })
}

fn check_pattern(value: &Value, pattern: &str) -> Option<String> {
    let text = py_str(value);
    let matched = regex::Regex::new(&format!("^(?:{pattern})"))
        .ok()
        .and_then(|re| re.find(&text).map(|m| m.end() == text.len()))
        .unwrap_or(false);
    (!matched).then(|| format!("\"{text}\" does not match pattern \"{pattern}\""))
}

// `repr()`, `str()` and `json.dumps()` as Heat prints values in messages.
pub(crate) use keelson_pyfmt::{repr as py_repr, str_of as py_str};

/// Python `json.dumps()` with its default separators and ASCII escaping.
pub(crate) fn py_json_dumps(value: &Value) -> String {
    keelson_pyfmt::json_dumps(value, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::schema::{Constraint, SupportStatus};
    use serde_json::json;

    fn schema(props: Vec<PropertySchema>) -> ResourceSchema {
        ResourceSchema {
            properties: props,
            attributes: vec![],
            support_status: SupportStatus::default(),
            description: "",
        }
    }

    fn err(s: &ResourceSchema, v: Value) -> String {
        let e = validate_properties(s, "r", &v).unwrap_err();
        assert_eq!(e.heat_type(), "StackValidationFailed");
        assert_eq!(e.http_status(), 400);
        e.message()
    }

    #[test]
    fn integers_past_64_bits_are_refused_not_saturated() {
        let s = schema(vec![PropertySchema::new("n", PropertyType::Integer, "")]);
        let range = "is out of range (min: -9223372036854775808, max: 9223372036854775807)";
        let text: Value = serde_json::from_str("{\"n\": 18446744073709551616}").unwrap();
        let at = |v: &str| format!("Property error: resources.r.properties.n: {v} {range}");
        assert_eq!(err(&s, text), at("1.8446744073709552e+19"));
        assert_eq!(err(&s, json!({"n": 9_223_372_036_854_775_808u64})), at("9223372036854775808"));
        assert_eq!(err(&s, json!({"n": "9223372036854775808"})), at("9223372036854775808"));
        assert_eq!(err(&s, json!({"n": 1e20})), at("1e+20"));
        let ok = |v: Value| validate_properties(&s, "r", &json!({"n": v})).unwrap()["n"].clone();
        assert_eq!(ok(json!(i64::MIN)), json!(i64::MIN));
        assert_eq!(ok(json!("-9223372036854775808")), json!(i64::MIN));
        assert_eq!(ok(json!(-9.223_372_036_854_776e18)), json!(i64::MIN));
        assert_eq!(ok(json!(1.7)), json!(1));
        assert_eq!(
            err(&s, json!({"n": "1_0__0"})),
            "Property error: resources.r.properties.n: Value '1_0__0' is not an integer"
        );
    }

    #[test]
    fn update_policies_are_validated_under_their_section() {
        let pause =
            PropertySchema::new("pause_time", PropertyType::Number, "").constraint(Constraint::range(Some(0), None));
        let s = vec![PropertySchema::new("batch", PropertyType::Map, "").map_of(vec![pause])];
        let e = validate_update_policy(&s, "g", &json!({"batch": {"pause_time": -1}})).unwrap_err();
        assert_eq!(
            e.message(),
            "Property error: resources.g.update_policy.batch.pause_time: -1 is out of range (min: 0, max: None)"
        );
        assert!(validate_update_policy(&s, "g", &json!({"batch": {"pause_time": 1e20}})).is_ok());
    }

    #[test]
    fn unknown_and_missing_properties() {
        let s = schema(vec![PropertySchema::new("a", PropertyType::String, "").required()]);
        assert_eq!(err(&s, json!({"b": 1})), "Property error: resources.r.properties: Unknown Property b");
        assert_eq!(err(&s, json!({})), "Property error: resources.r.properties: Property a not assigned");
        assert_eq!(err(&s, Value::Null), "Property error: resources.r.properties: Property a not assigned");
    }

    #[test]
    fn integer_coercion_and_messages() {
        let s = schema(vec![
            PropertySchema::new("n", PropertyType::Integer, "").constraint(Constraint::range(Some(1), Some(512)))
        ]);
        assert_eq!(
            err(&s, json!({"n": "abc"})),
            "Property error: resources.r.properties.n: Value 'abc' is not an integer"
        );
        assert_eq!(
            err(&s, json!({"n": 0})),
            "Property error: resources.r.properties.n: 0 is out of range (min: 1, max: 512)"
        );
        assert_eq!(err(&s, json!({"n": [1]})), "Property error: resources.r.properties.n: int() argument must be a string, a bytes-like object or a real number, not 'list'");
        assert_eq!(validate_properties(&s, "r", &json!({"n": " 12 "})).unwrap()["n"], json!(12));
        assert_eq!(validate_properties(&s, "r", &json!({"n": 7.9})).unwrap()["n"], json!(7));
    }

    #[test]
    fn string_number_bool_map_list() {
        let s = schema(vec![
            PropertySchema::new("s", PropertyType::String, ""),
            PropertySchema::new("x", PropertyType::Number, ""),
            PropertySchema::new("b", PropertyType::Boolean, "").default_value(false),
            PropertySchema::new("m", PropertyType::Map, ""),
            PropertySchema::new("l", PropertyType::List, ""),
        ]);
        let ok = validate_properties(&s, "r", &json!({"s": 5, "x": "1.5", "b": "TRUE"})).unwrap();
        assert_eq!(ok["s"], json!("5"));
        assert_eq!(ok["x"], json!(1.5));
        assert_eq!(ok["b"], json!(true));
        assert_eq!(ok["m"], Value::Null);
        assert_eq!(
            err(&s, json!({"s": {"a": 1}})),
            "Property error: resources.r.properties.s: Value must be a string; got {'a': 1}"
        );
        assert_eq!(
            err(&s, json!({"x": "abc"})),
            "Property error: resources.r.properties.x: could not convert string to float: 'abc'"
        );
        assert_eq!(
            err(&s, json!({"b": "yes"})),
            "Property error: resources.r.properties.b: \"yes\" is not a valid boolean"
        );
        assert_eq!(err(&s, json!({"b": 1})), "Property error: resources.r.properties.b: \"1\" is not a valid boolean");
        assert_eq!(err(&s, json!({"m": [1, 2]})), "Property error: resources.r.properties.m: \"[1, 2]\" is not a map");
        assert_eq!(err(&s, json!({"l": "abc"})), "Property error: resources.r.properties.l: \"'abc'\" is not a list");
    }

    #[test]
    fn nested_paths_and_defaults() {
        let item = PropertySchema::new("*", PropertyType::Map, "").map_of(vec![
            PropertySchema::new("class", PropertyType::String, "")
                .default_value("lettersdigits")
                .constraint(Constraint::allowed_values(["letters", "digits"])),
            PropertySchema::new("min", PropertyType::Integer, "").default_value(1),
        ]);
        let s = schema(vec![PropertySchema::new("cc", PropertyType::List, "").list_of(item)]);
        assert_eq!(
            err(&s, json!({"cc": [{"class": "letters"}, {"class": "bogus"}]})),
            "Property error: resources.r.properties.cc[1].class: \"bogus\" is not an allowed value [\"letters\", \"digits\"]"
        );
        assert_eq!(
            err(&s, json!({"cc": [{"klass": "letters"}]})),
            "Property error: resources.r.properties.cc[0]: Unknown Property klass"
        );
        let ok = validate_properties(&s, "r", &json!({"cc": [{"class": "digits"}]})).unwrap();
        assert_eq!(ok["cc"], json!([{"class": "digits", "min": 1}]));
    }

    #[test]
    fn unresolved_values_pass() {
        let s = schema(vec![
            PropertySchema::new("n", PropertyType::Integer, "").required().constraint(Constraint::range(Some(1), None)),
            PropertySchema::new("s", PropertyType::String, "").constraint(Constraint::length(Some(3), None)),
        ]);
        let ok = validate_properties(&s, "r", &json!({"n": null, "s": null})).unwrap();
        assert_eq!(ok["n"], json!(0));
        assert_eq!(
            err(&s, json!({"n": 2, "s": "ab"})),
            "Property error: resources.r.properties.s: length (2) is out of range (min: 3, max: None)"
        );
    }

    #[test]
    fn pattern_and_description_override() {
        let s = schema(vec![
            PropertySchema::new("p", PropertyType::String, "").constraint(Constraint::allowed_pattern("[a-z]+")),
            PropertySchema::new("q", PropertyType::String, "")
                .constraint(Constraint::allowed_pattern("[a-z]+").with_description("lower case only")),
        ]);
        assert_eq!(
            err(&s, json!({"p": "abC"})),
            "Property error: resources.r.properties.p: \"abC\" does not match pattern \"[a-z]+\""
        );
        assert_eq!(err(&s, json!({"q": "1"})), "Property error: resources.r.properties.q: lower case only");
    }

    #[test]
    fn python_reprs() {
        assert_eq!(py_repr(&json!(1e20)), "1e+20");
        assert_eq!(py_repr(&json!(2.0)), "2.0");
        assert_eq!(py_repr(&json!("it's")), "\"it's\"");
        assert_eq!(py_json_dumps(&json!({"a": [1, "é"]})), "{\"a\": [1, \"\\u00e9\"]}");
        assert_eq!(format_path(&["resources".into(), "0".into(), "properties".into()]), "resources[0].properties");
    }
}
