//! Python `re` patterns on Rust's regex engine.
//!
//! Schemas carry Python regexes (`pattern`, `patternProperties`) and
//! jsonschema applies them with `re.search`. Rust's `regex` crate has the same
//! core syntax but differs on a few points that can change a verdict, so
//! patterns are rewritten before compiling. Constructs Rust cannot express
//! (look-around, back-references) make compilation fail with
//! [`CompileError::InvalidRegex`] rather than silently match differently.

use regex::Regex;

use crate::error::CompileError;

/// Compile a Python `re` pattern so that `is_match` behaves like
/// `re.search`: Python's `$` also matches before a final newline, `\Z` is
/// `\z`, a `{`/`}` outside a repeat is literal, and `[`, `&`, `~` are
/// literal inside a character class.
pub fn compile_python_regex(pattern: &str) -> Result<Regex, CompileError> {
    python_regex(pattern, "pattern")
}

/// Compile a Python `re` pattern for `re.search` semantics.
///
/// The differences that matter for schema patterns are rewritten: Python's
/// `$` also matches before a final newline (so `'ABC\n'` matches `^[A-Z]+$`),
/// `\Z` is Rust's `\z`, a `{` or `}` that is not part of a repeat is a
/// literal (and `{,n}` means `{0,n}`), and inside a character class `[`, `&`
/// and `~` are plain characters in Python but class syntax in Rust.
pub(crate) fn python_regex(pattern: &str, location: &str) -> Result<Regex, CompileError> {
    let translated = translate_python_regex(pattern);
    Regex::new(&translated).map_err(|e| CompileError::InvalidRegex {
        pattern: pattern.to_owned(),
        location: location.to_owned(),
        reason: e.to_string(),
    })
}

fn translate_python_regex(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('Z') if !in_class => out.push_str(r"\z"),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                // A `]` right after the opening bracket is a literal in both.
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str(r"\]");
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '$' if !in_class => out.push_str(r"(?:\n?\z)"),
            '{' if !in_class => {
                let rest: String = chars.clone().collect();
                match python_repeat(&rest) {
                    Some((repeat, consumed)) => {
                        out.push_str(&repeat);
                        for _ in 0..consumed {
                            chars.next();
                        }
                    }
                    None => out.push_str(r"\{"),
                }
            }
            '}' if !in_class => out.push_str(r"\}"),
            _ => out.push(c),
        }
    }
    out
}

/// Python reads `{m}`, `{m,}`, `{,n}`, `{m,n}` (and `{,}`) after a `{` as a
/// repeat and any other `{` as a literal. Given the text after the `{`,
/// return the Rust spelling of the repeat and how many characters it used.
fn python_repeat(after_brace: &str) -> Option<(String, usize)> {
    let close = after_brace.find('}')?;
    let body = &after_brace[..close];
    let (low, high) = match body.split_once(',') {
        Some((low, high)) => (low, Some(high)),
        None => (body, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(low) || !high.is_none_or(digits) {
        return None;
    }
    let repeat = match high {
        None if low.is_empty() => return None,
        None => format!("{{{low}}}"),
        Some(high) => {
            let low = if low.is_empty() { "0" } else { low };
            format!("{{{low},{high}}}")
        }
    };
    Some((repeat, close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_dollar_allows_trailing_newline() {
        let re = python_regex("^[A-Z0-9_]+$", "#").expect("compiles");
        assert!(re.is_match("ABC"));
        assert!(re.is_match("ABC\n"));
        assert!(!re.is_match("ABC\n\n"));
        assert!(!re.is_match("abc"));
        let alt = python_regex("^[A-Z0-9_]+$|^all|^unknown$", "#").expect("compiles");
        assert!(alt.is_match("all_of_them"));
    }

    #[test]
    fn class_syntax_is_literal_like_python() {
        let re = python_regex("^[[&~$]+$", "#").expect("compiles");
        assert!(re.is_match("[&~$"));
        let re = python_regex(r"^[]a]\Z", "#").expect("compiles");
        assert!(re.is_match("]"));
        assert!(!re.is_match("]\n"));
    }

    #[test]
    fn braces_follow_python() {
        let literal = python_regex("^a{}$", "#").expect("compiles");
        assert!(literal.is_match("a{}"));
        let open_low = python_repeat(",2}x").expect("repeat");
        assert_eq!(open_low, ("{0,2}".to_owned(), 3));
        let re = python_regex("^a{,2}$", "#").expect("compiles");
        assert!(re.is_match("aa") && re.is_match("") && !re.is_match("aaa"));
        let re = python_regex("^[a-z]{1,3}}$", "#").expect("compiles");
        assert!(re.is_match("ab}"));
        assert!(python_regex("^x{x}$", "#").expect("compiles").is_match("x{x}"));
    }
}
