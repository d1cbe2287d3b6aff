//! Template sections, parameters, conditions, resources, outputs and the
//! error texts recorded from the real Heat (api-captures/v1-exchanges.json).

use keelson_hot::{parse_document, Environment, PseudoParams, Template, TemplateError};
use serde_json::{json, Map, Value};

fn pseudo() -> PseudoParams {
    PseudoParams {
        stack_id: "sid".into(),
        stack_name: "sname".into(),
        project_id: "pid".into(),
        region: "RegionOne".into(),
    }
}

fn params(t: &Template, user: Value) -> Result<keelson_hot::ParamValues, TemplateError> {
    let user: Map<String, Value> = user.as_object().cloned().unwrap_or_default();
    t.validate_parameters(&Environment::default(), &user, &pseudo())
}

fn capture_template() -> Value {
    json!({"heat_template_version": "2021-04-16", "description": "capture template",
        "parameters": {"v": {"type": "string", "default": "one"},
                       "n": {"type": "number", "default": 2, "constraints": [{"range": {"min": 1, "max": 5}}]}},
        "resources": {"rs": {"type": "OS::Heat::RandomString", "properties": {"length": 10}},
                      "tr": {"type": "OS::Heat::TestResource", "properties": {"value": {"get_param": "v"}}},
                      "val": {"type": "OS::Heat::Value", "properties": {"value": {"list_join": ["-", [{"get_attr": ["tr", "output"]}, {"get_param": "v"}]]}}},
                      "none": {"type": "OS::Heat::None", "depends_on": ["val", "rs"]},
                      "handle": {"type": "OS::Heat::WaitConditionHandle"}},
        "outputs": {"tr_out": {"description": "output of tr", "value": {"get_attr": ["tr", "output"]}},
                    "val_out": {"value": {"get_attr": ["val", "value"]}},
                    "rs_len": {"value": {"str_replace": {"template": "len=$L", "params": {"$L": {"get_param": "n"}}}}}}})
}

#[test]
fn validate_view_matches_capture() {
    let t = Template::parse(&capture_template()).unwrap();
    let body = t.validate_view(&Environment::default(), &Map::new()).unwrap();
    let expected = json!({"Description": "capture template", "Parameters": {
        "v": {"Type": "String", "Description": "", "NoEcho": "false", "Label": "v", "Default": "one"},
        "n": {"Type": "Number", "Description": "", "NoEcho": "false", "Label": "n", "Default": 2, "MinValue": 1, "MaxValue": 5}},
        "Environment": {"resource_registry": {"resources": {}}, "parameters": {}, "parameter_defaults": {}, "event_sinks": []}});
    assert_eq!(body, expected);
    assert_eq!(t.version(), "heat_template_version.2021-04-16");
    let p = params(&t, json!({})).unwrap();
    assert!(t.check_references(&p).is_ok());
    let res = t.resources(&p).unwrap();
    let none = res.iter().find(|r| r.name == "none").unwrap();
    assert_eq!(none.requires().into_iter().collect::<Vec<_>>(), vec!["rs", "val"]);
    let val = res.iter().find(|r| r.name == "val").unwrap();
    assert_eq!(val.requires().into_iter().collect::<Vec<_>>(), vec!["tr"]);
    assert_eq!(t.outputs(&p).unwrap().len(), 3);
}

#[test]
fn parameter_errors_from_capture() {
    let t = Template::parse(&capture_template()).unwrap();
    let e = params(&t, json!({"n": 9})).unwrap_err();
    assert_eq!(
        (e.type_name(), e.message.as_str()),
        ("StackValidationFailed", "Parameter 'n' is invalid: 9 is out of range (min: 1, max: 5)")
    );
    let e = params(&t, json!({"n": "9"})).unwrap_err();
    assert_eq!(e.message, "Parameter 'n' is invalid: 9 is out of range (min: 1, max: 5)");
    let e = params(&t, json!({"zzz": 1})).unwrap_err();
    assert_eq!(
        (e.type_name(), e.message.as_str()),
        ("UnknownUserParameter", "The Parameter (zzz) was not defined in template.")
    );
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "parameters": {"req": {"type": "string"}}}))
        .unwrap();
    let e = params(&t, json!({})).unwrap_err();
    assert_eq!((e.type_name(), e.message.as_str()), ("UserParameterMissing", "The Parameter (req) was not provided."));
}

#[test]
fn parameter_precedence_and_display() {
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "parameters": {
        "a": {"type": "string", "default": "d"}, "b": {"type": "number", "default": 1},
        "c": {"type": "comma_delimited_list", "default": "x,y"}, "h": {"type": "string", "default": "s", "hidden": true},
        "j": {"type": "json", "default": {"k": 1}}, "bo": {"type": "boolean", "default": false}}})).unwrap();
    let env = Environment::from_value(&json!({"parameters": {"a": "env"}, "parameter_defaults": {"b": 5}})).unwrap();
    let user: Map<String, Value> = json!({"c": "p,q"}).as_object().cloned().unwrap();
    let p = t.validate_parameters(&env, &user, &pseudo()).unwrap();
    assert_eq!(p.get("a"), Some(&json!("env")));
    assert_eq!(p.get("b"), Some(&json!(5)));
    assert_eq!(p.get("c"), Some(&json!(["p", "q"])));
    assert_eq!(p.get("OS::stack_name"), Some(&json!("sname")));
    let d = p.display();
    assert_eq!(d["c"], json!("p,q"));
    assert_eq!(d["h"], json!("******"));
    assert_eq!(d["j"], json!("{\"k\": 1}"));
    assert_eq!(d["bo"], json!("False"));
    assert_eq!(d["OS::stack_id"], json!("sid"));
    assert_eq!(d["OS::project_id"], json!("pid"));
    assert!(p.hidden("h"));
}

#[test]
fn invalid_reference_from_capture() {
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::Value", "properties": {"value": {"get_attr": ["nope", "x"]}}}}})).unwrap();
    let p = params(&t, json!({})).unwrap();
    let e = t.check_references(&p).unwrap_err();
    assert_eq!(
        (e.type_name(), e.message.as_str()),
        ("InvalidTemplateReference", "The specified reference \"nope\" (in a.Properties.value) is incorrect.")
    );
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None", "depends_on": "zz"}}})).unwrap();
    let e = t.check_references(&params(&t, json!({})).unwrap()).unwrap_err();
    assert_eq!(e.message, "The specified reference \"zz\" (in a) is incorrect.");
}

#[test]
fn circular_dependency_from_capture() {
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None", "depends_on": ["b"]}, "b": {"type": "OS::Heat::None", "depends_on": ["a"]}}})).unwrap();
    let e = t.check_references(&params(&t, json!({})).unwrap()).unwrap_err();
    assert_eq!(e.type_name(), "CircularDependencyException");
    assert_eq!(e.message, "Circular Dependency Found: {NoneResource \"b\": {NoneResource \"a\"}, NoneResource \"a\": {NoneResource \"b\"}}");
}

#[test]
fn version_and_section_errors() {
    let e = Template::parse(&json!({"heat_template_version": "2099-01-01", "resources": {}})).unwrap_err();
    assert_eq!(e.type_name(), "InvalidTemplateVersion");
    assert_eq!(e.message, "The template version is invalid: \"heat_template_version: 2099-01-01\". \"heat_template_version\" should be one of: 2013-05-23, 2014-10-16, 2015-04-30, 2015-10-15, 2016-04-08, 2016-10-14, 2017-02-24, 2017-09-01, 2018-03-02, 2018-08-31, 2021-04-16, newton, ocata, pike, queens, rocky, wallaby");
    let e = Template::parse(&json!({"heat_template_version": "2016-04-08", "conditions": {}})).unwrap_err();
    assert_eq!(
        (e.type_name(), e.message.as_str()),
        ("InvalidTemplateSection", "The template section is invalid: conditions")
    );
    let t = Template::parse(&parse_document("heat_template_version: wallaby\n").unwrap()).unwrap();
    assert_eq!(t.version(), "heat_template_version.2021-04-16");
    let t = Template::parse(&parse_document("heat_template_version: 2013-05-23\n").unwrap()).unwrap();
    assert_eq!(t.description(), None);
}

#[test]
fn resource_definition_errors() {
    let e = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "OS::Heat::None", "propertes": {}}}})).unwrap_err();
    assert_eq!(
        (e.type_name(), e.message.as_str()),
        ("StackValidationFailed", "\"propertes\" is not a valid keyword inside a resource definition")
    );
    let e = Template::parse(&json!({"heat_template_version": "2015-04-30", "resources": {"a": {"type": "OS::Heat::None", "condition": true}}})).unwrap_err();
    assert_eq!(e.message, "\"condition\" is not a valid keyword inside a resource definition");
    let e = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"properties": {}}}}))
        .unwrap_err();
    assert_eq!(e.message, "Resource a is missing \"type\"");
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "X", "deletion_policy": "retain"}, "b": {"type": "X", "deletion_policy": "Bogus"}}})).unwrap();
    let e = t.resources(&params(&t, json!({})).unwrap()).unwrap_err();
    assert_eq!(e.message, "Invalid deletion policy \"Bogus\"");
    let t = Template::parse(
        &json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "X", "deletion_policy": "retain"}}}),
    )
    .unwrap();
    assert_eq!(t.resources(&params(&t, json!({})).unwrap()).unwrap()[0].deletion_policy, "Retain");
    let t = Template::parse(
        &json!({"heat_template_version": "2015-04-30", "resources": {"a": {"type": "X", "deletion_policy": "retain"}}}),
    )
    .unwrap();
    assert!(t.resources(&params(&t, json!({})).unwrap()).is_err());
}

#[test]
fn conditions_select_resources_outputs_and_branches() {
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16",
        "parameters": {"env": {"type": "string", "default": "prod"}, "zones": {"type": "comma_delimited_list", "default": "a,b"}},
        "conditions": {"is_prod": {"equals": [{"get_param": "env"}, "prod"]},
                       "not_prod": {"not": "is_prod"},
                       "both": {"and": ["is_prod", {"contains": ["a", {"get_param": "zones"}]}]},
                       "either": {"or": ["not_prod", false]}},
        "resources": {"p": {"type": "OS::Heat::None", "condition": "is_prod", "properties": {"x": {"if": ["both", "yes", "no"]}, "y": {"if": ["not_prod", "drop"]}}},
                      "d": {"type": "OS::Heat::None", "condition": "not_prod"},
                      "i": {"type": "OS::Heat::None", "condition": {"not": "either"}},
                      "u": {"type": "OS::Heat::None", "properties": {"r": {"get_resource": "d"}}}},
        "outputs": {"o1": {"value": 1, "condition": "is_prod"}, "o2": {"value": 2, "condition": "not_prod"}}})).unwrap();
    let p = params(&t, json!({})).unwrap();
    let conds = t.condition_values(&p).unwrap();
    assert!(conds["is_prod"]);
    assert!(!conds["either"]);
    let res = t.resources(&p).unwrap();
    let names: Vec<&str> = res.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, vec!["p", "i", "u"]);
    assert_eq!(res[0].properties.to_value(), json!({"x": "yes"}));
    assert_eq!(t.skipped(&p).unwrap(), vec!["d".to_string()]);
    // A disabled output stays, with a null value (upstream OutputDefinition(key, None)).
    let outputs = t.outputs(&p).unwrap();
    assert_eq!(outputs.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), vec!["o1", "o2"]);
    assert_eq!(outputs[1].value.to_value(), Value::Null);
    // get_resource on a skipped resource is a valid reference.
    assert!(t.check_references(&p).is_ok());
    let p = params(&t, json!({"env": "dev"})).unwrap();
    let names: Vec<String> = t.resources(&p).unwrap().into_iter().map(|r| r.name).collect();
    assert_eq!(names, vec!["d", "u"]);
}

#[test]
fn condition_errors() {
    let e = Template::parse(
        &json!({"heat_template_version": "2021-04-16", "resources": {"a": {"type": "X", "condition": "nope"}}}),
    )
    .unwrap_err();
    assert_eq!(e.message, "resources.a.condition: Invalid condition \"nope\"");
    let t = Template::parse(
        &json!({"heat_template_version": "2021-04-16", "conditions": {"c1": {"not": "c2"}, "c2": {"not": "c1"}}}),
    )
    .unwrap();
    assert!(t.condition_values(&params(&t, json!({})).unwrap()).unwrap_err().message.contains("Circular"));
    let t = Template::parse(&json!({"heat_template_version": "2021-04-16", "parameters": {"s": {"type": "string", "default": "x"}}, "conditions": {"c": {"get_param": "s"}}})).unwrap();
    assert_eq!(
        t.condition_values(&params(&t, json!({})).unwrap()).unwrap_err().message,
        "The condition value should be boolean, after resolved the value is: x"
    );
}

#[test]
fn parameter_groups_validated() {
    let e = Template::parse(&json!({"heat_template_version": "2021-04-16", "parameters": {"a": {"type": "string"}},
        "parameter_groups": [{"label": "g", "parameters": ["a", "b"]}]}))
    .unwrap_err();
    assert!(e.message.contains("The grouped parameter b does not reference a valid parameter."), "{}", e.message);
    let e = Template::parse(&json!({"heat_template_version": "2021-04-16", "parameters": {"a": {"type": "string"}},
        "parameter_groups": [{"label": "g", "parameters": ["a"]}, {"label": "h", "parameters": ["a"]}]}))
    .unwrap_err();
    assert!(e.message.contains("The a parameter must be assigned to one parameter group only."));
}

#[test]
fn ref_in_2013_templates_becomes_param_or_resource() {
    let t = Template::parse(
        &json!({"heat_template_version": "2013-05-23", "parameters": {"p": {"type": "string", "default": "v"}},
        "resources": {"a": {"type": "X"}, "b": {"type": "X", "properties": {"x": {"Ref": "a"}, "y": {"Ref": "p"}}}}}),
    )
    .unwrap();
    let p = params(&t, json!({})).unwrap();
    let b = t.resources(&p).unwrap().into_iter().find(|r| r.name == "b").unwrap();
    assert_eq!(b.requires().into_iter().collect::<Vec<_>>(), vec!["a"]);
}

#[test]
fn stack_show_parameters_and_environment_as_captured() {
    let t = Template::parse(&capture_template()).unwrap();
    let env = Environment::from_value(&json!({"parameters": {"v": "alpha"}})).unwrap();
    let p = t.validate_parameters(&env, &Map::new(), &pseudo()).unwrap();
    let shown = p.display();
    let keys: Vec<&str> = shown.keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["OS::stack_id", "OS::project_id", "OS::stack_name", "v", "n"]);
    assert_eq!(
        Value::Object(shown.clone()),
        json!({"OS::stack_id": "sid", "OS::project_id": "pid", "OS::stack_name": "sname", "v": "alpha", "n": "2"})
    );
    assert_eq!(
        serde_json::to_string(&env.to_value()).unwrap(),
        r#"{"resource_registry":{"resources":{}},"parameters":{"v":"alpha"},"parameter_defaults":{},"event_sinks":[],"encrypted_param_names":[]}"#
    );
}

#[test]
fn cfn_templates_parse_and_resolve() {
    let doc = parse_document(
        r#"
AWSTemplateFormatVersion: 2010-09-09
Parameters:
  Size:
    Type: Number
    Default: 3
    MinValue: 1
    MaxValue: 5
Mappings:
  M: {k: {v: found}}
Conditions:
  Big: {"Fn::Equals": [{Ref: Size}, 3]}
Resources:
  A: {Type: "OS::Heat::None"}
  B:
    Type: "OS::Heat::None"
    Condition: Big
    Properties:
      x: {"Fn::Join": [",", [{Ref: A}, {"Fn::FindInMap": [M, k, v]}]]}
      y: {"Fn::GetAtt": [A, name]}
Outputs:
  O: {Value: {Ref: B}}
"#,
    )
    .unwrap();
    let t = Template::parse(&doc).unwrap();
    assert_eq!(t.version(), "AWSTemplateFormatVersion.2010-09-09");
    let p = params(&t, json!({})).unwrap();
    assert!(p.display().contains_key("AWS::StackId"));
    let res = t.resources(&p).unwrap();
    let b = res.iter().find(|r| r.name == "B").unwrap();
    assert_eq!(b.requires().into_iter().collect::<Vec<_>>(), vec!["A"]);
    assert_eq!(b.properties.to_value()["x"]["Fn::Join"][1][1]["Fn::FindInMap"], json!(["M", "k", "v"]));
    assert!(t.check_references(&p).is_ok());
    let e = params(&t, json!({"Size": 9})).unwrap_err();
    assert_eq!(e.message, "Parameter 'Size' is invalid: 9 is out of range (min: 1, max: 5)");
    let e = Template::parse(&json!({"HeatTemplateFormatVersion": "2012-12-12", "Conditions": {}})).unwrap_err();
    assert_eq!(e.type_name(), "InvalidTemplateSection");
}

#[test]
fn non_condition_functions_rejected_in_conditions() {
    let e = Template::parse(&json!({"heat_template_version": "2021-04-16", "resources": {"r": {"type": "X"}},
        "conditions": {"c": {"equals": [{"get_resource": "r"}, "x"]}}}))
    .unwrap_err();
    assert_eq!(
        e.message,
        "conditions.c.equals[0].get_resource: The function \"get_resource\" is invalid in this context"
    );
    // Before 2017-09-01 "contains" is no function: a map is no condition.
    let t = Template::parse(
        &json!({"heat_template_version": "2016-10-14", "conditions": {"c": {"contains": ["a", ["a"]]}}}),
    )
    .unwrap();
    let e = t.condition_values(&params(&t, json!({})).unwrap()).unwrap_err();
    assert!(e.message.starts_with("Invalid condition"), "{}", e.message);
}
