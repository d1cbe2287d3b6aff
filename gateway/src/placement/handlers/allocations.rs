//! `/allocations`, `/allocations/{consumer_uuid}` and
//! `/resource_providers/{uuid}/allocations`.

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use crate::placement::handlers::Route;
use crate::placement::json_text::JsonText;
use crate::placement::params::{consumer_write, consumer_writes, normalize_uuid};
use crate::placement::request::{
    bad_request, cache_headers, empty, json, json_text_response, not_found, to_naive, HandlerResult, PlacementError,
    Req,
};
use crate::route;

/// `GET /resource_providers/{uuid}/allocations` (declared before the
/// `/allocations` routes upstream).
pub fn provider_routes() -> Vec<Route> {
    vec![route!(GET "/resource_providers/{uuid}/allocations" => list_for_provider)]
}

pub fn routes() -> Vec<Route> {
    vec![
        route!(POST "/allocations" => set_many),
        route!(GET "/allocations/{consumer_uuid}" => list_for_consumer),
        route!(PUT "/allocations/{consumer_uuid}" => set_for_consumer),
        route!(DELETE "/allocations/{consumer_uuid}" => delete),
    ]
}

/// The name upstream shows for consumers without a type.
const UNKNOWN_CONSUMER_TYPE: &str = "unknown";

fn resources_view(resources: &[pb::ResourceAmount]) -> Value {
    Value::Object(resources.iter().map(|r| (r.resource_class.clone(), json!(r.amount))).collect())
}

async fn list_for_consumer(req: Req) -> HandlerResult {
    req.authorize("placement:allocations:list", &[])?;
    let consumer_uuid = req.param("consumer_uuid").to_string();
    let resp = req
        .state
        .clients
        .allocations
        .clone()
        .get_consumer_allocations(pb::GetConsumerAllocationsRequest { consumer_uuid })
        .await?
        .into_inner();
    let by_provider: Map<String, Value> = resp
        .allocations
        .iter()
        .map(|a| {
            let entry =
                json!({"resources": resources_view(&a.resources), "generation": a.resource_provider_generation});
            (a.resource_provider_uuid.clone(), entry)
        })
        .collect();
    let mut out = Map::new();
    out.insert("allocations".into(), Value::Object(by_provider));
    if !resp.allocations.is_empty() && req.at_least(1, 12) {
        out.insert("project_id".into(), json!(resp.project_id));
        out.insert("user_id".into(), json!(resp.user_id));
        if req.at_least(1, 28) {
            out.insert("consumer_generation".into(), json!(resp.consumer_generation));
        }
        if req.at_least(1, 38) {
            let ty = if resp.consumer_type.is_empty() { UNKNOWN_CONSUMER_TYPE } else { resp.consumer_type.as_str() };
            out.insert("consumer_type".into(), json!(ty));
        }
    }
    Ok(cache_headers(&req, json(StatusCode::OK, &Value::Object(out)), to_naive(&resp.last_modified)))
}

async fn list_for_provider(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:allocations:list", &[])?;
    let uuid = req.param("uuid").to_string();
    let resp =
        req.state.clients.allocations.clone().get_provider_allocations(pb::ProviderRef { uuid }).await?.into_inner();
    // Written straight to JSON text: a provider holding a few hundred
    // consumers' allocations was mostly a `serde_json::Value` tree when
    // built as one.
    let with_generation = req.at_least(1, 28);
    let mut out =
        JsonText::with_capacity(64 + resp.allocations.iter().map(|c| 96 + 24 * c.resources.len()).sum::<usize>());
    out.raw("{\"allocations\":{");
    for (i, c) in resp.allocations.iter().enumerate() {
        if i > 0 {
            out.byte(b',');
        }
        out.string(&c.consumer_uuid);
        out.raw(":{\"resources\":{");
        for (j, r) in c.resources.iter().enumerate() {
            if j > 0 {
                out.byte(b',');
            }
            out.string(&r.resource_class);
            out.byte(b':');
            out.int(r.amount);
        }
        out.byte(b'}');
        if with_generation {
            out.raw(",\"consumer_generation\":");
            out.int(i64::from(c.consumer_generation));
        }
        out.byte(b'}');
    }
    out.raw("},\"resource_provider_generation\":");
    out.int(i64::from(resp.resource_provider_generation));
    out.byte(b'}');
    Ok(cache_headers(&req, json_text_response(StatusCode::OK, out), to_naive(&resp.last_modified)))
}

/// The schema of PUT /allocations/{consumer_uuid} at a microversion.
fn put_schema(req: &Req) -> &'static str {
    if req.at_least(1, 38) {
        "allocation.ALLOCATION_SCHEMA_V1_38"
    } else if req.at_least(1, 34) {
        "allocation.ALLOCATION_SCHEMA_V1_34"
    } else if req.at_least(1, 28) {
        "allocation.ALLOCATION_SCHEMA_V1_28"
    } else if req.at_least(1, 12) {
        "allocation.ALLOCATION_SCHEMA_V1_12"
    } else if req.at_least(1, 8) {
        "allocation.ALLOCATION_SCHEMA_V1_8"
    } else {
        "allocation.ALLOCATION_SCHEMA"
    }
}

async fn set_for_consumer(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:allocations:update", &[])?;
    let raw = req.param("consumer_uuid").to_string();
    let consumer_uuid = normalize_uuid(&raw).ok_or_else(|| bad_request(format!("Malformed consumer_uuid: {raw}")))?;
    let body = req.json_body(put_schema(&req))?;
    let consumer = consumer_write(req.version, &consumer_uuid, &body);
    req.state
        .clients
        .allocations
        .clone()
        .replace_consumer_allocations(pb::ReplaceConsumerAllocationsRequest { consumer: Some(consumer) })
        .await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

/// Before 1.13 POST /allocations does not exist.
fn require_1_13(req: &Req) -> Result<(), PlacementError> {
    if req.at_least(1, 13) {
        Ok(())
    } else {
        Err(not_found(""))
    }
}

async fn set_many(req: Req) -> HandlerResult {
    require_1_13(&req)?;
    req.require_content()?;
    req.authorize("placement:allocations:manage", &[])?;
    let schema = if req.at_least(1, 38) {
        "allocation.POST_ALLOCATIONS_V1_38"
    } else if req.at_least(1, 34) {
        "allocation.POST_ALLOCATIONS_V1_34"
    } else if req.at_least(1, 28) {
        "allocation.POST_ALLOCATIONS_V1_28"
    } else {
        "allocation.POST_ALLOCATIONS_V1_13"
    };
    let body = req.json_body(schema)?;
    let consumers = consumer_writes(req.version, &body);
    req.state.clients.allocations.clone().set_allocations(pb::SetAllocationsRequest { consumers }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

async fn delete(req: Req) -> HandlerResult {
    req.authorize("placement:allocations:delete", &[])?;
    let consumer_uuid = req.param("consumer_uuid").to_string();
    req.state
        .clients
        .allocations
        .clone()
        .delete_consumer_allocations(pb::DeleteConsumerAllocationsRequest { consumer_uuid })
        .await?;
    Ok(empty(StatusCode::NO_CONTENT))
}
