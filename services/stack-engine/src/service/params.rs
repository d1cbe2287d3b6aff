//! Query-string and body-field parsing with heat-api's rules and texts
//! (`heat/common/param_utils.py`, `heat/api/openstack/v1/util.py`).

use serde_json::Value;

use crate::error::EngineError;

/// Query parameters as given; a repeated key keeps every value in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryParams(pub Vec<(String, Vec<String>)>);

impl QueryParams {
    pub fn new(pairs: Vec<(String, Vec<String>)>) -> Self {
        QueryParams(pairs)
    }

    /// Builds from `key=value` pairs (tests, internal callers).
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let mut q = QueryParams::default();
        for (k, v) in pairs {
            match q.0.iter_mut().find(|(key, _)| key == k) {
                Some((_, values)) => values.push(v.to_string()),
                None => q.0.push((k.to_string(), vec![v.to_string()])),
            }
        }
        q
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.iter().any(|(k, v)| k == key && !v.is_empty())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0.iter().filter(|(k, _)| k == key).flat_map(|(_, v)| v.iter().cloned()).collect()
    }

    /// webob's `params[key]`: the last value given.
    pub fn single(&self, key: &str) -> Option<String> {
        self.all(key).pop()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter(|(_, v)| !v.is_empty()).map(|(k, _)| k.as_str())
    }

    /// Every (key, value) pair in order, for echoing the query string.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.0.iter().flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone()))).collect()
    }

    /// A boolean parameter with `extract_bool`'s rule; absent → `default`.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, EngineError> {
        match self.single(key) {
            Some(v) => extract_bool(key, &Value::String(v)),
            None => Ok(default),
        }
    }

    /// A non-negative integer parameter (`extract_int`); absent → None.
    pub fn int(&self, key: &str) -> Result<Option<i64>, EngineError> {
        match self.single(key) {
            Some(v) => extract_int(key, &Value::String(v)).map(Some),
            None => Ok(None),
        }
    }
}

/// 400 `HTTPBadRequest` with the given text: what heat-api's controllers
/// raise for malformed requests.
pub fn bad_request(message: impl Into<String>) -> EngineError {
    EngineError::BadRequest(message.into())
}

/// `param_utils.extract_bool`: only true/false (any case) are accepted.
pub fn extract_bool(name: &str, value: &Value) -> Result<bool, EngineError> {
    let text = python_str(value);
    match text.to_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad_request(format!(
            "Unrecognized value \"{text}\" for \"{name}\", acceptable values are: true, false."
        ))),
    }
}

/// `param_utils.extract_int` with allow_zero and no negatives.
pub fn extract_int(name: &str, value: &Value) -> Result<i64, EngineError> {
    let text = python_str(value);
    let parsed = match value {
        Value::Number(n) => n.as_i64(),
        _ => text.trim().parse::<i64>().ok(),
    };
    let Some(n) = parsed else {
        return Err(bad_request(format!("Only integer is acceptable by '{name}'.")));
    };
    if n < 0 {
        return Err(bad_request(format!(
            "Value '{text}' is invalid for '{name}' which only accepts non-negative integer."
        )));
    }
    Ok(n)
}

/// `param_utils.extract_tags`: a comma-separated string, each tag at most
/// 80 characters.
pub fn extract_tags(subject: &str) -> Result<Vec<String>, EngineError> {
    let tags: Vec<String> = subject.split(',').map(str::to_string).collect();
    check_tags(&tags)?;
    Ok(tags)
}

/// The tag rules of `engine/api.py:extract_args` for a list given in a body.
pub fn tags_from_body(value: &Value) -> Result<Option<Vec<String>>, EngineError> {
    let list = match value {
        Value::Null => return Ok(None),
        Value::String(s) => return extract_tags(s).map(Some),
        Value::Array(items) => items,
        other => return Err(EngineError::ValueError(format!("Invalid tags, not a list: {}", python_str(other)))),
    };
    let mut tags = Vec::with_capacity(list.len());
    for item in list {
        let Some(tag) = item.as_str() else {
            return Err(EngineError::ValueError(format!("Invalid tag, \"{}\" is not a string", python_str(item))));
        };
        if tag.contains(',') {
            return Err(EngineError::ValueError(format!("Invalid tag, \"{tag}\" contains a comma")));
        }
        tags.push(tag.to_string());
    }
    check_tags(&tags)?;
    Ok(Some(tags))
}

fn check_tags(tags: &[String]) -> Result<(), EngineError> {
    match tags.iter().find(|t| t.chars().count() > 80) {
        Some(long) => Err(bad_request(format!("Invalid tag, \"{long}\" is longer than 80 characters"))),
        None => Ok(()),
    }
}

/// How Python's `str()` shows a JSON value in messages.
pub use keelson_pyfmt::str_of as python_str;

/// A Python list of strings as `str(list)` prints it: `['a', 'b']`.
pub fn python_list(items: &[String]) -> String {
    keelson_pyfmt::repr_str_list(items)
}

/// A Python set of strings as `str(set)` prints it: `{'a', 'b'}` (in the
/// order given: Python's own order depends on the string hashes).
pub fn python_set(items: &[String]) -> String {
    keelson_pyfmt::repr_str_set(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bools_accept_only_true_and_false() {
        assert!(extract_bool("x", &json!("TRUE")).unwrap());
        assert!(!extract_bool("x", &json!(false)).unwrap());
        let e = extract_bool("show_deleted", &json!("yes")).unwrap_err();
        assert_eq!(e.message(), "Unrecognized value \"yes\" for \"show_deleted\", acceptable values are: true, false.");
        assert_eq!(e.heat_type(), "HTTPBadRequest");
    }

    #[test]
    fn ints_refuse_text_and_negatives() {
        assert_eq!(extract_int("limit", &json!("3")).unwrap(), 3);
        assert_eq!(extract_int("limit", &json!("x")).unwrap_err().message(), "Only integer is acceptable by 'limit'.");
        assert_eq!(
            extract_int("limit", &json!("-1")).unwrap_err().message(),
            "Value '-1' is invalid for 'limit' which only accepts non-negative integer."
        );
    }

    #[test]
    fn tags_from_string_or_list() {
        assert_eq!(tags_from_body(&json!("a,b")).unwrap(), Some(vec!["a".into(), "b".into()]));
        assert_eq!(tags_from_body(&json!(["a"])).unwrap(), Some(vec!["a".into()]));
        assert!(tags_from_body(&json!(["a,b"])).is_err());
        assert!(extract_tags(&"x".repeat(81)).is_err());
    }

    #[test]
    fn query_keeps_repeated_values_and_last_wins() {
        let q = QueryParams::from_pairs(&[("a", "1"), ("a", "2")]);
        assert_eq!(q.all("a"), vec!["1", "2"]);
        assert_eq!(q.single("a").as_deref(), Some("2"));
    }
}
