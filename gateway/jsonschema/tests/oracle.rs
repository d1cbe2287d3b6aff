//! Differential test against Python jsonschema 4.26 (the validator Placement
//! runs), recorded in `tests/data/oracle-cases.json` by `tools/oracle.py`.
//!
//! Every case pins the exact `exc.message`, the exact `str(exc)` Placement
//! embeds in its 400 detail, the failing keyword and the instance path; or
//! that the instance is valid.

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_jsonschema::{placement_schema, PathElement, Validator};
use serde_json::Value;

const CASES: &str = include_str!("data/oracle-cases.json");

fn validator_for(schema: &Value) -> Validator {
    match schema {
        Value::String(name) => match placement_schema(name) {
            Some(v) => Validator::new(v.schema()).expect("placement schema compiles"),
            None => panic!("unknown placement schema {name}"),
        },
        other => Validator::new(other).expect("schema compiles"),
    }
}

fn path_json(path: &[PathElement]) -> Value {
    Value::Array(
        path.iter()
            .map(|p| match p {
                PathElement::Index(i) => Value::from(*i),
                PathElement::Key(k) => Value::from(k.as_str()),
            })
            .collect(),
    )
}

/// Compare every recorded case selected by `select`; returns how many ran.
fn check(select: impl Fn(&str) -> bool) -> usize {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("oracle data parses");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        if !select(name) {
            continue;
        }
        checked += 1;
        let validator = validator_for(&case["schema"]);
        let got = validator.validate(&case["instance"]);
        match (&case["text"], got) {
            (Value::Null, Ok(())) => {
                assert!(validator.is_valid(&case["instance"]), "{name}: is_valid disagrees");
            }
            (Value::Null, Err(e)) => failures.push(format!("{name}: expected valid, got {:?}", e.message())),
            (_, Ok(())) => failures.push(format!("{name}: expected an error, got valid")),
            (Value::String(text), Err(e)) => {
                if e.message() != case["message"].as_str().unwrap_or_default() {
                    failures.push(format!("{name}: message\n  want {}\n  got  {}", case["message"], e.message()));
                } else if &e.to_string() != text {
                    failures.push(format!("{name}: text\n  want {text:?}\n  got  {:?}", e.to_string()));
                } else if e.keyword().map(Value::from).unwrap_or(Value::Null) != case["keyword"] {
                    failures.push(format!("{name}: keyword want {} got {:?}", case["keyword"], e.keyword()));
                } else if path_json(e.path()) != case["path"] {
                    failures.push(format!("{name}: path want {} got {:?}", case["path"], e.path()));
                }
                assert!(!validator.is_valid(&case["instance"]), "{name}: is_valid disagrees");
            }
            (other, _) => failures.push(format!("{name}: malformed expectation {other}")),
        }
    }
    assert!(failures.is_empty(), "{} of {checked} cases differ:\n{}", failures.len(), failures.join("\n"));
    checked
}

fn is_gabbi(name: &str) -> bool {
    name.starts_with("gabbi: ")
}

fn is_generated(name: &str) -> bool {
    name.starts_with("mutation ") || name.starts_with("valid: ")
}

/// The exact text for every gabbi request, beyond the substrings gabbi checks.
#[test]
fn gabbi_instances_give_pythons_exact_text() {
    assert!(check(is_gabbi) >= 100);
}

/// Hand-written cases: each keyword and message variant, best-match rules,
/// Python repr and pprint corner cases.
#[test]
fn keyword_cases_give_pythons_exact_text() {
    assert!(check(|n| !is_gabbi(n) && !is_generated(n)) >= 100);
}

/// Seeded random mutations of valid requests for Placement's schemas.
#[test]
fn mutated_placement_requests_give_pythons_exact_text() {
    assert!(check(is_generated) >= 250);
}
