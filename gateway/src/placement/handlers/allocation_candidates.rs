//! `GET /allocation_candidates` (from 1.10): parses the query string per
//! microversion (upstream's `placement/lib.py` and handler, with their 400
//! texts), asks the candidates service, and shapes the answer for the
//! request's microversion.
//!
//! Also keelson's own `GET /keelson/v1/placement/explain`: the same query,
//! parsed the same way, answered with why the candidates are what they are
//! (admin-only by the `keelson:placement:explain` rule).

use http::StatusCode;
use keelson_proto::candidates::v2 as pb;
use keelson_runtime::ApiError;

use crate::placement::handlers::Route;
use crate::placement::json_text::{self, JsonText};
use crate::placement::params::{is_uuid_like, member_of_params, required_params, required_value, resources_param};
use crate::placement::request::{bad_request, cache_headers, json, json_text_response, not_found, HandlerResult, Req};
use crate::placement::PlacementError;
use crate::route;

const BAD_VALUE: &str = "placement.query.bad_value";

pub fn routes() -> Vec<Route> {
    vec![route!(GET "/allocation_candidates" => list), route!(GET "/keelson/v1/placement/explain" => explain)]
}

/// The query schema upstream applies at each microversion.
fn schema_name(req: &Req) -> &'static str {
    const BY_VERSION: &[((u16, u16), &str)] = &[
        ((1, 36), "allocation_candidate.GET_SCHEMA_1_36"),
        ((1, 35), "allocation_candidate.GET_SCHEMA_1_35"),
        ((1, 33), "allocation_candidate.GET_SCHEMA_1_33"),
        ((1, 31), "allocation_candidate.GET_SCHEMA_1_31"),
        ((1, 25), "allocation_candidate.GET_SCHEMA_1_25"),
        ((1, 21), "allocation_candidate.GET_SCHEMA_1_21"),
        ((1, 17), "allocation_candidate.GET_SCHEMA_1_17"),
        ((1, 16), "allocation_candidate.GET_SCHEMA_1_16"),
    ];
    BY_VERSION
        .iter()
        .find(|((major, minor), _)| req.at_least(*major, *minor))
        .map(|(_, name)| *name)
        .unwrap_or("allocation_candidate.GET_SCHEMA_1_10")
}

/// 406 unless `Accept` (when given) admits JSON (upstream's
/// `check_accept('application/json')`).
fn check_accept(req: &Req) -> Result<(), PlacementError> {
    let Some(accept) = req.headers.get(http::header::ACCEPT).and_then(|v| v.to_str().ok()) else { return Ok(()) };
    if accept.trim().is_empty() {
        return Ok(());
    }
    let acceptable = accept.split(',').any(|range| {
        let mut items = range.split(';');
        let media = items.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = items
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        q > 0.0 && matches!(media.as_str(), "*/*" | "application/*" | "application/json")
    });
    if acceptable {
        Ok(())
    } else {
        Err(PlacementError::NotAcceptable(accept.to_string()))
    }
}

/// Splits `resources_X` style keys into (kind, suffix); suffixes are
/// numbers before 1.33, `[A-Za-z0-9_-]{1,64}` from 1.33.
fn group_key(key: &str, verbose_suffix: bool) -> Option<(&'static str, &str)> {
    const KINDS: [&str; 4] = ["resources", "required", "member_of", "in_tree"];
    let kind = KINDS.into_iter().find(|k| key.starts_with(k))?;
    let suffix = &key[kind.len()..];
    let valid = suffix.is_empty()
        || if verbose_suffix {
            suffix.len() <= 64 && suffix.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        } else {
            suffix.bytes().all(|b| b.is_ascii_digit()) && !suffix.starts_with('0')
        };
    valid.then_some((kind, suffix))
}

/// Python's `str.strip()`.
fn strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}

/// The request-wide parameters (upstream's `RequestWideParams`), checked
/// before the groups.
fn request_wide(req: &Req, out: &mut pb::GetAllocationCandidatesRequest) -> Result<(), PlacementError> {
    if let Some(limit) = req.query_all("limit").first() {
        // The schema checked the last value; upstream uses the first.
        let digits = strip(limit);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
            // jsonschema's "%r does not match %r".
            return Err(bad_request(format!(
                "Invalid query string parameters: {} does not match '^[1-9][0-9]*$'",
                keelson_pyfmt::repr_str(limit)
            )));
        }
        // More than u32 can hold means no limit in practice.
        out.limit = digits.parse::<u32>().unwrap_or(u32::MAX);
    }
    if let Some(policy) = req.query_all("group_policy").first() {
        out.group_policy = if policy == "isolate" { pb::GroupPolicy::Isolate } else { pb::GroupPolicy::None } as i32;
    }
    let root_required = req.query_all("root_required");
    if root_required.len() > 1 {
        return Err(ApiError::new(
            400,
            "placement.query.duplicate_key",
            "Query parameter 'root_required' may be specified only once.",
        )
        .into());
    }
    if let Some(value) = root_required.first() {
        // root_required has no any-of form.
        let (required, forbidden) = required_value(value, true, false)?;
        let required: Vec<String> =
            required.into_iter().flatten().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let conflicts: Vec<&str> = required.iter().filter(|t| forbidden.contains(*t)).map(String::as_str).collect();
        if !conflicts.is_empty() {
            let detail =
                format!("Conflicting required and forbidden traits found in root_required: {}", conflicts.join(", "));
            return Err(ApiError::new(400, BAD_VALUE, detail).into());
        }
        out.root_required_traits = required;
        out.root_forbidden_traits = forbidden.into_iter().collect();
    }
    for value in req.query_all("same_subtree") {
        let mut suffixes: Vec<String> = Vec::new();
        for s in value.split(',').map(strip) {
            if s.is_empty() {
                return Err(ApiError::new(
                    400,
                    BAD_VALUE,
                    "Empty string (unsuffixed group) can not be specified in `same_subtree` ",
                )
                .into());
            }
            if !suffixes.iter().any(|x| x == s) {
                suffixes.push(s.to_string());
            }
        }
        out.same_subtrees.push(pb::SameSubtree { suffixes });
    }
    Ok(())
}

fn any_of(sets: Vec<std::collections::BTreeSet<String>>) -> Vec<pb::AnyOf> {
    sets.into_iter().map(|s| pb::AnyOf { names: s.into_iter().collect() }).collect()
}

/// The request groups, in order of first appearance (upstream's
/// `RequestGroup.dict_from_request` parsing; its checks run in the
/// candidates service).
fn request_groups(req: &Req) -> Result<Vec<pb::RequestGroup>, PlacementError> {
    let verbose_suffix = req.at_least(1, 33);
    let mut groups: Vec<pb::RequestGroup> = Vec::new();
    for (key, value) in req.query_pairs() {
        let Some((kind, suffix)) = group_key(&key, verbose_suffix) else { continue };
        let i = match groups.iter().position(|g| g.suffix == suffix) {
            Some(i) => i,
            None => {
                groups.push(pb::RequestGroup {
                    suffix: suffix.to_string(),
                    use_same_provider: !suffix.is_empty(),
                    ..Default::default()
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[i];
        match kind {
            "resources" => {
                let mut resources: Vec<(String, i64)> = resources_param(&value)?.into_iter().collect();
                resources.sort();
                group.resources = resources
                    .into_iter()
                    .map(|(resource_class, amount)| pb::ResourceAmount { resource_class, amount })
                    .collect();
            }
            "required" => {
                let (required, forbidden) = required_params(req, suffix)?;
                group.required_traits = any_of(required);
                group.forbidden_traits = forbidden.into_iter().collect();
            }
            "member_of" => {
                let (required, forbidden) = member_of_params(req, suffix)?;
                group.member_of = any_of(required);
                group.forbidden_aggregates = forbidden.into_iter().collect();
            }
            _ => {
                let tree = strip(&value);
                if !is_uuid_like(tree) {
                    return Err(bad_request(format!(
                        "Invalid query string parameters: Expected 'in_tree' parameter to be a format of uuid. Got: {value}"
                    )));
                }
                group.in_tree = Some(tree.to_string());
            }
        }
    }
    Ok(groups)
}

/// The request as `GET /allocation_candidates` reads it at the request's
/// microversion, after its checks in its order (version, `Accept`, the
/// policy `rule`, the query schema).
fn parsed_request(req: &Req, rule: &str) -> Result<pb::GetAllocationCandidatesRequest, PlacementError> {
    if !req.at_least(1, 10) {
        return Err(not_found(""));
    }
    check_accept(req)?;
    req.authorize(rule, &[])?;
    req.validated_query(schema_name(req))?;
    let mut request = pb::GetAllocationCandidatesRequest {
        nested_aware: req.at_least(1, 29),
        allow_resourceless_groups: req.at_least(1, 36),
        all_resource_classes_in_summaries: req.at_least(1, 27),
        traits_in_summaries: req.at_least(1, 17),
        ..Default::default()
    };
    request_wide(req, &mut request)?;
    request.groups = request_groups(req)?;
    Ok(request)
}

async fn list(req: Req) -> HandlerResult {
    let request = parsed_request(&req, "placement:allocation_candidates:list")?;
    let answer = req.state.clients.candidates.clone().get_allocation_candidates(request).await?.into_inner();
    Ok(cache_headers(&req, json_text_response(StatusCode::OK, view(&req, &answer)?), None))
}

/// The service's answer did not hold together (a column ran short or an
/// index fell outside its table): a 500, never a wrong answer.
fn malformed(what: &str) -> PlacementError {
    tracing::error!(what, "malformed allocation candidates answer from the candidates service");
    ApiError::new(500, "", format!("malformed answer from the candidates service: {what}")).into()
}

/// Reads one packed column of the answer in order.
struct Column<'a, T> {
    values: &'a [T],
    at: usize,
    what: &'static str,
}

impl<'a, T: Copy> Column<'a, T> {
    fn new(values: &'a [T], what: &'static str) -> Self {
        Column { values, at: 0, what }
    }

    fn next(&mut self) -> Result<T, PlacementError> {
        let v = self.values.get(self.at).copied().ok_or_else(|| malformed(self.what))?;
        self.at += 1;
        Ok(v)
    }
}

/// A table's names as JSON strings (quotes included), rendered once each:
/// a large answer names the same providers and classes thousands of times.
fn quoted(table: &[String]) -> Vec<String> {
    table.iter().map(|s| json_text::quoted(s)).collect()
}

/// The entry at `index` of a quoted table.
fn entry<'a>(table: &'a [String], index: u32, what: &str) -> Result<&'a str, PlacementError> {
    usize::try_from(index).ok().and_then(|i| table.get(i)).map(String::as_str).ok_or_else(|| malformed(what))
}

/// The answer as the request's microversion shows it, written straight to
/// JSON text from the answer's tables and columns: answers for big fleets
/// run to megabytes, and building a `serde_json::Value` tree (or per-request
/// messages) first would double the work.
fn view(req: &Req, answer: &pb::GetAllocationCandidatesResponse) -> Result<JsonText, PlacementError> {
    let uuids = quoted(&answer.provider_uuids);
    let classes = quoted(&answer.resource_classes);
    let suffixes = quoted(&answer.group_suffixes);
    let trait_names = quoted(&answer.trait_names);
    let empty_requests = pb::AllocationRequests::default();
    let ar = answer.allocation_requests.as_ref().unwrap_or(&empty_requests);
    let empty_summaries = pb::ProviderSummaries::default();
    let ps = answer.provider_summaries.as_ref().unwrap_or(&empty_summaries);
    let (old_list_form, mappings, traits, tree) =
        (!req.at_least(1, 12), req.at_least(1, 34), req.at_least(1, 17), req.at_least(1, 29));

    let mut out = JsonText::with_capacity(
        24 * (ar.providers.len()
            + ar.classes.len()
            + ar.mapping_providers.len()
            + ps.providers.len()
            + ps.resource_classes.len())
            + 48 * (ar.providers.len() + ar.mapping_providers.len() + 3 * ps.providers.len())
            + 64,
    );
    let mut providers = Column::new(&ar.providers, "providers");
    let mut class_counts = Column::new(&ar.class_counts, "class counts");
    let mut class_ids = Column::new(&ar.classes, "classes");
    let mut amounts = Column::new(&ar.amounts, "amounts");
    let mut mapping_counts = Column::new(&ar.mapping_counts, "mapping counts");
    let mut mapping_providers = Column::new(&ar.mapping_providers, "mapping providers");
    // `{"CLASS":amount,...}` of the next allocation.
    let mut push_resources = |out: &mut JsonText| -> Result<(), PlacementError> {
        out.byte(b'{');
        for j in 0..class_counts.next()? {
            if j > 0 {
                out.byte(b',');
            }
            out.raw(entry(&classes, class_ids.next()?, "class")?);
            out.byte(b':');
            out.int(amounts.next()?);
        }
        out.byte(b'}');
        Ok(())
    };
    out.raw("{\"allocation_requests\":[");
    for (i, count) in ar.allocation_counts.iter().enumerate() {
        if i > 0 {
            out.byte(b',');
        }
        if old_list_form {
            out.raw("{\"allocations\":[");
            for j in 0..*count {
                if j > 0 {
                    out.byte(b',');
                }
                out.raw("{\"resource_provider\":{\"uuid\":");
                out.raw(entry(&uuids, providers.next()?, "provider")?);
                out.raw("},\"resources\":");
                push_resources(&mut out)?;
                out.byte(b'}');
            }
            out.raw("]}");
        } else {
            out.raw("{\"allocations\":{");
            for j in 0..*count {
                if j > 0 {
                    out.byte(b',');
                }
                out.raw(entry(&uuids, providers.next()?, "provider")?);
                out.raw(":{\"resources\":");
                push_resources(&mut out)?;
                out.byte(b'}');
            }
            out.byte(b'}');
        }
        // Every request maps every suffix, shown or not: keep the columns
        // aligned.
        if mappings {
            out.raw(",\"mappings\":{");
        }
        for (j, suffix) in suffixes.iter().enumerate() {
            if mappings {
                if j > 0 {
                    out.byte(b',');
                }
                out.raw(suffix);
                out.raw(":[");
            }
            for k in 0..mapping_counts.next()? {
                let p = entry(&uuids, mapping_providers.next()?, "mapped provider")?;
                if mappings {
                    if k > 0 {
                        out.byte(b',');
                    }
                    out.raw(p);
                }
            }
            if mappings {
                out.byte(b']');
            }
        }
        if mappings {
            out.byte(b'}');
        }
        if !old_list_form {
            out.byte(b'}');
        }
    }
    out.raw("],\"provider_summaries\":{");
    let mut parents = Column::new(&ps.parents, "parents");
    let mut roots = Column::new(&ps.roots, "roots");
    let mut resource_counts = Column::new(&ps.resource_counts, "resource counts");
    let mut resource_classes = Column::new(&ps.resource_classes, "summary classes");
    let mut capacities = Column::new(&ps.capacities, "capacities");
    let mut used = Column::new(&ps.used, "used");
    let mut trait_counts = Column::new(&ps.trait_counts, "trait counts");
    let mut trait_ids = Column::new(&ps.traits, "traits");
    for (i, provider) in ps.providers.iter().enumerate() {
        if i > 0 {
            out.byte(b',');
        }
        out.raw(entry(&uuids, *provider, "summary provider")?);
        out.raw(":{\"resources\":{");
        for j in 0..resource_counts.next()? {
            if j > 0 {
                out.byte(b',');
            }
            out.raw(entry(&classes, resource_classes.next()?, "summary class")?);
            out.raw(":{\"capacity\":");
            out.int(capacities.next()?);
            out.raw(",\"used\":");
            out.int(used.next()?);
            out.byte(b'}');
        }
        out.byte(b'}');
        let trait_count = trait_counts.next()?;
        if traits {
            out.raw(",\"traits\":[");
        }
        for j in 0..trait_count {
            let t = entry(&trait_names, trait_ids.next()?, "trait")?;
            if traits {
                if j > 0 {
                    out.byte(b',');
                }
                out.raw(t);
            }
        }
        if traits {
            out.byte(b']');
        }
        let (parent, root) = (parents.next()?, roots.next()?);
        if tree {
            out.raw(",\"parent_provider_uuid\":");
            match parent.checked_sub(1) {
                Some(p) => out.raw(entry(&uuids, p, "parent")?),
                None => out.raw("null"),
            }
            out.raw(",\"root_provider_uuid\":");
            out.raw(entry(&uuids, root, "root")?);
        }
        out.byte(b'}');
    }
    out.raw("}}");
    Ok(out)
}

async fn explain(req: Req) -> HandlerResult {
    let request = parsed_request(&req, keelson_policy::KEELSON_PLACEMENT_EXPLAIN)?;
    let answer = req.state.clients.candidates.clone().explain(request).await?.into_inner();
    Ok(json(StatusCode::OK, &explanation_view(&answer)))
}

/// A rule as JSON: its name and the fields it sets, the inventory value
/// named after what it is.
fn rule_view(r: &pb::ExplainRule) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value;
    let mut out = serde_json::Map::new();
    out.insert("rule".into(), Value::from(r.rule.as_str()));
    if !r.resource_class.is_empty() {
        out.insert("resource_class".into(), Value::from(r.resource_class.as_str()));
    }
    if r.amount != 0 {
        out.insert("amount".into(), Value::from(r.amount));
    }
    let value_name = match r.rule.as_str() {
        "step_size" | "min_unit" | "max_unit" => Some(r.rule.as_str()),
        "capacity" => Some("free"),
        "overall_capacity" => Some("room"),
        _ => None,
    };
    // A tally has no per-provider value.
    if let Some(name) = value_name.filter(|_| r.value != 0 || r.rule == "capacity") {
        out.insert(name.into(), Value::from(r.value));
    }
    if !r.traits.is_empty() {
        out.insert("traits".into(), Value::from(r.traits.clone()));
    }
    if r.rule == "group_missing" || r.rule == "group_policy_isolate" {
        out.insert("group".into(), Value::from(r.group.as_str()));
    }
    if !r.provider.is_empty() {
        out.insert("provider".into(), Value::from(r.provider.as_str()));
    }
    if r.rule == "same_subtree" {
        out.insert("same_subtree".into(), Value::from(r.index));
    }
    out
}

/// The explanation as keelson's REST API shows it.
fn explanation_view(answer: &pb::ExplainResponse) -> serde_json::Value {
    use serde_json::{json, Value};
    let rule = |r: &Option<pb::ExplainRule>| r.as_ref().map(rule_view).unwrap_or_default();
    let groups: Vec<Value> = answer
        .groups
        .iter()
        .map(|g| {
            json!({
                "suffix": g.suffix,
                "searched": g.searched,
                "providers": g.providers,
                "survivors": g.survivors,
                "tallies": g.tallies.iter().map(|t| {
                    let mut out = rule(&t.rule);
                    out.remove("free");
                    out.insert("providers".into(), Value::from(t.providers));
                    if let Some(free) = t.largest_free {
                        out.insert("largest_free".into(), Value::from(free));
                    }
                    Value::Object(out)
                }).collect::<Vec<_>>(),
                "excluded": g.excluded.iter().map(|x| {
                    let mut out = rule(&x.rule);
                    out.insert("provider".into(), Value::from(x.provider.as_str()));
                    Value::Object(out)
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let trees: Vec<Value> = answer
        .trees
        .iter()
        .map(|t| {
            let mut out = serde_json::Map::new();
            out.insert("root".into(), Value::from(t.root.as_str()));
            out.insert("in_answer".into(), Value::from(t.dropped.is_none()));
            if t.dropped.is_some() {
                out.insert("dropped".into(), Value::Object(rule(&t.dropped)));
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "groups": groups,
        "trees": trees,
        "allocation_requests": answer.allocation_requests,
        "providers_in_answer": answer.providers_in_answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explanation_json() {
        let capacity = pb::ExplainRule {
            rule: "capacity".into(),
            resource_class: "VCPU".into(),
            amount: 8,
            value: 6,
            ..Default::default()
        };
        let answer = pb::ExplainResponse {
            groups: vec![pb::GroupExplanation {
                suffix: String::new(),
                searched: true,
                providers: 1,
                excluded: vec![pb::Exclusion { provider: "p1".into(), rule: Some(capacity.clone()) }],
                tallies: vec![pb::RuleTally {
                    rule: Some(pb::ExplainRule { value: 0, ..capacity }),
                    providers: 1,
                    largest_free: Some(6),
                }],
                ..Default::default()
            }],
            trees: vec![pb::TreeOutcome {
                root: "r".into(),
                dropped: Some(pb::ExplainRule {
                    rule: "group_policy_isolate".into(),
                    group: "2".into(),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        };
        assert_eq!(
            explanation_view(&answer),
            serde_json::json!({
                "groups": [{"suffix": "", "searched": true, "providers": 1, "survivors": [],
                    "excluded": [{"provider": "p1", "rule": "capacity", "resource_class": "VCPU", "amount": 8, "free": 6}],
                    "tallies": [{"rule": "capacity", "resource_class": "VCPU", "amount": 8, "providers": 1, "largest_free": 6}]}],
                "trees": [{"root": "r", "in_answer": false, "dropped": {"rule": "group_policy_isolate", "group": "2"}}],
                "allocation_requests": 0,
                "providers_in_answer": [],
            })
        );
    }

    #[test]
    fn group_keys() {
        assert_eq!(group_key("resources", false), Some(("resources", "")));
        assert_eq!(group_key("resources12", false), Some(("resources", "12")));
        assert_eq!(group_key("resources01", false), None);
        assert_eq!(group_key("required_NET", false), None);
        assert_eq!(group_key("required_NET", true), Some(("required", "_NET")));
        assert_eq!(group_key("member_ofX-1", true), Some(("member_of", "X-1")));
        assert_eq!(group_key("in_tree1", false), Some(("in_tree", "1")));
        assert_eq!(group_key("resources1@", true), None);
        assert_eq!(group_key("limit", true), None);
        assert_eq!(group_key(&format!("resources{}", "a".repeat(65)), true), None);
    }
}
