//! `/resource_classes` (from 1.2).

use std::sync::atomic::{AtomicU64, Ordering};

use http::StatusCode;
use keelson_placement_standard::standard_resource_class_id;
use keelson_proto::placement::v1 as pb;
use serde_json::json;

use crate::placement::handlers::Route;
use crate::placement::json_text::JsonText;
use crate::placement::request::{
    cache_headers, empty, json_text_response, newest, not_found, to_naive, HandlerResult, Req,
};
use crate::route;

pub fn routes() -> Vec<Route> {
    vec![
        route!(GET "/resource_classes" => list),
        route!(POST "/resource_classes" => create),
        route!(GET "/resource_classes/{name}" => show),
        route!(PUT "/resource_classes/{name}" => update),
        route!(DELETE "/resource_classes/{name}" => delete),
    ]
}

/// Before 1.2 these routes do not exist.
fn require_1_2(req: &Req) -> Result<(), crate::placement::PlacementError> {
    if req.at_least(1, 2) {
        Ok(())
    } else {
        Err(not_found(""))
    }
}

/// A class as the API shows it, written straight to JSON text.
fn write_class(out: &mut JsonText, req: &Req, name: &str) {
    out.raw("{\"name\":");
    out.string(name);
    out.raw(",\"links\":[{\"rel\":\"self\",\"href\":");
    out.string(&req.link(&format!("/resource_classes/{name}")));
    out.raw("}]}");
}

fn view(req: &Req, name: &str) -> JsonText {
    let mut out = JsonText::with_capacity(96 + 2 * name.len());
    write_class(&mut out, req, name);
    out
}

async fn list(req: Req) -> HandlerResult {
    require_1_2(&req)?;
    req.authorize("placement:resource_classes:list", &[])?;
    let resp =
        req.state.clients.classes.clone().list_resource_classes(pb::ListResourceClassesRequest {}).await?.into_inner();
    let mut out = JsonText::with_capacity(32 + resp.resource_classes.len() * 128);
    out.raw("{\"resource_classes\":[");
    for (i, rc) in resp.resource_classes.iter().enumerate() {
        if i > 0 {
            out.byte(b',');
        }
        write_class(&mut out, &req, &rc.name);
    }
    out.raw("]}");
    let last = newest(resp.resource_classes.iter().map(|rc| &rc.last_modified));
    Ok(cache_headers(&req, json_text_response(StatusCode::OK, out), last))
}

async fn create(req: Req) -> HandlerResult {
    require_1_2(&req)?;
    req.require_content()?;
    req.authorize("placement:resource_classes:create", &[])?;
    let body = req.json_body("resource_class.POST_RC_SCHEMA_V1_2")?;
    let name = body["name"].as_str().unwrap_or_default().to_string();
    req.state
        .clients
        .classes
        .clone()
        .create_resource_class(pb::CreateResourceClassRequest { name: name.clone() })
        .await?;
    let mut resp = empty(StatusCode::CREATED);
    resp.headers_mut().insert(http::header::LOCATION, req.location(&format!("/resource_classes/{name}")));
    Ok(resp)
}

async fn show(req: Req) -> HandlerResult {
    require_1_2(&req)?;
    req.authorize("placement:resource_classes:show", &[])?;
    let name = req.param("name");
    if req.state.standard_classes_seen.contains(name) {
        return Ok(cache_headers(&req, json_text_response(StatusCode::OK, view(&req, name)), None));
    }
    let rc = req
        .state
        .clients
        .classes
        .clone()
        .get_resource_class(pb::GetResourceClassRequest { name: name.to_string() })
        .await?
        .into_inner();
    req.state.standard_classes_seen.insert(&rc.name);
    let out = json_text_response(StatusCode::OK, view(&req, &rc.name));
    Ok(cache_headers(&req, out, to_naive(&rc.last_modified)))
}

/// The standard resource classes the inventory service has shown to
/// exist, a bit per standard id. From then on a standard class is answered
/// here: it is never renamed or deleted and reports no modification time,
/// so its answer is derived. Until then the database may not hold it yet
/// (a controller seeds the standard classes shortly after start-up), so the
/// first ask goes to the service. Only the exact name: the database's
/// collation may match other spellings.
#[derive(Default)]
pub struct StandardClassesSeen(AtomicU64);

impl StandardClassesSeen {
    fn bit(name: &str) -> Option<u64> {
        let id = standard_resource_class_id(name)?;
        1u64.checked_shl(u32::try_from(id).ok()?)
    }

    fn contains(&self, name: &str) -> bool {
        Self::bit(name).is_some_and(|bit| self.0.load(Ordering::Relaxed) & bit != 0)
    }

    fn insert(&self, name: &str) {
        if let Some(bit) = Self::bit(name) {
            self.0.fetch_or(bit, Ordering::Relaxed);
        }
    }
}

async fn update(req: Req) -> HandlerResult {
    require_1_2(&req)?;
    let name = req.param("name").to_string();
    if req.at_least(1, 7) {
        req.authorize("placement:resource_classes:update", &[])?;
        // Upstream validates the path name with the body schema.
        crate::placement::handlers::validate("resource_class.PUT_RC_SCHEMA_V1_2", &json!({ "name": name }))
            .map_err(|msg| crate::placement::request::bad_request(format!("JSON does not validate: {msg}")))?;
        let r = req
            .state
            .clients
            .classes
            .clone()
            .ensure_resource_class(pb::EnsureResourceClassRequest { name: name.clone() })
            .await?;
        let status = if r.into_inner().created { StatusCode::CREATED } else { StatusCode::NO_CONTENT };
        let mut resp = empty(status);
        resp.headers_mut().insert(http::header::LOCATION, req.location(&format!("/resource_classes/{name}")));
        return Ok(resp);
    }
    // 1.2-1.6: rename a custom class .
    req.require_content()?;
    req.authorize("placement:resource_classes:update", &[])?;
    let body = req.json_body("resource_class.PUT_RC_SCHEMA_V1_2")?;
    let new_name = body["name"].as_str().unwrap_or_default().to_string();
    let rc = req
        .state
        .clients
        .classes
        .clone()
        .rename_resource_class(pb::RenameResourceClassRequest { name, new_name })
        .await?
        .into_inner();
    Ok(json_text_response(StatusCode::OK, view(&req, &rc.name)))
}

async fn delete(req: Req) -> HandlerResult {
    require_1_2(&req)?;
    req.authorize("placement:resource_classes:delete", &[])?;
    let name = req.param("name").to_string();
    req.state.clients.classes.clone().delete_resource_class(pb::DeleteResourceClassRequest { name }).await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_classes_seen_one_by_one_and_exactly() {
        let seen = StandardClassesSeen::default();
        assert!(!seen.contains("VCPU"));
        seen.insert("VCPU");
        seen.insert("CUSTOM_FOO");
        assert!(seen.contains("VCPU"));
        assert!(!seen.contains("MEMORY_MB"));
        assert!(!seen.contains("vcpu"));
        assert!(!seen.contains("CUSTOM_FOO"));
    }
}
