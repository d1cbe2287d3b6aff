//! Python's way of printing values (str, repr, json.dumps, truthiness):
//! Heat's messages and displayed values are produced by Python, so texts
//! that embed values must format them the same way.

use serde_json::Value;

/// Python truthiness of a JSON value.
pub(crate) fn is_falsy(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

/// Python's repr() of a str: single quotes unless the text has only
/// single quotes; backslashes, newlines and tabs escaped.
pub(crate) fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's str() of a JSON value (True/False/None, 1.0).
pub(crate) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        _ => py_repr(v),
    }
}

/// Python's repr() of a JSON value.
pub(crate) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("'{s}'"),
        Value::Array(a) => format!("[{}]", a.iter().map(py_repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => {
            format!("{{{}}}", m.iter().map(|(k, v)| format!("'{k}': {}", py_repr(v))).collect::<Vec<_>>().join(", "))
        }
    }
}

/// Python's json.dumps(v, sort_keys=True): ", " and ": " separators,
/// non-ASCII escaped.
pub(crate) fn py_json_dumps(v: &Value) -> String {
    py_json_dumps_with(v, true)
}

/// Python's json.dumps(v), keys sorted or in their given order.
pub(crate) fn py_json_dumps_with(v: &Value, sort_keys: bool) -> String {
    match v {
        Value::Array(a) => {
            format!("[{}]", a.iter().map(|x| py_json_dumps_with(x, sort_keys)).collect::<Vec<_>>().join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            if sort_keys {
                keys.sort();
            }
            let entries: Vec<String> = keys
                .iter()
                .map(|k| format!("{}: {}", ascii_json_string(k), py_json_dumps_with(&m[k.as_str()], sort_keys)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::String(s) => ascii_json_string(s),
        other => other.to_string(),
    }
}

fn ascii_json_string(s: &str) -> String {
    let encoded = Value::String(s.to_string()).to_string();
    let mut out = String::with_capacity(encoded.len());
    for c in encoded.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}
