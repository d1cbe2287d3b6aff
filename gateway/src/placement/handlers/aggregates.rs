//! `/resource_providers/{uuid}/aggregates` (from 1.1): a plain list before
//! 1.19, `{aggregates, resource_provider_generation}` with a generation
//! check from 1.19.

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Value};

use crate::placement::handlers::Route;
use crate::placement::request::{cache_headers, json, not_found, HandlerResult, PlacementError, Req};
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![
        route!(GET "/resource_providers/{uuid}/aggregates" => list),
        route!(PUT "/resource_providers/{uuid}/aggregates" => update),
    ]
}

fn require_1_1(req: &Req) -> Result<(), PlacementError> {
    if req.at_least(1, 1) {
        Ok(())
    } else {
        Err(not_found(""))
    }
}

/// The answer of both routes. The association time is not recorded, so
/// `Last-Modified` is now (as upstream).
fn send(req: &Req, aggregates: &[String], generation: u32) -> HandlerResult {
    let mut body = json!({ "aggregates": aggregates });
    if req.at_least(1, 19) {
        body["resource_provider_generation"] = json!(generation);
    }
    Ok(cache_headers(req, json(StatusCode::OK, &body), None))
}

async fn list(req: Req) -> HandlerResult {
    require_1_1(&req)?;
    req.authorize("placement:resource_providers:aggregates:list", &[])?;
    let uuid = req.param("uuid").to_string();
    let a = req.state.clients.providers.clone().get_provider_aggregates(pb::ProviderRef { uuid }).await?.into_inner();
    send(&req, &a.aggregates, a.resource_provider_generation)
}

async fn update(req: Req) -> HandlerResult {
    req.require_content()?;
    require_1_1(&req)?;
    req.authorize("placement:resource_providers:aggregates:update", &[])?;
    let uuid = req.param("uuid").to_string();
    let mut client = req.state.clients.providers.clone();
    // Upstream looks the provider up (404) before reading the body.
    let rp = client.get_resource_provider(pb::GetResourceProviderRequest { uuid: uuid.clone() }).await?.into_inner();
    let with_generation = req.at_least(1, 19);
    let schema =
        if with_generation { "aggregate.PUT_AGGREGATES_SCHEMA_V1_19" } else { "aggregate.PUT_AGGREGATES_SCHEMA_V1_1" };
    let body = req.json_body(schema)?;
    let (list, generation) = if with_generation {
        // An integer no provider can have is a stale generation.
        let g = body["resource_provider_generation"].as_i64().and_then(|g| u32::try_from(g).ok());
        (&body["aggregates"], Some(g.unwrap_or(rp.generation.wrapping_add(1))))
    } else {
        (&body, None)
    };
    let aggregates: Vec<String> =
        list.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
    let a = client
        .set_provider_aggregates(pb::SetProviderAggregatesRequest {
            uuid,
            resource_provider_generation: generation,
            aggregates: aggregates.clone(),
        })
        .await?
        .into_inner();
    // Upstream echoes the list as sent.
    send(&req, &aggregates, a.resource_provider_generation)
}
