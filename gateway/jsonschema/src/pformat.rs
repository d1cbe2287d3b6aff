//! Python `pprint.pformat(value, width=72, sort_dicts=False)`.
//!
//! `str(ValidationError)` in Python jsonschema embeds the failing schema and
//! instance pretty-printed this way, and Placement puts that whole text into
//! its 400 error detail, so the line breaking must follow CPython's pprint
//! algorithm: an object is written on one line when its repr fits in the
//! remaining width, otherwise dicts and lists put one entry per line and long
//! strings are split into adjacent literals at whitespace boundaries.

use serde_json::{Map, Value};

use keelson_pyfmt::{repr as py_repr, repr_str};

/// The width jsonschema passes to `pformat`.
pub const WIDTH: usize = 72;

/// Pretty-print `value` like `pprint.pformat(value, width, sort_dicts=False)`.
pub fn pformat(value: &Value, width: usize) -> String {
    let mut printer = Printer { width: width as isize, out: String::new() };
    printer.format(value, 0, 0, 0);
    printer.out
}

/// Number of code points: Python measures widths with `len(str)`.
fn width_of(s: &str) -> isize {
    s.chars().count() as isize
}

struct Printer {
    width: isize,
    out: String,
}

impl Printer {
    /// `PrettyPrinter._format`: write the repr if it fits, otherwise hand
    /// containers and strings to their specific pretty printer.
    fn format(&mut self, value: &Value, indent: isize, allowance: isize, level: usize) {
        let rep = py_repr(value);
        let max_width = self.width - indent - allowance;
        if width_of(&rep) > max_width {
            match value {
                Value::Object(map) => return self.dict(map, indent, allowance, level + 1),
                Value::Array(items) => return self.list(items, indent, allowance, level + 1),
                Value::String(s) => return self.string(s, &rep, indent, allowance, level + 1),
                _ => {}
            }
        }
        self.out.push_str(&rep);
    }

    /// `_pprint_dict` + `_format_dict_items` (indent per level is 1).
    fn dict(&mut self, map: &Map<String, Value>, indent: isize, allowance: isize, level: usize) {
        self.out.push('{');
        let allowance = allowance + 1;
        let indent = indent + 1;
        let last_index = map.len().saturating_sub(1);
        for (i, (key, entry)) in map.iter().enumerate() {
            let last = i == last_index;
            let key_rep = repr_str(key);
            self.out.push_str(&key_rep);
            self.out.push_str(": ");
            let entry_indent = indent + width_of(&key_rep) + 2;
            self.format(entry, entry_indent, if last { allowance } else { 1 }, level);
            if !last {
                self.newline_delimiter(indent);
            }
        }
        self.out.push('}');
    }

    /// `_pprint_list` + `_format_items` (non-compact).
    fn list(&mut self, items: &[Value], indent: isize, allowance: isize, level: usize) {
        self.out.push('[');
        let allowance = allowance + 1;
        let indent = indent + 1;
        let last_index = items.len().saturating_sub(1);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.newline_delimiter(indent);
            }
            let last = i == last_index;
            self.format(item, indent, if last { allowance } else { 1 }, level);
        }
        self.out.push(']');
    }

    fn newline_delimiter(&mut self, indent: isize) {
        self.out.push_str(",\n");
        for _ in 0..indent.max(0) {
            self.out.push(' ');
        }
    }

    /// `_pprint_str`: split into lines, then split over-long lines at
    /// whitespace boundaries into chunks whose reprs fit; a top-level string
    /// of several chunks is wrapped in parentheses.
    fn string(&mut self, s: &str, whole_rep: &str, indent: isize, allowance: isize, level: usize) {
        if s.is_empty() {
            self.out.push_str(whole_rep);
            return;
        }
        let (indent, allowance) = if level == 1 { (indent + 1, allowance + 1) } else { (indent, allowance) };
        let max_width = self.width - indent;
        let mut max_width1 = max_width;
        let lines = split_lines_keepends(s);
        let mut chunks: Vec<String> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let rep = repr_str(line);
            let last_line = i + 1 == lines.len();
            if last_line {
                max_width1 -= allowance;
            }
            if width_of(&rep) <= max_width1 {
                chunks.push(rep);
                continue;
            }
            let parts = split_words(line);
            let mut max_width2 = max_width;
            let mut current = String::new();
            for (j, part) in parts.iter().enumerate() {
                let candidate = format!("{current}{part}");
                if j + 1 == parts.len() && last_line {
                    max_width2 -= allowance;
                }
                if width_of(&repr_str(&candidate)) > max_width2 {
                    if !current.is_empty() {
                        chunks.push(repr_str(&current));
                    }
                    current = (*part).to_owned();
                } else {
                    current = candidate;
                }
            }
            if !current.is_empty() {
                chunks.push(repr_str(&current));
            }
        }
        if chunks.len() == 1 {
            self.out.push_str(whole_rep);
            return;
        }
        if level == 1 {
            self.out.push('(');
        }
        for (i, chunk) in chunks.iter().enumerate() {
            if i > 0 {
                self.out.push('\n');
                for _ in 0..indent.max(0) {
                    self.out.push(' ');
                }
            }
            self.out.push_str(chunk);
        }
        if level == 1 {
            self.out.push(')');
        }
    }
}

/// Python's `str.isspace()` (what `\s` matches in a `str` regex): Unicode
/// White_Space plus the information separators U+001C..U+001F.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines(keepends=True)`.
fn split_lines_keepends(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let end = match c {
            '\r' => match iter.peek() {
                Some(&(j, '\n')) => {
                    iter.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                i + c.len_utf8()
            }
            _ => continue,
        };
        lines.push(&s[start..end]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// `re.findall(r'\S*\s*', line)` without the trailing empty match: runs of
/// non-space characters each followed by the whitespace after them.
fn split_words(line: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in line.char_indices() {
        let space = is_py_space(c);
        if in_space && !space {
            parts.push(&line[start..i]);
            start = i;
        }
        in_space = space;
    }
    if start < line.len() {
        parts.push(&line[start..]);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_values_stay_on_one_line() {
        assert_eq!(
            pformat(&json!({"type": "string", "format": "uuid"}), WIDTH),
            "{'type': 'string', 'format': 'uuid'}"
        );
        assert_eq!(pformat(&json!([]), WIDTH), "[]");
    }

    #[test]
    fn long_dict_breaks_one_entry_per_line() {
        let v = json!({
            "type": "object",
            "properties": {"name": {"type": "string", "maxLength": 200}, "uuid": {"type": "string", "format": "uuid"}},
            "required": ["name"],
            "additionalProperties": false
        });
        let want = "{'type': 'object',\n \
'properties': {'name': {'type': 'string', 'maxLength': 200},\n                \
'uuid': {'type': 'string', 'format': 'uuid'}},\n \
'required': ['name'],\n \
'additionalProperties': False}";
        assert_eq!(pformat(&v, WIDTH), want);
    }

    #[test]
    fn long_top_level_string_is_parenthesised_chunks() {
        let s = "word ".repeat(20);
        let want = "('word word word word word word word word word word word word word '\n 'word word word word word word word ')";
        assert_eq!(pformat(&json!(s), WIDTH), want);
    }

    #[test]
    fn splitlines_and_words() {
        assert_eq!(split_lines_keepends("a\u{b}b\r\nc\rd"), vec!["a\u{b}", "b\r\n", "c\r", "d"]);
        assert_eq!(split_words("ab  cd e "), vec!["ab  ", "cd ", "e "]);
        assert_eq!(split_words("  x"), vec!["  ", "x"]);
    }
}
