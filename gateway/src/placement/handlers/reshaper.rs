//! `POST /reshaper` (from 1.30).

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::Value;

use crate::placement::handlers::Route;
use crate::placement::params::{consumer_writes, int, inventories_from_json};
use crate::placement::request::{empty, not_found, HandlerResult, Req};
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![route!(POST "/reshaper" => reshape)]
}

async fn reshape(req: Req) -> HandlerResult {
    if !req.at_least(1, 30) {
        return Err(not_found(""));
    }
    req.require_content()?;
    req.authorize("placement:reshaper:reshape", &[])?;
    let schema = if req.at_least(1, 38) {
        "reshaper.POST_RESHAPER_SCHEMA_V1_38"
    } else if req.at_least(1, 34) {
        "reshaper.POST_RESHAPER_SCHEMA_V1_34"
    } else {
        "reshaper.POST_RESHAPER_SCHEMA"
    };
    let body = req.json_body(schema)?;
    let inventories = body["inventories"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(rp, entry)| pb::ReshapeInventories {
                    resource_provider_uuid: rp.clone(),
                    resource_provider_generation: u32::try_from(int(&entry["resource_provider_generation"]))
                        .unwrap_or(u32::MAX),
                    inventories: inventories_from_json(&entry["inventories"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let allocations = consumer_writes(req.version, body.get("allocations").unwrap_or(&Value::Null));
    req.state.clients.allocations.clone().reshape(pb::ReshapeRequest { inventories, allocations }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}
