//! Every template and environment literal of upstream Heat's functional
//! tests parses (environments as environments, templates through the
//! reference checks), and so does every template the convergence scenarios
//! and the functional tests derive from them.
//!
//! The data is built from the openstack-heat 27.0.1 wheel by
//! tests/conformance/heat-test-data/extract.py into the directory named by
//! KEELSON_HEAT_TEST_DATA. The tests are ignored by default; run with
//! `--include-ignored` and the variable set.

use std::fs;
use std::path::{Path, PathBuf};

use keelson_hot::{parse_document, Environment, PseudoParams, Template, TemplateError, TemplateErrorKind};
use serde_json::Map;

/// With default parameter values (when the template has them all):
/// resources, outputs and references must work.
fn exercise(t: &Template) -> Result<(), TemplateError> {
    let pseudo =
        PseudoParams { stack_id: "id".into(), stack_name: "n".into(), project_id: "p".into(), region: "r".into() };
    let params = match t.validate_parameters(&Environment::default(), &Map::new(), &pseudo) {
        Ok(p) => p,
        Err(e) if e.kind == TemplateErrorKind::UserParameterMissing => return Ok(()),
        Err(e) => return Err(e),
    };
    t.resources(&params)?;
    t.outputs(&params)?;
    t.check_references(&params)?;
    t.validate_view(&Environment::default(), &Map::new())?;
    Ok(())
}

/// What extract.py finds in the 27.0.1 wheel (it checks the same numbers).
const TEMPLATES: usize = 125;
const ENVIRONMENTS: usize = 32;
const CONVERGENCE_TEMPLATES: usize = 91;
const DERIVED_TEMPLATES: usize = 33;

fn data_dir() -> PathBuf {
    match std::env::var_os("KEELSON_HEAT_TEST_DATA") {
        Some(dir) => PathBuf::from(dir),
        None => panic!("set KEELSON_HEAT_TEST_DATA to the output of tests/conformance/heat-test-data/extract.py"),
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
#[ignore = "needs KEELSON_HEAT_TEST_DATA (tests/conformance/heat-test-data/extract.py)"]
fn all_conformance_templates_parse() {
    let dir = data_dir().join("templates");
    let index = read_json(&dir.join("INDEX.json"));
    let index = index.as_object().expect("INDEX.json is an object");
    let files =
        fs::read_dir(&dir).expect("templates/").flatten().filter(|e| e.path().extension() == Some("yaml".as_ref()));
    assert_eq!(files.count(), index.len(), "templates/*.yaml vs INDEX.json entries");
    let (mut templates, mut environments) = (0, 0);
    let mut failures = Vec::new();
    for (name, entry) in index {
        let is_env = match entry["kind"].as_str() {
            Some("environment") => true,
            Some("template") => false,
            other => panic!("{name}: kind {other:?}"),
        };
        let text = fs::read_to_string(dir.join(name)).expect("readable");
        // The test substitutes the "empty" placeholder type before use.
        let text = text.replace("type: empty", "type: string");

        let doc = match parse_document(&text) {
            Ok(d) => d,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let result = if is_env {
            Environment::from_value(&doc).map(|_| ())
        } else {
            Template::parse(&doc).and_then(|t| exercise(&t))
        };
        match result {
            Ok(()) if is_env => environments += 1,
            Ok(()) => templates += 1,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "failures:\n{}", failures.join("\n"));
    assert_eq!((templates, environments), (TEMPLATES, ENVIRONMENTS), "(templates, environments) parsed");
}

/// Every template of the convergence scenarios, and every template the
/// functional tests derive with literal arguments (the ones their create /
/// update / rollback / cancel scenarios send), parses and passes the
/// reference checks.
#[test]
#[ignore = "needs KEELSON_HEAT_TEST_DATA (tests/conformance/heat-test-data/extract.py)"]
fn scenario_templates_parse() {
    let dir = data_dir();
    for (file, expected) in
        [("convergence_scenarios.json", CONVERGENCE_TEMPLATES), ("derived_templates.json", DERIVED_TEMPLATES)]
    {
        let data = read_json(&dir.join(file));
        let mut templates = Vec::new();
        collect_templates(&data, &mut templates);
        for t in &templates {
            let parsed = Template::parse(t).unwrap_or_else(|e| panic!("{file}: {e}\n{t}"));
            exercise(&parsed).unwrap_or_else(|e| panic!("{file}: {e}\n{t}"));
        }
        assert_eq!(templates.len(), expected, "{file}: templates checked");
    }
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
