//! Operator overrides: the `[oslo_policy] policy_file` (YAML or JSON).
//!
//! oslo.policy reads both formats with `yaml.safe_load`; a file that is
//! empty, `{}` or otherwise falsy means "no overrides". Each value is a rule
//! in the policy language or in the legacy list-of-lists form.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Yaml;

use crate::checks::Check;
use crate::error::PolicyError;
use crate::parser::{parse_list_rule, parse_rule, Parsed};

/// Parsed overrides, by rule name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFile {
    rules: BTreeMap<String, Check>,
    warnings: Vec<String>,
}

impl PolicyFile {
    /// No overrides.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses the text of a policy file (YAML, or JSON).
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        // Aliases may expand a file to at most this many entries and bytes.
        let limits = keelson_yaml::Limits::for_text(text.len(), 100_000, 16 << 20);
        let document: Yaml = match keelson_yaml::load(text, &limits) {
            Ok(doc) => doc.unwrap_or(Yaml::Null),
            // JSON is read as YAML by oslo; fall back for the rare JSON that
            // our YAML parser is stricter about.
            Err(yaml_err) => serde_json::from_str::<serde_json::Value>(text)
                .map_err(|_| PolicyError::PolicyFileSyntax(yaml_err.to_string()))?,
        };
        let mapping = match document {
            Yaml::Object(mapping) => mapping,
            other if !yaml_truthy(&other) => return Ok(Self::empty()),
            _ => {
                return Err(PolicyError::PolicyFileShape("the document must be a mapping of rule name to rule".into()))
            }
        };
        let mut file = Self::empty();
        for (key, value) in mapping {
            // Keys are text already: a non-string YAML key is its JSON text.
            let parsed = rule_from_yaml(&key, &value)?;
            file.warnings.extend(parsed.warnings.into_iter().map(|w| format!("policy file rule {key}: {w}")));
            file.rules.insert(key, parsed.check);
        }
        Ok(file)
    }

    /// Reads and parses a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::ReadPolicyFile { path: path.to_owned(), source })?;
        Self::parse(&text)
    }

    /// Overrides given directly as check strings (as oslo's `Rules.from_dict`).
    pub fn from_check_strings<I, K, V>(rules: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: AsRef<str>,
    {
        let mut file = Self::empty();
        for (name, rule) in rules {
            let name = name.into();
            let parsed = parse_rule(rule.as_ref());
            file.warnings.extend(parsed.warnings.into_iter().map(|w| format!("policy file rule {name}: {w}")));
            file.rules.insert(name, parsed.check);
        }
        file
    }

    /// Finds the policy file the way oslo.config's `find_file` does: an
    /// absolute path is used if it exists; a relative one is looked up in
    /// each of `search_dirs` in turn (for Placement: the config file's
    /// directory, `~/.placement`, `~`, `/etc/placement`, `/etc`).
    pub fn locate(policy_file: &Path, search_dirs: &[PathBuf]) -> Option<PathBuf> {
        if policy_file.is_absolute() {
            return policy_file.exists().then(|| policy_file.to_owned());
        }
        search_dirs.iter().map(|dir| dir.join(policy_file)).find(|candidate| candidate.exists())
    }

    /// The overridden rules, by name.
    pub fn rules(&self) -> &BTreeMap<String, Check> {
        &self.rules
    }

    /// Problems oslo.policy would have logged while parsing the file.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// True when the file overrides nothing.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Python truthiness of a parsed YAML document (`parsed or {}`).
fn yaml_truthy(value: &Yaml) -> bool {
    match value {
        Yaml::Null => false,
        Yaml::Bool(b) => *b,
        Yaml::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Yaml::String(s) => !s.is_empty(),
        Yaml::Array(s) => !s.is_empty(),
        Yaml::Object(m) => !m.is_empty(),
    }
}

/// Converts one file value into a check, following oslo's `parse_rule`:
/// strings are the policy language, lists the legacy form, and falsy values
/// (`~`, `false`, `0`) an empty list rule that allows everything.
fn rule_from_yaml(name: &str, value: &Yaml) -> Result<Parsed, PolicyError> {
    match value {
        Yaml::String(text) => Ok(parse_rule(text)),
        Yaml::Array(outer) => {
            let mut warnings = Vec::new();
            let mut lists: Vec<Vec<String>> = Vec::with_capacity(outer.len());
            for item in outer {
                match item {
                    Yaml::String(s) if s.is_empty() => lists.push(Vec::new()),
                    Yaml::String(s) => lists.push(vec![s.clone()]),
                    Yaml::Array(inner) => {
                        let checks = inner
                            .iter()
                            .map(|element| match element.as_str() {
                                Some(s) => s.to_owned(),
                                None => {
                                    // oslo fails closed on a non-string check.
                                    warnings.push(format!("Failed to understand rule {element:?}"));
                                    "!".to_owned()
                                }
                            })
                            .collect();
                        lists.push(checks);
                    }
                    other if !yaml_truthy(other) => lists.push(Vec::new()),
                    _ => {
                        return Err(PolicyError::PolicyFileShape(format!(
                            "rule {name}: list rules may only hold strings and lists of strings"
                        )))
                    }
                }
            }
            let mut parsed = parse_list_rule(&lists);
            parsed.warnings.splice(0..0, warnings);
            Ok(parsed)
        }
        other if !yaml_truthy(other) => Ok(Parsed { check: Check::True, warnings: Vec::new() }),
        _ => Err(PolicyError::PolicyFileShape(format!("rule {name} must be a string or a list"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_documents_mean_no_overrides() {
        for text in ["", "\n", "# only a comment\n", "{}", "---\n", "~"] {
            let file = PolicyFile::parse(text).expect(text);
            assert!(file.is_empty(), "{text:?}");
        }
    }

    #[test]
    fn yaml_and_json_overrides() {
        let yaml = "\"placement:resource_providers:list\": \"role:reader\"\nadmin_api: 'role:boss or role:admin'\n";
        let file = PolicyFile::parse(yaml).expect("yaml");
        assert_eq!(file.rules().get("placement:resource_providers:list"), Some(&Check::Role("reader".into())));
        assert_eq!(
            file.rules().get("admin_api"),
            Some(&Check::Or(vec![Check::Role("boss".into()), Check::Role("admin".into())]))
        );

        let json = "{\n\t\"placement:usages\": \"@\",\n\t\"service_api\": \"\"\n}";
        let file = PolicyFile::parse(json).expect("json");
        assert_eq!(file.rules().get("placement:usages"), Some(&Check::True));
        assert_eq!(file.rules().get("service_api"), Some(&Check::True));
    }

    #[test]
    fn legacy_list_values() {
        let file =
            PolicyFile::parse("a: [[\"role:x\", \"role:y\"], [\"role:z\"]]\nb: []\nc: [[]]\nd: ~\ne: [\"role:q\"]\n")
                .expect("parse");
        let rules = file.rules();
        assert_eq!(
            rules.get("a"),
            Some(&Check::Or(vec![
                Check::And(vec![Check::Role("x".into()), Check::Role("y".into())]),
                Check::Role("z".into())
            ]))
        );
        assert_eq!(rules.get("b"), Some(&Check::True));
        assert_eq!(rules.get("c"), Some(&Check::False));
        assert_eq!(rules.get("d"), Some(&Check::True));
        assert_eq!(rules.get("e"), Some(&Check::Role("q".into())));
    }

    #[test]
    fn bad_files_are_errors_and_bad_rules_warnings() {
        assert!(matches!(PolicyFile::parse("[1, 2]"), Err(PolicyError::PolicyFileShape(_))));
        assert!(matches!(PolicyFile::parse("a: {b: c}"), Err(PolicyError::PolicyFileShape(_))));
        assert!(matches!(PolicyFile::parse("a: 'x\n  b: ["), Err(PolicyError::PolicyFileSyntax(_))));
        let file = PolicyFile::parse("a: 'role:x and'").expect("parse");
        assert_eq!(file.rules().get("a"), Some(&Check::False));
        assert_eq!(file.warnings().len(), 1);
    }

    #[test]
    fn locate_and_load() {
        let dir = std::env::temp_dir().join(format!("keelson-policy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("policy.yaml");
        std::fs::write(&path, "admin_api: role:root\n").expect("write");
        assert_eq!(PolicyFile::locate(&path, &[]), Some(path.clone()));
        assert_eq!(PolicyFile::locate(Path::new("policy.yaml"), std::slice::from_ref(&dir)), Some(path.clone()));
        assert_eq!(PolicyFile::locate(Path::new("nope.yaml"), std::slice::from_ref(&dir)), None);
        let file = PolicyFile::load(&path).expect("load");
        assert_eq!(file.rules().get("admin_api"), Some(&Check::Role("root".into())));
        assert!(matches!(PolicyFile::load(&dir.join("missing.yaml")), Err(PolicyError::ReadPolicyFile { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
