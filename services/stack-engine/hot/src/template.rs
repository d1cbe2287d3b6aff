//! A parsed HOT template: version, sections, parameter schemata,
//! parameter groups, conditions, resource and output definitions, and the
//! reference / dependency checks.

use crate::conditions;
use crate::environment::Environment;
use crate::functions::Func;
use crate::parameters::{ParamSchema, ParamValues, PseudoParams, PSEUDO_NAMES};
use crate::snippet::{join_path, ConditionValues, Node, ResolveContext, Snippet};
use crate::versions::{valid_version_list, HotVersion};
use crate::{TemplateError, TemplateErrorKind};
use keelson_pyfmt::{str_of as py_str, type_name as py_type_name};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
pub struct Template {
    doc: Value,
    version: HotVersion,
    full_version: String,
    description: Option<String>,
    params: Vec<ParamSchema>,
    param_groups: Option<Value>,
    conditions: Vec<(String, Snippet)>,
    resources: Vec<ParsedResource>,
    outputs: Vec<ParsedOutput>,
    /// CFN format (AWSTemplateFormatVersion / HeatTemplateFormatVersion).
    cfn: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct ParsedResource {
    pub name: String,
    pub type_name: String,
    pub properties: Option<Snippet>,
    pub metadata: Option<Snippet>,
    pub depends_on: Vec<String>,
    pub deletion_policy: Option<Snippet>,
    pub update_policy: Option<Snippet>,
    pub description: Option<String>,
    pub condition: Option<Snippet>,
    pub external_id: Option<Snippet>,
}

#[derive(Debug, Clone)]
pub(crate) struct ParsedOutput {
    pub name: String,
    pub description: Option<String>,
    pub value: Snippet,
    pub condition: Option<Snippet>,
}

/// One resource of the template, with conditions applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDefn {
    pub name: String,
    pub type_name: String,
    pub properties: Snippet,
    pub metadata: Option<Snippet>,
    pub depends_on: Vec<String>,
    /// "Delete", "Retain" or "Snapshot".
    pub deletion_policy: String,
    pub update_policy: Option<Snippet>,
    pub description: Option<String>,
    pub external_id: Option<Snippet>,
}

impl ResourceDefn {
    /// Resources this one needs first: get_resource / get_attr targets in
    /// properties and metadata, plus depends_on.
    pub fn requires(&self) -> BTreeSet<String> {
        let mut out = self.properties.referenced_resources();
        if let Some(m) = &self.metadata {
            out.extend(m.referenced_resources());
        }
        out.extend(self.depends_on.iter().cloned());
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutputDefn {
    pub name: String,
    pub description: Option<String>,
    pub value: Snippet,
}

fn section_error(section: &str) -> TemplateError {
    TemplateError::new(TemplateErrorKind::InvalidTemplateSection, format!("The template section is invalid: {section}"))
}

fn version_error(explanation: String) -> TemplateError {
    TemplateError::new(
        TemplateErrorKind::InvalidTemplateVersion,
        format!("The template version is invalid: {explanation}"),
    )
}

fn failed(message: impl Into<String>) -> TemplateError {
    TemplateError::validation_failed(message)
}

/// Python's type, as upstream's "Found a [<class 'str'>] instead".
fn py_type(v: &Value) -> String {
    format!("<class '{}'>", keelson_pyfmt::type_name(v))
}

const RESOURCE_KEYS: &[&str] =
    &["type", "properties", "metadata", "depends_on", "deletion_policy", "update_policy", "description"];
const RESOURCE_KEYS_2016: &[&str] = &["condition", "external_id"];

/// Parameters only: what conditions may use.
struct ParamsOnly<'a>(&'a ParamValues);

impl ResolveContext for ParamsOnly<'_> {
    fn param(&self, name: &str) -> Option<Value> {
        self.0.get(name).cloned()
    }
    fn get_resource(&self, name: &str) -> Result<Value, TemplateError> {
        Err(failed(format!("get_resource ({name}) is not allowed in conditions")))
    }
    fn get_attr(&self, resource: &str, _attribute: &str, _path: &[Value]) -> Result<Value, TemplateError> {
        Err(failed(format!("get_attr ({resource}) is not allowed in conditions")))
    }
    fn get_attr_all(&self, resource: &str) -> Result<Value, TemplateError> {
        Err(failed(format!("get_attr ({resource}) is not allowed in conditions")))
    }
    fn get_file(&self, _name: &str) -> Option<String> {
        None
    }
}

impl Template {
    pub fn parse(doc: &Value) -> Result<Template, TemplateError> {
        let Some(top) = doc.as_object() else {
            return Err(TemplateError::invalid_template("The template is not a JSON object or YAML mapping."));
        };
        if !top.contains_key("heat_template_version")
            && (top.contains_key("AWSTemplateFormatVersion") || top.contains_key("HeatTemplateFormatVersion"))
        {
            return Self::from_cfn(doc, top);
        }
        let (version, full_version) = parse_version(top)?;
        let mut sections =
            vec!["heat_template_version", "description", "parameter_groups", "parameters", "resources", "outputs"];
        if version.at_least("2016-10-14") {
            sections.push("conditions");
        }
        if let Some(bad) = top.keys().find(|k| !sections.contains(&k.as_str())) {
            return Err(section_error(bad));
        }
        let description = top.get("description").filter(|d| !d.is_null()).map(py_str);

        let mut params = Vec::new();
        match top.get("parameters") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (name, schema) in m {
                    params.push(ParamSchema::parse(name, schema, version)?);
                }
            }
            Some(other) => {
                return Err(failed(format!(
                    "The section \"parameters\" must be a map, found a [{}] instead",
                    py_type(other)
                )))
            }
        }

        let param_groups = top.get("parameter_groups").filter(|g| !g.is_null()).cloned();
        if let Some(groups) = &param_groups {
            validate_parameter_groups(groups, &params)?;
        }

        let mut conditions = Vec::new();
        if let Some(section) = top.get("conditions").filter(|c| !c.is_null()) {
            let Some(m) = section.as_object() else {
                return Err(failed(format!(
                    "Conditions validation error: Condition definitions must be a map. Found a {} instead",
                    py_type_name(section)
                )));
            };
            for (name, expr) in m {
                let path = join_path("conditions", name);
                conditions.push((name.clone(), Snippet::parse(expr, version, true, &path)?));
            }
        }

        let mut resources = Vec::new();
        match top.get("resources") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (name, body) in m {
                    resources.push(parse_resource(name, body, version)?);
                }
            }
            Some(other) => {
                return Err(failed(format!(
                    "\"resources\" must contain a map of resource maps. Found a [{}] instead",
                    py_type(other)
                )))
            }
        }

        let mut outputs = Vec::new();
        match top.get("outputs") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (name, body) in m {
                    outputs.push(parse_output(name, body, version)?);
                }
            }
            Some(other) => {
                return Err(failed(format!(
                    "\"outputs\" must contain a map of output maps. Found a [{}] instead",
                    py_type(other)
                )))
            }
        }

        let template = Template {
            doc: doc.clone(),
            version,
            full_version,
            description,
            params,
            param_groups,
            conditions,
            resources,
            outputs,
            cfn: false,
        };
        template.finish()
    }

    fn from_cfn(doc: &Value, top: &Map<String, Value>) -> Result<Template, TemplateError> {
        let parts = crate::cfn::parse(top)?;
        let template = Template {
            doc: doc.clone(),
            version: HotVersion("2013-05-23"),
            full_version: parts.full_version,
            description: parts.description,
            params: parts.params,
            param_groups: None,
            conditions: parts.conditions,
            resources: parts.resources,
            outputs: parts.outputs,
            cfn: true,
        };
        template.finish()
    }

    fn finish(mut self) -> Result<Template, TemplateError> {
        let param_names: BTreeSet<String> = self.params.iter().map(|p| p.name.clone()).collect();
        for r in &mut self.resources {
            for s in
                [&mut r.properties, &mut r.metadata, &mut r.update_policy, &mut r.deletion_policy, &mut r.external_id]
                    .into_iter()
                    .flatten()
            {
                s.rewrite_refs(&param_names);
            }
        }
        for o in &mut self.outputs {
            o.value.rewrite_refs(&param_names);
        }
        self.check_condition_names()?;
        Ok(self)
    }

    /// e.g. "heat_template_version.2021-04-16" (aliases resolved).
    pub fn version(&self) -> &str {
        &self.full_version
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The document as given (GET .../template).
    pub fn to_value(&self) -> &Value {
        &self.doc
    }

    pub fn param_schemata(&self) -> &[ParamSchema] {
        &self.params
    }

    /// All resource names of the template, enabled or not, in order.
    pub fn resource_names(&self) -> Vec<String> {
        self.resources.iter().map(|r| r.name.clone()).collect()
    }

    /// Type of a resource as written in the template.
    pub fn resource_type(&self, name: &str) -> Option<&str> {
        self.resources.iter().find(|r| r.name == name).map(|r| r.type_name.as_str())
    }

    /// Request params (strings from heatclient, or JSON) > env.parameters >
    /// env.parameter_defaults > the schema default.
    pub fn validate_parameters(
        &self,
        env: &Environment,
        user: &Map<String, Value>,
        pseudo: &PseudoParams,
    ) -> Result<ParamValues, TemplateError> {
        self.parameter_values(env, user, pseudo, false)
    }

    /// As [`Template::validate_parameters`], but a parameter given no value
    /// is null rather than an error: `POST /validate`, and a nested stack
    /// validated before its parent's unknown values exist (upstream
    /// validates values only when it creates).
    pub fn validate_parameters_allow_missing(
        &self,
        env: &Environment,
        user: &Map<String, Value>,
        pseudo: &PseudoParams,
    ) -> Result<ParamValues, TemplateError> {
        self.parameter_values(env, user, pseudo, true)
    }

    fn parameter_values(
        &self,
        env: &Environment,
        user: &Map<String, Value>,
        pseudo: &PseudoParams,
        allow_missing: bool,
    ) -> Result<ParamValues, TemplateError> {
        self.check_unknown(env, user)?;
        let mut values = ParamValues::default();
        for schema in &self.params {
            let given = user.get(&schema.name).or_else(|| env.parameters.get(&schema.name));
            let raw = given.or_else(|| env.parameter_defaults.get(&schema.name)).or(schema.default.as_ref());
            let raw = match raw {
                Some(Value::Null) | None if allow_missing => {
                    values.insert(schema, Value::Null, None);
                    continue;
                }
                raw => raw,
            };
            let Some(raw) = raw else {
                return Err(TemplateError::new(
                    TemplateErrorKind::UserParameterMissing,
                    format!("The Parameter ({}) was not provided.", schema.name),
                ));
            };
            let value = schema
                .check_value(raw)
                .map_err(|e| failed(format!("Parameter '{}' is invalid: {}", schema.name, e.message)))?;
            values.insert(schema, value, given.cloned());
        }
        if self.cfn {
            values.insert_cfn_pseudo(pseudo);
        } else {
            values.insert_pseudo(pseudo);
        }
        Ok(values)
    }

    fn check_unknown(&self, env: &Environment, user: &Map<String, Value>) -> Result<(), TemplateError> {
        for name in user.keys().chain(env.parameters.keys()) {
            if !self.params.iter().any(|p| &p.name == name) {
                return Err(TemplateError::new(
                    TemplateErrorKind::UnknownUserParameter,
                    format!("The Parameter ({name}) was not defined in template."),
                ));
            }
        }
        Ok(())
    }

    /// POST /validate body.
    pub fn validate_view(&self, env: &Environment, user: &Map<String, Value>) -> Result<Value, TemplateError> {
        self.check_unknown(env, user)?;
        let mut out = Map::new();
        out.insert(
            "Description".into(),
            Value::String(self.description.clone().unwrap_or_else(|| "No description".into())),
        );
        let mut params = Map::new();
        for schema in &self.params {
            let mut schema = schema.clone();
            if let Some(d) = env.parameter_defaults.get(&schema.name) {
                schema.default = Some(d.clone());
            }
            let given = user.get(&schema.name).or_else(|| env.parameters.get(&schema.name));
            params.insert(schema.name.clone(), schema.validate_view(given));
        }
        out.insert("Parameters".into(), Value::Object(params));
        if let Some(groups) = &self.param_groups {
            out.insert("ParameterGroups".into(), groups.clone());
        }
        out.insert("Environment".into(), env.to_user_value());
        Ok(Value::Object(out))
    }

    /// Values of the `conditions` section for these parameters.
    pub fn condition_values(&self, params: &ParamValues) -> Result<BTreeMap<String, bool>, TemplateError> {
        conditions::evaluate_section(&self.conditions, &ParamsOnly(params))
    }

    fn is_enabled(
        &self,
        condition: &Option<Snippet>,
        conds: &ConditionValues,
        params: &ParamValues,
    ) -> Result<bool, TemplateError> {
        match condition {
            None => Ok(true),
            Some(c) => conditions::evaluate_inline(c, conds, &ParamsOnly(params)),
        }
    }

    /// Resources whose condition is true, with `if` branches chosen.
    pub fn resources(&self, params: &ParamValues) -> Result<Vec<ResourceDefn>, TemplateError> {
        let conds = self.condition_values(params)?;
        let ctx = ParamsOnly(params);
        let mut out = Vec::new();
        for r in &self.resources {
            if !self.is_enabled(&r.condition, &conds, params)? {
                continue;
            }
            let apply = |s: &Option<Snippet>| -> Result<Option<Snippet>, TemplateError> {
                match s {
                    None => Ok(None),
                    Some(s) => s.apply_conditions(&conds, &ctx),
                }
            };
            let properties = apply(&r.properties)?.unwrap_or_else(|| Snippet::literal(Value::Object(Map::new())));
            let deletion_policy = match apply(&r.deletion_policy)? {
                None => "Delete".to_string(),
                Some(s) => normalise_deletion_policy(&s.resolve(&ctx)?, self.version)?,
            };
            out.push(ResourceDefn {
                name: r.name.clone(),
                type_name: r.type_name.clone(),
                properties,
                metadata: apply(&r.metadata)?,
                depends_on: r.depends_on.clone(),
                deletion_policy,
                update_policy: apply(&r.update_policy)?,
                description: r.description.clone(),
                external_id: apply(&r.external_id)?,
            });
        }
        Ok(out)
    }

    /// Names of resources whose condition is false.
    pub fn skipped(&self, params: &ParamValues) -> Result<Vec<String>, TemplateError> {
        let conds = self.condition_values(params)?;
        let mut out = Vec::new();
        for r in &self.resources {
            if !self.is_enabled(&r.condition, &conds, params)? {
                out.push(r.name.clone());
            }
        }
        Ok(out)
    }

    /// Every output, `if` branches chosen; an output whose condition is
    /// false stays listed with a null value (as upstream, whose
    /// OutputDefinition then has no value).
    pub fn outputs(&self, params: &ParamValues) -> Result<Vec<OutputDefn>, TemplateError> {
        let conds = self.condition_values(params)?;
        let ctx = ParamsOnly(params);
        let mut out = Vec::new();
        for o in &self.outputs {
            if !self.is_enabled(&o.condition, &conds, params)? {
                let value = Snippet::literal(Value::Null);
                out.push(OutputDefn { name: o.name.clone(), description: o.description.clone(), value });
                continue;
            }
            let value = o.value.apply_conditions(&conds, &ctx)?.unwrap_or_else(|| Snippet::literal(Value::Null));
            out.push(OutputDefn { name: o.name.clone(), description: o.description.clone(), value });
        }
        Ok(out)
    }

    /// Every get_resource / get_attr / depends_on names a resource of the
    /// template and get_param a parameter; no dependency cycle.
    pub fn check_references(&self, params: &ParamValues) -> Result<(), TemplateError> {
        self.check_references_with(params, &default_class_name)
    }

    /// As `check_references`; `class_name(type)` names resources in the
    /// cycle message as Heat's Python classes do ("NoneResource").
    pub fn check_references_with(
        &self,
        params: &ParamValues,
        class_name: &dyn Fn(&str) -> String,
    ) -> Result<(), TemplateError> {
        let all: BTreeSet<&str> = self.resources.iter().map(|r| r.name.as_str()).collect();
        let defns = self.resources(params)?;
        for d in &defns {
            let sections = [
                (Some(&d.properties), "Properties"),
                (d.metadata.as_ref(), "Metadata"),
                (d.update_policy.as_ref(), "UpdatePolicy"),
                (d.external_id.as_ref(), "ExternalId"),
            ];
            for (snippet, section) in sections {
                if let Some(s) = snippet {
                    check_snippet_refs(s, &format!("{}.{section}", d.name), &all, params)?;
                }
            }
            for dep in &d.depends_on {
                if !all.contains(dep.as_str()) {
                    return Err(reference_error(dep, &d.name));
                }
            }
        }
        for o in self.outputs(params)? {
            check_snippet_refs(&o.value, &format!("outputs.{}.value", o.name), &all, params)?;
        }
        check_cycles(&defns, class_name)
    }

    fn check_condition_names(&self) -> Result<(), TemplateError> {
        let names: BTreeSet<&str> = self.conditions.iter().map(|(n, _)| n.as_str()).collect();
        let check = |c: &Option<Snippet>| -> Result<(), TemplateError> {
            if let Some(Value::String(name)) = c.as_ref().and_then(Snippet::as_literal) {
                if !names.contains(name.as_str()) {
                    return Err(failed(format!("Invalid condition \"{name}\"")));
                }
            }
            Ok(())
        };
        for r in &self.resources {
            check(&r.condition).map_err(|e| e.at_path(&format!("resources.{}.condition", r.name)))?;
        }
        for o in &self.outputs {
            check(&o.condition).map_err(|e| e.at_path(&format!("outputs.{}.condition", o.name)))?;
        }
        Ok(())
    }
}

fn parse_version(top: &Map<String, Value>) -> Result<(HotVersion, String), TemplateError> {
    let Some(given) = top.get("heat_template_version") else {
        if top.contains_key("AWSTemplateFormatVersion") || top.contains_key("HeatTemplateFormatVersion") {
            return Err(version_error(
                "CFN templates (AWSTemplateFormatVersion / HeatTemplateFormatVersion) are not supported".into(),
            ));
        }
        return Err(version_error("Template version was not provided".into()));
    };
    let text = py_str(given);
    match HotVersion::lookup(&text) {
        Some(v) => Ok((v, v.full_name())),
        None => Err(version_error(format!(
            "\"heat_template_version: {text}\". \"heat_template_version\" should be one of: {}",
            valid_version_list()
        ))),
    }
}

fn validate_parameter_groups(groups: &Value, params: &[ParamSchema]) -> Result<(), TemplateError> {
    let Some(list) = groups.as_array() else {
        return Err(failed("Parameter Groups error: parameter_groups: The parameter_groups should be a list."));
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for group in list {
        let Some(g) = group.as_object() else {
            return Err(failed("Parameter Groups error: parameter_groups: The parameter_groups should be a list."));
        };
        let label = g.get("label").map(py_str).unwrap_or_default();
        let Some(names) = g.get("parameters") else {
            return Err(failed(format!(
                "Parameter Groups error: parameter_groups.{label}: The parameters must be provided for each parameter group."
            )));
        };
        let Some(names) = names.as_array() else {
            return Err(failed(format!(
                "Parameter Groups error: parameter_groups.{label}: The parameters of parameter group should be a list."
            )));
        };
        for n in names {
            let name = py_str(n);
            if !seen.insert(name.clone()) {
                return Err(failed(format!(
                    "Parameter Groups error: parameter_groups.{label}: The {name} parameter must be assigned to one parameter group only."
                )));
            }
            if !params.iter().any(|p| p.name == name) {
                return Err(failed(format!(
                    "Parameter Groups error: parameter_groups.{label}: The grouped parameter {name} does not reference a valid parameter."
                )));
            }
        }
    }
    Ok(())
}

fn parse_resource(name: &str, body: &Value, version: HotVersion) -> Result<ParsedResource, TemplateError> {
    let Some(m) = body.as_object() else {
        return Err(failed(format!(
            "\"resources\" must contain a map of resource maps. Found a [{}] instead",
            py_type(body)
        )));
    };
    if m.is_empty() {
        return Err(failed("Each resource must contain a type key."));
    }
    for key in m.keys() {
        let allowed = RESOURCE_KEYS.contains(&key.as_str())
            || (version.at_least("2016-10-14") && RESOURCE_KEYS_2016.contains(&key.as_str()));
        if !allowed {
            return Err(failed(format!("\"{key}\" is not a valid keyword inside a resource definition")));
        }
    }
    let type_name = match m.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(_) => return Err(failed(format!("Resource {name} type type must be string"))),
        None => return Err(failed(format!("Resource {name} is missing \"type\""))),
    };
    let base = format!("resources.{name}");
    let parse = |key: &str, expect: &str| -> Result<Option<Snippet>, TemplateError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let s = Snippet::parse(v, version, false, &join_path(&base, key))?;
                let ok = matches!(s.0, Node::Call(_))
                    || match expect {
                        "object" => v.is_object(),
                        "string" => v.is_string(),
                        _ => true,
                    };
                if !ok {
                    return Err(failed(format!("Resource {name} {key} type must be {expect}")));
                }
                Ok(Some(s))
            }
        }
    };
    let depends_on = match m.get("depends_on") {
        None | Some(Value::Null) => vec![],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::String(s) => out.push(s.clone()),
                    _ => return Err(failed(format!("Resource {name} depends_on must be a list of strings"))),
                }
            }
            out
        }
        Some(_) => return Err(failed(format!("Resource {name} depends_on type must be list or string"))),
    };
    let condition = if version.at_least("2016-10-14") {
        match m.get("condition") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Snippet::parse(v, version, true, &join_path(&base, "condition"))?),
        }
    } else {
        None
    };
    Ok(ParsedResource {
        name: name.to_string(),
        type_name,
        properties: parse("properties", "object")?,
        metadata: parse("metadata", "object")?,
        depends_on,
        deletion_policy: parse("deletion_policy", "string")?,
        update_policy: parse("update_policy", "object")?,
        description: m.get("description").filter(|d| !d.is_null()).map(py_str),
        condition,
        external_id: parse("external_id", "any")?,
    })
}

fn parse_output(name: &str, body: &Value, version: HotVersion) -> Result<ParsedOutput, TemplateError> {
    let Some(m) = body.as_object() else {
        return Err(failed(format!(
            "Output validation error: outputs.{name}: Output definitions must be a map. Found a {} instead",
            py_type_name(body)
        )));
    };
    if !m.contains_key("value") {
        return Err(failed(format!(
            "Output validation error: outputs.{name}: Each output definition must contain a value key."
        )));
    }
    for key in m.keys() {
        let allowed =
            matches!(key.as_str(), "value" | "description") || (version.at_least("2016-10-14") && key == "condition");
        if !allowed {
            return Err(failed(format!("\"{key}\" is not a valid keyword inside a output definition")));
        }
    }
    let base = format!("outputs.{name}");
    let value = Snippet::parse(m.get("value").unwrap_or(&Value::Null), version, false, &join_path(&base, "value"))?;
    let condition = match m.get("condition") {
        None | Some(Value::Null) => None,
        Some(v) => Some(Snippet::parse(v, version, true, &join_path(&base, "condition"))?),
    };
    Ok(ParsedOutput {
        name: name.to_string(),
        description: m.get("description").filter(|d| !d.is_null()).map(py_str),
        value,
        condition,
    })
}

fn normalise_deletion_policy(v: &Value, version: HotVersion) -> Result<String, TemplateError> {
    let text = py_str(v);
    let canonical = match text.as_str() {
        "Delete" | "Retain" | "Snapshot" => Some(text.clone()),
        "delete" | "retain" | "snapshot" if version.at_least("2016-10-14") => {
            let mut c = text.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        }
        _ => None,
    };
    canonical.ok_or_else(|| failed(format!("Invalid deletion policy \"{text}\"")))
}

fn reference_error(resource: &str, key: &str) -> TemplateError {
    TemplateError::new(
        TemplateErrorKind::InvalidTemplateReference,
        format!("The specified reference \"{resource}\" (in {key}) is incorrect."),
    )
}

/// Walks a snippet with upstream's dependency paths ("a.Properties.value",
/// ".fn_name" for function arguments, "[i]" for list items).
fn check_snippet_refs(
    s: &Snippet,
    path: &str,
    resources: &BTreeSet<&str>,
    params: &ParamValues,
) -> Result<(), TemplateError> {
    match &s.0 {
        Node::Literal(_) => Ok(()),
        Node::List(items) => {
            for (i, item) in items.iter().enumerate() {
                check_snippet_refs(item, &format!("{path}[{i}]"), resources, params)?;
            }
            Ok(())
        }
        Node::Map(entries) => {
            for (k, v) in entries {
                check_snippet_refs(v, &format!("{path}.{k}"), resources, params)?;
            }
            Ok(())
        }
        Node::Call(call) => {
            let target = match call.func {
                Func::GetResource => call.args.as_literal().and_then(Value::as_str).map(str::to_string),
                Func::GetAttr { .. } => match &call.args.0 {
                    Node::List(items) => {
                        items.first().and_then(Snippet::as_literal).and_then(Value::as_str).map(str::to_string)
                    }
                    _ => None,
                },
                _ => None,
            };
            if let Some(t) = target {
                if !resources.contains(t.as_str()) {
                    return Err(reference_error(&t, path));
                }
            }
            if call.func == Func::GetParam {
                for p in s.referenced_params() {
                    if params.get(&p).is_none() && !PSEUDO_NAMES.contains(&p.as_str()) {
                        return Err(TemplateError::new(
                            TemplateErrorKind::UserParameterMissing,
                            format!("The Parameter ({p}) was not provided."),
                        ));
                    }
                }
            }
            check_snippet_refs(&call.args, &format!("{path}.{}", call.name), resources, params)
        }
    }
}

/// Python class names Heat prints for resources in cycle messages.
fn default_class_name(type_name: &str) -> String {
    match type_name {
        "OS::Heat::None" => "NoneResource".into(),
        "OS::Heat::WaitConditionHandle" => "HeatWaitConditionHandle".into(),
        "OS::Heat::WaitCondition" => "HeatWaitCondition".into(),
        "OS::Heat::Stack" => "RemoteStack".into(),
        t if crate::environment::is_template_reference(t) => "TemplateResource".into(),
        t => t.rsplit("::").next().unwrap_or(t).to_string(),
    }
}

/// Upstream's dependency graph: required resources are inserted before
/// their requirers; nodes without requirements are removed until only the
/// cycle (and what depends on it) remains.
fn check_cycles(defns: &[ResourceDefn], class_name: &dyn Fn(&str) -> String) -> Result<(), TemplateError> {
    let enabled: BTreeSet<&str> = defns.iter().map(|d| d.name.as_str()).collect();
    let mut order: Vec<String> = Vec::new();
    let mut requires: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let touch = |name: &str, order: &mut Vec<String>, requires: &mut BTreeMap<String, Vec<String>>| {
        if !requires.contains_key(name) {
            requires.insert(name.to_string(), Vec::new());
            order.push(name.to_string());
        }
    };
    for d in defns {
        let mut deps: Vec<String> = Vec::new();
        for r in d.properties.referenced_resources() {
            deps.push(r);
        }
        if let Some(m) = &d.metadata {
            deps.extend(m.referenced_resources());
        }
        deps.extend(d.depends_on.iter().cloned());
        for dep in deps.into_iter().filter(|x| enabled.contains(x.as_str())) {
            touch(&dep, &mut order, &mut requires);
            touch(&d.name, &mut order, &mut requires);
            if let Some(list) = requires.get_mut(&d.name) {
                if !list.contains(&dep) {
                    list.push(dep);
                }
            }
        }
        touch(&d.name, &mut order, &mut requires);
    }
    loop {
        let free = order.iter().position(|n| requires.get(n).is_none_or(Vec::is_empty));
        let Some(i) = free else { break };
        let removed = order.remove(i);
        requires.remove(&removed);
        for list in requires.values_mut() {
            list.retain(|x| x != &removed);
        }
    }
    if order.is_empty() {
        return Ok(());
    }
    let type_of = |n: &str| defns.iter().find(|d| d.name == n).map(|d| d.type_name.as_str()).unwrap_or("");
    let label = |n: &str| format!("{} \"{n}\"", class_name(type_of(n)));
    let parts: Vec<String> = order
        .iter()
        .map(|n| {
            let reqs: Vec<String> = requires.get(n).map(|l| l.iter().map(|r| label(r)).collect()).unwrap_or_default();
            format!("{}: {{{}}}", label(n), reqs.join(", "))
        })
        .collect();
    Err(TemplateError::new(
        TemplateErrorKind::CircularDependency,
        format!("Circular Dependency Found: {{{}}}", parts.join(", ")),
    ))
}
