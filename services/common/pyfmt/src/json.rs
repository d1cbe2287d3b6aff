//! Python's `json` module: `json.dumps()` output and `json.loads()` errors.

use serde_json::Value;

use crate::float_repr;

/// `json.dumps(value)` with the defaults keelson's callers use: `", "` and
/// `": "` separators, `ensure_ascii` escapes, keys in their given order or
/// sorted (`sort_keys=True`).
pub fn json_dumps(value: &Value, sort_keys: bool) -> String {
    let mut out = String::new();
    write_dumps(value, sort_keys, &mut out);
    out
}

fn write_dumps(value: &Value, sort_keys: bool, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => out.push_str(&u.to_string()),
            (None, Some(i)) => out.push_str(&i.to_string()),
            (None, None) => out.push_str(&json_float(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => write_json_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_dumps(item, sort_keys, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(key, out);
                out.push_str(": ");
                write_dumps(item, sort_keys, out);
            }
            out.push('}');
        }
    }
}

/// A float as `json.dumps` writes it: `repr()`, but `NaN`/`Infinity`.
pub fn json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
    } else {
        float_repr(f)
    }
}

/// A string as `json.dumps` (ensure_ascii) writes it.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_json_str(s, &mut out);
    out
}

fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            // Everything outside ' '..='~' (0x7f included) as UTF-16 units.
            c if !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The message CPython's `json.loads(text)` raises for a document serde_json
/// rejected: `"<what>: line L column C (char P)"`, positions in code points.
///
/// The text is rescanned with CPython's decoder rules to find its first
/// defect. Documents Python accepts but serde_json does not (`NaN`, numbers
/// out of range, nesting past serde's limit) get `Expecting value` where
/// serde_json stopped.
pub fn json_loads_error(text: &str, e: &serde_json::Error) -> String {
    let chars: Vec<char> = text.chars().collect();
    let (what, pos) = match scan_document(&chars) {
        Err(defect) => defect,
        Ok(()) => {
            let (line, column) = (e.line().max(1), e.column().max(1));
            let before: usize = text.split('\n').take(line - 1).map(|l| l.chars().count() + 1).sum();
            ("Expecting value", (before + column - 1).min(chars.len()))
        }
    };
    with_position(what, &chars, pos)
}

/// [`json_loads_error`] for a request body as received (the one copy the
/// gateway's two APIs share); bytes that are not UTF-8 are read as U+FFFD.
pub fn json_loads_bytes_error(body: &[u8], e: &serde_json::Error) -> String {
    json_loads_error(&String::from_utf8_lossy(body), e)
}

/// `JSONDecodeError`'s text: 1-based line, 1-based column, 0-based char.
fn with_position(what: &str, chars: &[char], pos: usize) -> String {
    let before = &chars[..pos.min(chars.len())];
    let line = before.iter().filter(|c| **c == '\n').count() + 1;
    let column = match before.iter().rposition(|c| *c == '\n') {
        Some(newline) => pos - newline,
        None => pos + 1,
    };
    format!("{what}: line {line} column {column} (char {pos})")
}

/// A defect: CPython's message and the position it names.
type Defect = (&'static str, usize);

fn scan_document(s: &[char]) -> Result<(), Defect> {
    if s.first() == Some(&'\u{feff}') {
        return Err(("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0));
    }
    let start = skip_ws(s, 0);
    let end = skip_ws(s, scan_value(s, start)?);
    if end != s.len() {
        return Err(("Extra data", end));
    }
    Ok(())
}

/// JSON's whitespace as Python's decoder knows it.
fn skip_ws(s: &[char], mut i: usize) -> usize {
    while matches!(s.get(i), Some(' ' | '\t' | '\n' | '\r')) {
        i += 1;
    }
    i
}

fn starts_with(s: &[char], i: usize, word: &str) -> bool {
    let word: Vec<char> = word.chars().collect();
    s.get(i..i + word.len()) == Some(word.as_slice())
}

/// One value at `i`; returns the index after it.
fn scan_value(s: &[char], i: usize) -> Result<usize, Defect> {
    const EXPECTING_VALUE: &str = "Expecting value";
    match s.get(i) {
        None => Err((EXPECTING_VALUE, i)),
        Some('"') => scan_string(s, i + 1),
        Some('{') => scan_object(s, i + 1),
        Some('[') => scan_array(s, i + 1),
        Some(_) => {
            for word in ["null", "true", "false", "NaN", "Infinity", "-Infinity"] {
                if starts_with(s, i, word) {
                    return Ok(i + word.chars().count());
                }
            }
            scan_number(s, i).ok_or((EXPECTING_VALUE, i))
        }
    }
}

/// `-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?`, or `None` when nothing matches.
fn scan_number(s: &[char], i: usize) -> Option<usize> {
    let digits = |mut at: usize| {
        let from = at;
        while s.get(at).is_some_and(char::is_ascii_digit) {
            at += 1;
        }
        (at > from).then_some(at)
    };
    let mut at = if s.get(i) == Some(&'-') { i + 1 } else { i };
    at = match s.get(at) {
        Some('0') => at + 1,
        Some('1'..='9') => digits(at)?,
        _ => return None,
    };
    if s.get(at) == Some(&'.') {
        if let Some(after) = digits(at + 1) {
            at = after;
        }
    }
    if matches!(s.get(at), Some('e' | 'E')) {
        let sign = usize::from(matches!(s.get(at + 1), Some('+' | '-')));
        if let Some(after) = digits(at + 1 + sign) {
            at = after;
        }
    }
    Some(at)
}

fn scan_object(s: &[char], mut i: usize) -> Result<usize, Defect> {
    const PROPERTY_NAME: &str = "Expecting property name enclosed in double quotes";
    i = skip_ws(s, i);
    if s.get(i) == Some(&'}') {
        return Ok(i + 1);
    }
    loop {
        if s.get(i) != Some(&'"') {
            return Err((PROPERTY_NAME, i));
        }
        i = skip_ws(s, scan_string(s, i + 1)?);
        if s.get(i) != Some(&':') {
            return Err(("Expecting ':' delimiter", i));
        }
        i = skip_ws(s, scan_value(s, skip_ws(s, i + 1))?);
        match s.get(i) {
            Some('}') => return Ok(i + 1),
            Some(',') => i = skip_ws(s, i + 1),
            _ => return Err(("Expecting ',' delimiter", i)),
        }
    }
}

fn scan_array(s: &[char], mut i: usize) -> Result<usize, Defect> {
    i = skip_ws(s, i);
    if s.get(i) == Some(&']') {
        return Ok(i + 1);
    }
    loop {
        i = skip_ws(s, scan_value(s, i)?);
        match s.get(i) {
            Some(']') => return Ok(i + 1),
            Some(',') => i = skip_ws(s, i + 1),
            _ => return Err(("Expecting ',' delimiter", i)),
        }
    }
}

/// A string's body from `i` (after the opening quote); strict, as
/// `json.loads` is by default.
fn scan_string(s: &[char], mut i: usize) -> Result<usize, Defect> {
    const UNTERMINATED: &str = "Unterminated string starting at";
    let begin = i - 1;
    loop {
        match s.get(i) {
            None => return Err((UNTERMINATED, begin)),
            Some('"') => return Ok(i + 1),
            Some(c) if u32::from(*c) < 0x20 => return Err(("Invalid control character at", i)),
            Some('\\') => match s.get(i + 1) {
                None => return Err((UNTERMINATED, begin)),
                Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => i += 2,
                Some('u') => {
                    let unit = hex4(s, i + 1)?;
                    i += 6;
                    // A high surrogate takes a following `\u` escape with it.
                    if (0xd800..0xdc00).contains(&unit) && s.get(i) == Some(&'\\') && s.get(i + 1) == Some(&'u') {
                        let low = hex4(s, i + 1)?;
                        if (0xdc00..0xe000).contains(&low) {
                            i += 6;
                        }
                    }
                }
                Some(_) => return Err(("Invalid \\escape", i)),
            },
            Some(_) => i += 1,
        }
    }
}

/// The four hex digits after the `u` at `u`. CPython's scanner also wants a
/// character after them (an unterminated `"\u1234` is a bad escape).
fn hex4(s: &[char], u: usize) -> Result<u32, Defect> {
    const BAD_UNICODE: &str = "Invalid \\uXXXX escape";
    if u + 5 >= s.len() {
        return Err((BAD_UNICODE, u));
    }
    s[u + 1..u + 5].iter().try_fold(0u32, |acc, c| c.to_digit(16).map(|d| acc * 16 + d)).ok_or((BAD_UNICODE, u))
}
