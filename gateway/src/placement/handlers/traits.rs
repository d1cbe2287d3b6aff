//! `/traits`, `/traits/{name}` and `/resource_providers/{uuid}/traits`
//! (from 1.6).

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use keelson_runtime::ApiError;
use serde_json::{json, Value};

use crate::placement::handlers::Route;
use crate::placement::request::{
    bad_request, cache_headers, empty, json, newest, not_found, to_naive, HandlerResult, PlacementError, Req,
};
use crate::route;

/// Routes of `/traits` and `/traits/{name}`.
pub fn routes() -> Vec<Route> {
    vec![
        route!(GET "/traits" => list),
        route!(GET "/traits/{name}" => show),
        route!(PUT "/traits/{name}" => update),
        route!(DELETE "/traits/{name}" => delete),
    ]
}

/// Routes of `/resource_providers/{uuid}/traits`.
pub fn provider_routes() -> Vec<Route> {
    vec![
        route!(GET "/resource_providers/{uuid}/traits" => list_for_provider),
        route!(PUT "/resource_providers/{uuid}/traits" => set_for_provider),
        route!(DELETE "/resource_providers/{uuid}/traits" => delete_for_provider),
    ]
}

/// Before 1.6 these routes do not exist.
fn require_1_6(req: &Req) -> Result<(), PlacementError> {
    if req.at_least(1, 6) {
        Ok(())
    } else {
        Err(not_found(""))
    }
}

async fn list(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:traits:list", &[])?;
    let query = req.validated_query("trait.LIST_TRAIT_SCHEMA")?;
    let mut filter = pb::ListTraitsRequest::default();
    if let Some(name) = query.get("name").and_then(Value::as_str) {
        let Some((op, value)) = name.split_once(':') else {
            return Err(bad_request(format!(
                "Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"{name}\""
            )));
        };
        match op {
            "in" => {
                filter.names = value.split(',').map(str::to_string).collect();
                filter.filter_by_names = true;
            }
            "startswith" => filter.name_prefix = Some(value.to_string()),
            // Upstream ignores any other operator.
            _ => {}
        }
    }
    if let Some(associated) = query.get("associated").and_then(Value::as_str) {
        filter.associated = match associated.to_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => return Err(bad_request("The query parameter \"associated\" only accepts \"true\" or \"false\"")),
        };
    }
    let resp = req.state.clients.traits.clone().list_traits(filter).await?.into_inner();
    let names: Vec<&str> = resp.traits.iter().map(|t| t.name.as_str()).collect();
    let last = newest(resp.traits.iter().map(|t| &t.last_modified));
    let out = json(StatusCode::OK, &json!({ "traits": names }));
    Ok(cache_headers(&req, out, last))
}

async fn show(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:traits:show", &[])?;
    let name = req.param("name").to_string();
    let t = req.state.clients.traits.clone().get_trait(pb::GetTraitRequest { name }).await?.into_inner();
    Ok(cache_headers(&req, empty(StatusCode::NO_CONTENT), to_naive(&t.last_modified)))
}

async fn update(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:traits:update", &[])?;
    let name = req.param("name").to_string();
    if crate::placement::handlers::validate("trait.CUSTOM_TRAIT", &json!(name)).is_err() {
        return Err(bad_request(
            "The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"",
        ));
    }
    let r = req
        .state
        .clients
        .traits
        .clone()
        .ensure_trait(pb::EnsureTraitRequest { name: name.clone() })
        .await?
        .into_inner();
    let status = if r.created { StatusCode::CREATED } else { StatusCode::NO_CONTENT };
    // Upstream reports the creation time, or now when it lost a race.
    let when = if r.created { r.r#trait.as_ref().and_then(|t| to_naive(&t.last_modified)) } else { None };
    let mut resp = cache_headers(&req, empty(status), when);
    resp.headers_mut().insert(http::header::LOCATION, req.location(&format!("/traits/{name}")));
    Ok(resp)
}

async fn delete(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:traits:delete", &[])?;
    let name = req.param("name").to_string();
    req.state.clients.traits.clone().delete_trait(pb::DeleteTraitRequest { name }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

fn provider_traits_body(t: &pb::ProviderTraits) -> Value {
    json!({ "traits": t.traits, "resource_provider_generation": t.resource_provider_generation })
}

async fn list_for_provider(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:resource_providers:traits:list", &[])?;
    let uuid = req.param("uuid").to_string();
    let t = match req.state.clients.providers.clone().get_provider_traits(pb::ProviderRef { uuid: uuid.clone() }).await
    {
        Ok(t) => t.into_inner(),
        Err(status) => {
            // Upstream repeats the lookup's message after its own.
            let e = ApiError::from_status(&status, crate::placement::error::UNDEFINED_CODE);
            if e.http_status == 404 {
                return Err(not_found(format!("No resource provider with uuid {uuid} found: {}", e.detail)));
            }
            return Err(e.into());
        }
    };
    let out = json(StatusCode::OK, &provider_traits_body(&t));
    Ok(cache_headers(&req, out, to_naive(&t.last_modified)))
}

async fn set_for_provider(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.require_content()?;
    req.authorize("placement:resource_providers:traits:update", &[])?;
    let body = req.json_body("trait.SET_TRAITS_FOR_RP_SCHEMA")?;
    let uuid = req.param("uuid").to_string();
    // The schema admits any integer; one no provider can have conflicts.
    let generation = body["resource_provider_generation"].as_i64().and_then(|g| u32::try_from(g).ok());
    let traits: Vec<String> =
        body["traits"].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect();
    let mut client = req.state.clients.providers.clone();
    let Some(generation) = generation else {
        client.get_resource_provider(pb::GetResourceProviderRequest { uuid }).await?;
        return Err(crate::placement::request::conflict(
            "placement.concurrent_update",
            "Resource provider's generation already changed. Please update the generation and try again.",
        ));
    };
    let t = client
        .set_provider_traits(pb::SetProviderTraitsRequest { uuid, resource_provider_generation: generation, traits })
        .await?
        .into_inner();
    let out = json(StatusCode::OK, &provider_traits_body(&t));
    Ok(cache_headers(&req, out, to_naive(&t.last_modified)))
}

async fn delete_for_provider(req: Req) -> HandlerResult {
    require_1_6(&req)?;
    req.authorize("placement:resource_providers:traits:delete", &[])?;
    let uuid = req.param("uuid").to_string();
    req.state.clients.providers.clone().delete_provider_traits(pb::ProviderRef { uuid }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}
