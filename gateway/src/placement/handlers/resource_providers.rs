//! `/resource_providers` and `/resource_providers/{uuid}`.

use http::StatusCode;
use keelson_proto::placement::v1 as pb;
use serde_json::Value;

use crate::placement::handlers::Route;
use crate::placement::json_text::JsonText;
use crate::placement::params::{member_of_params, normalize_uuid, required_params, resources_param};
use crate::placement::request::{
    bad_request, cache_headers, empty, json_text_response, newest, to_naive, HandlerResult, Req,
};
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

/// How the request's microversion shows a provider, written straight to
/// JSON text: a list of a few hundred providers, each with its links, was
/// mostly allocations when built as a `serde_json::Value` tree first.
struct ProviderView {
    /// The escaped start of every link: `{prefix}/resource_providers/`.
    href_start: String,
    /// The link relations after `self`.
    rels: Vec<&'static str>,
    /// Parent and root (from 1.14).
    tree: bool,
}

impl ProviderView {
    fn new(req: &Req) -> Self {
        let mut href_start = JsonText::with_capacity(64);
        href_start.escaped(&req.link(&provider_url("")));
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
        let href_start = String::from_utf8(href_start.into_bytes()).unwrap_or_default();
        ProviderView { href_start, rels, tree: req.at_least(1, 14) }
    }

    /// About how many bytes a provider takes.
    fn size_hint(&self) -> usize {
        160 + (self.rels.len() + 1) * (self.href_start.len() + 72)
    }

    fn write(&self, out: &mut JsonText, rp: &pb::ResourceProvider) {
        out.raw("{\"uuid\":");
        out.string(&rp.uuid);
        out.raw(",\"name\":");
        out.string(&rp.name);
        out.raw(",\"generation\":");
        out.int(i64::from(rp.generation));
        out.raw(",\"links\":[{\"rel\":\"self\",\"href\":\"");
        // Every link starts with the provider's own: written once, copied.
        let own = out.mark();
        out.raw(&self.href_start);
        out.escaped(&rp.uuid);
        let own = (own, out.mark());
        out.byte(b'"');
        for rel in &self.rels {
            out.raw("},{\"rel\":\"");
            out.raw(rel);
            out.raw("\",\"href\":\"");
            out.repeat(own.0, own.1);
            out.byte(b'/');
            out.raw(rel);
            out.byte(b'"');
        }
        out.raw("}]");
        if self.tree {
            out.raw(",\"parent_provider_uuid\":");
            if rp.parent_provider_uuid.is_empty() {
                out.raw("null");
            } else {
                out.string(&rp.parent_provider_uuid);
            }
            out.raw(",\"root_provider_uuid\":");
            out.string(&rp.root_provider_uuid);
        }
        out.byte(b'}');
    }
}

/// A provider as the request's microversion shows it.
fn view(req: &Req, rp: &pb::ResourceProvider) -> JsonText {
    let view = ProviderView::new(req);
    let mut out = JsonText::with_capacity(view.size_hint());
    view.write(&mut out, rp);
    out
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
        let out = json_text_response(StatusCode::OK, view(&req, &rp));
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
    let out = json_text_response(StatusCode::OK, view(&req, &rp));
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
    let out = json_text_response(StatusCode::OK, view(&req, &rp));
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
    let view = ProviderView::new(&req);
    let mut out = JsonText::with_capacity(32 + resp.resource_providers.len() * view.size_hint());
    out.raw("{\"resource_providers\":[");
    for (i, rp) in resp.resource_providers.iter().enumerate() {
        if i > 0 {
            out.byte(b',');
        }
        view.write(&mut out, rp);
    }
    out.raw("]}");
    let last = newest(resp.resource_providers.iter().map(|rp| &rp.last_modified));
    Ok(cache_headers(&req, json_text_response(StatusCode::OK, out), last))
}
