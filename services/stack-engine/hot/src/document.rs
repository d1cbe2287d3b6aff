//! Template and environment text (YAML or JSON) to a JSON value, as Heat's
//! template_format.parse: dates stay strings, empty text is an empty map.

use crate::TemplateError;
use serde_json::{Map, Number, Value};

/// Parses template or environment text. JSON when it starts with '{',
/// otherwise YAML (a superset). The result must be a mapping.
pub fn parse_document(text: &str) -> Result<Value, TemplateError> {
    // Only the start is inspected: stripping would break the indentation
    // of an indented YAML document.
    if text.trim_start().starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            return require_mapping(v);
        }
    }
    let yaml: serde_yaml::Value = serde_yaml::from_str(text)
        .map_err(|e| TemplateError::new("HTTPBadRequest", format!("Error parsing template [root stack] {e}")))?;
    require_mapping(yaml_to_json(yaml))
}

fn require_mapping(v: Value) -> Result<Value, TemplateError> {
    match v {
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) => Ok(v),
        _ => Err(TemplateError::new("HTTPBadRequest", "The template is not a JSON object or YAML mapping.")),
    }
}

/// YAML values as JSON; non-string keys become their text (as json.dumps
/// would render Python's keys).
pub(crate) fn yaml_to_json(y: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                n.as_f64().and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match yaml_to_json(k) {
                    Value::String(s) => s,
                    Value::Null => "null".to_string(),
                    Value::Bool(b) => {
                        if b {
                            "True".into()
                        } else {
                            "False".into()
                        }
                    }
                    other => other.to_string(),
                };
                out.insert(key, yaml_to_json(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => yaml_to_json(t.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_dates_stay_strings() {
        let v = parse_document("heat_template_version: 2013-05-23\nresources: {}\n").unwrap();
        assert_eq!(v["heat_template_version"], "2013-05-23");
    }

    #[test]
    fn json_and_empty() {
        assert_eq!(parse_document("{\"a\": 1}").unwrap()["a"], 1);
        assert_eq!(parse_document("").unwrap(), Value::Object(Map::new()));
    }

    #[test]
    fn bad_yaml_is_reported() {
        let e = parse_document("a: [1, 2\n").unwrap_err();
        assert!(e.message.starts_with("Error parsing template [root stack]"), "{}", e.message);
        let e = parse_document("- 1\n- 2\n").unwrap_err();
        assert_eq!(e.message, "The template is not a JSON object or YAML mapping.");
    }
}
