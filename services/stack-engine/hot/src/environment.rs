//! Stack environments: parameters, parameter_defaults, resource_registry,
//! and their merging (environment_files in order, then the request's).

use crate::{TemplateError, TemplateErrorKind};
use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

const SECTIONS: &[&str] = &[
    "parameters",
    "parameter_defaults",
    "resource_registry",
    "encrypted_param_names",
    "event_sinks",
    "parameter_merge_strategies",
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    pub parameters: Map<String, Value>,
    pub parameter_defaults: Map<String, Value>,
    /// As written: type mappings plus the "resources" per-resource section.
    pub resource_registry: Map<String, Value>,
    pub encrypted_param_names: Vec<String>,
    pub event_sinks: Vec<Value>,
    pub parameter_merge_strategies: Map<String, Value>,
}

/// How many types a chain of registry mappings may pass through: a "*"
/// mapping can make new types forever ("A::*": "A::B::*") without ever
/// repeating one.
const MAX_MAPPING_CHAIN: usize = 64;

/// Where a chain of registry mappings ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// What the last mapping names: a type mapped no further, or a template.
    pub target: RegistryTarget,
    /// The type the last mapping is for (the looked-up type when the chain
    /// has one step), as upstream's registry entry that chose `target`.
    pub mapped_type: String,
}

/// Where a resource type is redirected by one registry mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryTarget {
    /// Another resource type name.
    Type(String),
    /// A template (a key of the request's `files`, or a URL).
    TemplateFile(String),
}

fn env_error(message: impl Into<String>) -> TemplateError {
    TemplateError::new(TemplateErrorKind::BadRequest, message)
}

fn section_map(v: &Value, name: &str) -> Result<Map<String, Value>, TemplateError> {
    match v {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m.clone()),
        _ => Err(env_error(format!("The environment section \"{name}\" must be a mapping."))),
    }
}

impl Environment {
    /// From a parsed environment document (see `parse_document`).
    pub fn from_value(v: &Value) -> Result<Environment, TemplateError> {
        let doc = match v {
            Value::Null => return Ok(Environment::default()),
            Value::Object(m) => m,
            _ => return Err(env_error("The environment is not a valid YAML mapping data type.")),
        };
        if let Some(bad) = doc.keys().find(|k| !SECTIONS.contains(&k.as_str())) {
            return Err(env_error(format!("environment has wrong section \"{bad}\"")));
        }
        let null = Value::Null;
        let get = |k: &str| doc.get(k).unwrap_or(&null);
        let string_list = |k: &str| -> Vec<String> {
            get(k)
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        Ok(Environment {
            parameters: section_map(get("parameters"), "parameters")?,
            parameter_defaults: section_map(get("parameter_defaults"), "parameter_defaults")?,
            resource_registry: section_map(get("resource_registry"), "resource_registry")?,
            encrypted_param_names: string_list("encrypted_param_names"),
            event_sinks: get("event_sinks").as_array().cloned().unwrap_or_default(),
            parameter_merge_strategies: section_map(get("parameter_merge_strategies"), "parameter_merge_strategies")?,
        })
    }

    /// Applies `other` on top of `self`: later values win; parameter
    /// defaults follow `other`'s merge strategies (overwrite | merge |
    /// deep_merge, per parameter or "default").
    pub fn merge(&mut self, other: &Environment) {
        for (k, v) in &other.parameters {
            self.parameters.insert(k.clone(), v.clone());
        }
        let default_strategy =
            other.parameter_merge_strategies.get("default").and_then(Value::as_str).unwrap_or("overwrite").to_string();
        for (k, v) in &other.parameter_defaults {
            let strategy = other.parameter_merge_strategies.get(k).and_then(Value::as_str).unwrap_or(&default_strategy);
            let merged = match (self.parameter_defaults.get(k), strategy) {
                (Some(old), "merge") => merge_values(old, v, false),
                (Some(old), "deep_merge") => merge_values(old, v, true),
                _ => v.clone(),
            };
            self.parameter_defaults.insert(k.clone(), merged);
        }
        for (k, v) in &other.resource_registry {
            let merged = match (self.resource_registry.get(k), k.as_str()) {
                (Some(old), "resources") => merge_values(old, v, true),
                _ => v.clone(),
            };
            self.resource_registry.insert(k.clone(), merged);
        }
        for name in &other.encrypted_param_names {
            if !self.encrypted_param_names.contains(name) {
                self.encrypted_param_names.push(name.clone());
            }
        }
        self.event_sinks.extend(other.event_sinks.iter().cloned());
        for (k, v) in &other.parameter_merge_strategies {
            self.parameter_merge_strategies.insert(k.clone(), v.clone());
        }
    }

    /// GET .../environment body.
    pub fn to_value(&self) -> Value {
        let mut registry = self.resource_registry.clone();
        if !registry.contains_key("resources") {
            registry.insert("resources".into(), json!({}));
        }
        // Key order as Heat answers GET .../environment.
        let mut out = Map::new();
        out.insert("resource_registry".into(), Value::Object(registry));
        out.insert("parameters".into(), Value::Object(self.parameters.clone()));
        out.insert("parameter_defaults".into(), Value::Object(self.parameter_defaults.clone()));
        out.insert("event_sinks".into(), Value::Array(self.event_sinks.clone()));
        out.insert(
            "encrypted_param_names".into(),
            Value::Array(self.encrypted_param_names.iter().cloned().map(Value::String).collect()),
        );
        Value::Object(out)
    }

    /// The user-visible part (POST /validate's "Environment").
    pub fn to_user_value(&self) -> Value {
        let mut v = self.to_value();
        if let Some(m) = v.as_object_mut() {
            m.shift_remove("encrypted_param_names");
        }
        v
    }

    /// Where resource `resource_name`'s type `type_name` ends once the
    /// registry's mappings are followed, as upstream's registry looks each
    /// mapped type up again: every step tries the resource's own
    /// `resources: {name: {type: target}}` section, then the type mappings
    /// (exact key, else the longest matching "Prefix::*"). The chain stops
    /// at a template, or at a type nothing (or only itself) maps further.
    /// `None` when `type_name` is not mapped; an error when the mappings
    /// loop (upstream recurses until Python gives up).
    pub fn resolve_type_for(&self, resource_name: &str, type_name: &str) -> Result<Option<Resolution>, TemplateError> {
        let first = self.lookup_for(resource_name, type_name);
        self.follow(resource_name, type_name, first)
    }

    /// As [`Environment::resolve_type_for`], with the resource's own
    /// mapping of `type_name` itself left out (upstream's facade lookup,
    /// which passes over the mapping that chose the template).
    pub fn resolve_type_skipping_own_for(
        &self,
        resource_name: &str,
        type_name: &str,
    ) -> Result<Option<Resolution>, TemplateError> {
        let first = lookup_registry(&self.resource_registry, type_name);
        self.follow(resource_name, type_name, first)
    }

    /// The mapping of `type_name` in resource `resource_name`'s own
    /// `resources` section only (one step, no chain).
    pub fn resolve_type_only_for(&self, resource_name: &str, type_name: &str) -> Option<RegistryTarget> {
        self.resource_registry
            .get("resources")
            .and_then(|r| r.get(resource_name))
            .and_then(Value::as_object)
            .and_then(|specific| lookup_registry(specific, type_name))
    }

    /// One step: the resource's own section, then the type mappings.
    fn lookup_for(&self, resource_name: &str, type_name: &str) -> Option<RegistryTarget> {
        self.resolve_type_only_for(resource_name, type_name)
            .or_else(|| lookup_registry(&self.resource_registry, type_name))
    }

    /// The chain from `type_name`, whose first step is `first`.
    fn follow(
        &self,
        resource_name: &str,
        type_name: &str,
        first: Option<RegistryTarget>,
    ) -> Result<Option<Resolution>, TemplateError> {
        let mut chain = vec![type_name.to_string()];
        let mut step = first;
        let mut end = None;
        while let Some(target) = step {
            let mapped_type = chain.last().cloned().unwrap_or_default();
            let next = match &target {
                RegistryTarget::TemplateFile(_) => return Ok(Some(Resolution { target, mapped_type })),
                RegistryTarget::Type(next) => next.clone(),
            };
            let looped = chain.contains(&next);
            chain.push(next.clone());
            if looped || chain.len() > MAX_MAPPING_CHAIN {
                let how = if looped { "in a loop" } else { "through too many types" };
                return Err(env_error(format!(
                    "The resource_registry maps the Resource Type ({type_name}) {how}: {}",
                    chain.join(" -> ")
                )));
            }
            step = self.lookup_for(resource_name, &next);
            end = Some(Resolution { target, mapped_type });
        }
        Ok(end)
    }

    /// The actions (`update`, `replace`) the environment restricts for
    /// resource `resource_name`: the union over every `resources` entry
    /// whose key matches the name as a shell pattern (fnmatchcase), each
    /// holding `restricted_actions` as one action or a list of them.
    pub fn restricted_actions(&self, resource_name: &str) -> BTreeSet<String> {
        let mut actions = BTreeSet::new();
        let Some(Value::Object(resources)) = self.resource_registry.get("resources") else {
            return actions;
        };
        for (pattern, entry) in resources {
            if !fnmatch_case(resource_name, pattern) {
                continue;
            }
            match entry.get("restricted_actions") {
                Some(Value::String(a)) => {
                    actions.insert(a.clone());
                }
                Some(Value::Array(list)) => {
                    actions.extend(list.iter().filter_map(Value::as_str).map(str::to_string));
                }
                _ => {}
            }
        }
        actions
    }
}

/// Python's `fnmatch.fnmatchcase`: `*`, `?`, `[seq]` and `[!seq]`, case
/// sensitive, anchored at both ends. Both strings come from a tenant's
/// template and environment, so matching is one pass over the pattern
/// keeping the set of name positions reached (time pattern x name, never
/// the backtracking that makes `*a*a*a...b` exponential).
pub(crate) fn fnmatch_case(name: &str, pattern: &str) -> bool {
    let name: Vec<char> = name.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    // reached[i]: the pattern so far matches name[..i].
    let mut reached = vec![false; name.len() + 1];
    reached[0] = true;
    let mut rest: &[char] = &pattern;
    while let Some((&first, after)) = rest.split_first() {
        let step: Box<dyn Fn(char) -> bool> = match first {
            '*' => {
                // Every position at or past the first one reached.
                if let Some(from) = reached.iter().position(|r| *r) {
                    reached[from..].iter_mut().for_each(|r| *r = true);
                }
                rest = after;
                continue;
            }
            '?' => {
                rest = after;
                Box::new(|_| true)
            }
            '[' => match CharClass::parse(after) {
                // An unterminated "[" is a literal, as in Python.
                None => {
                    rest = after;
                    Box::new(|c| c == '[')
                }
                Some((class, past)) => {
                    rest = past;
                    Box::new(move |c| class.contains(c))
                }
            },
            literal => {
                rest = after;
                Box::new(move |c| c == literal)
            }
        };
        // One character consumed: position i+1 is reached when i was and
        // name[i] matches.
        for i in (0..name.len()).rev() {
            reached[i + 1] = reached[i] && step(name[i]);
        }
        reached[0] = false;
        if !reached.iter().any(|r| *r) {
            return false;
        }
    }
    reached[name.len()]
}

/// A "[...]" set: its members and ranges, maybe negated.
struct CharClass {
    negated: bool,
    body: Vec<char>,
}

impl CharClass {
    /// The class after a "[" and the pattern after its "]"; None when
    /// the "[" is not closed.
    fn parse(pattern: &[char]) -> Option<(CharClass, &[char])> {
        let (negated, body_start) = match pattern.first() {
            Some('!') => (true, 1),
            _ => (false, 0),
        };
        // A "]" right after "[" or "[!" belongs to the class.
        let close = pattern.iter().enumerate().skip(body_start + 1).find(|(_, c)| **c == ']').map(|(i, _)| i)?;
        Some((CharClass { negated, body: pattern[body_start..close].to_vec() }, &pattern[close + 1..]))
    }

    fn contains(&self, c: char) -> bool {
        let body = &self.body;
        let mut i = 0;
        let mut found = false;
        while i < body.len() {
            if i + 2 < body.len() && body[i + 1] == '-' {
                found |= body[i] <= c && c <= body[i + 2];
                i += 3;
            } else {
                found |= body[i] == c;
                i += 1;
            }
        }
        found != self.negated
    }
}

fn lookup_registry(registry: &Map<String, Value>, type_name: &str) -> Option<RegistryTarget> {
    let target = registry.get(type_name).and_then(Value::as_str).map(str::to_string).or_else(|| {
        registry
            .iter()
            .filter(|(k, _)| k.ends_with('*') && type_name.starts_with(&k[..k.len() - 1]))
            .max_by_key(|(k, _)| k.len())
            .and_then(|(k, v)| {
                let to = v.as_str()?;
                // "OS::Nova::*": "AWS::EC2::*" maps the matched suffix too.
                Some(match to.strip_suffix('*') {
                    Some(prefix) => format!("{prefix}{}", &type_name[k.len() - 1..]),
                    None => to.to_string(),
                })
            })
    })?;
    if target == type_name {
        return None;
    }
    Some(if is_template_reference(&target) {
        RegistryTarget::TemplateFile(target)
    } else {
        RegistryTarget::Type(target)
    })
}

/// Heat treats a registry value as a template when it names a file.
pub fn is_template_reference(target: &str) -> bool {
    target.ends_with(".yaml") || target.ends_with(".template") || target.ends_with(".yml") || target.contains("://")
}

fn merge_values(old: &Value, new: &Value, deep: bool) -> Value {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = a.clone();
            for (k, v) in b {
                let merged = match (out.get(k), deep) {
                    (Some(prev), true) => merge_values(prev, v, true),
                    _ => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(a), Value::Array(b)) => {
            let mut out = a.clone();
            out.extend(b.iter().cloned());
            Value::Array(out)
        }
        (Value::String(a), Value::String(b)) => {
            // Heat joins comma-delimited strings when merging.
            Value::String(format!("{a},{b}"))
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_section_rejected() {
        let e = Environment::from_value(&json!({"paramters": {}})).unwrap_err();
        assert_eq!(e.message, "environment has wrong section \"paramters\"");
    }

    #[test]
    fn merge_later_wins_and_registry_resolves() {
        let mut a = Environment::from_value(&json!({
            "parameters": {"x": 1},
            "resource_registry": {"My::A": "a.yaml", "OS::Nova::*": "AWS::EC2::*"}
        }))
        .unwrap();
        let b =
            Environment::from_value(&json!({"parameters": {"x": 2}, "resource_registry": {"My::B": "OS::Heat::None"}}))
                .unwrap();
        a.merge(&b);
        assert_eq!(a.parameters["x"], 2);
        assert_eq!(target(&a, "My::A"), Some(RegistryTarget::TemplateFile("a.yaml".into())));
        assert_eq!(target(&a, "My::B"), Some(RegistryTarget::Type("OS::Heat::None".into())));
        assert_eq!(target(&a, "OS::Nova::Server"), Some(RegistryTarget::Type("AWS::EC2::Server".into())));
        assert_eq!(target(&a, "Other"), None);
        assert_eq!(a.to_value()["resource_registry"]["resources"], json!({}));
    }

    /// Where resource "r" of `type_name` ends.
    fn target(env: &Environment, type_name: &str) -> Option<RegistryTarget> {
        env.resolve_type_for("r", type_name).unwrap().map(|r| r.target)
    }

    fn env(registry: Value) -> Environment {
        Environment::from_value(&json!({ "resource_registry": registry })).unwrap()
    }

    #[test]
    fn mappings_resolve_as_chains() {
        // A scaling group's members: mapped to an instance, which the user
        // mapped to a provider template.
        let e = env(json!({"OS::Heat::ScaledResource": "AWS::EC2::Instance", "AWS::EC2::Instance": "provider.yaml"}));
        let end = e.resolve_type_for("r", "OS::Heat::ScaledResource").unwrap().unwrap();
        assert_eq!(end.target, RegistryTarget::TemplateFile("provider.yaml".into()));
        assert_eq!(end.mapped_type, "AWS::EC2::Instance");
        // Type to type to type, through a "*" mapping.
        let e = env(json!({"My::A": "My::B", "My::B": "Other::C", "Other::*": "OS::Heat::None"}));
        let end = e.resolve_type_for("r", "My::A").unwrap().unwrap();
        assert_eq!(end.target, RegistryTarget::Type("OS::Heat::None".into()));
        assert_eq!(end.mapped_type, "Other::C");
        // A type mapped to itself ends the chain there.
        let e = env(json!({"My::A": "My::B", "My::B": "My::B"}));
        assert_eq!(target(&e, "My::A"), Some(RegistryTarget::Type("My::B".into())));
        assert_eq!(target(&e, "My::B"), None);
        // The resource's own section wins at every step.
        let e = env(json!({"My::A": "My::B", "My::B": "b.yaml", "resources": {"r": {"My::B": "own.yaml"}}}));
        assert_eq!(target(&e, "My::A"), Some(RegistryTarget::TemplateFile("own.yaml".into())));
        assert_eq!(
            e.resolve_type_for("s", "My::A").unwrap().map(|r| r.target),
            Some(RegistryTarget::TemplateFile("b.yaml".into()))
        );
    }

    #[test]
    fn facade_lookup_skips_only_the_resources_own_first_mapping() {
        let e = env(json!({"My::A": "My::B", "resources": {"r": {"My::A": "own.yaml", "My::B": "OS::Heat::None"}}}));
        assert_eq!(target(&e, "My::A"), Some(RegistryTarget::TemplateFile("own.yaml".into())));
        let facade = e.resolve_type_skipping_own_for("r", "My::A").unwrap().map(|r| r.target);
        assert_eq!(facade, Some(RegistryTarget::Type("OS::Heat::None".into())));
        assert_eq!(e.resolve_type_skipping_own_for("r", "Other").unwrap(), None);
    }

    #[test]
    fn looping_mappings_are_refused() {
        let e = env(json!({"My::A": "My::B", "My::B": "My::A"}));
        let err = e.resolve_type_for("r", "My::A").unwrap_err();
        assert_eq!(err.kind, TemplateErrorKind::BadRequest);
        assert_eq!(
            err.message,
            "The resource_registry maps the Resource Type (My::A) in a loop: My::A -> My::B -> My::A"
        );
        let e = env(json!({"My::A": "My::B", "resources": {"r": {"My::B": "My::A"}}}));
        assert!(e.resolve_type_for("r", "My::A").is_err());
        assert_eq!(
            e.resolve_type_for("s", "My::A").unwrap().map(|r| r.target),
            Some(RegistryTarget::Type("My::B".into()))
        );
        // A "*" mapping that makes a new type at every step ends too.
        let e = env(json!({"My::*": "My::More::*"}));
        let err = e.resolve_type_for("r", "My::A").unwrap_err();
        assert!(err.message.starts_with("The resource_registry maps the Resource Type (My::A) through too many types"));
    }

    #[test]
    fn restricted_actions_match_names_as_shell_patterns() {
        let env = Environment::from_value(&json!({"resource_registry": {"resources": {
            "bar": {"restricted_actions": ["update", "replace"]},
            "*ar": {"restricted_actions": "replace"},
            "b?z": {"restricted_actions": "update"},
            "[!b]oo": {"restricted_actions": "replace"},
            "other": {"hooks": "pre-create"}}}}))
        .unwrap();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(env.restricted_actions("bar"), set(&["replace", "update"]));
        assert_eq!(env.restricted_actions("car"), set(&["replace"]));
        assert_eq!(env.restricted_actions("baz"), set(&["update"]));
        assert_eq!(env.restricted_actions("foo"), set(&["replace"]));
        assert_eq!(env.restricted_actions("boo"), set(&[]));
        assert_eq!(env.restricted_actions("other"), set(&[]));
        assert!(Environment::default().restricted_actions("bar").is_empty());
    }

    #[test]
    fn fnmatch_case_is_not_exponential() {
        // Backtracking would try some 10^17 splits here.
        let name = "a".repeat(4000);
        let pattern = format!("{}b", "*a".repeat(40));
        assert!(!fnmatch_case(&name, &pattern));
        assert!(fnmatch_case(&format!("{name}b"), &pattern));
    }

    #[test]
    fn fnmatch_case_semantics() {
        assert!(fnmatch_case("abc", "a*"));
        assert!(fnmatch_case("abc", "*"));
        assert!(!fnmatch_case("abc", "A*"));
        assert!(fnmatch_case("a1", "a[0-9]"));
        assert!(!fnmatch_case("ax", "a[0-9]"));
        assert!(fnmatch_case("a]", "a[]]"));
        assert!(fnmatch_case("a[", "a["));
        assert!(!fnmatch_case("abcd", "a?c"));
        assert!(fnmatch_case("abcd", "a*?d"));
        assert!(fnmatch_case("", "*"));
        assert!(!fnmatch_case("", "?"));
        assert!(fnmatch_case("a-b", "a[!x]b"));
        assert!(fnmatch_case("a*b", "a[*]b"));
    }

    #[test]
    fn merge_strategy_merge_for_defaults() {
        let mut a = Environment::from_value(&json!({"parameter_defaults": {"m": {"a": 1}}})).unwrap();
        let b = Environment::from_value(
            &json!({"parameter_defaults": {"m": {"b": 2}}, "parameter_merge_strategies": {"m": "merge"}}),
        )
        .unwrap();
        a.merge(&b);
        assert_eq!(a.parameter_defaults["m"], json!({"a": 1, "b": 2}));
    }
}
