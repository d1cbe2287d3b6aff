//! Every template of the conformance suite parses; env_* files parse as
//! environments.

use keelson_hot::{parse_document, Environment, PseudoParams, Template, TemplateError};
use serde_json::Map;

/// With default parameter values (when the template has them all):
/// resources, outputs and references must work.
fn exercise(t: &Template) -> Result<(), TemplateError> {
    let pseudo =
        PseudoParams { stack_id: "id".into(), stack_name: "n".into(), project_id: "p".into(), region: "r".into() };
    let params = match t.validate_parameters(&Environment::default(), &Map::new(), &pseudo) {
        Ok(p) => p,
        Err(e) if e.type_name == "UserParameterMissing" => return Ok(()),
        Err(e) => return Err(e),
    };
    t.resources(&params)?;
    t.outputs(&params)?;
    t.check_references(&params)?;
    t.validate_view(&Environment::default(), &Map::new())?;
    Ok(())
}
use std::fs;

const DIR: &str = "/work/shared/conformance/heat/templates";

#[test]
fn all_conformance_templates_parse() {
    let Ok(entries) = fs::read_dir(DIR) else {
        eprintln!("conformance templates not available; skipping");
        return;
    };
    let mut parsed = 0;
    let mut failures = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if !name.ends_with(".yaml") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        // The test substitutes the "empty" placeholder type before use.
        let text = text.replace("type: empty", "type: string");

        let doc = match parse_document(&text) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let is_env = name.contains("__env") || name.contains("ENV_") || name.ends_with("__env.yaml");
        let result = if is_env && doc.get("heat_template_version").is_none() {
            Environment::from_value(&doc).map(|_| ())
        } else {
            Template::parse(&doc).and_then(|t| exercise(&t))
        };
        match result {
            Ok(()) => parsed += 1,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
    assert!(parsed > 100, "only {parsed} parsed");
}

/// Every template embedded in the convergence scenarios and in the key
/// scenarios parses and passes the reference checks.
#[test]
fn scenario_templates_parse() {
    let mut count = 0;
    for file in ["convergence_scenarios.json", "scenarios.json"] {
        let Ok(text) = fs::read_to_string(format!("/work/shared/conformance/heat/{file}")) else {
            continue;
        };
        let data: serde_json::Value = serde_json::from_str(&text).expect("json");
        let mut templates = Vec::new();
        collect_templates(&data, &mut templates);
        for t in templates {
            let parsed = Template::parse(&t).unwrap_or_else(|e| panic!("{file}: {e}\n{t}"));
            exercise(&parsed).unwrap_or_else(|e| panic!("{file}: {e}\n{t}"));
            count += 1;
        }
    }
    eprintln!("{count} scenario templates checked");
}

fn collect_templates(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    match v {
        serde_json::Value::Object(m) => {
            if m.contains_key("heat_template_version") {
                out.push(v.clone());
                return;
            }
            m.values().for_each(|x| collect_templates(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_templates(x, out)),
        _ => {}
    }
}
