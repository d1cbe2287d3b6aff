//! `/allocations`, `/allocations/{consumer_uuid}` and
//! `/resource_providers/{uuid}/allocations`.

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use super::inventories::int;
use super::resource_providers::normalize_uuid;
use crate::placement::request::{
    bad_request, cache_headers, empty, json, not_found, to_naive, HandlerResult, PlacementError, Req,
};
use crate::placement::router::Route;
use crate::placement::Microversion;
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
    let with_generation = req.at_least(1, 28);
    let by_consumer: Map<String, Value> = resp
        .allocations
        .iter()
        .map(|c| {
            let mut entry = Map::new();
            entry.insert("resources".into(), resources_view(&c.resources));
            if with_generation {
                entry.insert("consumer_generation".into(), json!(c.consumer_generation));
            }
            (c.consumer_uuid.clone(), Value::Object(entry))
        })
        .collect();
    let body = json!({"allocations": by_consumer, "resource_provider_generation": resp.resource_provider_generation});
    Ok(cache_headers(&req, json(StatusCode::OK, &body), to_naive(&resp.last_modified)))
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

#[cfg(test)]
mod tests {
    use super::*;

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
