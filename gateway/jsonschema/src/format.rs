//! The `format` checkers Placement registers.
//!
//! Placement installs exactly one checker on jsonschema's `FormatChecker`:
//! `'uuid'`, implemented with oslo.utils' `uuidutils.is_uuid_like`. Formats
//! without a registered checker pass, as in Python. The checker is called for
//! every instance type, so a non-string never "is a 'uuid'".

use serde_json::Value;

/// A format name with a checker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Placement's `uuid` format (`uuidutils.is_uuid_like`).
    Uuid,
}

impl Format {
    /// The checker registered for `name`, if any.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "uuid" => Some(Format::Uuid),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Uuid => "uuid",
        }
    }

    /// Does `instance` conform?
    pub fn check(self, instance: &Value) -> bool {
        match self {
            Format::Uuid => matches!(instance, Value::String(s) if is_uuid_like(s)),
        }
    }
}

/// oslo.utils' `is_uuid_like`: after removing `urn:` and `uuid:`, stripping
/// braces from both ends and dropping every `-`, exactly 32 hex digits must
/// remain. So canonical, dash-less, braced, `urn:uuid:` and upper-case forms
/// are all accepted; Python's int-parsing leniencies (`0x`, `_`, spaces) are
/// not, because the text must equal the normalised UUID.
pub fn is_uuid_like(s: &str) -> bool {
    let stripped = s.replace("urn:", "").replace("uuid:", "");
    let stripped = stripped.trim_matches(|c| c == '{' || c == '}').replace('-', "");
    stripped.len() == 32 && stripped.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uuid_forms_accepted_by_oslo() {
        for ok in [
            "f918801a-5e54-4bee-9095-09a9d0c786b8",
            "f918801a5e544bee909509a9d0c786b8",
            "F918801A-5E54-4BEE-9095-09A9D0C786B8",
            "{f918801a-5e54-4bee-9095-09a9d0c786b8}",
            "urn:uuid:f918801a-5e54-4bee-9095-09a9d0c786b8",
            "f-918801a5e544bee909509a9d0c786b8--",
        ] {
            assert!(is_uuid_like(ok), "{ok}");
        }
        for bad in [
            "harry",
            "",
            "f918801a-5e54-4bee-9095-09a9d0c786b",
            "0xf918801a5e544bee909509a9d0c786",
            " f918801a5e544bee909509a9d0c786b8",
            "f918801a_5e544bee909509a9d0c786b8",
            "g918801a5e544bee909509a9d0c786b8",
        ] {
            assert!(!is_uuid_like(bad), "{bad}");
        }
        assert!(!Format::Uuid.check(&json!(5)));
        assert!(!Format::Uuid.check(&json!(null)));
    }
}
