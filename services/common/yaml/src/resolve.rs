//! PyYAML's implicit resolution of plain scalars (YAML 1.1 forms) and its
//! constructors for `!!int`, `!!float` and `!!bool` texts.

/// What a plain scalar (or one tagged with the non-specific `!`) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Implicit {
    Null,
    Bool,
    Int,
    Float,
    /// `<<`: a merge key.
    Merge,
    /// `=`: the YAML 1.1 "value" key, a string when it is a mapping key.
    Value,
    /// Anything else, timestamps included (Heat keeps them as strings).
    Str,
}

/// The type PyYAML's resolver gives a plain scalar's text.
pub(crate) fn resolve_plain(text: &str) -> Implicit {
    if is_bool(text) {
        Implicit::Bool
    } else if is_float(text) {
        Implicit::Float
    } else if is_int(text) {
        Implicit::Int
    } else if text == "<<" {
        Implicit::Merge
    } else if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        Implicit::Null
    } else if text == "=" {
        Implicit::Value
    } else {
        Implicit::Str
    }
}

fn is_bool(text: &str) -> bool {
    matches!(
        text,
        "yes"
            | "Yes"
            | "YES"
            | "no"
            | "No"
            | "NO"
            | "true"
            | "True"
            | "TRUE"
            | "false"
            | "False"
            | "FALSE"
            | "on"
            | "On"
            | "ON"
            | "off"
            | "Off"
            | "OFF"
    )
}

fn strip_sign(text: &str) -> &str {
    text.strip_prefix(['-', '+']).unwrap_or(text)
}

/// `[0-9][0-9_]*`, returning the rest.
fn digits_underscores(s: &str) -> Option<&str> {
    let first = s.chars().next()?;
    if !first.is_ascii_digit() {
        return None;
    }
    Some(s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_'))
}

/// `(?::[0-5]?[0-9])+`, returning the rest.
fn sexagesimal_parts(mut s: &str) -> Option<&str> {
    let mut parts = 0;
    while let Some(rest) = s.strip_prefix(':') {
        let b = rest.as_bytes();
        let n = match (b.first(), b.get(1)) {
            (Some(a), Some(d)) if (b'0'..=b'5').contains(a) && d.is_ascii_digit() => 2,
            (Some(d), _) if d.is_ascii_digit() => 1,
            _ => return if parts > 0 { Some(s) } else { None },
        };
        s = &rest[n..];
        parts += 1;
    }
    (parts > 0).then_some(s)
}

/// `[eE][-+][0-9]+` or nothing; true when the whole rest is that.
fn optional_exponent(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let Some(rest) = s.strip_prefix(['e', 'E']) else { return false };
    let Some(digits) = rest.strip_prefix(['-', '+']) else { return false };
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn fraction(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_')
}

fn is_float(text: &str) -> bool {
    let unsigned = strip_sign(text);
    let signed = unsigned.len() != text.len();
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return true;
    }
    if !signed && matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    // A fraction without an integer part takes no sign.
    if !signed {
        if let Some(rest) = text.strip_prefix('.') {
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                return optional_exponent(fraction(rest));
            }
        }
    }
    let Some(rest) = digits_underscores(unsigned) else { return false };
    if let Some(after_dot) = rest.strip_prefix('.') {
        return optional_exponent(fraction(after_dot));
    }
    // Sexagesimal: 1:20.5
    match sexagesimal_parts(rest).and_then(|r| r.strip_prefix('.')) {
        Some(after_dot) => fraction(after_dot).is_empty(),
        None => false,
    }
}

fn is_int(text: &str) -> bool {
    let s = strip_sign(text);
    let all = |s: &str, f: fn(u8) -> bool| !s.is_empty() && s.bytes().all(|b| f(b) || b == b'_');
    if let Some(bin) = s.strip_prefix("0b") {
        return all(bin, |b| b == b'0' || b == b'1');
    }
    if let Some(hex) = s.strip_prefix("0x") {
        return all(hex, |b| b.is_ascii_hexdigit());
    }
    if let Some(oct) = s.strip_prefix('0') {
        return oct.is_empty() || all(oct, |b| (b'0'..=b'7').contains(&b));
    }
    if !s.starts_with(|c: char| ('1'..='9').contains(&c)) {
        return false;
    }
    let rest = s.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
    rest.is_empty() || sexagesimal_parts(rest).is_some_and(str::is_empty)
}

/// Why an `!!int` or `!!float` text cannot be read (Python's int() and
/// float() fail on it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NumberError {
    Invalid(String),
    /// Python reads it; keelson's numbers (64 bits) cannot hold it.
    TooLarge(String),
}

fn python_int(digits: &str, radix: u32, original: &str) -> Result<i128, NumberError> {
    let digits = digits.trim_matches(|c: char| c.is_ascii_whitespace());
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(NumberError::Invalid(format!(
            "invalid literal for int() with base {radix}: '{}'",
            if radix == 10 { original } else { digits }
        )));
    }
    i128::from_str_radix(digits, radix).map_err(|_| NumberError::TooLarge(original.to_string()))
}

/// PyYAML's construct_yaml_int over a scalar's text.
pub(crate) fn construct_int(text: &str) -> Result<i128, NumberError> {
    let value: String = text.chars().filter(|&c| c != '_').collect();
    let Some(first) = value.chars().next() else {
        return Err(NumberError::Invalid("string index out of range".into()));
    };
    let sign: i128 = if first == '-' { -1 } else { 1 };
    let value = if first == '-' || first == '+' { &value[1..] } else { value.as_str() };
    let too_large = || NumberError::TooLarge(text.to_string());
    if value == "0" {
        return Ok(0);
    }
    let magnitude = if let Some(bin) = value.strip_prefix("0b") {
        python_int(bin, 2, value)?
    } else if let Some(hex) = value.strip_prefix("0x") {
        python_int(hex, 16, value)?
    } else if value.starts_with('0') {
        python_int(value, 8, value)?
    } else if value.contains(':') {
        let mut total: i128 = 0;
        let mut base: i128 = 1;
        for part in value.split(':').rev() {
            let digit = python_int(part, 10, part)?;
            total = digit.checked_mul(base).and_then(|d| total.checked_add(d)).ok_or_else(too_large)?;
            base = base.checked_mul(60).ok_or_else(too_large)?;
        }
        total
    } else {
        python_int(value, 10, value)?
    };
    magnitude.checked_mul(sign).ok_or_else(too_large)
}

fn python_float(text: &str) -> Result<f64, NumberError> {
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    // Rust's parser takes what Python's float() takes, but for "infinity"
    // spelled differently and a few forms Python refuses ("1." is fine in both).
    trimmed.parse::<f64>().map_err(|_| NumberError::Invalid(format!("could not convert string to float: '{text}'")))
}

/// PyYAML's construct_yaml_float over a scalar's text.
pub(crate) fn construct_float(text: &str) -> Result<f64, NumberError> {
    let value: String = text.chars().filter(|&c| c != '_').collect::<String>().to_lowercase();
    let Some(first) = value.chars().next() else {
        return Err(NumberError::Invalid("string index out of range".into()));
    };
    let sign = if first == '-' { -1.0 } else { 1.0 };
    let value = if first == '-' || first == '+' { &value[1..] } else { value.as_str() };
    if value == ".inf" {
        return Ok(sign * f64::INFINITY);
    }
    if value == ".nan" {
        return Ok(f64::NAN);
    }
    if value.contains(':') {
        let mut total = 0.0;
        let mut base = 1.0;
        for part in value.split(':').rev() {
            total += python_float(part)? * base;
            base *= 60.0;
        }
        return Ok(sign * total);
    }
    Ok(sign * python_float(value)?)
}

/// PyYAML's construct_yaml_bool: the six words, any case.
pub(crate) fn construct_bool(text: &str) -> Option<bool> {
    match text.to_lowercase().as_str() {
        "yes" | "true" | "on" => Some(true),
        "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_1_1_forms() {
        for t in ["yes", "No", "ON", "off", "TRUE", "false"] {
            assert_eq!(resolve_plain(t), Implicit::Bool, "{t}");
        }
        for t in ["y", "n", "Y", "yEs", "nO"] {
            assert_eq!(resolve_plain(t), Implicit::Str, "{t}");
        }
        for t in ["0", "-0", "+12", "010", "0_7", "0x1F", "0b101", "1_000", "1:20", "-1:2:3", "0__"] {
            assert_eq!(resolve_plain(t), Implicit::Int, "{t}");
        }
        for t in ["1.5", "1.", "-1_0.5", ".5", "1.0e+5", ".5E-3", "1:20.5", "0:20.", ".inf", "-.Inf", ".NaN"] {
            assert_eq!(resolve_plain(t), Implicit::Float, "{t}");
        }
        for t in ["1e5", "1.0e5", "-.5", "+.nan", "09", "0o17", "0X1F", "1:70", "0:20", "2001-12-14", "1_", "_1"] {
            assert_eq!(resolve_plain(t), if t == "1_" { Implicit::Int } else { Implicit::Str }, "{t}");
        }
        for t in ["", "~", "null", "Null", "NULL"] {
            assert_eq!(resolve_plain(t), Implicit::Null, "{t}");
        }
        assert_eq!(resolve_plain("<<"), Implicit::Merge);
        assert_eq!(resolve_plain("="), Implicit::Value);
    }

    #[test]
    fn int_and_float_values() {
        assert_eq!(construct_int("010"), Ok(8));
        assert_eq!(construct_int("-0x1_f"), Ok(-31));
        assert_eq!(construct_int("0b11"), Ok(3));
        assert_eq!(construct_int("1:20"), Ok(80));
        assert_eq!(construct_int("+0__"), Ok(0));
        assert!(matches!(construct_int("0b_"), Err(NumberError::Invalid(_))));
        assert!(matches!(construct_int("123456789012345678901234567890123456789012"), Err(NumberError::TooLarge(_))));
        assert_eq!(construct_float("1:20.5"), Ok(80.5));
        assert_eq!(construct_float("1_0.5"), Ok(10.5));
        assert_eq!(construct_float("-.INF"), Ok(f64::NEG_INFINITY));
        assert!(construct_float(".nan").is_ok_and(f64::is_nan));
        assert_eq!(construct_float("1"), Ok(1.0));
    }
}
