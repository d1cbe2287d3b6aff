//! Evaluating a compiled schema against an instance.
//!
//! This produces *every* error, in the order Python's `iter_errors` yields
//! them (keywords in schema order, depth first), with the same instance and
//! schema paths, because `best_match` breaks ties by that order. Paths are
//! built while unwinding, so they are stored reversed and flipped once.

use std::borrow::Cow;

use serde_json::Value;

use crate::compile::{Additional, Body, Check, Compiled, Items, Keyword, NodeId};
use crate::error::PathElement;
use crate::messages;
use crate::number::{all_unique, json_equal, PyNum};

/// An error as Python's `ValidationError` holds it before `best_match`.
#[derive(Debug, Clone)]
pub(crate) struct RawError<'v> {
    pub(crate) message: String,
    /// The keyword that failed (`error.validator`); `None` for `false`.
    pub(crate) keyword: Option<&'static str>,
    /// The (sub)schema holding the keyword.
    pub(crate) node: NodeId,
    pub(crate) instance: Cow<'v, Value>,
    /// Instance path, innermost step first.
    pub(crate) rev_path: Vec<PathElement>,
    /// Schema path, innermost step first.
    pub(crate) rev_schema_path: Vec<PathElement>,
    /// Sub-errors of a failed `anyOf`/`oneOf`, with paths relative to it.
    pub(crate) context: Vec<RawError<'v>>,
}

impl RawError<'_> {
    /// Detach from the instance (for errors about values built on the fly,
    /// such as property names checked by `propertyNames`).
    fn into_owned(self) -> RawError<'static> {
        RawError {
            message: self.message,
            keyword: self.keyword,
            node: self.node,
            instance: Cow::Owned(self.instance.into_owned()),
            rev_path: self.rev_path,
            rev_schema_path: self.rev_schema_path,
            context: self.context.into_iter().map(RawError::into_owned).collect(),
        }
    }

    pub(crate) fn path(&self) -> Vec<PathElement> {
        self.rev_path.iter().rev().cloned().collect()
    }

    pub(crate) fn schema_path(&self) -> Vec<PathElement> {
        self.rev_schema_path.iter().rev().cloned().collect()
    }
}

/// Evaluation context over one compiled document.
pub(crate) struct Evaluator<'c> {
    pub(crate) compiled: &'c Compiled,
}

impl<'c> Evaluator<'c> {
    /// `iter_errors`: all errors of `instance` against the root schema.
    pub(crate) fn errors<'v>(&self, instance: &'v Value) -> Vec<RawError<'v>> {
        let mut out = Vec::new();
        self.eval(self.compiled.root, instance, &mut out);
        out
    }

    /// `is_valid` for a subschema.
    pub(crate) fn is_valid(&self, node: NodeId, instance: &Value) -> bool {
        let mut scratch = Vec::new();
        self.eval(node, instance, &mut scratch);
        scratch.is_empty()
    }

    fn eval<'v>(&self, node: NodeId, instance: &'v Value, out: &mut Vec<RawError<'v>>) {
        match &self.compiled.nodes[node].body {
            Body::AlwaysValid => {}
            Body::AlwaysInvalid => out.push(self.false_schema_error(node, instance)),
            Body::Keywords(keywords) => {
                for keyword in keywords {
                    let start = out.len();
                    self.keyword(node, keyword, instance, out);
                    if keyword.name != "if" && keyword.name != "$ref" {
                        for error in &mut out[start..] {
                            error.rev_schema_path.push(PathElement::Key(keyword.name.to_owned()));
                        }
                    }
                }
            }
        }
    }

    fn false_schema_error<'v>(&self, node: NodeId, instance: &'v Value) -> RawError<'v> {
        RawError {
            message: messages::false_schema(instance),
            keyword: None,
            node,
            instance: Cow::Borrowed(instance),
            rev_path: Vec::new(),
            rev_schema_path: Vec::new(),
            context: Vec::new(),
        }
    }

    /// `descend`: evaluate a subschema on a part of the instance and prefix
    /// the new errors' paths. A `false` subschema's error gets no prefix,
    /// exactly as in Python (its early return skips the path bookkeeping).
    fn descend<'v>(
        &self,
        node: NodeId,
        instance: &'v Value,
        path: Option<PathElement>,
        schema_path: Option<PathElement>,
        out: &mut Vec<RawError<'v>>,
    ) {
        if let Body::AlwaysInvalid = self.compiled.nodes[node].body {
            out.push(self.false_schema_error(node, instance));
            return;
        }
        let start = out.len();
        self.eval(node, instance, out);
        for error in &mut out[start..] {
            if let Some(step) = &path {
                error.rev_path.push(step.clone());
            }
            if let Some(step) = &schema_path {
                error.rev_schema_path.push(step.clone());
            }
        }
    }

    fn keyword<'v>(&self, node: NodeId, keyword: &Keyword, instance: &'v Value, out: &mut Vec<RawError<'v>>) {
        let fail = |message: String| RawError {
            message,
            keyword: Some(keyword.name),
            node,
            instance: Cow::Borrowed(instance),
            rev_path: Vec::new(),
            rev_schema_path: Vec::new(),
            context: Vec::new(),
        };
        match &keyword.check {
            Check::Type { types, names } => {
                if !types.iter().any(|t| t.matches(instance)) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    out.push(fail(messages::not_of_type(instance, &names)));
                }
            }
            Check::Enum(choices) => {
                if !choices.iter().any(|c| json_equal(c, instance)) {
                    out.push(fail(messages::not_one_of(instance, &keyword.value)));
                }
            }
            Check::Const(expected) => {
                if !json_equal(instance, expected) {
                    out.push(fail(messages::const_expected(expected)));
                }
            }
            Check::Properties(properties) => {
                if let Value::Object(map) = instance {
                    for (name, child) in properties {
                        if let Some(value) = map.get(name) {
                            let step = PathElement::Key(name.clone());
                            self.descend(*child, value, Some(step.clone()), Some(step), out);
                        }
                    }
                }
            }
            Check::PatternProperties(patterns) => {
                if let Value::Object(map) = instance {
                    for (regex, source, child) in patterns {
                        for (key, value) in map {
                            if regex.is_match(key) {
                                let path = Some(PathElement::Key(key.clone()));
                                let schema_path = Some(PathElement::Key(source.clone()));
                                self.descend(*child, value, path, schema_path, out);
                            }
                        }
                    }
                }
            }
            Check::AdditionalProperties { rule, known, patterns, pattern_sources } => {
                if let Value::Object(map) = instance {
                    let extras: Vec<&String> =
                        map.keys().filter(|k| !known.contains(k) && !patterns.iter().any(|p| p.is_match(k))).collect();
                    match rule {
                        Additional::Schema(child) => {
                            for extra in extras {
                                if let Some(value) = map.get(extra) {
                                    self.descend(*child, value, Some(PathElement::Key(extra.clone())), None, out);
                                }
                            }
                        }
                        Additional::Forbidden if !extras.is_empty() => {
                            let mut sorted: Vec<&str> = extras.iter().map(|s| s.as_str()).collect();
                            sorted.sort_unstable();
                            let message = match pattern_sources {
                                Some(sources) => {
                                    let mut sources: Vec<&str> = sources.iter().map(String::as_str).collect();
                                    sources.sort_unstable();
                                    messages::no_pattern_matches(&sorted, &sources)
                                }
                                None => messages::additional_properties(&sorted),
                            };
                            out.push(fail(message));
                        }
                        Additional::Forbidden => {}
                    }
                }
            }
            Check::Required(names) => {
                if let Value::Object(map) = instance {
                    for name in names {
                        if !map.contains_key(name) {
                            out.push(fail(messages::required_property(name)));
                        }
                    }
                }
            }
            Check::MinProperties(limit) => {
                if let Value::Object(map) = instance {
                    if less_than(map.len(), *limit) {
                        out.push(fail(messages::too_few_properties(instance, *limit)));
                    }
                }
            }
            Check::MaxProperties(limit) => {
                if let Value::Object(map) = instance {
                    if greater_than(map.len(), *limit) {
                        out.push(fail(messages::too_many_properties(instance, *limit)));
                    }
                }
            }
            Check::PropertyNames(child) => {
                if let Value::Object(map) = instance {
                    for key in map.keys() {
                        let name = Value::String(key.clone());
                        let mut scratch: Vec<RawError<'_>> = Vec::new();
                        self.descend(*child, &name, None, None, &mut scratch);
                        for error in scratch {
                            let owned: RawError<'static> = error.into_owned();
                            out.push(owned);
                        }
                    }
                }
            }
            Check::DependentRequired(dependencies) => {
                if let Value::Object(map) = instance {
                    for (property, needed) in dependencies {
                        if !map.contains_key(property) {
                            continue;
                        }
                        for each in needed {
                            if !map.contains_key(each) {
                                out.push(fail(messages::dependency_missing(each, property)));
                            }
                        }
                    }
                }
            }
            Check::DependentSchemas(dependencies) => {
                if let Value::Object(map) = instance {
                    for (property, child) in dependencies {
                        if map.contains_key(property) {
                            self.descend(*child, instance, None, Some(PathElement::Key(property.clone())), out);
                        }
                    }
                }
            }
            Check::Items(items) => {
                if let Value::Array(elements) = instance {
                    self.items(items, elements, &fail, out);
                }
            }
            Check::PrefixItems(children) => {
                if let Value::Array(elements) = instance {
                    for (index, (element, child)) in elements.iter().zip(children).enumerate() {
                        let step = PathElement::Index(index);
                        self.descend(*child, element, Some(step.clone()), Some(step), out);
                    }
                }
            }
            Check::Contains { node: child, min, max } => {
                if let Value::Array(elements) = instance {
                    let max_value = max.clone().unwrap_or_else(|| Value::from(elements.len()));
                    let max_limit = PyNum::from_value(&max_value).unwrap_or(PyNum::Int(i128::MAX));
                    let min_limit = PyNum::from_value(min).unwrap_or(PyNum::Int(1));
                    let mut matches = 0usize;
                    for element in elements {
                        if self.is_valid(*child, element) {
                            matches += 1;
                            if greater_than(matches, max_limit) {
                                let mut error = fail(messages::contains_too_many(&max_value));
                                error.keyword = Some("maxContains");
                                out.push(error);
                                return;
                            }
                        }
                    }
                    if less_than(matches, min_limit) {
                        if matches == 0 {
                            out.push(fail(messages::contains_none(instance)));
                        } else {
                            let mut error = fail(messages::contains_too_few(min, matches));
                            error.keyword = Some("minContains");
                            out.push(error);
                        }
                    }
                }
            }
            Check::MinItems(limit) => {
                if let Value::Array(elements) = instance {
                    if less_than(elements.len(), *limit) {
                        out.push(fail(messages::too_short(instance, *limit)));
                    }
                }
            }
            Check::MaxItems(limit) => {
                if let Value::Array(elements) = instance {
                    if greater_than(elements.len(), *limit) {
                        out.push(fail(messages::too_long(instance, *limit)));
                    }
                }
            }
            Check::UniqueItems => {
                if let Value::Array(elements) = instance {
                    if !all_unique(elements) {
                        out.push(fail(messages::non_unique(instance)));
                    }
                }
            }
            Check::Pattern { regex, source } => {
                if let Value::String(s) = instance {
                    if !regex.is_match(s) {
                        out.push(fail(messages::pattern_mismatch(instance, source)));
                    }
                }
            }
            Check::MinLength(limit) => {
                if let Value::String(s) = instance {
                    if less_than(s.chars().count(), *limit) {
                        out.push(fail(messages::too_short(instance, *limit)));
                    }
                }
            }
            Check::MaxLength(limit) => {
                if let Value::String(s) = instance {
                    if greater_than(s.chars().count(), *limit) {
                        out.push(fail(messages::too_long(instance, *limit)));
                    }
                }
            }
            Check::Format(format) => {
                if !format.check(instance) {
                    out.push(fail(messages::not_a_format(instance, format.name())));
                }
            }
            Check::Minimum { limit, exclusive } => {
                if let Value::Number(n) = instance {
                    let ord = PyNum::from_number(n).py_cmp(*limit);
                    let failed = match ord {
                        Some(std::cmp::Ordering::Less) => true,
                        Some(std::cmp::Ordering::Equal) => *exclusive,
                        _ => false,
                    };
                    if failed {
                        out.push(fail(messages::below_minimum(instance, &keyword.value, *exclusive)));
                    }
                }
            }
            Check::Maximum { limit, exclusive } => {
                if let Value::Number(n) = instance {
                    let ord = PyNum::from_number(n).py_cmp(*limit);
                    let failed = match ord {
                        Some(std::cmp::Ordering::Greater) => true,
                        Some(std::cmp::Ordering::Equal) => *exclusive,
                        _ => false,
                    };
                    if failed {
                        out.push(fail(messages::above_maximum(instance, &keyword.value, *exclusive)));
                    }
                }
            }
            Check::ExclusiveMinimum(limit) => {
                if let Value::Number(n) = instance {
                    if PyNum::from_number(n).py_cmp(*limit) != Some(std::cmp::Ordering::Greater) {
                        out.push(fail(messages::below_minimum(instance, &keyword.value, true)));
                    }
                }
            }
            Check::ExclusiveMaximum(limit) => {
                if let Value::Number(n) = instance {
                    if PyNum::from_number(n).py_cmp(*limit) != Some(std::cmp::Ordering::Less) {
                        out.push(fail(messages::above_maximum(instance, &keyword.value, true)));
                    }
                }
            }
            Check::MultipleOf(divisor) => {
                if let Value::Number(n) = instance {
                    if !is_multiple(PyNum::from_number(n), *divisor) {
                        out.push(fail(messages::not_multiple_of(instance, &keyword.value)));
                    }
                }
            }
            Check::AllOf(children) => {
                for (index, child) in children.iter().enumerate() {
                    self.descend(*child, instance, None, Some(PathElement::Index(index)), out);
                }
            }
            Check::AnyOf(children) => {
                let mut context = Vec::new();
                for (index, child) in children.iter().enumerate() {
                    let mut errors = Vec::new();
                    self.descend(*child, instance, None, Some(PathElement::Index(index)), &mut errors);
                    if errors.is_empty() {
                        return;
                    }
                    context.extend(errors);
                }
                let mut error = fail(messages::not_valid_under_any(instance));
                error.context = context;
                out.push(error);
            }
            Check::OneOf(children) => {
                let mut context = Vec::new();
                let mut first_valid = None;
                for (index, child) in children.iter().enumerate() {
                    let mut errors = Vec::new();
                    self.descend(*child, instance, None, Some(PathElement::Index(index)), &mut errors);
                    if errors.is_empty() {
                        first_valid = Some(index);
                        break;
                    }
                    context.extend(errors);
                }
                let Some(first) = first_valid else {
                    let mut error = fail(messages::not_valid_under_any(instance));
                    error.context = context;
                    out.push(error);
                    return;
                };
                let mut more_valid: Vec<&Value> = children[first + 1..]
                    .iter()
                    .filter(|child| self.is_valid(**child, instance))
                    .map(|child| &self.compiled.nodes[*child].schema)
                    .collect();
                if !more_valid.is_empty() {
                    more_valid.push(&self.compiled.nodes[children[first]].schema);
                    out.push(fail(messages::valid_under_each(instance, &more_valid)));
                }
            }
            Check::Not(child) => {
                if self.is_valid(*child, instance) {
                    let schema = &self.compiled.nodes[*child].schema;
                    out.push(fail(messages::should_not_be_valid(instance, schema)));
                }
            }
            Check::If { condition, then, otherwise } => {
                if self.is_valid(*condition, instance) {
                    if let Some(then) = then {
                        self.descend(*then, instance, None, Some(PathElement::Key("then".to_owned())), out);
                    }
                } else if let Some(otherwise) = otherwise {
                    self.descend(*otherwise, instance, None, Some(PathElement::Key("else".to_owned())), out);
                }
            }
            Check::Ref(target) => self.descend(*target, instance, None, None, out),
        }
    }

    fn items<'v>(
        &self,
        items: &Items,
        elements: &'v [Value],
        fail: &dyn Fn(String) -> RawError<'v>,
        out: &mut Vec<RawError<'v>>,
    ) {
        match items {
            Items::Positional(children) => {
                for (index, (element, child)) in elements.iter().zip(children).enumerate() {
                    let step = PathElement::Index(index);
                    self.descend(*child, element, Some(step.clone()), Some(step), out);
                }
            }
            Items::Rest { prefix, rest, forbidden } => {
                let total = elements.len();
                if total <= *prefix {
                    return;
                }
                let extra = total - prefix;
                if *forbidden {
                    let shown =
                        if extra == 1 { elements[*prefix].clone() } else { Value::Array(elements[*prefix..].to_vec()) };
                    out.push(fail(messages::too_many_items(*prefix, &shown, extra)));
                } else if let Some(child) = rest {
                    for (index, element) in elements.iter().enumerate().skip(*prefix) {
                        self.descend(*child, element, Some(PathElement::Index(index)), None, out);
                    }
                }
            }
        }
    }
}

fn less_than(count: usize, limit: PyNum) -> bool {
    PyNum::Int(count as i128).py_cmp(limit) == Some(std::cmp::Ordering::Less)
}

fn greater_than(count: usize, limit: PyNum) -> bool {
    PyNum::Int(count as i128).py_cmp(limit) == Some(std::cmp::Ordering::Greater)
}

/// jsonschema's `multipleOf`: a float divisor checks that the quotient is
/// integral, an integer divisor checks Python's `%`.
fn is_multiple(instance: PyNum, divisor: PyNum) -> bool {
    match divisor {
        PyNum::Float(d) => {
            let quotient = instance.as_f64() / d;
            if quotient.is_finite() {
                quotient.fract() == 0.0
            } else {
                !instance.has_remainder(divisor)
            }
        }
        PyNum::Int(_) => !instance.has_remainder(divisor),
    }
}
