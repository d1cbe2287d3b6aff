//! Template versions and the function tables of each version
//! (GET /template_versions, GET /template_versions/{v}/functions).

use crate::{TemplateError, TemplateErrorKind};
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

/// Captured from the real API: which functions each version offers.
const VERSION_DATA: &str = include_str!("versions_data.json");

/// HOT versions in order, with their code-name alias.
pub(crate) const HOT_VERSIONS: &[(&str, Option<&str>)] = &[
    ("2013-05-23", None),
    ("2014-10-16", None),
    ("2015-04-30", None),
    ("2015-10-15", None),
    ("2016-04-08", None),
    ("2016-10-14", Some("newton")),
    ("2017-02-24", Some("ocata")),
    ("2017-09-01", Some("pike")),
    ("2018-03-02", Some("queens")),
    ("2018-08-31", Some("rocky")),
    ("2021-04-16", Some("wallaby")),
];

/// A HOT version, as its canonical date ("2016-10-14"). Dates compare in
/// release order, which is how features are gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HotVersion(pub &'static str);

impl HotVersion {
    /// Accepts a date or an alias as written after `heat_template_version:`.
    pub fn lookup(given: &str) -> Option<HotVersion> {
        HOT_VERSIONS
            .iter()
            .find(|(date, alias)| *date == given || alias.is_some_and(|a| a == given))
            .map(|(date, _)| HotVersion(date))
    }
    pub fn at_least(self, date: &str) -> bool {
        self.0 >= date
    }
    pub fn full_name(self) -> String {
        format!("heat_template_version.{}", self.0)
    }
}

/// "2013-05-23, ..., 2021-04-16, newton, ..., wallaby" as upstream lists them.
pub(crate) fn valid_version_list() -> String {
    let dates = HOT_VERSIONS.iter().map(|(d, _)| *d);
    let aliases = HOT_VERSIONS.iter().filter_map(|(_, a)| *a);
    dates.chain(aliases).collect::<Vec<_>>().join(", ")
}

fn version_data() -> &'static Value {
    // Embedded at compile time (checked by a unit test); parsed once.
    static DATA: OnceLock<Value> = OnceLock::new();
    DATA.get_or_init(|| serde_json::from_str(VERSION_DATA).unwrap_or(Value::Null))
}

/// Body of GET /template_versions.
pub fn template_versions() -> Value {
    let listed = version_data().get("template_versions").cloned().unwrap_or_else(|| Value::Array(vec![]));
    let entries: Vec<Value> = listed
        .as_array()
        .map(|a| {
            a.iter().map(|v| json!({"version": v["version"], "type": v["type"], "aliases": v["aliases"]})).collect()
        })
        .unwrap_or_default();
    json!({ "template_versions": entries })
}

/// Upstream registers functions in this order; the API lists them so.
const FUNCTION_ORDER: &[&str] = &[
    "get_attr",
    "get_file",
    "get_param",
    "get_resource",
    "list_join",
    "repeat",
    "resource_facade",
    "str_replace",
    "digest",
    "str_split",
    "map_merge",
    "yaql",
    "map_replace",
    "if",
    "filter",
    "str_replace_strict",
    "make_url",
    "list_concat",
    "str_replace_vstrict",
    "list_concat_unique",
    "contains",
    "equals",
    "not",
    "and",
    "or",
    "Fn::Select",
    "Fn::GetAZs",
    "Ref",
    "Fn::Join",
    "Fn::Split",
    "Fn::Replace",
    "Fn::Base64",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
    "Fn::FindInMap",
    "Fn::GetAtt",
    "Fn::If",
    "Fn::Equals",
    "Fn::Not",
    "Fn::And",
    "Fn::Or",
];

fn function_description(name: &str) -> &'static str {
    match name {
        "get_attr" | "Fn::GetAtt" => "A function for resolving resource attributes.",
        "get_file" => "A function for including a file inline.",
        "get_param" => "A function for resolving parameter references.",
        "get_resource" => "A function for resolving resource references.",
        "list_join" => "A function for joining one or more lists of strings.",
        "repeat" => "A function for iterating over a list of items or a dict of keys.",
        "resource_facade" | "Fn::ResourceFacade" => "A function for retrieving data in a parent provider template.",
        "str_replace" | "str_replace_strict" | "str_replace_vstrict" | "Fn::Replace" => {
            "A function for performing string substitutions."
        }
        "digest" => "A function for performing digest operations.",
        "str_split" => "A function for splitting delimited strings into a list.",
        "map_merge" => "A function for merging maps.",
        "yaql" => "A function for executing a yaql expression.",
        "map_replace" | "make_url" => "A function for performing substitutions on maps.",
        "if" | "Fn::If" => "A function to return corresponding value based on condition evaluation.",
        "filter" => "A function for filtering out values from lists.",
        "list_concat" => "A function for extending lists.",
        "list_concat_unique" => "A function for extending lists with unique items.",
        "contains" => "A function for checking whether specific value is in sequence.",
        "equals" | "Fn::Equals" => "A function for comparing whether two values are equal.",
        "not" | "Fn::Not" => "A function that acts as a NOT operator on a condition.",
        "and" | "Fn::And" => "A function that acts as an AND operator on conditions.",
        "or" | "Fn::Or" => "A function that acts as an OR operator on conditions.",
        "Fn::Select" => "A function for selecting an item from a list or map.",
        "Fn::GetAZs" => "A function for retrieving the availability zones.",
        "Ref" => "A function for resolving parameters or resource references.",
        "Fn::Join" => "A function for joining strings.",
        "Fn::Split" => "A function for splitting strings.",
        "Fn::Base64" => "A placeholder function for converting to base64.",
        "Fn::MemberListToMap" => "A function to convert lists with enumerated keys and values to mapping.",
        "Fn::FindInMap" => "A function for resolving keys in the template mappings.",
        _ => "",
    }
}

/// Names of the functions `full_version` (e.g. "heat_template_version.2016-10-14")
/// offers; the condition-function table when `conditions` is set.
pub(crate) fn function_names(full_version: &str, conditions: bool) -> Option<Vec<String>> {
    let table = if conditions { "condition_functions" } else { "functions" };
    let data = version_data();
    let names = data.get(table)?.get(full_version)?.as_array()?;
    Some(names.iter().filter_map(|n| n.as_str().map(str::to_string)).collect())
}

/// Whether `full_version` offers the function `name` (parsing asks this
/// for every single-key map, so it must not allocate).
pub(crate) fn offers_function(full_version: &str, conditions: bool, name: &str) -> bool {
    let table = if conditions { "condition_functions" } else { "functions" };
    version_data()
        .get(table)
        .and_then(|t| t.get(full_version))
        .and_then(Value::as_array)
        .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
}

/// Body of GET /template_versions/{version}/functions.
pub fn template_functions(version: &str, with_condition_func: bool) -> Result<Value, TemplateError> {
    let Some(mut names) = function_names(version, with_condition_func) else {
        return Err(TemplateError::new(
            TemplateErrorKind::NotFound,
            format!("Template with version {version} not found"),
        ));
    };
    let rank = |n: &str| FUNCTION_ORDER.iter().position(|o| *o == n).unwrap_or(usize::MAX);
    names.sort_by_key(|n| rank(n));
    let entries: Vec<Value> = names
        .iter()
        .map(|n| {
            let mut m = Map::new();
            m.insert("functions".into(), Value::String(n.clone()));
            m.insert("description".into(), Value::String(function_description(n).into()));
            Value::Object(m)
        })
        .collect();
    Ok(json!({ "template_functions": entries }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_data_parses() {
        assert!(serde_json::from_str::<Value>(VERSION_DATA).is_ok());
        assert_eq!(template_versions()["template_versions"].as_array().map(Vec::len), Some(13));
    }

    #[test]
    fn functions_of_wallaby_in_upstream_order() {
        let v = template_functions("heat_template_version.2021-04-16", false).unwrap();
        let names: Vec<&str> =
            v["template_functions"].as_array().unwrap().iter().map(|e| e["functions"].as_str().unwrap()).collect();
        assert_eq!(names[..4], ["get_attr", "get_file", "get_param", "get_resource"]);
        assert_eq!(names.last(), Some(&"contains"));
        assert_eq!(v["template_functions"][0]["description"], "A function for resolving resource attributes.");
    }

    #[test]
    fn unknown_version_is_not_found() {
        let e = template_functions("heat_template_version.2099-01-01", false).unwrap_err();
        assert_eq!(e.type_name(), "NotFound");
    }

    #[test]
    fn version_list_matches_upstream_message() {
        assert!(valid_version_list().starts_with("2013-05-23, 2014-10-16"));
        assert!(valid_version_list().ends_with("queens, rocky, wallaby"));
        assert_eq!(HotVersion::lookup("pike"), Some(HotVersion("2017-09-01")));
    }
}
