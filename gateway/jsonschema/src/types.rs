//! JSON Schema primitive types, checked like jsonschema's draft 2020-12 type
//! checker (the one `jsonschema.validate` picks for Placement's schemas,
//! which carry no `$schema`): booleans are not numbers, and a float with no
//! fractional part (`1.0`) is an integer.

use serde_json::Value;

use crate::number::PyNum;

/// One of the seven JSON Schema type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Array,
    Boolean,
    Integer,
    Null,
    Number,
    Object,
    String,
}

impl JsonType {
    /// Parse a `type` keyword entry; `None` for names the spec does not know.
    pub fn from_name(name: &str) -> Option<JsonType> {
        Some(match name {
            "array" => JsonType::Array,
            "boolean" => JsonType::Boolean,
            "integer" => JsonType::Integer,
            "null" => JsonType::Null,
            "number" => JsonType::Number,
            "object" => JsonType::Object,
            "string" => JsonType::String,
            _ => return None,
        })
    }

    /// The keyword spelling, as quoted in "is not of type" messages.
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Array => "array",
            JsonType::Boolean => "boolean",
            JsonType::Integer => "integer",
            JsonType::Null => "null",
            JsonType::Number => "number",
            JsonType::Object => "object",
            JsonType::String => "string",
        }
    }

    /// Does `instance` have this type?
    pub fn matches(self, instance: &Value) -> bool {
        match (self, instance) {
            (JsonType::Array, Value::Array(_)) => true,
            (JsonType::Boolean, Value::Bool(_)) => true,
            (JsonType::Null, Value::Null) => true,
            (JsonType::Number, Value::Number(_)) => true,
            (JsonType::Object, Value::Object(_)) => true,
            (JsonType::String, Value::String(_)) => true,
            (JsonType::Integer, Value::Number(n)) => PyNum::from_number(n).is_integral(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integer_follows_draft_2020_12_checker() {
        assert!(JsonType::Integer.matches(&json!(3)));
        assert!(JsonType::Integer.matches(&json!(1.0)));
        assert!(!JsonType::Integer.matches(&json!(1.5)));
        assert!(!JsonType::Integer.matches(&json!(true)));
        assert!(!JsonType::Number.matches(&json!(false)));
        assert!(JsonType::Number.matches(&json!(1.5)));
    }
}
