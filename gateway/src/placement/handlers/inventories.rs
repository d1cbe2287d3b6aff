//! `/resource_providers/{uuid}/inventories[/{resource_class}]`.

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::{json, Map, Value};

use crate::placement::error;
use crate::placement::handlers::Route;
use crate::placement::params::{int, inventories_from_json, inventory_from_json};
use crate::placement::request::{
    cache_headers, empty, json, newest, not_found, to_naive, HandlerResult, PlacementError, Req,
};
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![
        route!(GET "/resource_providers/{uuid}/inventories" => list),
        route!(POST "/resource_providers/{uuid}/inventories" => create),
        route!(PUT "/resource_providers/{uuid}/inventories" => replace_all),
        route!(DELETE "/resource_providers/{uuid}/inventories" => delete_all),
        route!(GET "/resource_providers/{uuid}/inventories/{resource_class}" => show),
        route!(PUT "/resource_providers/{uuid}/inventories/{resource_class}" => update),
        route!(DELETE "/resource_providers/{uuid}/inventories/{resource_class}" => delete),
    ]
}

fn inventory_view(inv: &pb::Inventory) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("total".into(), json!(inv.total));
    out.insert("reserved".into(), json!(inv.reserved));
    out.insert("min_unit".into(), json!(inv.min_unit));
    out.insert("max_unit".into(), json!(inv.max_unit));
    out.insert("step_size".into(), json!(inv.step_size));
    out.insert("allocation_ratio".into(), json!(inv.allocation_ratio));
    out
}

fn one_view(resp: &pb::InventoryResponse) -> Value {
    let mut out = resp.inventory.as_ref().map(inventory_view).unwrap_or_default();
    // Upstream leaves a falsy generation out.
    if resp.resource_provider_generation != 0 {
        out.insert("resource_provider_generation".into(), json!(resp.resource_provider_generation));
    }
    Value::Object(out)
}

fn one_response(req: &Req, status: StatusCode, resp: &pb::InventoryResponse) -> http::Response<axum::body::Body> {
    let out = json(status, &one_view(resp));
    let modified = resp.inventory.as_ref().and_then(|i| to_naive(&i.last_modified));
    cache_headers(req, out, modified)
}

fn list_response(req: &Req, resp: &pb::ProviderInventories) -> http::Response<axum::body::Body> {
    let by_class: Map<String, Value> =
        resp.inventories.iter().map(|i| (i.resource_class.clone(), Value::Object(inventory_view(i)))).collect();
    let body = json!({"resource_provider_generation": resp.resource_provider_generation, "inventories": by_class});
    let modified = newest(resp.inventories.iter().map(|i| &i.last_modified));
    cache_headers(req, json(StatusCode::OK, &body), modified)
}

/// Upstream looks the provider up before reading the body: a bad body
/// for a provider that does not exist is a 404.
async fn body_for_provider(req: &Req, uuid: &str, schema: &str) -> Result<Value, PlacementError> {
    match req.json_body(schema) {
        Ok(body) => Ok(body),
        Err(bad) => {
            let probe =
                req.state.clients.inventories.clone().get_inventories(pb::ProviderRef { uuid: uuid.to_string() }).await;
            match probe {
                Err(status) if status.code() == tonic::Code::NotFound => {
                    Err(not_found(format!("No resource provider with uuid {uuid} found")))
                }
                _ => Err(bad),
            }
        }
    }
}

async fn list(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:inventories:list", &[])?;
    let uuid = req.param("uuid").to_string();
    let resp = req.state.clients.inventories.clone().get_inventories(pb::ProviderRef { uuid }).await?.into_inner();
    Ok(list_response(&req, &resp))
}

async fn show(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:inventories:show", &[])?;
    let uuid = req.param("uuid").to_string();
    let resource_class = req.param("resource_class").to_string();
    let resp = req
        .state
        .clients
        .inventories
        .clone()
        .get_inventory(pb::GetInventoryRequest { uuid, resource_class })
        .await?
        .into_inner();
    Ok(one_response(&req, StatusCode::OK, &resp))
}

async fn create(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:resource_providers:inventories:create", &[])?;
    let uuid = req.param("uuid").to_string();
    let body = body_for_provider(&req, &uuid, "inventory.POST_INVENTORY_SCHEMA").await?;
    let resource_class = body["resource_class"].as_str().unwrap_or_default().to_string();
    let inventory = inventory_from_json(&resource_class, &body);
    let resp = req
        .state
        .clients
        .inventories
        .clone()
        .create_inventory(pb::WriteInventoryRequest {
            uuid: uuid.clone(),
            resource_provider_generation: 0,
            inventory: Some(inventory),
            allow_reserved_equal_total: req.at_least(1, 26),
        })
        .await?
        .into_inner();
    let mut out = one_response(&req, StatusCode::CREATED, &resp);
    let location = req.absolute_url(&format!("/resource_providers/{uuid}/inventories/{resource_class}"));
    if let Ok(v) = http::HeaderValue::from_str(&location) {
        out.headers_mut().insert(http::header::LOCATION, v);
    }
    Ok(out)
}

async fn replace_all(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:resource_providers:inventories:update", &[])?;
    let uuid = req.param("uuid").to_string();
    let body = body_for_provider(&req, &uuid, "inventory.PUT_INVENTORY_SCHEMA").await?;
    let resp = req
        .state
        .clients
        .inventories
        .clone()
        .set_inventories(pb::SetInventoriesRequest {
            uuid,
            resource_provider_generation: u32::try_from(int(&body["resource_provider_generation"])).unwrap_or(u32::MAX),
            inventories: inventories_from_json(&body["inventories"]),
            allow_reserved_equal_total: req.at_least(1, 26),
        })
        .await?
        .into_inner();
    Ok(list_response(&req, &resp))
}

async fn update(req: Req) -> HandlerResult {
    req.require_content()?;
    req.authorize("placement:resource_providers:inventories:update", &[])?;
    let uuid = req.param("uuid").to_string();
    let resource_class = req.param("resource_class").to_string();
    let body = body_for_provider(&req, &uuid, "inventory.BASE_INVENTORY_SCHEMA").await?;
    let resp = req
        .state
        .clients
        .inventories
        .clone()
        .update_inventory(pb::WriteInventoryRequest {
            uuid,
            resource_provider_generation: u32::try_from(int(&body["resource_provider_generation"])).unwrap_or(u32::MAX),
            inventory: Some(inventory_from_json(&resource_class, &body)),
            allow_reserved_equal_total: req.at_least(1, 26),
        })
        .await?
        .into_inner();
    Ok(one_response(&req, StatusCode::OK, &resp))
}

async fn delete(req: Req) -> HandlerResult {
    req.authorize("placement:resource_providers:inventories:delete", &[])?;
    let uuid = req.param("uuid").to_string();
    let resource_class = req.param("resource_class").to_string();
    req.state.clients.inventories.clone().delete_inventory(pb::DeleteInventoryRequest { uuid, resource_class }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

async fn delete_all(req: Req) -> HandlerResult {
    if !req.at_least(1, 5) {
        // Upstream's version guard answers 405 with its own short text
        // and no Allow header.
        let detail = format!("The method {} is not allowed for this resource. \n\n ", req.method);
        return Ok(error::render_with_detail(405, "", detail, Some(req.version), &req.request_id, None));
    }
    req.authorize("placement:resource_providers:inventories:delete", &[])?;
    let uuid = req.param("uuid").to_string();
    req.state
        .clients
        .inventories
        .clone()
        .delete_inventories(pb::DeleteInventoriesRequest { uuid, resource_provider_generation: None })
        .await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::params::MAX_INT;

    #[test]
    fn inventory_defaults() {
        let inv = inventory_from_json("VCPU", &json!({"total": 8, "allocation_ratio": 16.0}));
        assert_eq!((inv.total, inv.reserved, inv.min_unit, inv.max_unit, inv.step_size), (8, 0, 1, MAX_INT, 1));
        assert_eq!(inv.allocation_ratio, 16.0);
        let view = Value::Object(inventory_view(&inv)).to_string();
        assert_eq!(
            view,
            r#"{"total":8,"reserved":0,"min_unit":1,"max_unit":2147483647,"step_size":1,"allocation_ratio":16.0}"#
        );
    }

    #[test]
    fn falsy_generation_is_left_out() {
        let inv = inventory_from_json("VCPU", &json!({"total": 1}));
        let zero = pb::InventoryResponse { resource_provider_generation: 0, inventory: Some(inv.clone()) };
        assert!(one_view(&zero).get("resource_provider_generation").is_none());
        let one = pb::InventoryResponse { resource_provider_generation: 1, inventory: Some(inv) };
        assert_eq!(one_view(&one)["resource_provider_generation"], 1);
    }
}
