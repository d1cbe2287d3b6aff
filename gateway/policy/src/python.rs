//! The small slice of Python value semantics that oslo.policy leans on.
//!
//! oslo.policy compares strings produced by Python: `str(value)` of credential
//! and target values, `match % target` substitution and `ast.literal_eval` of
//! a check's kind. To give the same answers we render JSON values the way
//! Python renders the equivalent objects (`None`, `True`, `1.0`, `['a']`...).

use serde_json::{Map, Value};

// `str()`, `repr()`, float `repr()` and truthiness come from keelson-pyfmt.
pub(crate) use keelson_pyfmt::{float_repr as py_float_repr, repr as py_repr, str_of as py_str, truthy as py_truthy};

/// Why `match % target` could not be computed; every case makes a check false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FormatError {
    /// `%(key)s` names a key the target lacks (oslo catches this KeyError).
    MissingKey(String),
    /// Anything Python would reject or that we do not model (oslo would raise).
    Unsupported(String),
}

/// Python's `pattern % target` where `target` is a mapping.
///
/// Supports `%%` and `%(key)[flags][width][.precision]conv` with conversions
/// `s`, `r`, `a`, `d`, `i`, `u`; other forms are reported as unsupported.
pub(crate) fn percent_format(pattern: &str, target: &Map<String, Value>) -> Result<String, FormatError> {
    if !pattern.contains('%') {
        return Ok(pattern.to_owned());
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(&next) = chars.get(i) else {
            return Err(FormatError::Unsupported("incomplete format".into()));
        };
        if next == '%' {
            out.push('%');
            i += 1;
            continue;
        }
        if next != '(' {
            return Err(FormatError::Unsupported("positional conversion with a mapping argument".into()));
        }
        // Python allows nested parentheses inside the key.
        i += 1;
        let mut depth = 1;
        let start = i;
        while i < chars.len() {
            match chars[i] {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        if i >= chars.len() {
            return Err(FormatError::Unsupported("incomplete format key".into()));
        }
        let key: String = chars[start..i].iter().collect();
        i += 1;
        let spec = parse_spec(&chars, &mut i)?;
        let value = target.get(&key).ok_or_else(|| FormatError::MissingKey(key.clone()))?;
        out.push_str(&spec.apply(value)?);
    }
    Ok(out)
}

/// The part of a `%` directive after the mapping key.
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    width: usize,
    precision: Option<usize>,
    conversion: char,
}

fn parse_spec(chars: &[char], i: &mut usize) -> Result<Spec, FormatError> {
    let mut spec =
        Spec { left: false, zero: false, plus: false, space: false, width: 0, precision: None, conversion: 's' };
    while let Some(&c) = chars.get(*i) {
        match c {
            '-' => spec.left = true,
            '0' => spec.zero = true,
            '+' => spec.plus = true,
            ' ' => spec.space = true,
            '#' => {}
            _ => break,
        }
        *i += 1;
    }
    spec.width = read_number(chars, i);
    if chars.get(*i) == Some(&'.') {
        *i += 1;
        spec.precision = Some(read_number(chars, i));
    }
    while matches!(chars.get(*i), Some('h' | 'l' | 'L')) {
        *i += 1;
    }
    let Some(&conversion) = chars.get(*i) else {
        return Err(FormatError::Unsupported("incomplete format".into()));
    };
    *i += 1;
    spec.conversion = conversion;
    Ok(spec)
}

fn read_number(chars: &[char], i: &mut usize) -> usize {
    let mut n: usize = 0;
    while let Some(d) = chars.get(*i).and_then(|c| c.to_digit(10)) {
        n = n.saturating_mul(10).saturating_add(d as usize);
        *i += 1;
    }
    n
}

impl Spec {
    fn apply(&self, value: &Value) -> Result<String, FormatError> {
        let text = match self.conversion {
            's' => py_str(value),
            'r' | 'a' => py_repr(value),
            'd' | 'i' | 'u' => return self.integer(value),
            other => return Err(FormatError::Unsupported(format!("conversion %{other} is not modelled"))),
        };
        let text = match self.precision {
            Some(p) => text.chars().take(p).collect(),
            None => text,
        };
        Ok(self.pad(text, ' '))
    }

    fn integer(&self, value: &Value) -> Result<String, FormatError> {
        let n: i128 = match value {
            Value::Bool(b) => i128::from(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    i128::from(i)
                } else if let Some(u) = n.as_u64() {
                    i128::from(u)
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    if !f.is_finite() {
                        return Err(FormatError::Unsupported("non-finite %d".into()));
                    }
                    // Python's int() is unbounded; `as` saturates past ±2^127,
                    // far beyond any number a policy check formats.
                    #[allow(clippy::cast_possible_truncation)]
                    let whole = f.trunc() as i128;
                    whole
                }
            }
            _ => return Err(FormatError::Unsupported("%d format: a real number is required".into())),
        };
        let sign = if n < 0 {
            "-"
        } else if self.plus {
            "+"
        } else if self.space {
            " "
        } else {
            ""
        };
        let digits = n.unsigned_abs().to_string();
        if self.zero && !self.left {
            let fill = self.width.saturating_sub(sign.len() + digits.len());
            return Ok(format!("{sign}{}{digits}", "0".repeat(fill)));
        }
        Ok(self.pad(format!("{sign}{digits}"), ' '))
    }

    fn pad(&self, text: String, fill: char) -> String {
        let len = text.chars().count();
        if len >= self.width {
            return text;
        }
        let padding: String = std::iter::repeat_n(fill, self.width - len).collect();
        if self.left {
            text + &padding
        } else {
            padding + &text
        }
    }
}

/// What `ast.literal_eval(kind)` does with a generic check's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Literal {
    /// A literal; holds `str()` of its value.
    Value(String),
    /// Not a literal (oslo's `ValueError` branch): the kind is a credential path.
    CredentialPath,
    /// Python would raise `SyntaxError`, which oslo does not catch; we fail closed.
    SyntaxError,
}

/// The subset of `ast.literal_eval` that can appear as a check kind:
/// `True`/`False`/`None`, numbers with one optional sign, and (possibly
/// adjacent) string literals with `r`/`u` prefixes. Containers and complex
/// numbers are treated as non-literals.
pub(crate) fn literal_eval(kind: &str) -> Literal {
    match kind {
        "True" | "False" | "None" => return Literal::Value(kind.to_owned()),
        _ => {}
    }
    if let Some(number) = number_literal(kind) {
        return Literal::Value(number);
    }
    let starts_string = {
        let rest = kind.trim_start_matches(['r', 'R', 'u', 'U']);
        rest.len() + 1 >= kind.len() && (rest.starts_with('\'') || rest.starts_with('"'))
    };
    if !starts_string {
        return Literal::CredentialPath;
    }
    match string_literals(kind) {
        Some(s) => Literal::Value(s),
        None => Literal::SyntaxError,
    }
}

fn number_literal(text: &str) -> Option<String> {
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if let Some(n) = int_literal(body) {
        if n == 0 {
            return Some("0".to_owned());
        }
        return Some(if negative { format!("-{n}") } else { n.to_string() });
    }
    let f = float_literal(body)?;
    Some(py_float_repr(if negative { -f } else { f }))
}

/// Python integer literal (decimal, 0x, 0o, 0b, with `_` separators).
fn int_literal(text: &str) -> Option<u128> {
    let lower = text.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else {
        (10, lower.as_str())
    };
    if radix != 10 {
        // Prefixed literals may start with an underscore: 0x_ff.
        let digits = digits.strip_prefix('_').unwrap_or(digits);
        return radix_digits(digits, radix);
    }
    let value = radix_digits(digits, 10)?;
    // Decimal literals may not have leading zeros unless they are all zeros.
    if digits.starts_with('0') && value != 0 {
        return None;
    }
    Some(value)
}

fn radix_digits(digits: &str, radix: u32) -> Option<u128> {
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: u128 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        let d = c.to_digit(radix)?;
        value = value.checked_mul(u128::from(radix))?.checked_add(u128::from(d))?;
    }
    Some(value)
}

/// Python float literal: `1.`, `.5`, `1.5`, `1e3`, `1_0.2_5e-1_0`.
fn float_literal(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digit_part_ok =
        |s: &str| radix_digits(s, 10).is_some() || s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty();
    let int_ok = int_part.is_empty() || digit_part_ok(int_part);
    let frac_ok = match frac_part {
        Some(f) => f.is_empty() || digit_part_ok(f),
        None => true,
    };
    let has_digits = !int_part.is_empty() || frac_part.is_some_and(|f| !f.is_empty());
    if !int_ok || !frac_ok || !has_digits {
        return None;
    }
    // Without '.' or an exponent it would have been an int literal.
    if frac_part.is_none() && exponent.is_none() {
        return None;
    }
    if let Some(e) = exponent {
        let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
        if !digit_part_ok(digits) {
            return None;
        }
    }
    lower.replace('_', "").parse::<f64>().ok()
}

/// One or more adjacent Python string literals, concatenated.
fn string_literals(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut out = String::new();
    while i < chars.len() {
        let mut raw = false;
        while let Some(c) = chars.get(i) {
            match c {
                'r' | 'R' if !raw => raw = true,
                'u' | 'U' => {}
                _ => break,
            }
            i += 1;
        }
        let quote = *chars.get(i)?;
        if quote != '\'' && quote != '"' {
            return None;
        }
        let triple = chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote);
        i += if triple { 3 } else { 1 };
        let mut closed = false;
        while i < chars.len() {
            let c = chars[i];
            if c == quote {
                if !triple {
                    i += 1;
                    closed = true;
                    break;
                }
                if chars.get(i + 1) == Some(&quote) && chars.get(i + 2) == Some(&quote) {
                    i += 3;
                    closed = true;
                    break;
                }
            }
            if c == '\\' {
                let next = *chars.get(i + 1)?;
                if raw {
                    out.push('\\');
                    out.push(next);
                    i += 2;
                    continue;
                }
                i += 2;
                match next {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '\\' | '\'' | '"' => out.push(next),
                    'x' => out.push(hex_escape(&chars, &mut i, 2)?),
                    'u' => out.push(hex_escape(&chars, &mut i, 4)?),
                    'U' => out.push(hex_escape(&chars, &mut i, 8)?),
                    '0'..='7' => {
                        let mut code = next.to_digit(8)?;
                        for _ in 0..2 {
                            match chars.get(i).and_then(|c| c.to_digit(8)) {
                                Some(d) => {
                                    code = code * 8 + d;
                                    i += 1;
                                }
                                None => break,
                            }
                        }
                        out.push(char::from_u32(code)?);
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
                continue;
            }
            if !triple && c == '\n' {
                return None;
            }
            out.push(c);
            i += 1;
        }
        if !closed {
            return None;
        }
    }
    Some(out)
}

fn hex_escape(chars: &[char], i: &mut usize, len: usize) -> Option<char> {
    let digits: String = chars.get(*i..*i + len)?.iter().collect();
    *i += len;
    char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn str_of_values_matches_python() {
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(5)), "5");
        assert_eq!(py_str(&json!(1.0)), "1.0");
        assert_eq!(py_str(&json!(0.5)), "0.5");
        assert_eq!(py_str(&json!(1e20)), "1e+20");
        assert_eq!(py_str(&json!(1.5e-7)), "1.5e-07");
        assert_eq!(py_str(&json!(123456.75)), "123456.75");
        assert_eq!(py_float_repr(1e16), "1e+16");
        assert_eq!(py_float_repr(1e15), "1000000000000000.0");
        assert_eq!(py_float_repr(0.0001), "0.0001");
        assert_eq!(py_float_repr(0.00001), "1e-05");
        assert_eq!(py_float_repr(-0.0), "-0.0");
        assert_eq!(py_str(&json!("x")), "x");
        assert_eq!(py_str(&json!(["a", 1, null])), "['a', 1, None]");
        assert_eq!(py_str(&json!({"k": "it's"})), "{'k': \"it's\"}");
    }

    #[test]
    fn percent_substitution() {
        let t = target(json!({"project_id": "p1", "n": 7, "none": null}));
        assert_eq!(percent_format("%(project_id)s", &t).unwrap(), "p1");
        assert_eq!(percent_format("x-%(n)s-%%", &t).unwrap(), "x-7-%");
        assert_eq!(percent_format("%(none)s", &t).unwrap(), "None");
        assert_eq!(percent_format("%(n)03d", &t).unwrap(), "007");
        assert_eq!(percent_format("%(project_id)r", &t).unwrap(), "'p1'");
        assert_eq!(percent_format("plain", &t).unwrap(), "plain");
        let s = target(json!({"x": "ab", "b": true}));
        assert_eq!(percent_format("%(x)5s|%(x)-5s|%(x).1s", &s).unwrap(), "   ab|ab   |a");
        assert_eq!(percent_format("%(b)d", &s).unwrap(), "1");
        assert_eq!(percent_format("%(missing)s", &t), Err(FormatError::MissingKey("missing".into())));
        assert!(matches!(percent_format("50%", &t), Err(FormatError::Unsupported(_))));
        assert!(matches!(percent_format("%s", &t), Err(FormatError::Unsupported(_))));
    }

    #[test]
    fn literal_eval_subset() {
        assert_eq!(literal_eval("True"), Literal::Value("True".into()));
        assert_eq!(literal_eval("'Member'"), Literal::Value("Member".into()));
        assert_eq!(literal_eval("\"a\"'b'"), Literal::Value("ab".into()));
        assert_eq!(literal_eval("'a\\x41'"), Literal::Value("aA".into()));
        assert_eq!(literal_eval("r'a\\n'"), Literal::Value("a\\n".into()));
        assert_eq!(literal_eval("-12"), Literal::Value("-12".into()));
        assert_eq!(literal_eval("0x1F"), Literal::Value("31".into()));
        assert_eq!(literal_eval("1_000"), Literal::Value("1000".into()));
        assert_eq!(literal_eval("2.50"), Literal::Value("2.5".into()));
        assert_eq!(literal_eval("1e3"), Literal::Value("1000.0".into()));
        assert_eq!(literal_eval("1."), Literal::Value("1.0".into()));
        assert_eq!(literal_eval(".5"), Literal::Value("0.5".into()));
        assert_eq!(literal_eval("0_0"), Literal::Value("0".into()));
        assert_eq!(literal_eval("project_id"), Literal::CredentialPath);
        assert_eq!(literal_eval("user.enabled"), Literal::CredentialPath);
        assert_eq!(literal_eval("role"), Literal::CredentialPath);
        assert_eq!(literal_eval("007"), Literal::CredentialPath);
        assert_eq!(literal_eval("'open"), Literal::SyntaxError);
        assert_eq!(literal_eval("'a'b"), Literal::SyntaxError);
    }
}
