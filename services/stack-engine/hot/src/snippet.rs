//! Parsed template values: literals, lists, maps and intrinsic function
//! calls, parsed with the function table of the template's version.

use crate::budget::{Budget, EvaluationLimits};
use crate::functions::{self, Func};
use crate::versions::HotVersion;
use crate::{TemplateError, TemplateErrorKind};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What resolution needs from the outside; the engine implements it with
/// live resources, validation with placeholders.
pub trait ResolveContext {
    fn param(&self, name: &str) -> Option<Value>;
    /// The reference id; Null for a skipped (condition false) resource.
    fn get_resource(&self, name: &str) -> Result<Value, TemplateError>;
    /// `path` is the rest of get_attr's arguments, already resolved.
    fn get_attr(&self, resource: &str, attribute: &str, path: &[Value]) -> Result<Value, TemplateError>;
    /// get_attr with no attribute name (>= 2015-10-15): all attributes.
    fn get_attr_all(&self, resource: &str) -> Result<Value, TemplateError>;
    fn get_file(&self, name: &str) -> Option<String>;
    /// resource_facade: the parent's metadata / deletion_policy /
    /// update_policy for a nested stack; top-level stacks have none.
    fn resource_facade(&self, key: &str) -> Result<Value, TemplateError> {
        let _ = key;
        Err(TemplateError::validation_failed("resource_facade is only valid in nested stacks (provider templates)"))
    }
    /// The budget each resolution runs under (see [`EvaluationLimits`]):
    /// the process's installed limits unless the context chooses.
    fn evaluation_limits(&self) -> EvaluationLimits {
        EvaluationLimits::installed()
    }
}

/// A parsed template value. Clone + Debug; resolve it against a context.
#[derive(Debug, Clone, PartialEq)]
pub struct Snippet(pub(crate) Node);

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Literal(Value),
    List(Vec<Snippet>),
    Map(Vec<(String, Snippet)>),
    Call(Box<Call>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub func: Func,
    /// The key as written (e.g. "get_attr", "Fn::Select").
    pub name: String,
    pub args: Snippet,
}

/// Condition values by name, used to pick `if` branches.
pub(crate) type ConditionValues = BTreeMap<String, bool>;

impl Snippet {
    /// A literal value: nothing in it is interpreted as a function.
    pub fn literal(v: Value) -> Snippet {
        Snippet(Node::Literal(v))
    }

    /// Parses `v` with the function table of `version` ("conditions": the
    /// condition-function table). `path` locates errors ("resources.a.properties").
    pub fn parse(v: &Value, version: HotVersion, conditions: bool, path: &str) -> Result<Snippet, TemplateError> {
        let table = functions::FunctionTable { version, conditions, full_name: version.full_name(), cfn: false };
        parse_with(&table, v, path)
    }

    /// Parses `v` with a CFN template's function table; `mappings` is the
    /// template's Mappings section (for Fn::FindInMap).
    pub(crate) fn parse_cfn(
        v: &Value,
        full_name: &str,
        conditions: bool,
        path: &str,
        mappings: &Value,
    ) -> Result<Snippet, TemplateError> {
        let table = functions::FunctionTable {
            version: HotVersion("2013-05-23"),
            conditions,
            full_name: full_name.to_string(),
            cfn: true,
        };
        let mut parsed = parse_with(&table, v, path)?;
        parsed.attach_mappings(mappings);
        Ok(parsed)
    }

    fn attach_mappings(&mut self, mappings: &Value) {
        match &mut self.0 {
            Node::Literal(_) => {}
            Node::List(items) => items.iter_mut().for_each(|s| s.attach_mappings(mappings)),
            Node::Map(entries) => entries.iter_mut().for_each(|(_, s)| s.attach_mappings(mappings)),
            Node::Call(call) => {
                call.args.attach_mappings(mappings);
                if call.func == Func::FindInMap {
                    if let Node::List(items) = &mut call.args.0 {
                        items.insert(0, Snippet::literal(mappings.clone()));
                    }
                }
            }
        }
    }

    pub fn is_literal(&self) -> bool {
        match &self.0 {
            Node::Literal(_) => true,
            Node::List(items) => items.iter().all(Snippet::is_literal),
            Node::Map(entries) => entries.iter().all(|(_, s)| s.is_literal()),
            Node::Call(_) => false,
        }
    }

    /// Resources named by get_resource / get_attr (literal names only).
    pub fn referenced_resources(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.walk_calls(&mut |call| {
            if let Some(name) = call.referenced_resource() {
                out.insert(name);
            }
        });
        out
    }

    /// Whether the value under `key` of this map names a resource
    /// (get_resource / get_attr); for a snippet that is not a map (a
    /// function making one), whether anything in it does.
    pub fn key_references_resources(&self, key: &str) -> bool {
        match &self.0 {
            Node::Map(entries) => {
                entries.iter().filter(|(k, _)| k == key).any(|(_, s)| !s.referenced_resources().is_empty())
            }
            Node::Literal(_) => false,
            Node::List(_) | Node::Call(_) => !self.referenced_resources().is_empty(),
        }
    }

    /// Parameters named by get_param (literal names only).
    pub fn referenced_params(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.walk_calls(&mut |call| {
            if call.func == Func::GetParam {
                let first = match &call.args.0 {
                    Node::Literal(Value::String(s)) => Some(s.clone()),
                    Node::List(items) => match items.first().map(|s| &s.0) {
                        Some(Node::Literal(Value::String(s))) => Some(s.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                out.extend(first);
            }
        });
        out
    }

    pub(crate) fn walk_calls(&self, f: &mut dyn FnMut(&Call)) {
        match &self.0 {
            Node::Literal(_) => {}
            Node::List(items) => items.iter().for_each(|s| s.walk_calls(f)),
            Node::Map(entries) => entries.iter().for_each(|(_, s)| s.walk_calls(f)),
            Node::Call(call) => {
                f(call);
                call.args.walk_calls(f);
            }
        }
    }

    /// Resolves every function; a value dropped by a two-argument `if`
    /// at the top level resolves to Null.
    /// Every resolution runs under its own budget: an error of type
    /// RequestLimitExceeded when its functions would produce too much.
    pub fn resolve(&self, ctx: &dyn ResolveContext) -> Result<Value, TemplateError> {
        let budget = Budget::new(ctx.evaluation_limits());
        Ok(self.eval(ctx, &budget)?.unwrap_or(Value::Null))
    }

    /// None = dropped (a false two-argument `if`).
    pub(crate) fn eval(&self, ctx: &dyn ResolveContext, budget: &Budget) -> Result<Option<Value>, TemplateError> {
        match &self.0 {
            Node::Literal(v) => Ok(Some(v.clone())),
            Node::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.extend(item.eval(ctx, budget)?);
                }
                Ok(Some(Value::Array(out)))
            }
            Node::Map(entries) => {
                let mut out = Map::new();
                for (k, s) in entries {
                    if let Some(v) = s.eval(ctx, budget)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Value::Object(out)))
            }
            Node::Call(call) => functions::evaluate(call, ctx, budget),
        }
    }

    /// Replaces `if` calls by the branch their condition selects; None when
    /// the whole value is dropped.
    pub(crate) fn apply_conditions(
        &self,
        conds: &ConditionValues,
        params: &dyn ResolveContext,
    ) -> Result<Option<Snippet>, TemplateError> {
        match &self.0 {
            Node::Literal(_) => Ok(Some(self.clone())),
            Node::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.extend(item.apply_conditions(conds, params)?);
                }
                Ok(Some(Snippet(Node::List(out))))
            }
            Node::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, s) in entries {
                    if let Some(v) = s.apply_conditions(conds, params)? {
                        out.push((k.clone(), v));
                    }
                }
                Ok(Some(Snippet(Node::Map(out))))
            }
            Node::Call(call) if matches!(call.func, Func::If { .. }) => {
                match functions::choose_if_branch(call, conds, params)? {
                    Some(branch) => branch.apply_conditions(conds, params),
                    None => Ok(None),
                }
            }
            Node::Call(call) => {
                let args = call.args.apply_conditions(conds, params)?.unwrap_or(Snippet::literal(Value::Null));
                Ok(Some(Snippet(Node::Call(Box::new(Call { func: call.func, name: call.name.clone(), args })))))
            }
        }
    }

    /// The snippet back as template JSON (functions as `{name: args}`).
    pub fn to_value(&self) -> Value {
        match &self.0 {
            Node::Literal(v) => v.clone(),
            Node::List(items) => Value::Array(items.iter().map(Snippet::to_value).collect()),
            Node::Map(entries) => Value::Object(entries.iter().map(|(k, s)| (k.clone(), s.to_value())).collect()),
            Node::Call(call) => {
                let mut m = Map::new();
                let mut args = call.args.to_value();
                if call.func == Func::FindInMap {
                    // Drop the Mappings put in front when parsed.
                    if let Value::Array(items) = &mut args {
                        if !items.is_empty() {
                            items.remove(0);
                        }
                    }
                }
                m.insert(call.name.clone(), args);
                Value::Object(m)
            }
        }
    }

    /// `Ref` names a parameter or a resource; once the parameter names are
    /// known it becomes get_param or get_resource (so dependencies see it).
    pub(crate) fn rewrite_refs(&mut self, param_names: &BTreeSet<String>) {
        match &mut self.0 {
            Node::Literal(_) => {}
            Node::List(items) => items.iter_mut().for_each(|s| s.rewrite_refs(param_names)),
            Node::Map(entries) => entries.iter_mut().for_each(|(_, s)| s.rewrite_refs(param_names)),
            Node::Call(call) => {
                if call.func == Func::Ref {
                    if let Node::Literal(Value::String(target)) = &call.args.0 {
                        let is_param =
                            param_names.contains(target) || target.starts_with("OS::") || target.starts_with("AWS::");
                        call.func = if is_param { Func::GetParam } else { Func::GetResource };
                    }
                }
                call.args.rewrite_refs(param_names);
            }
        }
    }

    pub(crate) fn as_literal(&self) -> Option<&Value> {
        match &self.0 {
            Node::Literal(v) => Some(v),
            _ => None,
        }
    }
}

impl Call {
    fn referenced_resource(&self) -> Option<String> {
        let literal_str = |s: &Snippet| match &s.0 {
            Node::Literal(Value::String(n)) => Some(n.clone()),
            _ => None,
        };
        match self.func {
            Func::GetResource => literal_str(&self.args),
            Func::GetAttr { .. } => match &self.args.0 {
                Node::List(items) => items.first().and_then(literal_str),
                _ => None,
            },
            _ => None,
        }
    }
}

fn parse_with(table: &functions::FunctionTable, v: &Value, path: &str) -> Result<Snippet, TemplateError> {
    match v {
        Value::Object(m) => {
            if m.len() == 1 {
                if let Some((key, args)) = m.iter().next() {
                    if let Some(func) = table.lookup(key) {
                        let fn_path = join_path(path, key);
                        let parsed_args = parse_with(table, args, &fn_path)?;
                        let call = Call { func, name: key.clone(), args: parsed_args };
                        functions::check_arguments(&call).map_err(|e| {
                            // Only validation failures carry a location.
                            if e.kind == TemplateErrorKind::StackValidationFailed {
                                e.at_path(&fn_path)
                            } else {
                                e
                            }
                        })?;
                        return Ok(Snippet(Node::Call(Box::new(call))));
                    }
                }
            }
            let mut entries = Vec::with_capacity(m.len());
            for (k, child) in m {
                entries.push((k.clone(), parse_with(table, child, &join_path(path, k))?));
            }
            Ok(Snippet(Node::Map(entries)))
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, child) in items.iter().enumerate() {
                out.push(parse_with(table, child, &format!("{path}[{i}]"))?);
            }
            Ok(Snippet(Node::List(out)))
        }
        other => Ok(Snippet(Node::Literal(other.clone()))),
    }
}

pub(crate) fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
