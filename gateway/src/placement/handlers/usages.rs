//! `/resource_providers/{uuid}/usages` and `/usages` (from 1.9).

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use crate::placement::handlers::Route;
use crate::placement::request::{cache_headers, json, not_found, HandlerResult, Req};
use crate::route;

/// `GET /resource_providers/{uuid}/usages` (declared with the provider
/// routes upstream).
pub fn provider_routes() -> Vec<Route> {
    vec![route!(GET "/resource_providers/{uuid}/usages" => list_for_provider)]
}

pub fn routes() -> Vec<Route> {
    vec![route!(GET "/usages" => totals)]
}

fn usages_view(usages: &std::collections::HashMap<String, i64>) -> Map<String, Value> {
    let mut sorted: Vec<(&String, &i64)> = usages.iter().collect();
    sorted.sort();
    sorted.into_iter().map(|(rc, n)| (rc.clone(), json!(n))).collect()
}

async fn list_for_provider(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:usages", &[])?;
    let uuid = req.param("uuid").to_string();
    let resp = req.state.clients.usages.clone().get_provider_usages(pb::ProviderRef { uuid }).await?.into_inner();
    let body =
        json!({"resource_provider_generation": resp.resource_provider_generation, "usages": usages_view(&resp.usages)});
    // Usages are as of now: no stored modification time applies.
    Ok(cache_headers(&req, json(StatusCode::OK, &body), None))
}

async fn totals(req: Req) -> HandlerResult {
    if !req.at_least(1, 9) {
        return Err(not_found(""));
    }
    let query = req.query_dict();
    let project_id = query.get("project_id").and_then(Value::as_str).map(str::to_string);
    // Upstream's target holds the asked project, None (as text) if absent.
    req.authorize("placement:usages", &[("project_id", project_id.as_deref().unwrap_or("None"))])?;
    let by_consumer_type = req.at_least(1, 38);
    let schema = if by_consumer_type { "usage.GET_USAGES_SCHEMA_V1_38" } else { "usage.GET_USAGES_SCHEMA_1_9" };
    let query = req.validated_query(schema)?;
    let text = |name: &str| query.get(name).and_then(Value::as_str).map(str::to_string);
    let resp = req
        .state
        .clients
        .usages
        .clone()
        .get_usages(pb::GetUsagesRequest {
            project_id: project_id.unwrap_or_default(),
            // An empty user_id fails the schema; none means every user.
            user_id: text("user_id").filter(|u| !u.is_empty()),
            by_consumer_type,
            consumer_type: if by_consumer_type { text("consumer_type") } else { None },
        })
        .await?
        .into_inner();
    let usages: Map<String, Value> = if by_consumer_type {
        resp.usages
            .iter()
            .map(|g| {
                let mut group = usages_view(&g.usages);
                group.insert("consumer_count".into(), json!(g.consumer_count));
                (g.consumer_type.clone(), Value::Object(group))
            })
            .collect()
    } else {
        let mut all = std::collections::HashMap::new();
        for g in &resp.usages {
            for (rc, n) in &g.usages {
                *all.entry(rc.clone()).or_insert(0) += n;
            }
        }
        usages_view(&all)
    };
    Ok(cache_headers(&req, json(StatusCode::OK, &json!({ "usages": usages })), None))
}
