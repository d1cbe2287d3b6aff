//! Differential tests against answers recorded from oslo.policy 6.0.1 itself
//! (tests/data/oslo-cases.json, produced by tools/gen_oslo_cases.py).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keelson_policy::{parse_rule, ContextValues, Credentials, Denied, Enforcer, EnforcerConfig, PolicyFile, Target};
use serde_json::{Map, Value};

const CASES: &str = include_str!("data/oslo-cases.json");

fn cases() -> Value {
    serde_json::from_str(CASES).expect("oslo-cases.json parses")
}

fn object(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().expect("object")
}

/// Random rule strings: same parse tree (oslo's `str()`) and same answer for
/// every credential/target pair.
#[test]
fn random_rules_match_oslo() {
    let data = cases();
    let creds: Vec<Credentials> =
        data["creds"].as_array().expect("creds").iter().map(|c| Credentials::from(object(c))).collect();
    let targets: Vec<Target> = data["targets"].as_array().expect("targets").iter().map(object).collect();
    let rules = data["rules"].as_array().expect("rules");
    assert!(rules.len() >= 400);

    let mut failures = Vec::new();
    for case in rules {
        let rule = case[0].as_str().expect("rule text");
        let oslo_str = case[1].as_str().expect("str");
        let expected: Vec<char> = case[2].as_str().expect("results").chars().collect();

        let parsed = parse_rule(rule);
        if parsed.check.to_string() != oslo_str {
            failures.push(format!("{rule:?}: parsed as {} but oslo has {oslo_str}", parsed.check));
            continue;
        }
        let overrides = PolicyFile::from_check_strings([("yes", "@"), ("no", "!"), ("r", rule)]);
        let enforcer = Enforcer::new(EnforcerConfig::default(), Vec::new(), overrides).expect("enforcer");
        let mut got = Vec::new();
        for c in &creds {
            for t in &targets {
                got.push(if enforcer.enforce("r", t, c) { 'T' } else { 'F' });
            }
        }
        // 'E' (oslo raised) must fail closed here.
        let expected: Vec<char> = expected.iter().map(|&e| if e == 'E' { 'F' } else { e }).collect();
        if got != expected {
            failures.push(format!("{rule:?}: got {got:?}, oslo {expected:?}"));
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Every Placement default x persona x policy file x enforce_new_defaults.
#[test]
fn placement_matrix_matches_oslo() {
    let data = cases();
    let personas = data["personas"].as_object().expect("personas");
    let files = data["policy_files"].as_object().expect("policy files");
    let mut checked = 0;
    let mut failures = Vec::new();
    for (file_name, tables) in data["placement"].as_object().expect("placement") {
        let overrides = PolicyFile::parse(files[file_name].as_str().expect("file text")).expect("policy file");
        for (new_defaults, table) in tables.as_object().expect("table") {
            let config = EnforcerConfig { enforce_new_defaults: new_defaults == "true", ..EnforcerConfig::default() };
            let enforcer = Enforcer::placement(config, overrides.clone()).expect("enforcer");
            for (rule, outcomes) in table.as_object().expect("rules") {
                let outcomes: Vec<char> = outcomes.as_str().expect("outcomes").chars().collect();
                assert_eq!(outcomes.len(), personas.len());
                for ((persona, p), expected) in personas.iter().zip(outcomes) {
                    let ctx = ContextValues {
                        user_id: Some("user".into()),
                        project_id: p["project_id"].as_str().map(str::to_owned),
                        system_scope: p["system_scope"].as_str().map(str::to_owned),
                        roles: p["roles"]
                            .as_array()
                            .expect("roles")
                            .iter()
                            .filter_map(|r| r.as_str().map(str::to_owned))
                            .collect(),
                        ..ContextValues::default()
                    };
                    let creds = Credentials::from_context(&ctx);
                    let target = if rule == "placement:usages" {
                        object(&serde_json::json!({"project_id": "P"}))
                    } else {
                        creds.default_target()
                    };
                    let got = match enforcer.authorize(rule, &target, &creds) {
                        Ok(()) => 'A',
                        Err(Denied::InvalidScope { .. }) => 'S',
                        Err(Denied::NotAuthorized { .. }) => 'D',
                        Err(Denied::NotRegistered { .. }) => 'N',
                    };
                    checked += 1;
                    if got != expected {
                        failures.push(format!(
                            "file={file_name} new_defaults={new_defaults} {rule} {persona}: got {got}, oslo {expected}"
                        ));
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 38 * personas.len());
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}
