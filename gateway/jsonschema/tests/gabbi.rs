//! Placement's gabbi expectations, checked against this validator.
//!
//! `tests/data/gabbi-cases.json` is extracted from the upstream gabbi files
//! by `tools/gabbi_cases.py`: every 400 test whose error comes from schema
//! validation, with the schema the handler picks at that microversion, the
//! validated instance (body, or `dict(req.GET)` for query strings) and the
//! test's expected strings, verbatim. Here each instance must fail, and every
//! expectation must be found in the detail Placement would send: the wrapped
//! `str(exc)` with newlines turned into spaces by webob. Expectations written
//! `/like this/` are regexes, as in gabbi.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_jsonschema::compile_python_regex;
use keelson_jsonschema::placement::{body_error_text, placement_schema, query_error_text};
use serde_json::Value;

const CASES: &str = include_str!("data/gabbi-cases.json");

fn cases() -> Vec<Value> {
    serde_json::from_str(CASES).expect("gabbi case data parses")
}

/// The `detail` Placement returns for a failing instance.
fn detail(case: &Value) -> Result<String, String> {
    let schema_name = case["schema"].as_str().unwrap_or_default();
    let validator = placement_schema(schema_name).ok_or_else(|| format!("unknown schema {schema_name}"))?;
    let error = match validator.validate(&case["instance"]) {
        Ok(()) => return Err("instance unexpectedly valid".to_owned()),
        Err(e) => e,
    };
    let text = match case["kind"].as_str() {
        Some("query") => query_error_text(&error),
        _ => body_error_text(&error),
    };
    Ok(text.replace('\n', " "))
}

fn satisfied(expect: &str, detail: &str) -> bool {
    if expect.len() > 1 && expect.starts_with('/') && expect.ends_with('/') {
        let pattern = &expect[1..expect.len() - 1];
        // gabbi uses Python's re.search.
        return compile_python_regex(pattern).map(|re| re.is_match(detail)).unwrap_or(false);
    }
    // response_strings are matched against the JSON body text.
    let as_json = serde_json::to_string(detail).unwrap_or_default();
    detail.contains(expect) || as_json.contains(expect)
}

/// Run every case from one gabbi file; returns the number checked.
fn check_file(file: &str) -> usize {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases().iter().filter(|c| c["file"] == file) {
        checked += 1;
        let test = case["test"].as_str().unwrap_or("?");
        match detail(case) {
            Err(why) => failures.push(format!("{test}: {why}")),
            Ok(detail) => {
                for expect in case["expect"].as_array().into_iter().flatten() {
                    let expect = expect.as_str().unwrap_or_default();
                    if !satisfied(expect, &detail) {
                        failures.push(format!("{test}: {expect:?} not in {detail:?}"));
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no cases recorded for {file}");
    assert!(failures.is_empty(), "{file}:\n{}", failures.join("\n"));
    checked
}

macro_rules! gabbi_file {
    ($($test:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check_file($file);
            }
        )*

        #[test]
        fn every_recorded_case_belongs_to_a_checked_file() {
            let files = [$($file),*];
            let all = cases();
            assert!(all.len() >= 100, "expected the full gabbi table, got {}", all.len());
            for case in &all {
                let file = case["file"].as_str().unwrap_or_default();
                assert!(files.contains(&file), "no test function for {file}");
            }
        }
    };
}

gabbi_file! {
    aggregate_yaml => "aggregate.yaml",
    allocation_candidates_member_of_yaml => "allocation-candidates-member-of.yaml",
    allocation_candidates_root_required_yaml => "allocation-candidates-root-required.yaml",
    allocation_candidates_yaml => "allocation-candidates.yaml",
    allocations_1_12_yaml => "allocations-1-12.yaml",
    allocations_1_28_yaml => "allocations-1.28.yaml",
    allocations_1_8_yaml => "allocations-1-8.yaml",
    allocations_bug_1714072_yaml => "allocations-bug-1714072.yaml",
    allocations_mappings_yaml => "allocations-mappings.yaml",
    allocations_post_yaml => "allocations-post.yaml",
    allocations_yaml => "allocations.yaml",
    consumer_types_1_38_yaml => "consumer-types-1.38.yaml",
    granular_yaml => "granular.yaml",
    inventory_yaml => "inventory.yaml",
    reshaper_yaml => "reshaper.yaml",
    resource_classes_1_7_yaml => "resource-classes-1-7.yaml",
    resource_classes_yaml => "resource-classes.yaml",
    resource_provider_aggregates_yaml => "resource-provider-aggregates.yaml",
    resource_provider_resources_query_yaml => "resource-provider-resources-query.yaml",
    resource_provider_yaml => "resource-provider.yaml",
    traits_yaml => "traits.yaml",
    usage_yaml => "usage.yaml",
}
