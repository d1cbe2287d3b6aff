//! YAML as PyYAML's `SafeLoader` reads it, with Heat's two constructor
//! overrides (strings stay strings, timestamps stay strings), into
//! `serde_json` values.
//!
//! The events come from `saphyr-parser`; what they mean is decided here as
//! PyYAML decides it: YAML 1.1 implicit types (`yes`/`on` are booleans,
//! `010` is octal, `1:20` sexagesimal, `1_000` an integer; `y`/`n` and `1e5`
//! are strings), merge keys, the last of duplicate keys, the core tags, and
//! errors for the tags `SafeLoader` has no constructor for. A document whose
//! value JSON cannot hold is refused rather than altered: `.nan`, `.inf`,
//! integers beyond 64 bits, a document that contains itself through an
//! alias, and `!!binary` that is not UTF-8 text. Aliases are expanded under
//! a budget ([`Limits`]), so an alias bomb is refused, not expanded.

mod compose;
mod construct;
mod emit;
mod resolve;

pub use emit::to_block_string;

use serde_json::Value;

/// How large and deep a composed document may get. Aliases count every time
/// they are expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nested collections (serde_json's own limit is 128).
    pub max_depth: usize,
    /// List elements and mapping entries.
    pub max_items: usize,
    /// The bytes of all strings.
    pub max_bytes: usize,
}

impl Limits {
    /// Limits under which any literal text of `text_len` bytes passes (it
    /// cannot hold more items or string bytes than bytes); only alias
    /// expansion can exceed them.
    pub fn for_text(text_len: usize, max_items: usize, max_bytes: usize) -> Self {
        Limits { max_depth: 128, max_items: max_items.max(text_len), max_bytes: max_bytes.max(text_len) }
    }
}

/// Where in the text (PyYAML's marks: 1-based line and column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "in \"<unicode string>\", line {}, column {}", self.line, self.column)
    }
}

/// Why a text is not a document keelson reads. The texts follow PyYAML's
/// (problem, then the mark).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    /// The text is not YAML (PyYAML's ScannerError/ParserError/ReaderError).
    #[error("{problem}\n  {mark}")]
    Syntax { problem: String, mark: Mark },
    /// Well-formed YAML PyYAML's composer refuses (two documents, duplicate
    /// anchors).
    #[error("{problem}\n  {mark}")]
    Compose { problem: String, mark: Mark },
    /// A node SafeLoader cannot construct (unknown tag, bad merge, unhashable
    /// key, bad `!!int` text...).
    #[error("{problem}\n  {mark}")]
    Construct { problem: String, mark: Mark },
    /// PyYAML reads it, but JSON cannot represent the value.
    #[error("{problem}\n  {mark}")]
    Unrepresentable { problem: String, mark: Mark },
    /// Aliases or nesting beyond [`Limits`].
    #[error("{problem}\n  {mark}")]
    Limit { problem: String, mark: Mark },
}

/// Reads the single document of `text`: `None` when the stream holds no
/// document (PyYAML's `None`), else its value.
pub fn load(text: &str, limits: &Limits) -> Result<Option<Value>, YamlError> {
    let Some(root) = compose::compose(text, limits)? else { return Ok(None) };
    construct::construct(&root, limits).map(Some)
}

/// A float as `json.dumps` writes it, e.g. for a float key: `repr`, but
/// `NaN`/`Infinity`.
pub use keelson_pyfmt::json_float as python_float_repr;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str) -> Result<Option<Value>, YamlError> {
        load(text, &Limits::for_text(text.len(), 0, 0))
    }

    fn value(text: &str) -> Value {
        match read(text) {
            Ok(Some(v)) => v,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn yaml_1_1_scalars() {
        assert_eq!(value("value: [yes, no, on, 010, 1_000]"), json!({"value": [true, false, true, 8, 1000]}));
        assert_eq!(
            value("[y, n, 0o17, 1e5, 1.0e+5, .5, 1:20, 1:20.5, ~, null, '', 2013-05-23, 0x1F, \"yes\", ! 12]"),
            json!(["y", "n", "0o17", "1e5", 100000.0, 0.5, 80, 80.5, null, null, "", "2013-05-23", 31, "yes", 12])
        );
        assert_eq!(
            value("a:\nb: !!str 12\nc: !!int '12'\nd: !!float 1"),
            json!({"a": null, "b": "12", "c": 12, "d": 1.0})
        );
        assert_eq!(read(""), Ok(None));
        assert_eq!(read("# nothing\n"), Ok(None));
    }

    #[test]
    fn keys_merge_and_duplicates() {
        assert_eq!(
            value("{1: a, 1.0: b, true: c, '1': d, null: e, 1.5: f}"),
            json!({"1": "d", "null": "e", "1.5": "f"})
        );
        assert_eq!(value("a: 1\nb: 2\na: 3"), json!({"a": 3, "b": 2}));
        let merged = value("x: &x {a: 1, b: 2}\ny: &y {b: 3, c: 4}\nz:\n  <<: [*x, *y]\n  c: 5\n  =: 6");
        assert_eq!(merged["z"], json!({"a": 1, "b": 2, "c": 5, "=": 6}));
        // PyYAML 6.0.2 on: sources in order, a later equal key wins unless
        // it is the same string object (one-character texts are shared).
        assert_eq!(
            value("x: {<<: [{ab: 1, c: 1}, {d: 1, ab: 2}], e: 1}")["x"],
            json!({"ab": 2, "c": 1, "d": 1, "e": 1})
        );
        assert_eq!(value("x: {<<: [{a: 1}, {a: 2}]}")["x"], json!({"a": 1}));
        assert_eq!(value("x: &a {ab: 1}\ny: {<<: [*a, {ab: 2}, *a]}")["y"], json!({"ab": 2}));
        // A value JSON cannot hold is refused only if it stays.
        assert_eq!(value("a: .inf\na: 1\nb: {<<: {c: .nan}, c: 2}"), json!({"a": 1, "b": {"c": 2}}));
        assert!(matches!(read("a: [.inf]\na: 1\nb: .nan"), Err(YamlError::Unrepresentable { .. })));
        assert_eq!(value("a: &x [*x]\na: 1"), json!({"a": 1}));
        assert_eq!(value("a: !!binary //79\na: 1"), json!({"a": 1}));
        assert!(matches!(read("a: !!binary //79"), Err(YamlError::Unrepresentable { .. })));
        // `null` and "null" are two keys in Heat's dict: the earlier value
        // still reaches json.dumps.
        assert!(matches!(read("null: !!binary //79\n'null': 1"), Err(YamlError::Unrepresentable { .. })));
        assert!(matches!(read("null: [&x [*x]]\n'null': 1"), Err(YamlError::Unrepresentable { .. })));
        assert_eq!(value("a: {null: !!binary //79, 'null': 1}\na: 2"), json!({"a": 2}));
        // NaN is written, and the JSON read keeps the last "null".
        assert_eq!(value("null: [.nan]\n'null': 1"), json!({"null": 1}));
        assert_eq!(value("null: 1\n'null': 2"), json!({"null": 2}));
        assert!(matches!(read("a: <<"), Err(YamlError::Construct { .. })));
        assert!(matches!(read("a: {<<: 1}"), Err(YamlError::Construct { .. })));
        assert!(matches!(read("? [a]\n: 1"), Err(YamlError::Construct { .. })));
    }

    #[test]
    fn refusals() {
        for text in ["- !foo 1", "a: !!int x", "- 1\n--- \n- 2", "a: &x 1\nb: &x 2", "a: *nope", "a: \u{7}"] {
            assert!(read(text).is_err(), "{text:?}");
        }
        for text in ["a: .nan", "a: -.inf", "a: 123456789012345678901234567890", "&a [*a]"] {
            assert!(matches!(read(text), Err(YamlError::Unrepresentable { .. })), "{text:?}");
        }
        assert_eq!(value("!!binary aGVsbG8="), json!("hello"));
        // libyaml's refusals inside flow collections (Heat's first loader).
        for text in ["{a:, b: 1}", "[a:]", "{a:[1]}", "[!!str]", "{a: !!str}"] {
            assert!(matches!(read(text), Err(YamlError::Syntax { .. })), "{text:?}");
        }
        assert_eq!(
            value("{a: !!str, b: 1, \"c\":, d: x:y, e: [x]}"),
            json!({"a": "", "b": 1, "c": null, "d": "x:y", "e": ["x"]})
        );
        assert_eq!(value("a:\n  b:\nc: [!!str , &x]"), json!({"a": {"b": null}, "c": ["", null]}));
        assert_eq!(value("{.inf: 1, .nan: 2}"), json!({"Infinity": 1, "NaN": 2}));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(matches!(read(&text), Err(YamlError::Limit { .. })));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(read(&deep), Err(YamlError::Limit { .. })));
    }
}
