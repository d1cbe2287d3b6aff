//! Template parameters: schema (types, constraints), the values of a
//! stack (request > environment > parameter_defaults > default) and how
//! Heat displays them.

use crate::versions::HotVersion;
use crate::{TemplateError, TemplateErrorKind};
use keelson_pyfmt::{json_dumps, str_of as py_str, truthy};
use regex::Regex;
use serde_json::{Map, Number, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Number,
    CommaDelimitedList,
    Json,
    Boolean,
}

impl ParamType {
    fn from_hot(name: &str) -> Option<ParamType> {
        Some(match name {
            "string" => ParamType::String,
            "number" => ParamType::Number,
            "comma_delimited_list" => ParamType::CommaDelimitedList,
            "json" => ParamType::Json,
            "boolean" => ParamType::Boolean,
            _ => return None,
        })
    }
    /// The name POST /validate shows ("String", "CommaDelimitedList"...).
    pub fn validate_name(self) -> &'static str {
        match self {
            ParamType::String => "String",
            ParamType::Number => "Number",
            ParamType::CommaDelimitedList => "CommaDelimitedList",
            ParamType::Json => "Json",
            ParamType::Boolean => "Boolean",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintKind {
    Length {
        min: Option<Number>,
        max: Option<Number>,
    },
    Range {
        min: Option<Number>,
        max: Option<Number>,
    },
    Modulo {
        step: Number,
        offset: Number,
    },
    AllowedValues(Vec<Value>),
    AllowedPattern(String),
    /// Service-backed (e.g. nova.flavor): accepted without checking.
    Custom(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub kind: ConstraintKind,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParamSchema {
    pub name: String,
    pub param_type: ParamType,
    pub label: Option<String>,
    pub description: Option<String>,
    pub default: Option<Value>,
    pub hidden: bool,
    pub immutable: bool,
    pub tags: Vec<String>,
    pub constraints: Vec<Constraint>,
}

/// Values of the pseudo parameters OS::stack_id, OS::stack_name,
/// OS::project_id and OS::region.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PseudoParams {
    pub stack_id: String,
    pub stack_name: String,
    pub project_id: String,
    pub region: String,
}

pub(crate) const PSEUDO_NAMES: &[&str] = &["OS::stack_id", "OS::stack_name", "OS::project_id", "OS::region"];

fn schema_error(message: impl Into<String>) -> TemplateError {
    TemplateError::new(TemplateErrorKind::InvalidSchemaError, message)
}

fn as_number(v: &Value) -> Option<Number> {
    match v {
        Value::Number(n) => Some(n.clone()),
        Value::String(s) => parse_number(s),
        _ => None,
    }
}

fn parse_number(s: &str) -> Option<Number> {
    let t = s.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Some(i.into());
    }
    t.parse::<f64>().ok().and_then(Number::from_f64)
}

fn num_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(0.0)
}

fn opt_num(n: &Option<Number>) -> String {
    n.as_ref().map(|n| n.to_string()).unwrap_or_else(|| "None".into())
}

impl ParamSchema {
    pub(crate) fn parse(name: &str, v: &Value, version: HotVersion) -> Result<ParamSchema, TemplateError> {
        let Some(m) = v.as_object() else {
            return Err(schema_error(format!("Invalid parameter schema for parameter: {name}")));
        };
        let mut allowed = vec!["type", "description", "default", "constraints", "hidden", "label", "immutable"];
        if version.at_least("2018-03-02") {
            allowed.push("tags");
        }
        if let Some(key) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(schema_error(format!("Invalid key '{key}' for parameter ({name})")));
        }
        let type_name = match m.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => return Err(schema_error(format!("Invalid type ({})", py_str(other)))),
            None => return Err(schema_error(format!("Missing parameter type for parameter: {name}"))),
        };
        let param_type =
            ParamType::from_hot(type_name).ok_or_else(|| schema_error(format!("Invalid type ({type_name})")))?;
        let text = |k: &str| m.get(k).map(py_str);
        let flag = |k: &str| match m.get(k) {
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) => Ok(s.eq_ignore_ascii_case("true")),
            None | Some(Value::Null) => Ok(false),
            Some(other) => Err(schema_error(format!("Invalid boolean value for {k}: {}", py_str(other)))),
        };
        let constraints = parse_constraints(m.get("constraints"), param_type, version)?;
        let tags = match m.get("tags") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => a.iter().map(py_str).collect(),
            Some(_) => return Err(schema_error("Invalid parameter tags, expected a list")),
        };
        let schema = ParamSchema {
            name: name.to_string(),
            param_type,
            label: text("label"),
            description: text("description"),
            default: m.get("default").filter(|d| !d.is_null()).cloned(),
            hidden: flag("hidden")?,
            immutable: flag("immutable")?,
            tags,
            constraints,
        };
        if let Some(default) = &schema.default {
            // Upstream validates the default against the schema.
            schema.check_value(default).map_err(|e| {
                TemplateError::new(
                    TemplateErrorKind::InvalidSchemaError,
                    format!("Invalid default {} ({})", py_str(default), e.message),
                )
            })?;
        }
        Ok(schema)
    }

    /// A CFN (AWSTemplateFormatVersion / HeatTemplateFormatVersion)
    /// parameter: Type, Default, NoEcho, AllowedValues, AllowedPattern,
    /// Min/MaxLength, Min/MaxValue, Description, ConstraintDescription, Label.
    pub(crate) fn parse_cfn(name: &str, v: &Value) -> Result<ParamSchema, TemplateError> {
        const KEYS: &[&str] = &[
            "Type",
            "Default",
            "NoEcho",
            "AllowedValues",
            "AllowedPattern",
            "MaxLength",
            "MinLength",
            "MaxValue",
            "MinValue",
            "Description",
            "ConstraintDescription",
            "Label",
        ];
        let Some(m) = v.as_object() else {
            return Err(schema_error(format!("Invalid parameter schema for parameter: {name}")));
        };
        if let Some(key) = m.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(schema_error(format!("Invalid key '{key}' for parameter ({name})")));
        }
        let type_name = match m.get("Type") {
            Some(t) => py_str(t),
            None => return Err(schema_error(format!("Missing parameter type for parameter: {name}"))),
        };
        let param_type = match type_name.as_str() {
            "String" => ParamType::String,
            "Number" => ParamType::Number,
            "CommaDelimitedList" => ParamType::CommaDelimitedList,
            "Json" => ParamType::Json,
            "Boolean" => ParamType::Boolean,
            _ => return Err(schema_error(format!("Invalid type ({type_name})"))),
        };
        let description = m.get("ConstraintDescription").map(py_str);
        let num = |k: &str| m.get(k).and_then(as_number);
        let mut constraints = Vec::new();
        let mut push = |kind| constraints.push(Constraint { kind, description: description.clone() });
        if let Some(Value::Array(values)) = m.get("AllowedValues") {
            push(ConstraintKind::AllowedValues(values.clone()));
        }
        if let Some(p) = m.get("AllowedPattern") {
            push(ConstraintKind::AllowedPattern(py_str(p)));
        }
        if m.contains_key("MinLength") || m.contains_key("MaxLength") {
            push(ConstraintKind::Length { min: num("MinLength"), max: num("MaxLength") });
        }
        if m.contains_key("MinValue") || m.contains_key("MaxValue") {
            push(ConstraintKind::Range { min: num("MinValue"), max: num("MaxValue") });
        }
        let schema = ParamSchema {
            name: name.to_string(),
            param_type,
            label: m.get("Label").map(py_str),
            description: m.get("Description").map(py_str),
            default: m.get("Default").filter(|d| !d.is_null()).cloned(),
            hidden: m.get("NoEcho").is_some_and(|n| py_str(n).eq_ignore_ascii_case("true")),
            immutable: false,
            tags: vec![],
            constraints,
        };
        Ok(schema)
    }

    /// Converts a supplied value to the parameter's type and checks the
    /// constraints; the error message is upstream's (without the
    /// "Parameter 'x' is invalid: " prefix).
    pub fn check_value(&self, raw: &Value) -> Result<Value, TemplateError> {
        let value = self.convert(raw)?;
        for c in &self.constraints {
            if let Err(text) = check_constraint(&c.kind, &value) {
                return Err(TemplateError::validation_failed(c.description.clone().unwrap_or(text)));
            }
        }
        Ok(value)
    }

    fn convert(&self, raw: &Value) -> Result<Value, TemplateError> {
        let fail = |m: String| Err(TemplateError::validation_failed(m));
        match self.param_type {
            ParamType::String => Ok(match raw {
                Value::String(_) => raw.clone(),
                Value::Null => Value::String(String::new()),
                Value::Object(_) | Value::Array(_) => Value::String(json_dumps(raw, true)),
                other => Value::String(py_str(other)),
            }),
            ParamType::Number => match raw {
                Value::Number(_) => Ok(raw.clone()),
                Value::String(s) => match parse_number(s) {
                    Some(n) => Ok(Value::Number(n)),
                    None => fail(format!("could not convert string to float: '{s}'")),
                },
                other => fail(format!("Value must be a number, not {}", py_str(other))),
            },
            ParamType::Boolean => match raw {
                Value::Bool(_) => Ok(raw.clone()),
                Value::Number(n) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => Ok(Value::Bool(n.as_i64() == Some(1))),
                Value::String(s) => match s.trim().to_lowercase().as_str() {
                    "1" | "t" | "true" | "on" | "y" | "yes" => Ok(Value::Bool(true)),
                    "0" | "f" | "false" | "off" | "n" | "no" => Ok(Value::Bool(false)),
                    _ => fail(format!(
                        "Unrecognized value '{s}', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"
                    )),
                },
                other => fail(format!("Unrecognized value '{}', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", py_str(other))),
            },
            ParamType::CommaDelimitedList => match raw {
                Value::Array(items) => Ok(Value::Array(items.iter().map(|i| Value::String(py_str(i))).collect())),
                Value::String(s) if s.is_empty() => Ok(Value::Array(vec![])),
                Value::String(s) => Ok(Value::Array(s.split(',').map(|p| Value::String(p.trim().to_string())).collect())),
                Value::Null => Ok(Value::Array(vec![])),
                other => fail(format!("Value must be a comma-delimited list string: {}", py_str(other))),
            },
            ParamType::Json => match raw {
                Value::String(s) if s.is_empty() => Ok(Value::Object(Map::new())),
                Value::String(s) => match serde_json::from_str::<Value>(s) {
                    Ok(v @ (Value::Object(_) | Value::Array(_))) => Ok(v),
                    Ok(_) => fail("Value must be valid JSON: not a map or list".into()),
                    Err(e) => fail(format!("Value must be valid JSON: {e}")),
                },
                Value::Object(_) | Value::Array(_) => Ok(raw.clone()),
                Value::Null => Ok(Value::Object(Map::new())),
                other => fail(format!("Value must be valid JSON: {}", py_str(other))),
            },
        }
    }

    /// How Heat shows a value of this parameter (stack show "parameters").
    fn display(&self, value: &Value) -> String {
        match (self.param_type, value) {
            (ParamType::CommaDelimitedList, Value::Array(items)) => {
                items.iter().map(py_str).collect::<Vec<_>>().join(",")
            }
            (ParamType::Json, _) => json_dumps(value, false),
            (ParamType::Boolean, Value::Bool(b)) => {
                if *b {
                    "True".into()
                } else {
                    "False".into()
                }
            }
            _ => py_str(value),
        }
    }

    /// The entry of POST /validate's "Parameters".
    pub(crate) fn validate_view(&self, user_value: Option<&Value>) -> Value {
        let mut m = Map::new();
        m.insert("Type".into(), Value::String(self.param_type.validate_name().into()));
        m.insert("Description".into(), Value::String(self.description.clone().unwrap_or_default()));
        m.insert("NoEcho".into(), Value::String(if self.hidden { "true" } else { "false" }.into()));
        m.insert("Label".into(), Value::String(self.label.clone().unwrap_or_else(|| self.name.clone())));
        if let Some(d) = &self.default {
            m.insert("Default".into(), d.clone());
        }
        // Upstream shows the user's value only when it is truthy.
        if let Some(v) = user_value.filter(|v| truthy(v)) {
            m.insert("Value".into(), v.clone());
        }
        if !self.tags.is_empty() {
            m.insert("Tags".into(), Value::Array(self.tags.iter().cloned().map(Value::String).collect()));
        }
        let mut descriptions: Vec<&str> = Vec::new();
        for c in &self.constraints {
            match &c.kind {
                ConstraintKind::Length { min, max } => {
                    if let Some(n) = min {
                        m.insert("MinLength".into(), Value::Number(n.clone()));
                    }
                    if let Some(n) = max {
                        m.insert("MaxLength".into(), Value::Number(n.clone()));
                    }
                }
                ConstraintKind::Range { min, max } => {
                    if let Some(n) = min {
                        m.insert("MinValue".into(), Value::Number(n.clone()));
                    }
                    if let Some(n) = max {
                        m.insert("MaxValue".into(), Value::Number(n.clone()));
                    }
                }
                ConstraintKind::Modulo { step, offset } => {
                    m.insert("Step".into(), Value::Number(step.clone()));
                    m.insert("Offset".into(), Value::Number(offset.clone()));
                }
                ConstraintKind::AllowedValues(values) => {
                    m.insert("AllowedValues".into(), Value::Array(values.clone()));
                }
                ConstraintKind::AllowedPattern(p) => {
                    m.insert("AllowedPattern".into(), Value::String(p.clone()));
                }
                ConstraintKind::Custom(name) => {
                    m.insert("CustomConstraint".into(), Value::String(name.clone()));
                }
            }
            if let Some(d) = c.description.as_deref().filter(|d| !d.is_empty()) {
                descriptions.push(d);
            }
        }
        if !descriptions.is_empty() {
            m.insert("ConstraintDescription".into(), Value::String(descriptions.join(" ")));
        }
        Value::Object(m)
    }
}

fn parse_constraints(
    v: Option<&Value>,
    param_type: ParamType,
    version: HotVersion,
) -> Result<Vec<Constraint>, TemplateError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(schema_error("Invalid parameter constraints for parameter, expected a list")),
    };
    let mut out = Vec::new();
    for item in items {
        let Some(m) = item.as_object() else {
            return Err(schema_error("Invalid parameter constraints, expected a list"));
        };
        let mut valid =
            vec!["description", "length", "range", "allowed_values", "allowed_pattern", "custom_constraint"];
        if version.at_least("2017-02-24") {
            valid.push("modulo");
        }
        if let Some(k) = m.keys().find(|k| !valid.contains(&k.as_str())) {
            return Err(schema_error(format!("Invalid key '{k}' for parameter constraints")));
        }
        let description = m.get("description").map(py_str);
        let min_max = |k: &str| -> Result<(Option<Number>, Option<Number>), TemplateError> {
            let Some(cdef) = m.get(k).and_then(Value::as_object) else {
                return Err(schema_error(format!("Invalid {k} constraint, expected a map")));
            };
            if let Some(bad) = cdef.keys().find(|x| *x != "min" && *x != "max") {
                return Err(schema_error(format!("Invalid key '{bad}' for {k} constraint")));
            }
            let num = |x: &str| -> Result<Option<Number>, TemplateError> {
                match cdef.get(x) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => as_number(v)
                        .map(Some)
                        .ok_or_else(|| schema_error(format!("Invalid {x} value for {k} constraint"))),
                }
            };
            Ok((num("min")?, num("max")?))
        };
        let kind = if m.contains_key("range") {
            let (min, max) = min_max("range")?;
            ConstraintKind::Range { min, max }
        } else if m.contains_key("length") {
            let (min, max) = min_max("length")?;
            ConstraintKind::Length { min, max }
        } else if let Some(cdef) = m.get("modulo") {
            let step = cdef.get("step").and_then(as_number);
            let offset = cdef.get("offset").and_then(as_number);
            match (step, offset) {
                (Some(step), Some(offset)) => ConstraintKind::Modulo { step, offset },
                _ => return Err(schema_error("Invalid modulo constraint: step and offset are required")),
            }
        } else if let Some(values) = m.get("allowed_values") {
            match values {
                Value::Array(a) => ConstraintKind::AllowedValues(a.clone()),
                _ => return Err(schema_error("AllowedValues must be a list")),
            }
        } else if let Some(p) = m.get("allowed_pattern") {
            let pattern = py_str(p);
            if Regex::new(&pattern).is_err() {
                return Err(schema_error(format!("Invalid allowed_pattern \"{pattern}\"")));
            }
            ConstraintKind::AllowedPattern(pattern)
        } else if let Some(c) = m.get("custom_constraint") {
            ConstraintKind::Custom(py_str(c))
        } else {
            return Err(schema_error("No constraint expressed"));
        };
        let applies = match (&kind, param_type) {
            (ConstraintKind::Range { .. } | ConstraintKind::Modulo { .. }, ParamType::Number) => true,
            (ConstraintKind::Range { .. } | ConstraintKind::Modulo { .. }, _) => false,
            (ConstraintKind::Length { .. }, ParamType::String | ParamType::CommaDelimitedList | ParamType::Json) => {
                true
            }
            (ConstraintKind::Length { .. }, _) => false,
            (ConstraintKind::AllowedPattern(_), ParamType::String) => true,
            (ConstraintKind::AllowedPattern(_), _) => false,
            _ => true,
        };
        if !applies {
            let cname = match &kind {
                ConstraintKind::Range { .. } => "range",
                ConstraintKind::Modulo { .. } => "modulo",
                ConstraintKind::Length { .. } => "length",
                _ => "allowed_pattern",
            };
            let tname = match param_type {
                ParamType::String => "String",
                ParamType::Number => "Number",
                ParamType::CommaDelimitedList => "CommaDelimitedList",
                ParamType::Json => "Map",
                ParamType::Boolean => "Boolean",
            };
            return Err(schema_error(format!("{cname} constraint invalid for {tname}")));
        }
        out.push(Constraint { kind, description });
    }
    Ok(out)
}

fn check_constraint(kind: &ConstraintKind, value: &Value) -> Result<(), String> {
    match kind {
        ConstraintKind::Range { min, max } => {
            let Some(v) = value.as_f64() else { return Ok(()) };
            let below = min.as_ref().is_some_and(|m| v < num_f64(m));
            let above = max.as_ref().is_some_and(|m| v > num_f64(m));
            if below || above {
                return Err(format!(
                    "{} is out of range (min: {}, max: {})",
                    py_str(value),
                    opt_num(min),
                    opt_num(max)
                ));
            }
            Ok(())
        }
        ConstraintKind::Length { min, max } => {
            let count = match value {
                Value::String(s) => s.chars().count(),
                Value::Array(a) => a.len(),
                Value::Object(o) => o.len(),
                _ => return Ok(()),
            };
            let len = count as f64;
            let short = min.as_ref().is_some_and(|m| len < num_f64(m));
            let long = max.as_ref().is_some_and(|m| len > num_f64(m));
            if short || long {
                return Err(format!(
                    "length ({}) is out of range (min: {}, max: {})",
                    count,
                    opt_num(min),
                    opt_num(max)
                ));
            }
            Ok(())
        }
        ConstraintKind::Modulo { step, offset } => {
            let Some(v) = value.as_f64() else { return Ok(()) };
            let (s, o) = (num_f64(step), num_f64(offset));
            if s != 0.0 && (v - o).rem_euclid(s) != 0.0 {
                return Err(format!("{} is not a multiple of {} with an offset of {}", py_str(value), step, offset));
            }
            Ok(())
        }
        ConstraintKind::AllowedValues(allowed) => {
            let matches = |candidate: &Value| match value {
                Value::Array(items) => items.iter().all(|i| allowed.iter().any(|a| py_str(a) == py_str(i))),
                _ => py_str(candidate) == py_str(value),
            };
            let ok = match value {
                Value::Array(_) => matches(value),
                _ => allowed.iter().any(matches),
            };
            if ok {
                return Ok(());
            }
            let listed: Vec<String> = allowed.iter().map(py_str).collect();
            Err(format!("\"{}\" is not an allowed value [{}]", py_str(value), listed.join(", ")))
        }
        ConstraintKind::AllowedPattern(pattern) => {
            let Value::String(s) = value else { return Ok(()) };
            // Python's re.match anchors at the start; upstream also requires
            // the match to cover the whole value.
            let anchored = format!("^(?:{pattern})$");
            let matched = Regex::new(&anchored).map(|re| re.is_match(s)).unwrap_or(false);
            if matched {
                Ok(())
            } else {
                Err(format!("\"{s}\" does not match pattern \"{pattern}\""))
            }
        }
        ConstraintKind::Custom(_) => Ok(()),
    }
}

/// The parameter values of one stack, typed, with pseudo parameters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamValues {
    values: BTreeMap<String, Value>,
    /// Template order (no pseudo parameters).
    order: Vec<String>,
    /// Stack show "parameters" in Heat's order: pseudo parameters first.
    display: Vec<(String, String)>,
    hidden: BTreeSet<String>,
    /// Values given by the user (request or environment), not defaults.
    user_given: BTreeMap<String, Value>,
}

impl ParamValues {
    pub(crate) fn insert(&mut self, schema: &ParamSchema, value: Value, user_given: Option<Value>) {
        self.display.push((schema.name.clone(), schema.display(&value)));
        if schema.hidden {
            self.hidden.insert(schema.name.clone());
        }
        if let Some(u) = user_given {
            self.user_given.insert(schema.name.clone(), u);
        }
        self.order.push(schema.name.clone());
        self.values.insert(schema.name.clone(), value);
    }

    /// CFN templates show AWS::StackId (an ARN), AWS::StackName and
    /// AWS::Region instead of the OS:: names.
    pub(crate) fn insert_cfn_pseudo(&mut self, pseudo: &PseudoParams) {
        let arn = format!("arn:openstack:heat::{}:stacks/{}/{}", pseudo.project_id, pseudo.stack_name, pseudo.stack_id);
        let region = if pseudo.region.is_empty() { "ap-southeast-1".to_string() } else { pseudo.region.clone() };
        let mut shown = Vec::new();
        for (name, value) in
            [("AWS::Region", region), ("AWS::StackId", arn), ("AWS::StackName", pseudo.stack_name.clone())]
        {
            self.values.insert(name.to_string(), Value::String(value.clone()));
            shown.push((name.to_string(), value));
        }
        self.display.splice(0..0, shown);
        for (name, value) in [
            ("OS::stack_id", &pseudo.stack_id),
            ("OS::stack_name", &pseudo.stack_name),
            ("OS::project_id", &pseudo.project_id),
        ] {
            self.values.insert(name.to_string(), Value::String(value.clone()));
        }
    }

    pub(crate) fn insert_pseudo(&mut self, pseudo: &PseudoParams) {
        let mut shown = Vec::new();
        for (name, value) in [
            ("OS::stack_id", &pseudo.stack_id),
            ("OS::project_id", &pseudo.project_id),
            ("OS::stack_name", &pseudo.stack_name),
            ("OS::region", &pseudo.region),
        ] {
            self.values.insert(name.to_string(), Value::String(value.clone()));
            if name != "OS::region" {
                shown.push((name.to_string(), value.clone()));
            }
        }
        self.display.splice(0..0, shown);
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    pub fn hidden(&self, name: &str) -> bool {
        self.hidden.contains(name)
    }

    /// The value the user supplied (request or environment), if any.
    pub fn user_value(&self, name: &str) -> Option<&Value> {
        self.user_given.get(name)
    }

    /// Template parameter names in template order (no pseudo parameters).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// Stack show "parameters": strings as Heat shows them, including
    /// OS::stack_id / OS::stack_name / OS::project_id; hidden ones "******".
    pub fn display(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (name, text) in &self.display {
            let shown = if self.hidden.contains(name) { "******".to_string() } else { text.clone() };
            out.insert(name.clone(), Value::String(shown));
        }
        out
    }

    /// All values (pseudo parameters included), e.g. for a ResolveContext.
    pub fn as_map(&self) -> &BTreeMap<String, Value> {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> ParamSchema {
        ParamSchema::parse("p", &v, HotVersion("2021-04-16")).unwrap()
    }

    #[test]
    fn range_message_as_upstream() {
        let s = schema(json!({"type": "number", "constraints": [{"range": {"min": 1, "max": 5}}]}));
        assert_eq!(s.check_value(&json!("9")).unwrap_err().message, "9 is out of range (min: 1, max: 5)");
        assert_eq!(s.check_value(&json!(3)).unwrap(), json!(3));
    }

    #[test]
    fn length_pattern_allowed_modulo() {
        let s =
            schema(json!({"type": "string", "constraints": [{"length": {"min": 2}}, {"allowed_pattern": "[a-z]+"}]}));
        assert_eq!(s.check_value(&json!("a")).unwrap_err().message, "length (1) is out of range (min: 2, max: None)");
        assert_eq!(s.check_value(&json!("AB")).unwrap_err().message, "\"AB\" does not match pattern \"[a-z]+\"");
        let s = schema(json!({"type": "string", "constraints": [{"allowed_values": ["a", "b"]}]}));
        assert_eq!(s.check_value(&json!("c")).unwrap_err().message, "\"c\" is not an allowed value [a, b]");
        let s = schema(json!({"type": "number", "constraints": [{"modulo": {"step": 2, "offset": 1}}]}));
        assert_eq!(s.check_value(&json!(4)).unwrap_err().message, "4 is not a multiple of 2 with an offset of 1");
        assert!(s.check_value(&json!(5)).is_ok());
        let s = schema(json!({"type": "string", "constraints": [{"allowed_values": ["a"], "description": "pick a"}]}));
        assert_eq!(s.check_value(&json!("c")).unwrap_err().message, "pick a");
    }

    #[test]
    fn types_convert() {
        assert_eq!(
            schema(json!({"type": "comma_delimited_list"})).check_value(&json!("a, b")).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(schema(json!({"type": "json"})).check_value(&json!("{\"a\": 1}")).unwrap(), json!({"a": 1}));
        assert_eq!(schema(json!({"type": "boolean"})).check_value(&json!("yes")).unwrap(), json!(true));
        assert!(schema(json!({"type": "number"})).check_value(&json!("x")).is_err());
    }

    #[test]
    fn schema_errors() {
        let e = ParamSchema::parse("p", &json!({"type": "strin"}), HotVersion("2021-04-16")).unwrap_err();
        assert_eq!(e.message, "Invalid type (strin)");
        let e = ParamSchema::parse("p", &json!({"type": "string", "tags": []}), HotVersion("2016-10-14")).unwrap_err();
        assert_eq!(e.message, "Invalid key 'tags' for parameter (p)");
    }
}
