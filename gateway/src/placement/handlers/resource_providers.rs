//! `/resource_providers` and `/resource_providers/{uuid}`, plus the query
//! parameter parsers (`member_of`, `required`, `resources`) that
//! `GET /allocation_candidates` shares.

use std::collections::{BTreeSet, HashMap};

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use crate::placement::request::{
    bad_request, cache_headers, empty, json, newest, to_naive, HandlerResult, PlacementError, Req,
};
use crate::placement::router::Route;
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![
        route!(GET "/resource_providers" => list),
        route!(POST "/resource_providers" => create),
        route!(GET "/resource_providers/{uuid}" => show),
        route!(DELETE "/resource_providers/{uuid}" => delete),
        route!(PUT "/resource_providers/{uuid}" => update),
    ]
}

/// The path of a provider (upstream's `resource_provider_url`).
pub fn provider_url(uuid: &str) -> String {
    format!("/resource_providers/{uuid}")
}

fn links(req: &Req, uuid: &str) -> Vec<Value> {
    let url = req.link(&provider_url(uuid));
    let mut rels = vec!["inventories", "usages"];
    if req.at_least(1, 1) {
        rels.push("aggregates");
    }
    if req.at_least(1, 6) {
        rels.push("traits");
    }
    if req.at_least(1, 11) {
        rels.push("allocations");
    }
    let mut out = vec![json!({"rel": "self", "href": url})];
    out.extend(rels.into_iter().map(|rel| json!({"rel": rel, "href": format!("{url}/{rel}")})));
    out
}

/// A provider as the request's microversion shows it.
fn view(req: &Req, rp: &pb::ResourceProvider) -> Value {
    let mut out = Map::new();
    out.insert("uuid".into(), json!(rp.uuid));
    out.insert("name".into(), json!(rp.name));
    out.insert("generation".into(), json!(rp.generation));
    out.insert("links".into(), Value::Array(links(req, &rp.uuid)));
    if req.at_least(1, 14) {
        let parent = if rp.parent_provider_uuid.is_empty() { Value::Null } else { json!(rp.parent_provider_uuid) };
        out.insert("parent_provider_uuid".into(), parent);
        out.insert("root_provider_uuid".into(), json!(rp.root_provider_uuid));
    }
    Value::Object(out)
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

async fn create(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:resource_providers:create", &[])?;
    let schema = if req.at_least(1, 14) {
        "resource_provider.POST_RP_SCHEMA_V1_14"
    } else {
        "resource_provider.POST_RESOURCE_PROVIDER_SCHEMA"
    };
    let body = req.json_body(schema)?;
    let name = body["name"].as_str().unwrap_or_default().to_string();
    let uuid = match body.get("uuid").and_then(Value::as_str).filter(|u| !u.is_empty()) {
        // The schema checked the form; normalize dashes and case.
        Some(u) => {
            normalize_uuid(u).ok_or_else(|| bad_request(format!("badly formed hexadecimal UUID string: {u}")))?
        }
        None => String::new(),
    };
    let parent_provider_uuid = body.get("parent_provider_uuid").and_then(Value::as_str).unwrap_or_default().to_string();
    let rp = req
        .state
        .clients
        .providers
        .clone()
        .create_resource_provider(pb::CreateResourceProviderRequest { uuid, name, parent_provider_uuid })
        .await?
        .into_inner();
    let mut resp = if req.at_least(1, 20) {
        let out = json(StatusCode::OK, &view(&req, &rp));
        cache_headers(&req, out, to_naive(&rp.last_modified))
    } else {
        empty(StatusCode::CREATED)
    };
    resp.headers_mut().insert(http::header::LOCATION, req.location(&provider_url(&rp.uuid)));
    Ok(resp)
}

async fn show(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:show", &[])?;
    let uuid = req.param("uuid").to_string();
    let rp = req
        .state
        .clients
        .providers
        .clone()
        .get_resource_provider(pb::GetResourceProviderRequest { uuid })
        .await?
        .into_inner();
    let out = json(StatusCode::OK, &view(&req, &rp));
    Ok(cache_headers(&req, out, to_naive(&rp.last_modified)))
}

async fn delete(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:delete", &[])?;
    let uuid = req.param("uuid").to_string();
    req.state.clients.providers.clone().delete_resource_provider(pb::DeleteResourceProviderRequest { uuid }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

async fn update(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:resource_providers:update", &[])?;
    let uuid = req.param("uuid").to_string();
    let mut client = req.state.clients.providers.clone();
    // Upstream looks the provider up (404) before validating the body.
    client.get_resource_provider(pb::GetResourceProviderRequest { uuid: uuid.clone() }).await?;
    let schema = if req.at_least(1, 14) {
        "resource_provider.PUT_RP_SCHEMA_V1_14"
    } else {
        "resource_provider.PUT_RESOURCE_PROVIDER_SCHEMA"
    };
    let body = req.json_body(schema)?;
    let name = body["name"].as_str().unwrap_or_default().to_string();
    let parent_provider_uuid = match body.get("parent_provider_uuid") {
        None => None,
        Some(Value::Null) => Some(String::new()),
        Some(v) => Some(v.as_str().unwrap_or_default().to_string()),
    };
    let rp = client
        .update_resource_provider(pb::UpdateResourceProviderRequest {
            uuid,
            name,
            parent_provider_uuid,
            allow_reparent: req.at_least(1, 37),
        })
        .await?
        .into_inner();
    let out = json(StatusCode::OK, &view(&req, &rp));
    Ok(cache_headers(&req, out, to_naive(&rp.last_modified)))
}

async fn list(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:list", &[])?;
    let schema = if req.at_least(1, 18) {
        "resource_provider.GET_RPS_SCHEMA_1_18"
    } else if req.at_least(1, 14) {
        "resource_provider.GET_RPS_SCHEMA_1_14"
    } else if req.at_least(1, 4) {
        "resource_provider.GET_RPS_SCHEMA_1_4"
    } else if req.at_least(1, 3) {
        "resource_provider.GET_RPS_SCHEMA_1_3"
    } else {
        "resource_provider.GET_RPS_SCHEMA_1_0"
    };
    let query = req.validated_query(schema)?;
    let mut filter = pb::ListResourceProvidersRequest::default();
    if query.contains_key("member_of") {
        let (required, forbidden) = member_of_params(&req, "")?;
        filter.member_of = required.into_iter().map(|names| pb::AnyOf { names: names.into_iter().collect() }).collect();
        filter.forbidden_aggregates = forbidden.into_iter().collect();
    }
    if query.contains_key("required") {
        let (required, forbidden) = required_params(&req, "")?;
        filter.required_traits =
            required.into_iter().map(|names| pb::AnyOf { names: names.into_iter().collect() }).collect();
        filter.forbidden_traits = forbidden.into_iter().collect();
    }
    let text = |key: &str| query.get(key).and_then(Value::as_str).map(str::to_string);
    filter.uuid = text("uuid");
    filter.name = text("name");
    filter.in_tree = text("in_tree");
    if let Some(resources) = text("resources") {
        filter.resources = resources_param(&resources)?.into_iter().collect();
    }
    let resp = req.state.clients.providers.clone().list_resource_providers(filter).await?.into_inner();
    let items: Vec<Value> = resp.resource_providers.iter().map(|rp| view(&req, rp)).collect();
    let last = newest(resp.resource_providers.iter().map(|rp| &rp.last_modified));
    let out = json(StatusCode::OK, &json!({ "resource_providers": items }));
    Ok(cache_headers(&req, out, last))
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
}
