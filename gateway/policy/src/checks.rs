//! The check tree a rule parses into, and its evaluation.
//!
//! Each variant mirrors one oslo.policy check class so that a rule answers
//! exactly as it would under oslo.policy 6.0.1 (`_checks.py`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::Value;

use crate::credentials::{Credentials, Target};
use crate::python::{literal_eval, percent_format, py_str, Literal};

/// How many `rule:` references may nest before evaluation gives up.
///
/// A cycle would make oslo.policy hit Python's recursion limit and fail the
/// request; we deny instead (and report cycles when rules are loaded).
pub const MAX_RULE_DEPTH: usize = 64;

/// A parsed policy rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// `@` or the empty rule: always allows.
    True,
    /// `!` or anything unparsable: always denies.
    False,
    /// `rule:NAME`: the result of another rule; an unknown name denies.
    Rule(String),
    /// `role:NAME`: the credentials' `roles` contain NAME, case-insensitively.
    Role(String),
    /// `KIND:MATCH`: a credential attribute (or literal KIND) equals MATCH
    /// after `%(key)s` substitution from the target.
    Generic { kind: String, pattern: String },
    /// `http:`/`https:` checks call out to a remote server; they are not
    /// supported here and always deny.
    External { kind: String, url: String },
    /// `not CHECK`.
    Not(Box<Check>),
    /// `A and B and ...`.
    And(Vec<Check>),
    /// `A or B or ...`.
    Or(Vec<Check>),
}

/// Where `rule:NAME` references are looked up.
pub trait RuleResolver {
    /// The check registered under `name`, if any.
    fn resolve(&self, name: &str) -> Option<&Check>;
}

impl RuleResolver for HashMap<String, Check> {
    fn resolve(&self, name: &str) -> Option<&Check> {
        self.get(name)
    }
}

impl RuleResolver for BTreeMap<String, Check> {
    fn resolve(&self, name: &str) -> Option<&Check> {
        self.get(name)
    }
}

/// A resolver with no rules, for evaluating self-contained checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRules;

impl RuleResolver for NoRules {
    fn resolve(&self, _name: &str) -> Option<&Check> {
        None
    }
}

impl Check {
    /// Evaluates the check; `rules` resolves `rule:NAME` references.
    ///
    /// A reference chain deeper than [`MAX_RULE_DEPTH`] (a cycle, in
    /// practice) makes the whole evaluation false, as oslo.policy would
    /// abort the request with a RecursionError.
    pub fn evaluate(&self, target: &Target, creds: &Credentials, rules: &dyn RuleResolver) -> bool {
        self.eval(target, creds, rules, 0).unwrap_or(false)
    }

    /// `None` means the evaluation was aborted (reference depth exceeded).
    fn eval(&self, target: &Target, creds: &Credentials, rules: &dyn RuleResolver, depth: usize) -> Option<bool> {
        Some(match self {
            Check::True => true,
            Check::False | Check::External { .. } => false,
            Check::Not(inner) => !inner.eval(target, creds, rules, depth)?,
            Check::And(items) => {
                for item in items {
                    if !item.eval(target, creds, rules, depth)? {
                        return Some(false);
                    }
                }
                true
            }
            Check::Or(items) => {
                for item in items {
                    if item.eval(target, creds, rules, depth)? {
                        return Some(true);
                    }
                }
                false
            }
            Check::Rule(name) => {
                if depth >= MAX_RULE_DEPTH {
                    return None;
                }
                match rules.resolve(name) {
                    Some(rule) => rule.eval(target, creds, rules, depth + 1)?,
                    None => false,
                }
            }
            Check::Role(pattern) => role_check(pattern, target, creds),
            Check::Generic { kind, pattern } => generic_check(kind, pattern, target, creds),
        })
    }

    /// Every `rule:NAME` this check refers to directly.
    pub fn referenced_rules(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_rules(&mut out);
        out
    }

    fn collect_rules<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Check::Rule(name) => out.push(name),
            Check::Not(inner) => inner.collect_rules(out),
            Check::And(items) | Check::Or(items) => {
                items.iter().for_each(|c| c.collect_rules(out));
            }
            _ => {}
        }
    }
}

/// oslo's RoleCheck: substitute, then compare case-insensitively with each role.
fn role_check(pattern: &str, target: &Target, creds: &Credentials) -> bool {
    let Ok(wanted) = percent_format(pattern, target) else {
        return false;
    };
    let wanted = wanted.to_lowercase();
    match creds.lookup("roles") {
        Some(Value::Array(roles)) => roles.iter().filter_map(Value::as_str).any(|role| role.to_lowercase() == wanted),
        // Python iterates a string character by character.
        Some(Value::String(roles)) => roles.chars().any(|c| c.to_lowercase().eq(wanted.chars())),
        _ => false,
    }
}

/// oslo's GenericCheck: substitute the match, then compare it with a literal
/// kind or with the credential value at the kind's dotted path.
fn generic_check(kind: &str, pattern: &str, target: &Target, creds: &Credentials) -> bool {
    let Ok(wanted) = percent_format(pattern, target) else {
        return false;
    };
    match literal_eval(kind) {
        Literal::Value(literal) => literal == wanted,
        Literal::SyntaxError => false,
        Literal::CredentialPath => {
            let mut segments = kind.split('.');
            let Some(first) = segments.next() else {
                return false;
            };
            let rest: Vec<&str> = segments.collect();
            match creds.lookup(first) {
                Some(value) => found_at(value, &rest, &wanted),
                None => false,
            }
        }
    }
}

/// Walks the remaining path; a list matches if any element matches.
fn found_at(value: &Value, path: &[&str], wanted: &str) -> bool {
    if let Value::Array(items) = value {
        return items.iter().any(|item| matches_path(item, path, wanted));
    }
    matches_path(value, path, wanted)
}

fn matches_path(value: &Value, path: &[&str], wanted: &str) -> bool {
    match path.split_first() {
        None => py_str(value) == wanted,
        Some((key, rest)) => match value {
            Value::Object(map) => map.get(*key).is_some_and(|v| found_at(v, rest, wanted)),
            _ => false,
        },
    }
}

/// Renders the check the way oslo.policy's `str()` does.
impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, items: &[Check], op: &str| {
            f.write_str("(")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "{item}")?;
            }
            f.write_str(")")
        };
        match self {
            Check::True => f.write_str("@"),
            Check::False => f.write_str("!"),
            Check::Rule(name) => write!(f, "rule:{name}"),
            Check::Role(name) => write!(f, "role:{name}"),
            Check::Generic { kind, pattern } => write!(f, "{kind}:{pattern}"),
            Check::External { kind, url } => write!(f, "{kind}:{url}"),
            Check::Not(inner) => write!(f, "not {inner}"),
            Check::And(items) => join(f, items, "and"),
            Check::Or(items) => join(f, items, "or"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn generic(kind: &str, pattern: &str) -> Check {
        Check::Generic { kind: kind.into(), pattern: pattern.into() }
    }

    fn target(v: Value) -> Target {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn substitution_from_target() {
        let creds = Credentials::new().with("project_id", "p1").with("user_id", "u1");
        let check = generic("project_id", "%(project_id)s");
        assert!(check.evaluate(&target(json!({"project_id": "p1"})), &creds, &NoRules));
        assert!(!check.evaluate(&target(json!({"project_id": "p2"})), &creds, &NoRules));
        // Missing target key: oslo catches the KeyError and denies.
        assert!(!check.evaluate(&target(json!({})), &creds, &NoRules));
        // A None target value is rendered as "None" and so does not match.
        assert!(!check.evaluate(&target(json!({"project_id": null})), &creds, &NoRules));
        // Missing credential key denies.
        assert!(!generic("domain_id", "%(project_id)s").evaluate(
            &target(json!({"project_id": "p1"})),
            &creds,
            &NoRules
        ));
    }

    #[test]
    fn literal_values_and_kinds() {
        let creds =
            Credentials::new().with("system_scope", "all").with("is_admin_project", true).with("user_id", Value::Null);
        let none = Target::new();
        assert!(generic("system_scope", "all").evaluate(&none, &creds, &NoRules));
        assert!(generic("system", "all").evaluate(&none, &creds, &NoRules));
        assert!(generic("is_admin_project", "True").evaluate(&none, &creds, &NoRules));
        assert!(generic("user_id", "None").evaluate(&none, &creds, &NoRules));
        let t = target(json!({"enabled": true, "role": {"name": "x"}, "name": "Member"}));
        assert!(generic("True", "%(enabled)s").evaluate(&t, &creds, &NoRules));
        assert!(generic("'Member'", "%(name)s").evaluate(&t, &creds, &NoRules));
        assert!(!generic("'member'", "%(name)s").evaluate(&t, &creds, &NoRules));
        assert!(!generic("'broken", "%(name)s").evaluate(&t, &creds, &NoRules));
    }

    #[test]
    fn lists_and_nested_paths() {
        let creds = Credentials::new()
            .with("groups", json!(["g1", "g2"]))
            .with("token", json!({"user": {"id": "u"}, "roles": [{"name": "a"}, {"name": "b"}]}));
        let none = Target::new();
        assert!(generic("groups", "g2").evaluate(&none, &creds, &NoRules));
        assert!(!generic("groups", "g3").evaluate(&none, &creds, &NoRules));
        assert!(generic("token.user.id", "u").evaluate(&none, &creds, &NoRules));
        assert!(generic("token.roles.name", "b").evaluate(&none, &creds, &NoRules));
        assert!(!generic("token.user.name", "u").evaluate(&none, &creds, &NoRules));
        assert!(!generic("groups.x", "g1").evaluate(&none, &creds, &NoRules));
    }

    #[test]
    fn roles_are_case_insensitive_and_substituted() {
        let creds = Credentials::new().with("roles", json!(["Admin", "reader"]));
        let t = target(json!({"needed": "READER"}));
        assert!(Check::Role("admin".into()).evaluate(&t, &creds, &NoRules));
        assert!(Check::Role("ADMIN".into()).evaluate(&t, &creds, &NoRules));
        assert!(Check::Role("%(needed)s".into()).evaluate(&t, &creds, &NoRules));
        assert!(!Check::Role("member".into()).evaluate(&t, &creds, &NoRules));
        assert!(!Check::Role("%(absent)s".into()).evaluate(&t, &creds, &NoRules));
        assert!(!Check::Role("admin".into()).evaluate(&t, &Credentials::new(), &NoRules));
    }

    #[test]
    fn rule_references_and_cycles() {
        let mut rules = HashMap::new();
        rules.insert("a".to_owned(), Check::Rule("b".into()));
        rules.insert("b".to_owned(), Check::True);
        rules.insert("loop".to_owned(), Check::Rule("loop".into()));
        let creds = Credentials::new();
        let none = Target::new();
        assert!(Check::Rule("a".into()).evaluate(&none, &creds, &rules));
        assert!(!Check::Rule("missing".into()).evaluate(&none, &creds, &rules));
        assert!(!Check::Rule("loop".into()).evaluate(&none, &creds, &rules));
        assert!(Check::Not(Box::new(Check::Rule("missing".into()))).evaluate(&none, &creds, &rules));
        // A cycle aborts the whole evaluation, even under `not` or beside a true branch.
        assert!(!Check::Not(Box::new(Check::Rule("loop".into()))).evaluate(&none, &creds, &rules));
        assert!(!Check::Or(vec![Check::Rule("loop".into()), Check::True]).evaluate(&none, &creds, &rules));
        assert!(Check::Or(vec![Check::True, Check::Rule("loop".into())]).evaluate(&none, &creds, &rules));
    }

    #[test]
    fn display_matches_oslo() {
        let check = Check::Or(vec![
            Check::Role("admin".into()),
            Check::And(vec![Check::Not(Box::new(Check::True)), generic("project_id", "%(project_id)s")]),
        ]);
        assert_eq!(check.to_string(), "(role:admin or (not @ and project_id:%(project_id)s))");
    }
}
