//! What keelson must print as CPython prints it.
//!
//! OpenStack's services are Python, and clients (and the upstream test
//! suites) compare texts those services build from Python objects: `repr()`
//! and `str()` of values inside messages, `json.dumps()` output, and the
//! `json.loads()` error a malformed body gets. This crate renders the Python
//! object a JSON value decodes to (`dict`, `list`, `str`, `int`, `float`,
//! `True`/`False`/`None`) exactly as CPython 3.11 would. The tests compare
//! with cases CPython generated (`tests/gen_cases.py`).
//!
//! A leaf crate: it depends on serde_json only.

mod json;
mod printable;

pub use json::{json_dumps, json_float, json_loads_bytes_error, json_loads_error, json_str};

use serde_json::{Number, Value};

/// `repr(value)` for the Python object a JSON value decodes to: dicts in
/// insertion order, `'quoted'` strings with Python escapes, `True`/`None`.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

/// Appends `repr(value)` to `out`.
pub fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&repr_number(n)),
        Value::String(s) => write_repr_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr_str(key, out);
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// `str(value)`: a string is itself, everything else its `repr()`.
pub fn str_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// The name of the Python type a JSON value decodes to (`type(v).__name__`).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python truthiness (`bool(value)`): `None`, `False`, zero and empty
/// containers are false.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// `repr()` of a JSON number: integers in decimal, floats as [`float_repr`].
/// Integers past 64 bits reach here as floats (serde_json without
/// `arbitrary_precision`), where Python would keep an int.
pub fn repr_number(n: &Number) -> String {
    if let Some(u) = n.as_u64() {
        u.to_string()
    } else if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float_repr(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// `repr()` of a number Heat holds as an int when it is integral and a float
/// otherwise (its `Number` properties convert that way): `60`, `2.5`, `1e+20`.
pub fn int_or_float_repr(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        // Exact: |f| < 1e15 fits i64 and has no fraction.
        #[allow(clippy::cast_possible_truncation)]
        let whole = f as i64;
        whole.to_string()
    } else {
        float_repr(f)
    }
}

/// `repr(float)`: the shortest digits that round-trip, positional when the
/// decimal exponent is in `-4..16` (always with a fraction: `1.0`),
/// scientific otherwise with a signed two-digit exponent (`1e+16`, `1e-05`).
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as CPython's repr.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    if f.is_sign_negative() {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', exp.unsigned_abs() as usize - 1));
            out.push_str(&digits);
        } else {
            let point = exp.unsigned_abs() as usize + 1;
            if digits.len() <= point {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', point - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    }
    out
}

/// `repr(str)`: single quotes unless the text holds `'` and no `"`; `\\`,
/// `\t`, `\n`, `\r` and the quote escaped; every other code point
/// `str.isprintable()` rejects as `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
pub fn repr_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_repr_str(s, &mut out);
    out
}

/// Appends `repr(s)` to `out`.
pub fn write_repr_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let code = u32::from(c);
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else if code <= 0xffff {
                    out.push_str(&format!("\\u{code:04x}"));
                } else {
                    out.push_str(&format!("\\U{code:08x}"));
                }
            }
        }
    }
    out.push(quote);
}

/// `repr()` of a list of strings: `['a', 'b']`.
pub fn repr_str_list<S: AsRef<str>>(items: &[S]) -> String {
    repr_str_sequence(items, '[', ']')
}

/// `repr()` of a set of strings, in the order given (Python's own order
/// follows the strings' hashes): `{'a', 'b'}`; `set()` when empty.
pub fn repr_str_set<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "set()".to_owned();
    }
    repr_str_sequence(items, '{', '}')
}

fn repr_str_sequence<S: AsRef<str>>(items: &[S], open: char, close: char) -> String {
    let mut out = String::from(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_repr_str(item.as_ref(), &mut out);
    }
    out.push(close);
    out
}

/// CPython's `str.isprintable()` for one character.
pub fn is_printable(c: char) -> bool {
    let code = u32::from(c);
    if (0x20..0x7f).contains(&code) {
        return true;
    }
    printable::NON_PRINTABLE
        .binary_search_by(|&(lo, hi)| {
            if hi < code {
                std::cmp::Ordering::Less
            } else if lo > code {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_err()
}

#[cfg(test)]
// The cases keelson-jsonschema's own `repr` copy was tested with.
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars() {
        assert_eq!(repr(&json!(null)), "None");
        assert_eq!(repr(&json!(true)), "True");
        assert_eq!(repr(&json!(false)), "False");
        assert_eq!(repr(&json!(-12)), "-12");
        assert_eq!(repr(&json!(18446744073709551615u64)), "18446744073709551615");
    }

    #[test]
    fn floats_follow_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-0.0, "-0.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (123456789012345.6, "123456789012345.6"),
            (3.40282e38, "3.40282e+38"),
            (3.40282e39, "3.40282e+39"),
            (1e300, "1e+300"),
            (0.1, "0.1"),
            (2.5e-300, "2.5e-300"),
            (1234.5678, "1234.5678"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "repr of {f:?}");
        }
    }

    #[test]
    fn strings_pick_quotes_and_escape_like_python() {
        assert_eq!(repr_str("abc"), "'abc'");
        assert_eq!(repr_str(""), "''");
        assert_eq!(repr_str("it's"), "\"it's\"");
        assert_eq!(repr_str("it's \"x\""), "'it\\'s \"x\"'");
        assert_eq!(repr_str("a\\b"), "'a\\\\b'");
        assert_eq!(repr_str("l1\nl2\tx\r"), "'l1\\nl2\\tx\\r'");
        assert_eq!(repr_str("\u{7}\u{7f}\u{a0}"), "'\\x07\\x7f\\xa0'");
        assert_eq!(repr_str("\u{200b}é中"), "'\\u200bé中'");
        assert_eq!(repr_str("\u{e0001}😀"), "'\\U000e0001😀'");
    }

    #[test]
    fn containers_keep_insertion_order() {
        let v: Value =
            serde_json::from_str(r#"{"b": [1, 2.0, "x"], "a": {}, "c": [], "d": null}"#).expect("valid json");
        assert_eq!(repr(&v), "{'b': [1, 2.0, 'x'], 'a': {}, 'c': [], 'd': None}");
    }
}
