//! A block-style YAML text of a JSON value, laid out as PyYAML's
//! `safe_dump(default_flow_style=False)` lays it out (mappings in the given
//! order, sequences not indented under their key); a string is plain only
//! when reading it back gives that string, else quoted.

use serde_json::Value;

use crate::resolve::{resolve_plain, Implicit};

/// `value` as block-style YAML, ending in a newline.
pub fn to_block_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        other => {
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
    out
}

fn is_block(value: &Value) -> bool {
    match value {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

fn mapping(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    for (i, (key, value)) in m.iter().enumerate() {
        // The first entry of a mapping inside a sequence item follows "- ".
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&string(key));
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                mapping(out, inner, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(out, items, indent);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn sequence(out: &mut String, items: &[Value], indent: usize) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 || !out.ends_with("- ") {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if is_block(item) => mapping(out, inner, indent + 2),
            Value::Array(inner) if is_block(item) => sequence(out, inner, indent + 2),
            other => {
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn inline(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => float(f),
            _ => n.to_string(),
        },
        Value::String(s) => string(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// PyYAML's float form: repr, with an exponent's mantissa always dotted.
fn float(f: f64) -> String {
    let repr = crate::construct::python_float_repr(f);
    match repr.split_once('e') {
        Some((mantissa, exp)) if !mantissa.contains('.') => format!("{mantissa}.0e{exp}"),
        _ => repr,
    }
}

fn plain_allowed(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    let last = s.chars().last().unwrap_or(first);
    resolve_plain(s) == Implicit::Str
        && !"-?:,[]{}#&*!|>'\"%@`".contains(first)
        && !first.is_whitespace()
        && !last.is_whitespace()
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && s.chars().all(|c| (' '..='~').contains(&c))
        && !(s.starts_with("---") || s.starts_with("..."))
}

fn string(s: &str) -> String {
    if plain_allowed(s) {
        return s.to_string();
    }
    if s.chars().all(|c| (' '..='~').contains(&c)) {
        return format!("'{}'", s.replace('\'', "''"));
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFF => out.push_str(&format!("\\x{:02X}", u32::from(c))),
            c if u32::from(c) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load, Limits};
    use serde_json::json;

    #[test]
    fn block_layout_and_quoting() {
        let v = json!({"a": [{"b": 1, "c": [1, 2]}, [3, 4], []], "d": {"e": "yes"}, "f": "x: y", "g": "é\n", "h": 1.0});
        let text = to_block_string(&v);
        assert_eq!(
            text,
            "a:\n- b: 1\n  c:\n  - 1\n  - 2\n- - 3\n  - 4\n- []\nd:\n  e: 'yes'\nf: 'x: y'\ng: \"\\xE9\\n\"\nh: 1.0\n"
        );
        let limits = Limits::for_text(text.len(), 0, 0);
        assert_eq!(load(&text, &limits).ok().flatten(), Some(v));
    }
}
