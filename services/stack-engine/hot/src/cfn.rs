//! CFN-format templates (AWSTemplateFormatVersion 2010-09-09 and
//! HeatTemplateFormatVersion 2012-12-12): sections and keys translated to
//! the same parsed form as HOT.

use crate::parameters::ParamSchema;
use crate::snippet::Snippet;
use crate::template::{ParsedOutput, ParsedResource};
use crate::{TemplateError, TemplateErrorKind};
use keelson_pyfmt::str_of as py_str;
use serde_json::{Map, Value};

pub(crate) struct CfnParts {
    pub full_version: String,
    pub description: Option<String>,
    pub params: Vec<ParamSchema>,
    pub conditions: Vec<(String, Snippet)>,
    pub resources: Vec<ParsedResource>,
    pub outputs: Vec<ParsedOutput>,
}

fn failed(message: impl Into<String>) -> TemplateError {
    TemplateError::validation_failed(message)
}

fn version_of(top: &Map<String, Value>) -> Result<(&'static str, String), TemplateError> {
    for (key, valid) in [("AWSTemplateFormatVersion", "2010-09-09"), ("HeatTemplateFormatVersion", "2012-12-12")] {
        if let Some(v) = top.get(key) {
            let given = py_str(v);
            if given != valid {
                return Err(TemplateError::new(
                    TemplateErrorKind::InvalidTemplateVersion,
                    format!("The template version is invalid: \"{key}: {given}\". \"{key}\" should be one of: {valid}"),
                ));
            }
            return Ok((
                if key.starts_with("AWS") { "AWSTemplateFormatVersion" } else { "HeatTemplateFormatVersion" },
                format!("{key}.{valid}"),
            ));
        }
    }
    Err(TemplateError::new(
        TemplateErrorKind::InvalidTemplateVersion,
        "The template version is invalid: Template version was not provided",
    ))
}

fn section<'a>(top: &'a Map<String, Value>, name: &str) -> Result<Option<&'a Map<String, Value>>, TemplateError> {
    match top.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(failed(format!("The section \"{name}\" must be a map"))),
    }
}

pub(crate) fn parse(top: &Map<String, Value>) -> Result<CfnParts, TemplateError> {
    let (kind, full_version) = version_of(top)?;
    let mut sections = vec![kind, "Description", "Mappings", "Parameters", "Resources", "Outputs"];
    let with_conditions = kind == "AWSTemplateFormatVersion";
    if with_conditions {
        sections.push("Conditions");
    }
    if let Some(bad) = top.keys().find(|k| !sections.contains(&k.as_str())) {
        return Err(TemplateError::new(
            TemplateErrorKind::InvalidTemplateSection,
            format!("The template section is invalid: {bad}"),
        ));
    }
    let mappings = top.get("Mappings").cloned().unwrap_or(Value::Object(Map::new()));
    let snippet =
        |v: &Value, conditions: bool, path: &str| Snippet::parse_cfn(v, &full_version, conditions, path, &mappings);

    let mut params = Vec::new();
    for (name, schema) in section(top, "Parameters")?.into_iter().flatten() {
        params.push(ParamSchema::parse_cfn(name, schema)?);
    }
    let mut conditions = Vec::new();
    if with_conditions {
        for (name, expr) in section(top, "Conditions")?.into_iter().flatten() {
            conditions.push((name.clone(), snippet(expr, true, &format!("Conditions.{name}"))?));
        }
    }
    let mut resources = Vec::new();
    for (name, body) in section(top, "Resources")?.into_iter().flatten() {
        let Some(m) = body.as_object() else {
            return Err(failed("\"Resources\" must contain a map of resource maps."));
        };
        const KEYS: &[&str] = &[
            "Type",
            "Properties",
            "Metadata",
            "DependsOn",
            "DeletionPolicy",
            "UpdatePolicy",
            "Description",
            "Condition",
        ];
        if let Some(bad) = m.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(failed(format!("\"{bad}\" is not a valid keyword inside a resource definition")));
        }
        let Some(Value::String(type_name)) = m.get("Type") else {
            return Err(failed(format!("Resource {name} is missing \"Type\"")));
        };
        let base = format!("Resources.{name}");
        let part = |k: &str| -> Result<Option<Snippet>, TemplateError> {
            match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => Ok(Some(snippet(v, false, &format!("{base}.{k}"))?)),
            }
        };
        let depends_on = match m.get("DependsOn") {
            None | Some(Value::Null) => vec![],
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(items)) => items.iter().map(py_str).collect(),
            Some(_) => return Err(failed(format!("Resource {name} DependsOn type must be list or string"))),
        };
        let condition = match m.get("Condition") {
            Some(c) if with_conditions && !c.is_null() => Some(snippet(c, true, &format!("{base}.Condition"))?),
            _ => None,
        };
        resources.push(ParsedResource {
            name: name.clone(),
            type_name: type_name.clone(),
            properties: part("Properties")?,
            metadata: part("Metadata")?,
            depends_on,
            deletion_policy: part("DeletionPolicy")?,
            update_policy: part("UpdatePolicy")?,
            description: m.get("Description").map(py_str),
            condition,
            external_id: None,
        });
    }
    let mut outputs = Vec::new();
    for (name, body) in section(top, "Outputs")?.into_iter().flatten() {
        let Some(m) = body.as_object() else {
            return Err(failed("\"Outputs\" must contain a map of output maps."));
        };
        if let Some(bad) = m.keys().find(|k| !matches!(k.as_str(), "Value" | "Description" | "Condition")) {
            return Err(failed(format!("\"{bad}\" is not a valid keyword inside a output definition")));
        }
        let condition = match m.get("Condition") {
            Some(c) if with_conditions && !c.is_null() => Some(snippet(c, true, &format!("Outputs.{name}.Condition"))?),
            _ => None,
        };
        outputs.push(ParsedOutput {
            name: name.clone(),
            description: m.get("Description").map(py_str),
            value: snippet(m.get("Value").unwrap_or(&Value::Null), false, &format!("Outputs.{name}.Value"))?,
            condition,
        });
    }
    Ok(CfnParts {
        full_version,
        description: top.get("Description").filter(|d| !d.is_null()).map(py_str),
        params,
        conditions,
        resources,
        outputs,
    })
}
