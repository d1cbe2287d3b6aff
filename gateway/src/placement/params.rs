//! The request parsers Placement's handlers share: validated bodies into
//! protobuf writes (inventories, consumers' allocations) and the query and
//! path forms (uuids, `member_of`, `required`, `resources`), upstream's
//! 400 texts included. One home, so handlers never import from one
//! another.

use std::collections::{BTreeSet, HashMap};

use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use super::request::{bad_request, PlacementError, Req};
use super::Microversion;

/// Placement's largest inventory value.
pub const MAX_INT: i64 = 2_147_483_647;

/// A validated JSON integer (the schema allows nothing else).
pub fn int(v: &Value) -> i64 {
    // A whole float (`1.0`) passes the schema, whose bounds are within i64;
    // `as` would saturate one past them.
    #[allow(clippy::cast_possible_truncation)]
    let whole = |f: f64| f as i64;
    v.as_i64().or_else(|| v.as_f64().map(whole)).unwrap_or(0)
}

/// An inventory from a validated body, with upstream's defaults for the
/// fields left out.
pub fn inventory_from_json(resource_class: &str, body: &Value) -> pb::Inventory {
    let field = |name: &str, default: i64| body.get(name).map(int).unwrap_or(default);
    pb::Inventory {
        resource_class: resource_class.to_string(),
        total: field("total", 0),
        reserved: field("reserved", 0),
        min_unit: field("min_unit", 1),
        max_unit: field("max_unit", MAX_INT),
        step_size: field("step_size", 1),
        allocation_ratio: body.get("allocation_ratio").and_then(Value::as_f64).unwrap_or(1.0),
        last_modified: None,
    }
}

/// Inventories keyed by class, in the body's order.
pub fn inventories_from_json(by_class: &Value) -> Vec<pb::Inventory> {
    by_class.as_object().map(|m| m.iter().map(|(rc, inv)| inventory_from_json(rc, inv)).collect()).unwrap_or_default()
}

fn amounts(resources: &Value) -> Vec<pb::ResourceAmount> {
    resources
        .as_object()
        .map(|m| m.iter().map(|(rc, n)| pb::ResourceAmount { resource_class: rc.clone(), amount: int(n) }).collect())
        .unwrap_or_default()
}

/// Allocations in the dict form (1.12+): provider uuid → {resources}.
fn allocations_from_dict(allocations: &Value) -> Vec<pb::ProviderResources> {
    allocations
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(rp, a)| pb::ProviderResources {
                    resource_provider_uuid: rp.clone(),
                    resources: amounts(&a["resources"]),
                    resource_provider_generation: 0,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Allocations in the list form (before 1.12); a provider listed twice
/// keeps its first position and its last amounts, as a Python dict does.
fn allocations_from_list(allocations: &Value) -> Vec<pb::ProviderResources> {
    let mut by_provider = Map::new();
    for a in allocations.as_array().map(Vec::as_slice).unwrap_or_default() {
        let rp = a["resource_provider"]["uuid"].as_str().unwrap_or_default().to_string();
        by_provider.insert(rp, json!({"resources": a["resources"].clone()}));
    }
    allocations_from_dict(&Value::Object(by_provider))
}

/// One consumer's write from a validated body (PUT's whole body, or one
/// entry of POST /allocations or of the reshaper's allocations).
pub fn consumer_write(version: Microversion, consumer_uuid: &str, body: &Value) -> pb::ConsumerAllocationsWrite {
    let allocations = if version.at_least(1, 12) {
        allocations_from_dict(&body["allocations"])
    } else {
        allocations_from_list(&body["allocations"])
    };
    let text = |name: &str| body.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    let (generation_check, consumer_generation) = if version.at_least(1, 28) {
        let g = body.get("consumer_generation").filter(|v| !v.is_null()).map(int);
        // A generation no consumer can have still has to fail the check.
        (pb::ConsumerGenerationCheck::ConsumerGenerationRequired, g.map(|g| u32::try_from(g).unwrap_or(u32::MAX)))
    } else {
        (pb::ConsumerGenerationCheck::ConsumerGenerationIgnored, None)
    };
    pb::ConsumerAllocationsWrite {
        consumer_uuid: consumer_uuid.to_string(),
        allocations,
        project_id: text("project_id"),
        user_id: text("user_id"),
        consumer_generation,
        generation_check: generation_check as i32,
        consumer_type: if version.at_least(1, 38) {
            body.get("consumer_type").and_then(Value::as_str).map(str::to_string)
        } else {
            None
        },
    }
}

/// POST /allocations and the reshaper: consumer uuid → write, in order.
pub fn consumer_writes(version: Microversion, by_consumer: &Value) -> Vec<pb::ConsumerAllocationsWrite> {
    by_consumer
        .as_object()
        .map(|m| m.iter().map(|(c, body)| consumer_write(version, c, body)).collect())
        .unwrap_or_default()
}

/// Python's `str(uuid.UUID(value))`: accepts `urn:uuid:`, braces and
/// hyphens anywhere; `None` unless 32 hex digits remain.
pub fn normalize_uuid(value: &str) -> Option<String> {
    let hex: String =
        value.replace("urn:", "").replace("uuid:", "").trim_matches(|c| c == '{' || c == '}').replace('-', "");
    if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]))
}

/// oslo's `is_uuid_like`.
pub fn is_uuid_like(value: &str) -> bool {
    normalize_uuid(value).is_some()
}

/// `member_of{suffix}` parameters: (each entry any-of, forbidden). Several
/// parameters from 1.24, `!` forms from 1.32.
pub fn member_of_params(req: &Req, suffix: &str) -> Result<(Vec<BTreeSet<String>>, BTreeSet<String>), PlacementError> {
    let key = format!("member_of{suffix}");
    let values = req.query_all(&key);
    if !req.at_least(1, 24) && values.len() > 1 {
        return Err(bad_request(format!("Multiple member_of{suffix} parameters are not supported")));
    }
    let mut required = Vec::new();
    let mut forbidden = BTreeSet::new();
    for value in &values {
        let (req_aggs, forb_aggs) = member_of_value(value)?;
        if !req_aggs.is_empty() {
            required.push(req_aggs);
        }
        if !forb_aggs.is_empty() {
            if !req.at_least(1, 32) {
                return Err(bad_request(format!(
                    "Forbidden member_of{suffix} parameters are not supported in the specified microversion"
                )));
            }
            forbidden.extend(forb_aggs);
        }
    }
    Ok((required, forbidden))
}

/// One `member_of` value: a uuid, `!uuid`, `in:a,b` or `!in:a,b`.
fn member_of_value(value: &str) -> Result<(BTreeSet<String>, BTreeSet<String>), PlacementError> {
    if value.contains(',') && !(value.starts_with("in:") || value.starts_with("!in:")) {
        return Err(bad_request(format!(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' keyword using the valid microversion. Got: {value}"
        )));
    }
    let split = |s: &str| s.split(',').map(str::to_string).collect::<BTreeSet<_>>();
    let (required, forbidden) = if let Some(rest) = value.strip_prefix("!in:") {
        (BTreeSet::new(), split(rest))
    } else if let Some(rest) = value.strip_prefix('!') {
        (BTreeSet::new(), BTreeSet::from([rest.to_string()]))
    } else if let Some(rest) = value.strip_prefix("in:") {
        (split(rest), BTreeSet::new())
    } else {
        (BTreeSet::from([value.to_string()]), BTreeSet::new())
    };
    if let Some(bad) = required.iter().chain(forbidden.iter()).find(|u| !is_uuid_like(u)) {
        return Err(bad_request(format!(
            "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: {bad}"
        )));
    }
    Ok((required, forbidden))
}

/// `required{suffix}` parameters: (each entry any-of, forbidden). `!` forms
/// from 1.22; `in:` and repeated parameters from 1.39 (before, the last
/// one counts).
pub fn required_params(req: &Req, suffix: &str) -> Result<(Vec<BTreeSet<String>>, BTreeSet<String>), PlacementError> {
    let mut values = req.query_all(&format!("required{suffix}"));
    let allow_forbidden = req.at_least(1, 22);
    let allow_any = req.at_least(1, 39);
    if !allow_any && values.len() > 1 {
        values = values.split_off(values.len() - 1);
    }
    let mut required = Vec::new();
    let mut forbidden = BTreeSet::new();
    for value in &values {
        let (r, f) = required_value(value, allow_forbidden, allow_any)?;
        required.extend(r);
        forbidden.extend(f);
    }
    Ok((required, forbidden))
}

/// One `required` value: `A,!B` or (1.39) `in:A,B`.
pub fn required_value(
    value: &str,
    allow_forbidden: bool,
    allow_any: bool,
) -> Result<(Vec<BTreeSet<String>>, BTreeSet<String>), PlacementError> {
    if let Some(rest) = value.strip_prefix("in:") {
        if !allow_any {
            return Err(bad_request(format!(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since microversion 1.39. Got: {value}"
            )));
        }
        let any: BTreeSet<String> = rest.split(',').map(|s| python_strip(s).to_string()).collect();
        if any.iter().any(String::is_empty) {
            return Err(bad_request(format!(
                "Invalid query string parameters: Expected 'required' parameter value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
            )));
        }
        if any.iter().any(|t| t.starts_with('!')) {
            return Err(bad_request(format!(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden traits. Got: {value}"
            )));
        }
        return Ok((vec![any], BTreeSet::new()));
    }
    let all: Vec<String> = value.split(',').map(|s| python_strip(s).to_string()).collect();
    // Any number of leading `!` mark one forbidden trait (upstream keeps
    // this quirk).
    let forbidden: BTreeSet<String> =
        all.iter().filter(|t| t.starts_with('!')).map(|t| t.trim_start_matches('!').to_string()).collect();
    if all.iter().any(String::is_empty) || forbidden.iter().any(String::is_empty) {
        let form = if allow_forbidden { "HW_CPU_X86_VMX,!CUSTOM_MAGIC" } else { "HW_CPU_X86_VMX,CUSTOM_MAGIC" };
        return Err(bad_request(format!(
            "Invalid query string parameters: Expected 'required' parameter value of the form: {form}. Got an empty trait in: {value}"
        )));
    }
    let required: Vec<BTreeSet<String>> =
        all.iter().filter(|t| !t.starts_with('!')).map(|t| BTreeSet::from([t.clone()])).collect();
    if !forbidden.is_empty() && !allow_forbidden {
        return Err(bad_request(format!(
            "Invalid query string parameters: Expected 'required' parameter value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
        )));
    }
    Ok((required, forbidden))
}

/// Python's `str.strip()` (whitespace only).
fn python_strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

/// `resources=VCPU:2,MEMORY_MB:1024` as class → amount.
pub fn resources_param(value: &str) -> Result<HashMap<String, i64>, PlacementError> {
    if python_strip(value).is_empty() {
        return Err(bad_request(
            "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: empty string.",
        ));
    }
    let mut out = HashMap::new();
    for item in value.split(',') {
        let parts: Vec<&str> = item.split(':').collect();
        let [class, amount] = parts[..] else {
            return Err(bad_request(format!(
                "Badly formed resources parameter. Expected resources query string parameter in form: ?resources=VCPU:2,MEMORY_MB:1024. Got: {item}."
            )));
        };
        let Some(n) = python_int(amount) else {
            return Err(bad_request(format!(
                "Requested resource {class} expected positive integer amount. Got: {amount}."
            )));
        };
        if n < 1 {
            return Err(bad_request(format!("Requested resource {class} requires amount >= 1. Got: {n}.")));
        }
        out.insert(class.to_string(), n);
    }
    Ok(out)
}

/// Python's `int(text)` for the forms a query carries: surrounding
/// whitespace, a sign, digits and single underscores between digits.
fn python_int(text: &str) -> Option<i64> {
    let t = python_strip(text);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if !clean.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n: i64 = clean.parse().ok()?;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_normalization() {
        assert_eq!(
            normalize_uuid("{11111111222233334444555555555558}").as_deref(),
            Some("11111111-2222-3333-4444-555555555558")
        );
        assert_eq!(
            normalize_uuid("urn:uuid:ABCDEF00-0000-0000-0000-000000000000").as_deref(),
            Some("abcdef00-0000-0000-0000-000000000000")
        );
        assert!(normalize_uuid("not-a-uuid").is_none());
    }

    #[test]
    fn member_of_forms() {
        let a = "11111111-2222-3333-4444-555555555555";
        let b = "11111111-2222-3333-4444-666666666666";
        let (r, f) = member_of_value(&format!("in:{a},{b}")).unwrap();
        assert_eq!(r.len(), 2);
        assert!(f.is_empty());
        let (r, f) = member_of_value(&format!("!in:{a},{b}")).unwrap();
        assert!(r.is_empty());
        assert_eq!(f.len(), 2);
        let (_, f) = member_of_value(&format!("!{a}")).unwrap();
        assert!(f.contains(a));
        assert!(member_of_value(&format!("{a},{b}")).is_err());
        assert!(member_of_value("in:nope").is_err());
    }

    #[test]
    fn required_forms() {
        let (r, f) = required_value("A, !B,!!C", true, false).unwrap();
        assert_eq!(r, vec![BTreeSet::from(["A".to_string()])]);
        assert_eq!(f, BTreeSet::from(["B".to_string(), "C".to_string()]));
        assert!(required_value("A,!B", false, false).is_err());
        assert!(required_value("A,,B", true, false).is_err());
        assert!(required_value("in:A,B", true, false).is_err());
        let (r, _) = required_value("in:A, B", true, true).unwrap();
        assert_eq!(r, vec![BTreeSet::from(["A".to_string(), "B".to_string()])]);
        assert!(required_value("in:A,!B", true, true).is_err());
    }

    #[test]
    fn resources_forms() {
        let r = resources_param("VCPU:2,MEMORY_MB:1024").unwrap();
        assert_eq!(r["VCPU"], 2);
        assert_eq!(r["MEMORY_MB"], 1024);
        assert!(resources_param("").is_err());
        assert!(resources_param("VCPU").is_err());
        assert!(resources_param("VCPU:x").is_err());
        assert!(resources_param("VCPU:0").is_err());
    }

    #[test]
    fn list_form_keeps_the_first_position_and_the_last_amounts() {
        let body = json!({"allocations": [
            {"resource_provider": {"uuid": "a"}, "resources": {"VCPU": 1}},
            {"resource_provider": {"uuid": "b"}, "resources": {"DISK_GB": 2}},
            {"resource_provider": {"uuid": "a"}, "resources": {"MEMORY_MB": 3}},
        ]});
        let w = consumer_write(Microversion(1, 7), "c", &body);
        let got: Vec<_> = w
            .allocations
            .iter()
            .map(|a| (a.resource_provider_uuid.as_str(), a.resources[0].resource_class.as_str()))
            .collect();
        assert_eq!(got, [("a", "MEMORY_MB"), ("b", "DISK_GB")]);
        assert_eq!(w.generation_check(), pb::ConsumerGenerationCheck::ConsumerGenerationIgnored);
        assert!(w.project_id.is_empty(), "an incomplete consumer before 1.8");
    }

    #[test]
    fn generation_and_type_by_microversion() {
        let body = json!({"allocations": {"a": {"resources": {"VCPU": 1, "DISK_GB": 4}}}, "project_id": "p", "user_id": "u",
                          "consumer_generation": null, "consumer_type": "INSTANCE"});
        let w = consumer_write(Microversion(1, 28), "c", &body);
        assert_eq!(w.generation_check(), pb::ConsumerGenerationCheck::ConsumerGenerationRequired);
        assert_eq!((w.consumer_generation, w.consumer_type.as_deref()), (None, None));
        let classes: Vec<_> = w.allocations[0].resources.iter().map(|r| r.resource_class.as_str()).collect();
        assert_eq!(classes, ["VCPU", "DISK_GB"], "request order is kept");
        let w = consumer_write(
            Microversion(1, 38),
            "c",
            &json!({"allocations": {}, "consumer_generation": 3, "consumer_type": "X"}),
        );
        assert_eq!((w.consumer_generation, w.consumer_type.as_deref()), (Some(3), Some("X")));
        assert!(w.allocations.is_empty());
    }
}
