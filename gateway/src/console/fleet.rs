//! `GET /keelson/v1/console/fleet`: one page of provider trees with their
//! inventories (capacity against use per class), traits and aggregates,
//! from the inventory service's `ListFleet`.

use axum::response::Response;
use keelson_proto::placement::v1 as pb;
use keelson_runtime::ApiError;
use serde_json::{json, Map, Value};

use super::{console_route, json, ConsoleReq};
use crate::placement::error::UNDEFINED_CODE;
use crate::routes::Route;

/// The page sizes the endpoint takes (the inventory service's bounds).
const MAX_LIMIT: u32 = 5000;

pub fn routes() -> Vec<Route<super::Handler>> {
    vec![console_route!(GET "/keelson/v1/console/fleet" => fleet)]
}

async fn fleet(req: ConsoleReq) -> Result<Response, ApiError> {
    req.authorize(keelson_policy::KEELSON_CONSOLE_FLEET)?;
    let mut q = req.query_params(&["trait", "member_of", "resource_class", "search", "limit", "marker"])?;
    let limit = match q.remove("limit") {
        None => 0,
        Some(text) => match text.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::new(
                    400,
                    "",
                    format!("Invalid query string parameters: limit must be an integer from 1 to {MAX_LIMIT}"),
                ))
            }
        },
    };
    let mut take = |key: &str| q.remove(key).unwrap_or_default();
    let request = pb::ListFleetRequest {
        required_trait: take("trait"),
        member_of: take("member_of"),
        resource_class: take("resource_class"),
        search: take("search"),
        marker: take("marker"),
        limit,
    };
    let answer = req
        .state
        .placement
        .clients
        .providers
        .clone()
        .list_fleet(request)
        .await
        .map_err(|s| ApiError::from_status(&s, UNDEFINED_CODE))?
        .into_inner();
    Ok(json(&view(answer)))
}

fn view(answer: pb::ListFleetResponse) -> Value {
    let providers: Vec<Value> = answer
        .providers
        .into_iter()
        .map(|p| {
            let mut inventories = Map::new();
            for i in p.inventories {
                let used = p.usages.get(&i.resource_class).copied().unwrap_or(0);
                inventories.insert(
                    i.resource_class,
                    json!({
                        "total": i.total, "reserved": i.reserved, "min_unit": i.min_unit, "max_unit": i.max_unit,
                        "step_size": i.step_size, "allocation_ratio": i.allocation_ratio,
                        "capacity": i.capacity, "used": used,
                    }),
                );
            }
            let parent = (!p.parent_provider_uuid.is_empty()).then_some(p.parent_provider_uuid);
            json!({
                "uuid": p.uuid, "name": p.name, "generation": p.generation,
                "parent_provider_uuid": parent, "root_provider_uuid": p.root_provider_uuid,
                "inventories": inventories,
                "usages": p.usages.into_iter().collect::<std::collections::BTreeMap<_, _>>(),
                "traits": p.traits, "aggregates": p.aggregates, "matched": p.matched,
            })
        })
        .collect();
    json!({
        "providers": providers,
        "next_marker": (!answer.next_marker.is_empty()).then_some(answer.next_marker),
        "total": answer.total,
        "matched": answer.matched,
        "choices": {
            "resource_classes": answer.resource_classes,
            "traits": answer.traits,
            "aggregates": answer.aggregates,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleet_json() {
        let answer = pb::ListFleetResponse {
            providers: vec![pb::FleetProvider {
                uuid: "u1".into(),
                name: "cn1".into(),
                generation: 3,
                root_provider_uuid: "u1".into(),
                inventories: vec![pb::FleetInventory {
                    resource_class: "VCPU".into(),
                    total: 8,
                    reserved: 0,
                    min_unit: 1,
                    max_unit: 8,
                    step_size: 1,
                    allocation_ratio: 4.0,
                    capacity: 32,
                }],
                usages: [("VCPU".to_string(), 5)].into(),
                traits: vec!["HW_CPU_X86_AVX".into()],
                matched: true,
                ..Default::default()
            }],
            total: 1,
            matched: 1,
            ..Default::default()
        };
        assert_eq!(
            view(answer),
            json!({
                "providers": [{"uuid": "u1", "name": "cn1", "generation": 3, "parent_provider_uuid": null,
                    "root_provider_uuid": "u1",
                    "inventories": {"VCPU": {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8, "step_size": 1,
                        "allocation_ratio": 4.0, "capacity": 32, "used": 5}},
                    "usages": {"VCPU": 5}, "traits": ["HW_CPU_X86_AVX"], "aggregates": [], "matched": true}],
                "next_marker": null, "total": 1, "matched": 1,
                "choices": {"resource_classes": [], "traits": [], "aggregates": []},
            })
        );
    }
}
