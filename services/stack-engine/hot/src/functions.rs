//! The intrinsic functions: which name means what in each version, their
//! argument checks (upstream texts) and their evaluation.

use crate::budget::{Budget, Size};
use crate::conditions;
use crate::snippet::{Call, ConditionValues, Node, ResolveContext, Snippet};
use crate::versions::{self, HotVersion};
use crate::{TemplateError, TemplateErrorKind};
use keelson_pyfmt::{repr as py_repr, repr_str as py_repr_str, str_of as py_str, truthy};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    GetParam,
    GetResource,
    /// `all`: no attribute name allowed (>= 2015-10-15).
    GetAttr {
        all: bool,
    },
    GetFile,
    /// `multi`: several lists (>= 2015-10-15).
    ListJoin {
        multi: bool,
    },
    /// `json`: non-string params JSON-encoded; `strict`: 0 plain,
    /// 1 every param must occur, 2 also non-empty values.
    StrReplace {
        json: bool,
        strict: u8,
    },
    /// `maps`: for_each values may be maps; `permutations`: the
    /// `permutations` key is accepted.
    Repeat {
        maps: bool,
        permutations: bool,
    },
    Digest,
    StrSplit,
    MapMerge,
    MapReplace,
    /// `nullable`: the two-argument form (2021-04-16).
    If {
        nullable: bool,
    },
    Filter,
    MakeUrl,
    ListConcat {
        unique: bool,
    },
    Contains,
    Equals,
    Not,
    And,
    Or,
    Yaql,
    ResourceFacade,
    Select,
    CfnJoin,
    CfnSplit,
    CfnReplace,
    Base64,
    GetAZs,
    MemberListToMap,
    Ref,
    /// CFN Fn::FindInMap; the template's Mappings are put in front of the
    /// arguments when the template is parsed.
    FindInMap,
    /// Existed in an older version; using it is an error.
    Removed,
    /// A function that exists but cannot be used in a condition.
    Invalid,
}

pub(crate) struct FunctionTable {
    /// For CFN templates: the HOT version whose semantics apply (2013-05-23).
    pub version: HotVersion,
    pub conditions: bool,
    /// "heat_template_version.2016-10-14", "AWSTemplateFormatVersion.2010-09-09"...
    pub full_name: String,
    pub cfn: bool,
}

const CFN_IN_2013: &[&str] = &[
    "Fn::GetAZs",
    "Fn::Join",
    "Fn::Split",
    "Fn::Replace",
    "Fn::Base64",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
    "Ref",
    "Fn::Select",
];

impl FunctionTable {
    pub fn lookup(&self, key: &str) -> Option<Func> {
        let v = self.version;
        if !versions::offers_function(&self.full_name, self.conditions, key) {
            return (!self.cfn && CFN_IN_2013.contains(&key)).then_some(Func::Removed);
        }
        // Conditions only use the condition functions; the API's table for
        // conditions lists the others too, but upstream rejects them there.
        const CONDITION_ONLY: &[&str] = &["get_param", "equals", "not", "and", "or", "contains", "yaql"];
        if self.conditions && !self.cfn && !CONDITION_ONLY.contains(&key) {
            return Some(Func::Invalid);
        }
        Some(match key {
            "get_param" => Func::GetParam,
            "get_resource" => Func::GetResource,
            "get_attr" => Func::GetAttr { all: v.at_least("2015-10-15") },
            "get_file" => Func::GetFile,
            "list_join" => Func::ListJoin { multi: v.at_least("2015-10-15") },
            "str_replace" => Func::StrReplace { json: v.at_least("2015-10-15"), strict: 0 },
            "str_replace_strict" => Func::StrReplace { json: true, strict: 1 },
            "str_replace_vstrict" => Func::StrReplace { json: true, strict: 2 },
            "repeat" => Func::Repeat { maps: v.at_least("2016-10-14"), permutations: v.at_least("2017-09-01") },
            "digest" => Func::Digest,
            "str_split" => Func::StrSplit,
            "map_merge" => Func::MapMerge,
            "map_replace" => Func::MapReplace,
            "if" => Func::If { nullable: v.at_least("2021-04-16") },
            "filter" => Func::Filter,
            "make_url" => Func::MakeUrl,
            "list_concat" => Func::ListConcat { unique: false },
            "list_concat_unique" => Func::ListConcat { unique: true },
            "contains" => Func::Contains,
            "equals" => Func::Equals,
            "not" => Func::Not,
            "and" => Func::And,
            "or" => Func::Or,
            "yaql" => Func::Yaql,
            "resource_facade" | "Fn::ResourceFacade" => Func::ResourceFacade,
            "Fn::Select" => Func::Select,
            "Fn::Join" => Func::CfnJoin,
            "Fn::Split" => Func::CfnSplit,
            "Fn::Replace" => Func::CfnReplace,
            "Fn::Base64" => Func::Base64,
            "Fn::GetAZs" => Func::GetAZs,
            "Fn::MemberListToMap" => Func::MemberListToMap,
            "Ref" => Func::Ref,
            "Fn::GetAtt" => Func::GetAttr { all: false },
            "Fn::If" => Func::If { nullable: false },
            "Fn::Equals" => Func::Equals,
            "Fn::Not" => Func::Not,
            "Fn::And" => Func::And,
            "Fn::Or" => Func::Or,
            "Fn::FindInMap" => Func::FindInMap,
            _ => return None,
        })
    }
}

fn invalid(message: impl Into<String>) -> TemplateError {
    TemplateError::validation_failed(message)
}

fn list_join_example(name: &str, multi: bool) -> String {
    if multi {
        format!("\"{name}\" : [ \" \", [ \"str1\", \"str2\"] ...]")
    } else {
        format!("\"{name}\" : [ \" \", [ \"str1\", \"str2\"]]")
    }
}

/// Upstream raises these as KeyError, whose text Python shows as a repr.
fn str_replace_syntax_error(name: &str) -> TemplateError {
    let text = format!(
        "\"{name}\" syntax should be {name}:\n              template: This is var1 template var2\n              params:\n                var1: a\n                var2: string"
    );
    invalid(py_repr_str(&text))
}

fn repeat_syntax_error() -> TemplateError {
    let text = "\"repeat\" syntax should be repeat:\n              template: This is %var%\n              for_each:\n                %var%: ['a', 'b', 'c']";
    invalid(py_repr_str(text))
}

fn map_replace_example(name: &str) -> String {
    format!("\"{name}\" : [ {{ \"key1\": \"val1\" }}, {{\"keys\": {{\"key1\": \"key2\"}}, \"values\": {{\"val1\": \"val2\"}}}}]")
}
const MAKE_URL_KEYS: &[&str] = &["scheme", "username", "password", "host", "path", "port", "query", "fragment"];

fn list_items(s: &Snippet) -> Option<&[Snippet]> {
    match &s.0 {
        Node::List(items) => Some(items),
        _ => None,
    }
}

fn map_entries(s: &Snippet) -> Option<&[(String, Snippet)]> {
    match &s.0 {
        Node::Map(entries) => Some(entries),
        _ => None,
    }
}

fn is_call(s: &Snippet) -> bool {
    matches!(s.0, Node::Call(_))
}

/// Checks made when the template is parsed (upstream: at function
/// construction); arguments that are themselves functions are checked
/// when resolved.
pub(crate) fn check_arguments(call: &Call) -> Result<(), TemplateError> {
    let name = call.name.as_str();
    let args = &call.args;
    if is_call(args) && !matches!(call.func, Func::Removed | Func::Yaql | Func::Invalid) {
        return Ok(());
    }
    match call.func {
        Func::Invalid => Err(invalid(format!("The function \"{name}\" is invalid in this context"))),
        Func::Removed => Err(TemplateError::new(
            TemplateErrorKind::InvalidTemplateVersion,
            format!("The template version is invalid: The function {name} is not supported in this version of HOT."),
        )),
        Func::Yaql => Err(TemplateError::new(TemplateErrorKind::NotSupported, "yaql is not supported")),
        Func::GetAttr { all } => match list_items(args) {
            None => Err(invalid(format!("Argument to \"{name}\" must be a list"))),
            Some(items) if all && items.is_empty() => Err(invalid(format!(
                "Arguments to \"{name}\" can be of the next forms: [resource_name] or [resource_name, attribute, (path), ...]"
            ))),
            Some(items) if !all && items.len() < 2 => Err(invalid(format!(
                "Arguments to \"{name}\" must be of the form [resource_name, attribute, (path), ...]"
            ))),
            Some(_) => Ok(()),
        },
        Func::GetResource => match args.as_literal() {
            Some(Value::String(_)) | None => Ok(()),
            Some(_) => Err(invalid(format!("Argument to \"{name}\" must be a string"))),
        },
        Func::GetFile => match args.as_literal() {
            Some(Value::String(_)) | None => Ok(()),
            Some(_) => Err(invalid(format!("Argument to \"{name}\" must be a string"))),
        },
        Func::ListJoin { multi } => {
            let bad = || invalid(format!("Incorrect arguments to \"{name}\" should be: {}", list_join_example(name, multi)));
            match list_items(args) {
                None => Err(bad()),
                Some(items) if multi && items.len() < 2 => Err(bad()),
                Some(items) if !multi && items.len() != 2 => Err(bad()),
                Some(_) => Ok(()),
            }
        }
        Func::StrReplace { .. } => match map_entries(args) {
            None => Err(invalid(format!("Arguments to \"{name}\" must be a map"))),
            Some(entries) => {
                let has = |k: &str| entries.iter().any(|(key, _)| key == k);
                if !has("params") || !has("template") {
                    Err(str_replace_syntax_error(name))
                } else {
                    let params = entries.iter().find(|(k, _)| k == "params").map(|(_, s)| s);
                    match params {
                        None => Err(str_replace_syntax_error(name)),
                        Some(p) if map_entries(p).is_none() && !is_call(p) => {
                            Err(invalid(format!("\"{name}\" parameters must be a mapping")))
                        }
                        Some(_) => Ok(()),
                    }
                }
            }
        },
        Func::Repeat { .. } => match map_entries(args) {
            None => Err(invalid(format!("Arguments to \"{name}\" must be a map"))),
            Some(entries) => {
                let get = |k: &str| entries.iter().find(|(key, _)| key == k).map(|(_, s)| s);
                match (get("for_each"), get("template")) {
                    (Some(for_each), Some(_)) => {
                        if map_entries(for_each).is_none() && !is_call(for_each) {
                            Err(invalid(format!("The \"for_each\" argument to \"{name}\" must contain a map")))
                        } else {
                            Ok(())
                        }
                    }
                    _ => Err(repeat_syntax_error()),
                }
            }
        },
        Func::Digest => check_digest_args(name, &args.to_value()),
        Func::StrSplit => match &args.0 {
            Node::Map(_) | Node::Literal(Value::String(_)) => Err(invalid(format!(
                "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ \",\", \"apples,pears\", <index>]"
            ))),
            _ => Ok(()),
        },
        Func::MapMerge => match list_items(args) {
            Some(_) => Ok(()),
            None => Err(invalid(format!(
                "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ {{ \"key1\": \"val1\" }}, {{ \"key2\": \"val2\" }} ]"
            ))),
        },
        Func::MapReplace => match list_items(args) {
            Some(items) if items.len() == 2 => Ok(()),
            _ => Err(invalid(format!("Incorrect arguments to \"{name}\" should be: {}", map_replace_example(name)))),
        },
        Func::If { nullable } => {
            let ok = match list_items(args) {
                Some(items) => items.len() == 3 || (nullable && items.len() == 2),
                None => false,
            };
            if ok {
                Ok(())
            } else {
                Err(invalid(format!(
                    "Arguments to \"{name}\" must be of the form: [condition_name, value_if_true, value_if_false]"
                )))
            }
        }
        Func::Filter => match list_items(args) {
            None => Err(invalid(format!("Argument to \"{name}\" must be a list"))),
            Some(items) if items.len() != 2 => Err(invalid(format!(
                "\"{name}\" expected 2 arguments of the form [values, sequence] but got {} arguments instead",
                items.len()
            ))),
            Some(_) => Ok(()),
        },
        Func::MakeUrl => match map_entries(args) {
            None => Err(invalid(format!("The arguments to \"{name}\" must be a map"))),
            Some(entries) => {
                let bad: Vec<&str> = entries
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .filter(|k| !MAKE_URL_KEYS.contains(k))
                    .collect();
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(invalid(format!("Invalid arguments to \"{name}\": {}", bad.join(", "))))
                }
            }
        },
        Func::ListConcat { .. } => match list_items(args) {
            Some(_) => Ok(()),
            None => Err(invalid(format!(
                "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ [ <value 1>, <value 2> ], [ <value 3>, <value 4> ] ]"
            ))),
        },
        Func::Contains => match list_items(args) {
            Some(items) if items.len() == 2 => Ok(()),
            Some(items) if !items.is_empty() => {
                Err(invalid(format!("Arguments to \"{name}\" must be of the form: [value1, [value1, value2]]")))
            }
            _ => Err(invalid(format!(
                "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ \"value1\", [ \"value1\", \"value2\"]]"
            ))),
        },
        Func::Equals => match list_items(args) {
            Some(items) if items.len() == 2 => Ok(()),
            _ => Err(invalid(format!("Arguments to \"{name}\" must be of the form: [value_1, value_2]"))),
        },
        Func::Not => match args.as_literal() {
            Some(Value::Null) => Err(invalid(format!("Argument to \"{name}\" must be a condition"))),
            _ => Ok(()),
        },
        Func::And | Func::Or => match list_items(args) {
            Some(items) if items.len() >= 2 => Ok(()),
            Some(_) => Err(invalid(format!("The minimum number of condition arguments to \"{name}\" is 2."))),
            None => Err(invalid(format!("Arguments to \"{name}\" must be a list of conditions"))),
        },
        Func::ResourceFacade => match args.as_literal().and_then(Value::as_str) {
            Some("metadata" | "deletion_policy" | "update_policy") => Ok(()),
            _ => Err(invalid(format!(
                "Incorrect arguments to \"{name}\" should be one of: metadata, deletion_policy, update_policy"
            ))),
        },
        Func::Select => match list_items(args) {
            Some(items) if items.len() == 2 => Ok(()),
            _ => Err(invalid(format!("Arguments to \"{name}\" must be of the form [index, collection]"))),
        },
        _ => Ok(()),
    }
}

const DIGEST_ALGORITHMS: &[&str] = &["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];

fn check_digest_args(name: &str, args: &Value) -> Result<(), TemplateError> {
    let Some(items) = args.as_array().filter(|a| a.iter().all(Value::is_string)) else {
        // Unresolved functions inside are checked at resolution.
        if args.as_array().is_some_and(|a| a.iter().any(|x| x.is_object())) {
            return Ok(());
        }
        return Err(invalid(format!("Argument to function \"{name}\" must be a list of strings")));
    };
    if items.len() != 2 {
        return Err(invalid(format!("Function \"{name}\" usage: [\"<algorithm>\", \"<value>\"]")));
    }
    let algorithm = items[0].as_str().unwrap_or_default().to_lowercase();
    if !DIGEST_ALGORITHMS.contains(&algorithm.as_str()) {
        let listed: Vec<String> = DIGEST_ALGORITHMS.iter().map(|a| format!("'{a}'")).collect();
        return Err(invalid(format!("Algorithm must be one of {{{}}}", listed.join(", "))));
    }
    Ok(())
}

/// For `if` when conditions are known: the chosen branch, or None when a
/// two-argument `if` is false (the value is dropped).
pub(crate) fn choose_if_branch<'a>(
    call: &'a Call,
    conds: &ConditionValues,
    params: &dyn ResolveContext,
) -> Result<Option<&'a Snippet>, TemplateError> {
    let items = list_items(&call.args).ok_or_else(|| {
        invalid(format!(
            "Arguments to \"{}\" must be of the form: [condition_name, value_if_true, value_if_false]",
            call.name
        ))
    })?;
    let Some(condition) = items.first() else {
        return Err(invalid("if requires a condition"));
    };
    let chosen = if conditions::evaluate_inline(condition, conds, params)? { items.get(1) } else { items.get(2) };
    Ok(chosen)
}

/// Evaluates one call under `budget`; None when the value is dropped.
pub(crate) fn evaluate(call: &Call, ctx: &dyn ResolveContext, budget: &Budget) -> Result<Option<Value>, TemplateError> {
    let name = call.name.as_str();
    if let Func::If { .. } = call.func {
        // Conditions were not applied (a bare snippet): only literal
        // booleans and inline expressions can be decided here.
        let empty = ConditionValues::new();
        return match choose_if_branch(call, &empty, ctx)? {
            Some(branch) => branch.eval(ctx, budget),
            None => Ok(None),
        };
    }
    if matches!(call.func, Func::Removed | Func::Yaql | Func::Invalid) {
        check_arguments(call)?;
    }
    let mark = budget.mark();
    let args = call.args.eval(ctx, budget)?.unwrap_or(Value::Null);
    let value = apply(call, name, args, ctx, budget)?;
    // The arguments are dropped; what the function produced is held.
    budget.settle(name, mark, &value)?;
    Ok(Some(value))
}

fn apply(
    call: &Call,
    name: &str,
    args: Value,
    ctx: &dyn ResolveContext,
    budget: &Budget,
) -> Result<Value, TemplateError> {
    let value = match call.func {
        Func::GetParam => get_param(name, &args, ctx)?,
        Func::GetResource => match &args {
            Value::String(r) => ctx.get_resource(r)?,
            _ => return Err(invalid(format!("Argument to \"{name}\" must be a string"))),
        },
        Func::Ref => match &args {
            Value::String(r) => match ctx.param(r) {
                Some(v) => v,
                None => ctx.get_resource(r)?,
            },
            _ => return Err(invalid(format!("Argument to \"{name}\" must be a string"))),
        },
        Func::GetAttr { all } => get_attr(name, all, &args, ctx)?,
        Func::GetFile => match &args {
            Value::String(key) => match ctx.get_file(key) {
                Some(content) => Value::String(content),
                None => {
                    return Err(invalid(format!("No content found in the \"files\" section for {name} path: {key}")))
                }
            },
            _ => return Err(invalid(format!("Argument to \"{name}\" must be a string"))),
        },
        Func::ListJoin { multi } => list_join(name, multi, &args, budget)?,
        Func::CfnJoin => list_join(name, false, &args, budget)?,
        Func::StrReplace { json, strict } => str_replace(name, json, strict, &args, budget)?,
        Func::CfnReplace => cfn_replace(name, &args, budget)?,
        Func::Repeat { maps, permutations } => repeat(name, maps, permutations, &args, budget)?,
        Func::Digest => digest(name, &args)?,
        Func::StrSplit | Func::CfnSplit => str_split(name, &args, budget)?,
        Func::MapMerge => map_merge(name, &args, budget)?,
        Func::MapReplace => map_replace(name, &args, budget)?,
        Func::Filter => filter(name, &args)?,
        Func::MakeUrl => make_url(name, &args)?,
        Func::ListConcat { unique } => list_concat(name, unique, &args, budget)?,
        Func::Contains => contains(name, &args)?,
        Func::Equals => match args.as_array().map(Vec::as_slice) {
            Some([a, b]) => Value::Bool(a == b),
            _ => return Err(invalid(format!("Arguments to \"{name}\" must be of the form: [value_1, value_2]"))),
        },
        Func::Not | Func::And | Func::Or => {
            let empty = ConditionValues::new();
            Value::Bool(conditions::evaluate_inline(&Snippet(Node::Call(Box::new(call.clone()))), &empty, ctx)?)
        }
        Func::ResourceFacade => match &args {
            Value::String(key) => ctx.resource_facade(key)?,
            _ => {
                return Err(invalid(format!(
                    "Incorrect arguments to \"{name}\" should be one of: metadata, deletion_policy, update_policy"
                )))
            }
        },
        Func::Select => select(name, &args)?,
        Func::Base64 => args,
        Func::GetAZs => Value::Array(vec![Value::String("nova".into())]),
        Func::MemberListToMap => member_list_to_map(name, &args)?,
        Func::FindInMap => find_in_map(name, &args)?,
        Func::If { .. } | Func::Removed | Func::Yaql | Func::Invalid => Value::Null,
    };
    Ok(value)
}

fn get_param(name: &str, args: &Value, ctx: &dyn ResolveContext) -> Result<Value, TemplateError> {
    let (param_name, path): (&Value, &[Value]) = match args {
        Value::String(_) => (args, &[]),
        Value::Array(items) if !items.is_empty() => (&items[0], &items[1..]),
        Value::Null => return Err(invalid(format!("Function \"{name}\" must have arguments"))),
        Value::Array(_) => return Err(invalid(format!("Function \"{name}\" must have arguments"))),
        _ => return Err(invalid(format!("Argument to \"{name}\" must be string or list"))),
    };
    let Some(param_name) = param_name.as_str() else {
        return Err(invalid(format!("Parameter name in \"{name}\" must be string")));
    };
    let Some(mut current) = ctx.param(param_name) else {
        return Err(TemplateError::new(
            TemplateErrorKind::UserParameterMissing,
            format!("The Parameter ({param_name}) was not provided."),
        ));
    };
    for key in path {
        let next = match (&current, key) {
            (Value::Object(m), Value::String(k)) => m.get(k).cloned(),
            (Value::Object(m), Value::Number(n)) => m.get(&n.to_string()).cloned(),
            (Value::Array(a), Value::Number(n)) => {
                n.as_u64().and_then(|i| usize::try_from(i).ok()).and_then(|i| a.get(i).cloned())
            }
            (Value::Array(a), Value::String(s)) => match s.parse::<usize>() {
                Ok(i) => a.get(i).cloned(),
                Err(_) => {
                    return Err(invalid(format!(
                        "Path components in '{name}' must be a string that can be parsed into an integer."
                    )))
                }
            },
            (Value::Object(_) | Value::Array(_), _) => {
                return Err(invalid(format!("Path components in \"{name}\" must be strings")))
            }
            _ => return Err(invalid(format!("\"{name}\" can't traverse path"))),
        };
        // Upstream answers '' for a missing key or index.
        match next {
            Some(v) => current = v,
            None => return Ok(Value::String(String::new())),
        }
    }
    Ok(current)
}

fn get_attr(name: &str, all: bool, args: &Value, ctx: &dyn ResolveContext) -> Result<Value, TemplateError> {
    let Some(items) = args.as_array() else {
        return Err(invalid(format!("Argument to \"{name}\" must be a list")));
    };
    let Some(resource) = items.first().and_then(Value::as_str) else {
        return Err(invalid(format!("Argument to \"{name}\" must be a list")));
    };
    match items.get(1) {
        None if all => ctx.get_attr_all(resource),
        None => {
            Err(invalid(format!("Arguments to \"{name}\" must be of the form [resource_name, attribute, (path), ...]")))
        }
        Some(attribute) => {
            let attribute = match attribute {
                Value::String(s) => s.clone(),
                other => py_str(other),
            };
            ctx.get_attr(resource, &attribute, &items[2..])
        }
    }
}

fn list_join(name: &str, multi: bool, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let bad_args =
        || invalid(format!("Incorrect arguments to \"{name}\" should be: {}", list_join_example(name, multi)));
    let items = args.as_array().ok_or_else(bad_args)?;
    let (delim, lists) = match items.split_first() {
        Some((d, rest)) if (multi && !rest.is_empty()) || rest.len() == 1 => (d, rest),
        _ => return Err(bad_args()),
    };
    let Some(delim) = delim.as_str() else {
        return Err(invalid(format!("\"{name}\" delimiter must be a string")));
    };
    let mut parts: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    for list in lists {
        let list = match list {
            Value::Array(a) => a,
            Value::Null => continue,
            // JoinMultiple skips any empty (falsy) argument.
            Value::String(s) if multi && s.is_empty() => continue,
            _ => return Err(invalid(format!("\"{name}\" must operate on a list"))),
        };
        for item in list {
            parts.push(match item {
                Value::Null => "".into(),
                Value::String(s) => s.as_str().into(),
                Value::Object(_) | Value::Array(_) if multi => {
                    // The encoding is new text: at most six bytes per
                    // byte of the item (\uXXXX escapes).
                    budget.reserve(name, Size::new(Size::of(item).bytes.saturating_mul(6), 0))?;
                    keelson_pyfmt::json_dumps(item, true).into()
                }
                other if multi => {
                    return Err(invalid(format!(
                        "Items to join must be string, map or list not {}",
                        truncate(&py_repr(other), 200)
                    )))
                }
                other => {
                    return Err(invalid(format!(
                        "Items to join must be strings not {}",
                        truncate(&py_repr(other), 200)
                    )))
                }
            });
        }
    }
    // The joined length is known before the text is built.
    let len = parts
        .iter()
        .fold(delim.len().saturating_mul(parts.len().saturating_sub(1)), |acc, p| acc.saturating_add(p.len()));
    budget.reserve(name, Size::new(len.saturating_add(2), 0))?;
    let mut out = String::with_capacity(len);
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push_str(delim);
        }
        out.push_str(part);
    }
    Ok(Value::String(out))
}

fn str_replace(name: &str, json: bool, strict: u8, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let Some(m) = args.as_object() else {
        return Err(invalid(format!("Arguments to \"{name}\" must be a map")));
    };
    let (Some(template), Some(params)) = (m.get("template"), m.get("params")) else {
        return Err(str_replace_syntax_error(name));
    };
    let Some(template) = template.as_str() else {
        return Err(invalid(format!("\"{name}\" template must be a string")));
    };
    let Some(params) = params.as_object() else {
        return Err(invalid(format!("\"{name}\" params must be a map")));
    };
    str_replace_in(name, json, strict, template, params, budget)
}

fn str_replace_in(
    name: &str,
    json: bool,
    strict: u8,
    template: &str,
    params: &Map<String, Value>,
    budget: &Budget,
) -> Result<Value, TemplateError> {
    let mut replacements: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::with_capacity(params.len());
    for (placeholder, value) in params {
        if strict >= 2 && value_is_empty(value, json) {
            return Err(invalid(format!(
                "{name} has an undefined or empty value for param {placeholder}, must be a defined non-empty value"
            )));
        }
        let text: std::borrow::Cow<'_, str> = match value {
            Value::Null => "".into(),
            Value::String(s) => s.as_str().into(),
            Value::Number(_) | Value::Bool(_) => py_str(value).into(),
            Value::Object(_) | Value::Array(_) if json => {
                budget.reserve(name, Size::new(Size::of(value).bytes.saturating_mul(6), 0))?;
                keelson_pyfmt::json_dumps(value, true).into()
            }
            _ if json => return Err(invalid(format!("\"{name}\" params must be strings, numbers, list or map."))),
            _ => {
                return Err(invalid(format!(
                    "\"{name}\" params must be strings or numbers, param {placeholder} is not valid"
                )))
            }
        };
        replacements.push((placeholder.as_str(), text));
    }
    // Longest placeholders first, then alphabetical (as upstream sorts).
    replacements.sort_by(|a, b| by_length_then_name(a.0, b.0));
    // The result's length is counted before it is built.
    let len = replaced_len(template, &replacements);
    budget.reserve(name, Size::new(len.saturating_add(2), 0))?;
    let mut found = std::collections::BTreeSet::new();
    let mut result = String::with_capacity(len);
    replace_into(&mut result, template, &replacements, &mut found);
    if strict >= 1 {
        let mut missing: Vec<&str> = params.keys().map(String::as_str).filter(|p| !found.contains(*p)).collect();
        missing.sort_by(|a, b| by_length_then_name(a, b));
        if !missing.is_empty() {
            return Err(invalid(format!("The following params were not found in the template: {}", missing.join(","))));
        }
    }
    Ok(Value::String(result))
}

fn by_length_then_name(a: &str, b: &str) -> std::cmp::Ordering {
    b.len().cmp(&a.len()).then(a.cmp(b))
}

/// str_replace_vstrict: None, "" and empty lists/maps are not values.
fn value_is_empty(v: &Value, _json: bool) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Each placeholder is replaced in the text between the earlier
/// (longer) placeholders' occurrences, never inside a replacement.
fn replace_into<'a>(
    out: &mut String,
    template: &str,
    replacements: &[(&'a str, std::borrow::Cow<'_, str>)],
    found: &mut std::collections::BTreeSet<&'a str>,
) {
    let Some(((placeholder, value), rest)) = replacements.split_first() else {
        out.push_str(template);
        return;
    };
    if placeholder.is_empty() || template.is_empty() {
        return replace_into(out, template, rest, found);
    }
    for (i, piece) in template.split(placeholder).enumerate() {
        if i > 0 {
            found.insert(placeholder);
            out.push_str(value);
        }
        replace_into(out, piece, rest, found);
    }
}

/// The length [`replace_into`] produces, without building it.
fn replaced_len(template: &str, replacements: &[(&str, std::borrow::Cow<'_, str>)]) -> usize {
    let Some(((placeholder, value), rest)) = replacements.split_first() else {
        return template.len();
    };
    if placeholder.is_empty() || template.is_empty() {
        return replaced_len(template, rest);
    }
    template.split(placeholder).enumerate().fold(0usize, |acc, (i, piece)| {
        let joint = if i > 0 { value.len() } else { 0 };
        acc.saturating_add(joint).saturating_add(replaced_len(piece, rest))
    })
}

fn cfn_replace(name: &str, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    match args.as_array().map(Vec::as_slice) {
        Some([Value::Object(params), Value::String(template)]) => str_replace_in(name, false, 0, template, params, budget),
        _ => Err(invalid(format!(
            "Arguments to \"{name}\" must be of the form [{{\"$var1\": \"foo\", \"%var2%\": \"bar\"}}, \"$var1 is %var2%\"]"
        ))),
    }
}

fn repeat(
    name: &str,
    maps: bool,
    permutations_allowed: bool,
    args: &Value,
    budget: &Budget,
) -> Result<Value, TemplateError> {
    let Some(m) = args.as_object() else {
        return Err(invalid(format!("Arguments to \"{name}\" must be a map")));
    };
    let (Some(for_each), Some(template)) = (m.get("for_each"), m.get("template")) else {
        return Err(repeat_syntax_error());
    };
    let Some(for_each) = for_each.as_object() else {
        return Err(invalid(format!("The \"for_each\" argument to \"{name}\" must contain a map")));
    };
    let permutations = match m.get("permutations") {
        Some(Value::Bool(b)) if permutations_allowed => *b,
        Some(_) if permutations_allowed => {
            return Err(invalid(format!("\"permutations\" should be boolean type for {name} function.")))
        }
        _ => true,
    };
    let mut keys: Vec<&str> = Vec::new();
    let mut lists: Vec<std::borrow::Cow<'_, [Value]>> = Vec::new();
    // Maps are accepted (>= 2016-10-14) unless permutations is false.
    let maps_allowed = maps && permutations;
    for (k, v) in for_each {
        let items: std::borrow::Cow<'_, [Value]> = match v {
            Value::Null => std::borrow::Cow::Borrowed(&[]),
            Value::Array(a) => std::borrow::Cow::Borrowed(a.as_slice()),
            Value::Object(o) if maps_allowed => {
                budget.reserve(name, Size::of(v))?;
                o.keys().map(|k| Value::String(k.clone())).collect::<Vec<_>>().into()
            }
            _ if maps_allowed => {
                return Err(invalid(format!(
                    "The values of the \"for_each\" argument to \"{name}\" must be lists or maps"
                )))
            }
            _ => return Err(invalid(format!("The values of the \"for_each\" argument to \"{name}\" must be lists"))),
        };
        keys.push(k);
        lists.push(items);
    }
    if keys.is_empty() {
        return Ok(Value::Array(vec![]));
    }
    let count = if permutations {
        lists.iter().fold(1usize, |acc, l| acc.saturating_mul(l.len()))
    } else {
        let len = lists.first().map(|l| l.len()).unwrap_or(0);
        if lists.iter().any(|l| l.len() != len) {
            return Err(invalid(format!(
                "For {name}, the length of for_each values should be equal if no nested loop."
            )));
        }
        len
    };
    // The result's items (each a copy of the template) are counted before
    // any is built; each copy's text as it is made.
    let per_copy = Size::of(template);
    budget.reserve(name, Size::new(0, per_copy.items.saturating_add(1)).times(count))?;
    let mut out = Vec::with_capacity(count);
    // The combinations in itertools.product's order (the last list varies
    // fastest), or zip's.
    let mut indexes = vec![0usize; lists.len()];
    for n in 0..count {
        if n > 0 {
            if permutations {
                for (slot, list) in indexes.iter_mut().zip(&lists).rev() {
                    *slot += 1;
                    if *slot < list.len() {
                        break;
                    }
                    *slot = 0;
                }
            } else {
                indexes.iter_mut().for_each(|i| *i = n);
            }
        }
        let combo: Vec<&Value> = indexes.iter().zip(&lists).map(|(i, l)| &l[*i]).collect();
        out.push(substitute(name, template, &keys, &combo, budget)?);
    }
    Ok(Value::Array(out))
}

fn substitute(
    name: &str,
    template: &Value,
    keys: &[&str],
    values: &[&Value],
    budget: &Budget,
) -> Result<Value, TemplateError> {
    Ok(match template {
        Value::String(s) => Value::String(substitute_str(name, s, keys, values, budget)?),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| substitute(name, i, keys, values, budget)).collect::<Result<_, _>>()?)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(substitute_str(name, k, keys, values, budget)?, substitute(name, v, keys, values, budget)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// One string of the template with each key replaced in turn (as
/// upstream's str.replace in a loop); each step's length is counted
/// before it is built.
fn substitute_str(
    name: &str,
    s: &str,
    keys: &[&str],
    values: &[&Value],
    budget: &Budget,
) -> Result<String, TemplateError> {
    let mut out = s.to_string();
    budget.reserve(name, Size::of_str(&out))?;
    for (k, v) in keys.iter().zip(values) {
        if k.is_empty() || !out.contains(k) {
            continue;
        }
        let text: std::borrow::Cow<'_, str> = match v {
            Value::String(t) => t.as_str().into(),
            other => py_str(other).into(),
        };
        let occurrences = out.matches(k).count();
        let grown = text.len().saturating_sub(k.len()).saturating_mul(occurrences);
        budget.reserve(name, Size::new(grown, 0))?;
        out = out.replace(k, &text);
    }
    Ok(out)
}

fn digest(name: &str, args: &Value) -> Result<Value, TemplateError> {
    check_digest_args(name, args)?;
    let items = args.as_array().map(Vec::as_slice).unwrap_or_default();
    let algorithm = items.first().and_then(Value::as_str).unwrap_or_default().to_lowercase();
    let data = items.get(1).and_then(Value::as_str).unwrap_or_default().as_bytes();
    use sha2::Digest as _;
    let hexdigest = match algorithm.as_str() {
        "md5" => hex::encode(md5::Md5::digest(data)),
        "sha1" => hex::encode(sha1::Sha1::digest(data)),
        "sha224" => hex::encode(sha2::Sha224::digest(data)),
        "sha256" => hex::encode(sha2::Sha256::digest(data)),
        "sha384" => hex::encode(sha2::Sha384::digest(data)),
        _ => hex::encode(sha2::Sha512::digest(data)),
    };
    Ok(Value::String(hexdigest))
}

fn str_split(name: &str, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let example = format!("\"{name}\" : [ \",\", \"apples,pears\", <index>]");
    let bad = || invalid(format!("Incorrect arguments to \"{name}\" should be: {example}"));
    let items = args.as_array().ok_or_else(bad)?;
    if items.len() < 2 {
        return Err(bad());
    }
    if items[1].is_null() {
        return Ok(Value::Null);
    }
    let (Some(delim), Some(text)) = (items[0].as_str(), items[1].as_str()) else {
        return Err(bad());
    };
    if delim.is_empty() {
        return Err(invalid("empty separator"));
    }
    // The parts are counted before they are built.
    let count = text.matches(delim).count().saturating_add(1);
    budget.reserve(name, Size::new(text.len().saturating_add(count.saturating_mul(3)), count))?;
    let parts: Vec<Value> = text.split(delim).map(|s| Value::String(s.to_string())).collect();
    match items.get(2) {
        None => Ok(Value::Array(parts)),
        Some(index) => {
            let idx = match index {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => s.parse::<i64>().ok(),
                _ => None,
            };
            let Some(idx) = idx else {
                return Err(invalid(format!("Incorrect index to \"{name}\" should be: {example}")));
            };
            let resolved = if idx < 0 { parts.len() as i64 + idx } else { idx };
            usize::try_from(resolved).ok().and_then(|i| parts.get(i).cloned()).ok_or_else(|| {
                invalid(format!(
                    "Incorrect index to \"{name}\" should be between 0 and {}",
                    parts.len().saturating_sub(1)
                ))
            })
        }
    }
}

fn map_merge(name: &str, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let Some(items) = args.as_array() else {
        return Err(invalid(format!(
            "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ {{ \"key1\": \"val1\" }}, {{ \"key2\": \"val2\" }} ]"
        )));
    };
    // At most a copy of every map given, counted before it is made.
    budget
        .reserve(name, items.iter().filter(|i| i.is_object()).fold(Size::default(), |acc, i| acc.plus(Size::of(i))))?;
    let mut out = Map::new();
    for item in items {
        match item {
            Value::Null => {}
            Value::Object(m) => out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone()))),
            _ => return Err(invalid("Incorrect arguments: Items to merge must be maps.")),
        }
    }
    Ok(Value::Object(out))
}

fn map_replace(name: &str, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let bad = || invalid(format!("Incorrect arguments to \"{name}\" should be: {}", map_replace_example(name)));
    let not_maps = || {
        invalid(format!(
            "Incorrect arguments: to \"{name}\", arguments must be a list of maps. Example:  {}",
            map_replace_example(name)
        ))
    };
    let items = args.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
    let as_map = |v: &Value| -> Result<Map<String, Value>, TemplateError> {
        match v {
            Value::Null => Ok(Map::new()),
            Value::Object(m) => Ok(m.clone()),
            _ => Err(not_maps()),
        }
    };
    // The copies made here (the maps, then the result, whose values are
    // the input's or the replacements') are counted before they are made.
    let (input_size, replacements_size) = (Size::of(&items[0]), Size::of(&items[1]));
    budget.reserve(name, input_size.plus(replacements_size))?;
    let input = as_map(&items[0])?;
    let replacements = as_map(&items[1])?;
    if replacements.keys().any(|k| k != "keys" && k != "values") {
        return Err(bad());
    }
    let keys = as_map(replacements.get("keys").unwrap_or(&Value::Null))?;
    let values = as_map(replacements.get("values").unwrap_or(&Value::Null))?;
    let replaced_value = |v: &Value| -> Option<&Value> {
        match v {
            Value::String(s) => values.get(s),
            Value::Number(_) | Value::Bool(_) => values.get(&py_str(v)),
            _ => None,
        }
    };
    let result_size = input.iter().fold(Size::new(2, input.len()), |acc, (k, v)| {
        let key_size = keys.get(k).map(|nk| Size::of(nk).plus(Size::new(2, 0))).unwrap_or_else(|| Size::of_str(k));
        acc.plus(key_size).plus(Size::of(replaced_value(v).unwrap_or(v))).plus(Size::new(2, 0))
    });
    budget.reserve(name, result_size)?;
    let mut out = Map::new();
    for (k, v) in &input {
        let key = match keys.get(k) {
            None => k.clone(),
            Some(new_key) => {
                let new_key = match new_key {
                    Value::String(s) => s.clone(),
                    other => py_str(other),
                };
                if input.contains_key(&new_key) && &new_key != k {
                    return Err(invalid(format!("key replacement {new_key} collides with a key in the input map")));
                }
                if out.contains_key(&new_key) {
                    return Err(invalid(format!("key replacement {new_key} collides with a key in the output map")));
                }
                new_key
            }
        };
        out.insert(key, replaced_value(v).unwrap_or(v).clone());
    }
    Ok(Value::Object(out))
}

fn filter(name: &str, args: &Value) -> Result<Value, TemplateError> {
    let Some(items) = args.as_array() else {
        return Err(invalid(format!("Argument to \"{name}\" must be a list")));
    };
    let [values, sequence] = items.as_slice() else {
        return Err(invalid(format!(
            "\"{name}\" expected 2 arguments of the form [values, sequence] but got {} arguments instead",
            items.len()
        )));
    };
    if !truthy(sequence) {
        return Ok(sequence.clone());
    }
    let Value::Array(sequence) = sequence else {
        return Err(invalid(format!("\"{name}\" only works with lists")));
    };
    if !truthy(values) {
        return Ok(Value::Array(sequence.clone()));
    }
    let Value::Array(values) = values else {
        return Err(invalid(format!("\"{name}\" filters a list of values")));
    };
    let values = ValueSet::new(values);
    Ok(Value::Array(sequence.iter().filter(|i| !values.contains(i)).cloned().collect()))
}

fn make_url(name: &str, args: &Value) -> Result<Value, TemplateError> {
    let Some(m) = args.as_object() else {
        return Err(invalid(format!("The arguments to \"{name}\" must be a map")));
    };
    let text = |k: &str| -> Result<String, TemplateError> {
        match m.get(k) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(invalid(format!("The \"{k}\" argument to \"{name}\" must be a string"))),
        }
    };
    let port = match m.get("port") {
        None => String::new(),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(p) if (1..=65535).contains(&p) => p.to_string(),
            Some(p) => return Err(invalid(format!("Invalid URL port {p}, must be in range 1-65535"))),
            None => return Err(invalid(format!("Invalid URL port \"{n}\" for {name} called with {}", py_repr(args)))),
        },
        Some(Value::String(s)) if s.is_empty() => String::new(),
        Some(Value::String(s)) => match s.trim().parse::<i64>() {
            Ok(p) if (1..=65535).contains(&p) => s.clone(),
            Ok(p) => return Err(invalid(format!("Invalid URL port {p}, must be in range 1-65535"))),
            Err(_) => {
                return Err(invalid(format!("Invalid URL port \"{s}\" for {name} called with {}", py_repr(args))))
            }
        },
        Some(other) => {
            return Err(invalid(format!(
                "Invalid URL port \"{}\" for {name} called with {}",
                py_str(other),
                py_repr(args)
            )))
        }
    };
    let query = match m.get("query") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(q)) => q.clone(),
        Some(_) => return Err(invalid(format!("The \"query\" argument to \"{name}\" must be a map"))),
    };
    let scheme = text("scheme")?;
    if scheme.contains(':') {
        return Err(invalid("URL \"scheme\" should not contain ':'"));
    }
    // netloc as upstream builds it, then urllib's urlunsplit.
    let mut netloc = String::new();
    let username = percent_encode(&text("username")?, b"");
    let password = percent_encode(&text("password")?, b"");
    if !username.is_empty() || !password.is_empty() {
        netloc.push_str(&username);
        if !password.is_empty() {
            netloc.push(':');
            netloc.push_str(&password);
        }
        netloc.push('@');
    }
    let mut host = text("host")?;
    if host.starts_with('[') && host.ends_with(']') && host.len() >= 2 {
        host = host[1..host.len() - 1].to_string();
    }
    let host = percent_encode(&host, b":");
    if host.contains(':') {
        netloc.push_str(&format!("[{host}]"));
    } else {
        netloc.push_str(&host);
    }
    if !port.is_empty() {
        netloc.push(':');
        netloc.push_str(&port);
    }
    let mut url = percent_encode(&text("path")?, b"/");
    const USES_NETLOC: &[&str] = &[
        "", "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms", "https", "shttp", "snews",
        "prospero", "rtsp", "rtspu", "rsync", "svn", "svn+ssh", "sftp", "nfs", "git", "git+ssh", "ws", "wss",
    ];
    if !netloc.is_empty() || (!scheme.is_empty() && USES_NETLOC.contains(&scheme.as_str()) && !url.starts_with("//")) {
        if !url.is_empty() && !url.starts_with('/') {
            url.insert(0, '/');
        }
        url = format!("//{netloc}{url}");
    }
    if !scheme.is_empty() {
        url = format!("{scheme}:{url}");
    }
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s.clone(),
                    other => py_str(other),
                };
                format!("{}={}", quote_plus(k), quote_plus(&v))
            })
            .collect();
        url.push('?');
        url.push_str(&pairs.join("&").replace("%2F", "/"));
    }
    let fragment = percent_encode(&text("fragment")?, b"/");
    if !fragment.is_empty() {
        url.push('#');
        url.push_str(&fragment);
    }
    Ok(Value::String(url))
}

/// Python's urllib.parse.quote: unreserved characters plus `safe` kept.
fn percent_encode(s: &str, safe: &[u8]) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) || safe.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Python's quote_plus (what urlencode uses): spaces as '+', '/' escaped.
fn quote_plus(s: &str) -> String {
    percent_encode(s, b" ").replace(' ', "+")
}

fn list_concat(name: &str, unique: bool, args: &Value, budget: &Budget) -> Result<Value, TemplateError> {
    let Some(items) = args.as_array() else {
        return Err(invalid(format!(
            "Incorrect arguments to \"{name}\" should be: \"{name}\" : [ [ <value 1>, <value 2> ], [ <value 3>, <value 4> ] ]"
        )));
    };
    let mut size = Size::default();
    for item in items {
        match item {
            Value::Null => {}
            Value::Array(_) => size = size.plus(Size::of(item)),
            _ => return Err(invalid("Incorrect arguments: Items to concat must be lists.")),
        }
    }
    // The copy is counted before it is made.
    budget.reserve(name, size)?;
    let all = items.iter().filter_map(Value::as_array).flatten();
    if !unique {
        return Ok(Value::Array(all.cloned().collect()));
    }
    // Upstream deletes earlier duplicates: each value's last occurrence
    // is kept, in order.
    let all: Vec<&Value> = all.collect();
    let mut seen = ValueSet::default();
    let mut kept: Vec<Value> = Vec::new();
    for item in all.iter().rev() {
        if seen.insert(item) {
            kept.push((*item).clone());
        }
    }
    kept.reverse();
    Ok(Value::Array(kept))
}

/// A set of JSON values with `Value`'s equality (maps compared without
/// their order), for the functions that compare every item with every
/// other: a hash per value instead of a scan per pair.
#[derive(Default)]
struct ValueSet<'a>(std::collections::HashMap<u64, Vec<&'a Value>>);

impl<'a> ValueSet<'a> {
    fn new(values: &'a [Value]) -> Self {
        let mut set = ValueSet::default();
        values.iter().for_each(|v| {
            set.insert(v);
        });
        set
    }

    /// False when an equal value was there already.
    fn insert(&mut self, v: &'a Value) -> bool {
        let bucket = self.0.entry(value_hash(v)).or_default();
        if bucket.contains(&v) {
            return false;
        }
        bucket.push(v);
        true
    }

    fn contains(&self, v: &Value) -> bool {
        self.0.get(&value_hash(v)).is_some_and(|bucket| bucket.contains(&v))
    }
}

fn value_hash(v: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match v {
        Value::Null => 0u8.hash(&mut h),
        Value::Bool(b) => (1u8, b).hash(&mut h),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => (2u8, u).hash(&mut h),
            (None, Some(i), _) => (3u8, i).hash(&mut h),
            (None, None, f) => (4u8, f.map(f64::to_bits)).hash(&mut h),
        },
        Value::String(s) => (5u8, s).hash(&mut h),
        Value::Array(items) => {
            6u8.hash(&mut h);
            items.iter().for_each(|i| value_hash(i).hash(&mut h));
        }
        Value::Object(m) => {
            // Order-free: the entries' hashes summed.
            let sum = m.iter().fold(0u64, |acc, (k, item)| {
                let mut e = std::collections::hash_map::DefaultHasher::new();
                (k, value_hash(item)).hash(&mut e);
                acc.wrapping_add(e.finish())
            });
            (7u8, m.len(), sum).hash(&mut h);
        }
    }
    h.finish()
}

fn contains(name: &str, args: &Value) -> Result<Value, TemplateError> {
    match args.as_array().map(Vec::as_slice) {
        Some([value, Value::Array(seq)]) => Ok(Value::Bool(seq.contains(value))),
        Some([Value::String(needle), Value::String(hay)]) => Ok(Value::Bool(hay.contains(needle.as_str()))),
        Some([_, _]) => Err(invalid(format!("Second argument to \"{name}\" should be a sequence."))),
        _ => Err(invalid(format!("Arguments to \"{name}\" must be of the form: [value1, [value1, value2]]"))),
    }
}

fn select(name: &str, args: &Value) -> Result<Value, TemplateError> {
    let Some([index, collection]) = args.as_array().map(Vec::as_slice) else {
        return Err(invalid(format!("Arguments to \"{name}\" must be of the form [index, collection]")));
    };
    let collection = match collection {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    };
    match &collection {
        Value::Object(m) => match index {
            Value::String(k) => Ok(m.get(k).cloned().unwrap_or(Value::String(String::new()))),
            _ => Err(invalid(format!("Index to \"{name}\" must be a string"))),
        },
        Value::Array(a) => {
            let i = match index {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.parse::<u64>().ok(),
                _ => None,
            };
            match i {
                Some(i) => {
                    Ok(usize::try_from(i).ok().and_then(|i| a.get(i)).cloned().unwrap_or(Value::String(String::new())))
                }
                None => Err(invalid(format!("Index to \"{name}\" must be an integer"))),
            }
        }
        Value::Null => Ok(Value::String(String::new())),
        _ => Err(invalid(format!("Arguments to {name} not fully resolved"))),
    }
}

fn member_list_to_map(name: &str, args: &Value) -> Result<Value, TemplateError> {
    let bad = || {
        invalid(format!(
            "Wrong Arguments try: \"{name}\" : [ \"Name\", \"Value\", [ \"MemberList.member.0.Name=key\", ...]]"
        ))
    };
    let Some([Value::String(key_name), Value::String(value_name), Value::Array(members)]) =
        args.as_array().map(Vec::as_slice)
    else {
        return Err(bad());
    };
    let mut keys: std::collections::BTreeMap<String, String> = Default::default();
    let mut values: std::collections::BTreeMap<String, String> = Default::default();
    for m in members {
        let Some((lhs, rhs)) = m.as_str().and_then(|s| s.split_once('=')) else {
            return Err(bad());
        };
        let parts: Vec<&str> = lhs.split('.').collect();
        if parts.len() < 2 {
            return Err(bad());
        }
        let field = parts[parts.len() - 1];
        let idx = parts[parts.len() - 2].to_string();
        if field == key_name {
            keys.insert(idx, rhs.to_string());
        } else if field == value_name {
            values.insert(idx, rhs.to_string());
        }
    }
    let mut out = Map::new();
    for (idx, k) in keys {
        out.insert(k, Value::String(values.get(&idx).cloned().unwrap_or_default()));
    }
    Ok(Value::Object(out))
}

fn find_in_map(name: &str, args: &Value) -> Result<Value, TemplateError> {
    let Some([mappings, map, key, value]) = args.as_array().map(Vec::as_slice) else {
        return Err(invalid(format!("Arguments to \"{name}\" must be of the form [map_name, key, value]")));
    };
    let lookup = |v: &Value| py_str(v);
    mappings
        .get(lookup(map))
        .and_then(|m| m.get(lookup(key)))
        .and_then(|m| m.get(lookup(value)))
        .cloned()
        .ok_or_else(|| invalid(format!("Arguments to \"{name}\" must be of the form [map_name, key, value]")))
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
