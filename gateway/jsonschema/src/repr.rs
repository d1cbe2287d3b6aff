//! Python `repr()` of JSON values.
//!
//! Python jsonschema builds every message with `{instance!r}` / `{value!r}`,
//! and Placement hands those messages to clients verbatim, so a value must be
//! rendered exactly as CPython would render the object `json.loads` produced:
//! `'single-quoted'` strings with Python escapes, `True`/`False`/`None`,
//! `{'key': value}` dicts in insertion order, `[1, 2]` lists, and floats in
//! Python's shortest round-trip form (`1.0`, `1e-05`, `3.40282e+38`).

use serde_json::{Number, Value};

use crate::printable::NON_PRINTABLE;

/// Render `value` as Python's `repr()` of the equivalent Python object.
pub fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

/// Append the Python `repr()` of `value` to `out`.
pub(crate) fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&repr_number(n)),
        Value::String(s) => out.push_str(&repr_str(s)),
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
                out.push_str(&repr_str(key));
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python `repr()` of a JSON number: integers in decimal, floats as
/// [`repr_float`]. JSON integers too large for 64 bits arrive here as floats
/// (serde_json without `arbitrary_precision`), where Python would keep an int.
pub fn repr_number(n: &Number) -> String {
    if let Some(u) = n.as_u64() {
        u.to_string()
    } else if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        repr_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Python `repr(float)`: the shortest digits that round-trip, positional
/// notation when the decimal exponent is in `-4..16` (always with a fractional
/// part, `1.0`), scientific otherwise with a signed, at least two-digit
/// exponent (`1e+16`, `1.5e-05`).
pub fn repr_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".to_owned() } else { "-inf".to_owned() };
    }
    // Rust's `{:e}` yields the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            out.push_str("0.");
            for _ in 0..(-point) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let point = point as usize;
            if digits.len() <= point {
                out.push_str(&digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
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

/// Python `repr(str)`: single quotes unless the text contains `'` and no `"`,
/// backslash escapes for the quote, `\\`, `\t`, `\n`, `\r`, and `\x`/`\u`/`\U`
/// escapes (lower-case hex) for every non-printable code point.
pub fn repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for ch in s.chars() {
        match ch {
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
                let code = c as u32;
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
    out
}

/// Python's `str.isprintable()` for one character.
pub(crate) fn is_printable(c: char) -> bool {
    let code = c as u32;
    if (0x20..0x7f).contains(&code) {
        return true;
    }
    NON_PRINTABLE
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars() {
        assert_eq!(py_repr(&json!(null)), "None");
        assert_eq!(py_repr(&json!(true)), "True");
        assert_eq!(py_repr(&json!(false)), "False");
        assert_eq!(py_repr(&json!(-12)), "-12");
        assert_eq!(py_repr(&json!(18446744073709551615u64)), "18446744073709551615");
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
            assert_eq!(repr_float(f), want, "repr of {f:?}");
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
        assert_eq!(py_repr(&v), "{'b': [1, 2.0, 'x'], 'a': {}, 'c': [], 'd': None}");
    }
}
