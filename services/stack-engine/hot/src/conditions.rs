//! Conditions: the `conditions` section and inline condition expressions
//! (equals, not, and, or, contains, get_param, names of other conditions).

use crate::functions::Func;
use crate::snippet::{ConditionValues, Node, ResolveContext, Snippet};
use crate::TemplateError;
use serde_json::Value;
use std::collections::BTreeSet;

fn invalid_condition(name: &str) -> TemplateError {
    TemplateError::validation_failed(format!("Invalid condition \"{name}\""))
}

/// Evaluates an expression where condition names refer to already
/// evaluated conditions (`if`, resource/output `condition`).
pub(crate) fn evaluate_inline(
    expr: &Snippet,
    conds: &ConditionValues,
    params: &dyn ResolveContext,
) -> Result<bool, TemplateError> {
    evaluate(expr, &mut |name| conds.get(name).copied().ok_or_else(|| invalid_condition(name)), params)
}

/// Evaluates every definition of the `conditions` section; references
/// between conditions are followed, cycles reported.
pub(crate) fn evaluate_section(
    defs: &[(String, Snippet)],
    params: &dyn ResolveContext,
) -> Result<ConditionValues, TemplateError> {
    let mut done = ConditionValues::new();
    for (name, _) in defs {
        let mut visiting = BTreeSet::new();
        evaluate_named(name, defs, params, &mut done, &mut visiting)?;
    }
    Ok(done)
}

fn evaluate_named(
    name: &str,
    defs: &[(String, Snippet)],
    params: &dyn ResolveContext,
    done: &mut ConditionValues,
    visiting: &mut BTreeSet<String>,
) -> Result<bool, TemplateError> {
    if let Some(v) = done.get(name) {
        return Ok(*v);
    }
    let Some((_, expr)) = defs.iter().find(|(n, _)| n == name) else {
        return Err(invalid_condition(name));
    };
    if !visiting.insert(name.to_string()) {
        return Err(TemplateError::validation_failed(format!("Circular definition for condition \"{name}\"")));
    }
    let value = evaluate(expr, &mut |other| evaluate_named(other, defs, params, done, visiting), params)?;
    visiting.remove(name);
    done.insert(name.to_string(), value);
    Ok(value)
}

fn not_boolean(v: &Value) -> TemplateError {
    TemplateError::validation_failed(format!(
        "The condition value should be boolean, after resolved the value is: {}",
        keelson_pyfmt::str_of(v)
    ))
}

fn evaluate(
    expr: &Snippet,
    lookup: &mut dyn FnMut(&str) -> Result<bool, TemplateError>,
    params: &dyn ResolveContext,
) -> Result<bool, TemplateError> {
    match &expr.0 {
        Node::Literal(Value::Bool(b)) => Ok(*b),
        Node::Literal(Value::String(name)) => lookup(name),
        Node::Literal(other) => Err(not_boolean(other)),
        Node::List(_) | Node::Map(_) => Err(TemplateError::validation_failed(format!(
            "Invalid condition \"{}\"",
            keelson_pyfmt::str_of(&expr.to_value())
        ))),
        Node::Call(call) => match call.func {
            Func::Not => {
                let operand = match &call.args.0 {
                    Node::List(items) if items.len() == 1 => &items[0],
                    Node::List(_) => {
                        return Err(TemplateError::validation_failed(format!(
                            "Arguments to \"{}\" must be of the form: [condition]",
                            call.name
                        )))
                    }
                    _ => &call.args,
                };
                Ok(!evaluate(operand, lookup, params)?)
            }
            Func::And | Func::Or => {
                let items = match &call.args.0 {
                    Node::List(items) if items.len() >= 2 => items,
                    _ => {
                        return Err(TemplateError::validation_failed(format!(
                            "Arguments to \"{}\" must be of the form: [condition_1, condition_2, ...]",
                            call.name
                        )))
                    }
                };
                let is_and = call.func == Func::And;
                // Every operand is evaluated (errors surface) as upstream does.
                let mut result = is_and;
                for item in items {
                    let v = evaluate(item, lookup, params)?;
                    result = if is_and { result && v } else { result || v };
                }
                Ok(result)
            }
            _ => match expr.resolve(params)? {
                Value::Bool(b) => Ok(b),
                other => Err(not_boolean(&other)),
            },
        },
    }
}
