//! Template and environment text (JSON or YAML) to a JSON value, as Heat's
//! template_format.simple_parse: JSON when Python's `json` reads the text,
//! else YAML as PyYAML's SafeLoader with Heat's constructors reads it
//! (`keelson_yaml`); an empty YAML document is an empty map.

use crate::budget::EvaluationLimits;
use crate::{TemplateError, TemplateErrorKind};
use serde_json::{Map, Value};

/// Parses template or environment text. The result must be a mapping.
pub fn parse_document(text: &str) -> Result<Value, TemplateError> {
    match python_json(text) {
        PythonJson::Faithful => {
            // serde_json reads whatever the recognizer accepted as faithful,
            // but for nesting beyond its limit, which YAML refuses too.
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                return require_mapping(v);
            }
        }
        PythonJson::Unrepresentable(what) => {
            return Err(TemplateError::new(
                TemplateErrorKind::BadRequest,
                format!("Error parsing template [root stack] the JSON number {what} has no JSON form here"),
            ))
        }
        PythonJson::NotJson => {}
    }
    let limits = EvaluationLimits::installed();
    let yaml =
        keelson_yaml::load(text, &keelson_yaml::Limits::for_text(text.len(), limits.max_items, limits.max_bytes))
            .map_err(|e| {
                TemplateError::new(TemplateErrorKind::BadRequest, format!("Error parsing template [root stack] {e}"))
            })?;
    match yaml {
        // PyYAML's None: no document, or a null one.
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v) => require_mapping(v),
    }
}

fn require_mapping(v: Value) -> Result<Value, TemplateError> {
    match v {
        Value::Object(_) => Ok(v),
        _ => {
            Err(TemplateError::new(TemplateErrorKind::BadRequest, "The template is not a JSON object or YAML mapping."))
        }
    }
}

/// Whether Python's `json.loads` reads a text, and whether its value fits
/// serde_json's numbers.
#[derive(Debug, PartialEq, Eq)]
enum PythonJson {
    NotJson,
    Faithful,
    /// Python reads it, but a number (NaN, Infinity, an integer beyond 64
    /// bits, a float beyond f64) has no serde_json form.
    Unrepresentable(String),
}

/// Recognizes Python's JSON grammar (RFC 8259 plus NaN, Infinity and
/// -Infinity), without building a value.
fn python_json(text: &str) -> PythonJson {
    let mut r = JsonRecognizer { s: text.as_bytes(), at: 0, unrepresentable: None };
    r.skip_ws();
    let ok = r.value(0) && {
        r.skip_ws();
        r.at == r.s.len()
    };
    match (ok, r.unrepresentable) {
        (false, _) => PythonJson::NotJson,
        (true, None) => PythonJson::Faithful,
        (true, Some(what)) => PythonJson::Unrepresentable(what),
    }
}

struct JsonRecognizer<'a> {
    s: &'a [u8],
    at: usize,
    unrepresentable: Option<String>,
}

impl JsonRecognizer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> bool {
        let found = self.s[self.at..].starts_with(word);
        if found {
            self.at += word.len();
        }
        found
    }

    fn mark_unrepresentable(&mut self, what: &[u8]) {
        if self.unrepresentable.is_none() {
            self.unrepresentable = Some(String::from_utf8_lossy(what).into_owned());
        }
    }

    fn value(&mut self, depth: usize) -> bool {
        // Python's own recursion limit is about 1,000 levels.
        if depth > 1000 {
            return false;
        }
        match self.peek() {
            Some(b'{') => self.members(depth),
            Some(b'[') => self.elements(depth),
            Some(b'"') => self.string(),
            Some(b'N') => {
                let ok = self.eat(b"NaN");
                self.mark_unrepresentable(b"NaN");
                ok
            }
            Some(b'I') => {
                let ok = self.eat(b"Infinity");
                self.mark_unrepresentable(b"Infinity");
                ok
            }
            Some(b't') => self.eat(b"true"),
            Some(b'f') => self.eat(b"false"),
            Some(b'n') => self.eat(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn members(&mut self, depth: usize) -> bool {
        self.at += 1;
        self.skip_ws();
        if self.eat(b"}") {
            return true;
        }
        loop {
            self.skip_ws();
            if !(self.peek() == Some(b'"') && self.string()) {
                return false;
            }
            self.skip_ws();
            if !self.eat(b":") {
                return false;
            }
            self.skip_ws();
            if !self.value(depth + 1) {
                return false;
            }
            self.skip_ws();
            if self.eat(b"}") {
                return true;
            }
            if !self.eat(b",") {
                return false;
            }
        }
    }

    fn elements(&mut self, depth: usize) -> bool {
        self.at += 1;
        self.skip_ws();
        if self.eat(b"]") {
            return true;
        }
        loop {
            self.skip_ws();
            if !self.value(depth + 1) {
                return false;
            }
            self.skip_ws();
            if self.eat(b"]") {
                return true;
            }
            if !self.eat(b",") {
                return false;
            }
        }
    }

    fn string(&mut self) -> bool {
        self.at += 1;
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                b'"' => return true,
                b'\\' => match self.peek() {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.at += 1,
                    Some(b'u') => {
                        let hex = self.s.get(self.at + 1..self.at + 5);
                        if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                            return false;
                        }
                        self.at += 5;
                    }
                    _ => return false,
                },
                // Python's strict mode refuses control characters.
                0..=0x1f => return false,
                _ => {}
            }
        }
        false
    }

    fn number(&mut self) -> bool {
        let start = self.at;
        if self.eat(b"-Infinity") {
            self.mark_unrepresentable(b"-Infinity");
            return true;
        }
        self.eat(b"-");
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return false,
        }
        let mut integral = true;
        if self.peek() == Some(b'.') && self.s.get(self.at + 1).is_some_and(u8::is_ascii_digit) {
            integral = false;
            self.at += 1;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let save = self.at;
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                integral = false;
                self.digits();
            } else {
                // Python stops the number before a bare "e".
                self.at = save;
            }
        }
        let token = &self.s[start..self.at];
        let text = String::from_utf8_lossy(token);
        let fits = if integral {
            text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
        } else {
            text.parse::<f64>().is_ok_and(f64::is_finite)
        };
        if !fits {
            self.mark_unrepresentable(token);
        }
        true
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
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
        assert_eq!(parse_document("~").unwrap(), Value::Object(Map::new()));
        // JSON null is not the empty YAML document (Heat reads JSON first).
        assert!(parse_document("null").is_err());
        assert!(parse_document("{\"a\": NaN}").is_err());
        assert!(parse_document("{\"a\": 123456789012345678901234567890}").is_err());
        assert_eq!(parse_document("{\"a\": 1e5}").unwrap()["a"], 100000.0);
    }

    #[test]
    fn yaml_1_1_scalars() {
        let v = parse_document("value: [yes, no, on, 010, 1_000]").unwrap();
        assert_eq!(v["value"], serde_json::json!([true, false, true, 8, 1000]));
    }

    #[test]
    fn bad_yaml_is_reported() {
        let e = parse_document("a: [1, 2\n").unwrap_err();
        assert!(e.message.starts_with("Error parsing template [root stack]"), "{}", e.message);
        let e = parse_document("- 1\n- 2\n").unwrap_err();
        assert_eq!(e.message, "The template is not a JSON object or YAML mapping.");
    }
}
