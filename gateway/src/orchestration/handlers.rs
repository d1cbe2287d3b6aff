//! One engine call per route, each route's handler (the route table,
//! `routes.rs`, names it): builds the rpc request from the path, query and
//! body, and shapes the answer as heat-api does (status codes, `Location`,
//! absolute links). Validation of the documents themselves is the engine's.

use std::future::Future;
use std::pin::Pin;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use keelson_proto::orchestration::v1 as pb;
use keelson_runtime::ApiError;

use super::engines::Engines;
use super::fault::{self, Fault};
use super::urls;
use crate::routes::Params;

/// What a handler answers: the REST response, or heat-api's fault.
pub type Reply<'a> = Pin<Box<dyn Future<Output = Result<Response, Fault>> + Send + 'a>>;
/// A route's handler.
pub type Handler = for<'a> fn(Call<'a>) -> Reply<'a>;

/// One authorized, routed request.
pub struct Call<'a> {
    pub engines: &'a Engines,
    pub caller: pb::Caller,
    /// The route's path parameters.
    pub params: &'a Params,
    /// The decoded query pairs, in order.
    pub query: Vec<(String, String)>,
    /// The JSON body, when heat-api would have deserialized one.
    pub body: Option<serde_json::Value>,
    /// `scheme://host[/prefix]` of the request.
    pub base: &'a str,
}

impl Call<'_> {
    fn param(&self, name: &str) -> String {
        self.params.get(name).cloned().unwrap_or_default()
    }

    fn stack(&self) -> Option<pb::StackRef> {
        Some(pb::StackRef { name: self.param("stack_name"), id: self.param("stack_id") })
    }

    fn caller(&self) -> Option<pb::Caller> {
        Some(self.caller.clone())
    }

    /// The query as repeated `QueryParam`s: one per key, in first-seen
    /// order, every value kept.
    fn query_params(&self) -> Vec<pb::QueryParam> {
        let mut out: Vec<pb::QueryParam> = Vec::new();
        for (key, value) in &self.query {
            match out.iter_mut().find(|p| &p.key == key) {
                Some(p) => p.values.push(value.clone()),
                None => out.push(pb::QueryParam { key: key.clone(), values: vec![value.clone()] }),
            }
        }
        out
    }

    /// The body a handler cannot do without.
    fn required_body(&self) -> Result<String, Fault> {
        self.body.as_ref().map(|b| b.to_string()).ok_or_else(Fault::missing_body)
    }

    /// The body a handler takes as optional (`body=None` upstream), or
    /// `absent` when there is none.
    fn optional_body(&self, absent: &str) -> String {
        self.body.as_ref().map(|b| b.to_string()).unwrap_or_else(|| absent.to_string())
    }

    fn get_stack(&self) -> pb::GetStackRequest {
        pb::GetStackRequest { caller: self.caller(), stack: self.stack(), query: self.query_params() }
    }

    fn snapshot(&self, body_json: String) -> pb::SnapshotRequest {
        pb::SnapshotRequest {
            caller: self.caller(),
            stack: self.stack(),
            snapshot_id: self.param("snapshot_id"),
            body_json,
        }
    }

    fn resource_type(&self) -> pb::ResourceTypeRequest {
        pb::ResourceTypeRequest {
            caller: self.caller(),
            type_name: self.param("type_name"),
            query: self.query_params(),
        }
    }

    fn resource(&self) -> pb::ResourceRequest {
        pb::ResourceRequest {
            caller: self.caller(),
            stack: self.stack(),
            resource_name: self.param("resource_name"),
            query: self.query_params(),
        }
    }

    /// The software_configs / software_deployments request: the id of the
    /// route's `id_param` (none for the collections), and the body when
    /// `with_body`.
    fn software(&self, id_param: &str, with_body: bool) -> Result<pb::SoftwareRequest, Fault> {
        let body_json = if with_body { self.required_body()? } else { String::new() };
        Ok(pb::SoftwareRequest {
            caller: self.caller(),
            id: self.param(id_param),
            body_json,
            query: self.query_params(),
        })
    }
}

/// An engine failure as heat-api reports it.
pub fn engine_fault(status: &tonic::Status) -> Fault {
    let err = ApiError::from_status(status, "");
    if err.code.is_empty() {
        // Not the engine's answer (it is down, or not keelson): heat-api
        // reports the RPC layer's exception, a 500.
        tracing::error!(target: "keelson::orchestration", "engine call failed: {status}");
        let error_type = match status.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => "MessagingTimeout",
            _ => "RemoteError",
        };
        return Fault::new(500, error_type, status.message());
    }
    if err.http_status >= 500 {
        tracing::error!(target: "keelson::orchestration", "{}: {}", err.code, err.detail);
    }
    Fault::new(err.http_status, err.code, err.detail)
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A 200 with the engine's document, its links made absolute.
fn document(body_json: &str, base: &str) -> Response {
    let text = body_json.trim();
    if text.is_empty() {
        return json_response(StatusCode::OK, "null".to_string());
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut doc) => {
            urls::absolutize_links(&mut doc, base);
            json_response(StatusCode::OK, doc.to_string())
        }
        Err(e) => {
            tracing::error!(target: "keelson::orchestration", "engine answered invalid JSON: {e}");
            Fault::new(500, "ValueError", "").into_response()
        }
    }
}

fn no_content() -> Response {
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    resp
}

/// 201 for a created stack: `Location` and `{"stack": {"id", "links"}}`.
fn created(identity: &pb::StackIdentity, base: &str) -> Response {
    let url = urls::stack_url(base, &identity.tenant, &identity.stack_name, &identity.stack_id, &identity.path);
    let body = serde_json::json!({"stack": {"id": identity.stack_id, "links": [{"href": url, "rel": "self"}]}});
    let mut resp = json_response(StatusCode::CREATED, body.to_string());
    if let Ok(v) = HeaderValue::from_str(&url) {
        resp.headers_mut().insert(http::header::LOCATION, v);
    }
    resp
}

/// Calls the rpc `$method` on an engine that answers and keeps the reply.
macro_rules! rpc {
    ($engines:expr, $method:ident, $request:expr) => {
        $engines
            .call($request, |mut c, r| async move { c.$method(r).await })
            .await
            .map_err(|s| engine_fault(&s))?
            .into_inner()
    };
}

/// The 302 to a stack's canonical URL (`StackController.lookup`).
pub async fn lookup(call: Call<'_>) -> Result<Response, Fault> {
    let name_or_id = call.param("stack_name");
    let identity = match urls::parse_arn(&name_or_id) {
        Some(arn) => {
            pb::StackIdentity { tenant: arn.tenant, stack_name: arn.stack_name, stack_id: arn.stack_id, path: arn.path }
        }
        None => rpc!(
            call.engines,
            lookup_stack,
            pb::LookupStackRequest { caller: call.caller(), name_or_id, show_deleted: false }
        ),
    };
    let mut location =
        urls::stack_url(call.base, &identity.tenant, &identity.stack_name, &identity.stack_id, &identity.path);
    let subpath = call.param("path");
    if !subpath.is_empty() {
        location = format!("{location}/{subpath}");
    }
    if !call.query.is_empty() {
        location = format!("{location}?{}", urls::urlencode(&call.query));
    }
    Ok(fault::found(&location))
}

pub async fn validate_template(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::ValidateTemplateRequest {
        caller: call.caller(),
        body_json: call.required_body()?,
        query: call.query_params(),
    };
    Ok(document(&rpc!(call.engines, validate_template, req).body_json, call.base))
}

pub async fn list_resource_types(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::ListResourceTypesRequest { caller: call.caller(), query: call.query_params() };
    Ok(document(&rpc!(call.engines, list_resource_types, req).body_json, call.base))
}

pub async fn resource_schema(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, resource_type_schema, call.resource_type()).body_json, call.base))
}

pub async fn generate_template(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, resource_type_template, call.resource_type()).body_json, call.base))
}

pub async fn list_template_versions(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::CallerOnly { caller: call.caller() };
    Ok(document(&rpc!(call.engines, list_template_versions, req).body_json, call.base))
}

pub async fn list_template_functions(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::TemplateVersionRequest {
        caller: call.caller(),
        version: call.param("template_version"),
        query: call.query_params(),
    };
    Ok(document(&rpc!(call.engines, list_template_functions, req).body_json, call.base))
}

async fn list(call: Call<'_>, detail: bool) -> Result<Response, Fault> {
    let req = pb::ListStacksRequest { caller: call.caller(), query: call.query_params(), detail };
    Ok(document(&rpc!(call.engines, list_stacks, req).body_json, call.base))
}

pub async fn list_stacks(call: Call<'_>) -> Result<Response, Fault> {
    list(call, false).await
}

pub async fn list_stacks_detail(call: Call<'_>) -> Result<Response, Fault> {
    list(call, true).await
}

pub async fn create_stack(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::CreateStackRequest { caller: call.caller(), body_json: call.required_body()? };
    Ok(created(&rpc!(call.engines, create_stack, req), call.base))
}

pub async fn preview_stack(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::CreateStackRequest { caller: call.caller(), body_json: call.required_body()? };
    Ok(document(&rpc!(call.engines, preview_stack, req).body_json, call.base))
}

pub async fn show_stack(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, show_stack, call.get_stack()).body_json, call.base))
}

pub async fn get_template(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, get_template, call.get_stack()).body_json, call.base))
}

pub async fn get_environment(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, get_environment, call.get_stack()).body_json, call.base))
}

pub async fn get_files(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, get_files, call.get_stack()).body_json, call.base))
}

async fn update(call: Call<'_>, patch: bool) -> Result<Response, Fault> {
    let req =
        pb::UpdateStackRequest { caller: call.caller(), stack: call.stack(), body_json: call.required_body()?, patch };
    rpc!(call.engines, update_stack, req);
    Ok(fault::accepted())
}

pub async fn update_stack(call: Call<'_>) -> Result<Response, Fault> {
    update(call, false).await
}

pub async fn update_stack_patch(call: Call<'_>) -> Result<Response, Fault> {
    update(call, true).await
}

async fn preview(call: Call<'_>, patch: bool) -> Result<Response, Fault> {
    let req = pb::PreviewUpdateRequest {
        caller: call.caller(),
        stack: call.stack(),
        body_json: call.required_body()?,
        patch,
        query: call.query_params(),
    };
    Ok(document(&rpc!(call.engines, preview_update, req).body_json, call.base))
}

pub async fn preview_update(call: Call<'_>) -> Result<Response, Fault> {
    preview(call, false).await
}

pub async fn preview_update_patch(call: Call<'_>) -> Result<Response, Fault> {
    preview(call, true).await
}

pub async fn delete_stack(call: Call<'_>) -> Result<Response, Fault> {
    rpc!(call.engines, delete_stack, call.get_stack());
    Ok(no_content())
}

pub async fn abandon_stack(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, abandon_stack, call.get_stack()).body_json, call.base))
}

pub async fn export_stack(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, export_stack, call.get_stack()).body_json, call.base))
}

/// `POST .../snapshots` (200): the new snapshot.
pub async fn stack_snapshot(call: Call<'_>) -> Result<Response, Fault> {
    let req = call.snapshot(call.required_body()?);
    Ok(document(&rpc!(call.engines, stack_snapshot, req).body_json, call.base))
}

pub async fn show_snapshot(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, show_snapshot, call.snapshot(String::new())).body_json, call.base))
}

pub async fn delete_snapshot(call: Call<'_>) -> Result<Response, Fault> {
    rpc!(call.engines, delete_snapshot, call.snapshot(String::new()));
    Ok(no_content())
}

pub async fn list_snapshots(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, list_snapshots, call.snapshot(String::new())).body_json, call.base))
}

/// `POST .../snapshots/{id}/restore` (202).
pub async fn restore_snapshot(call: Call<'_>) -> Result<Response, Fault> {
    rpc!(call.engines, restore_snapshot, call.snapshot(String::new()));
    Ok(fault::accepted())
}

pub async fn list_outputs(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, list_outputs, call.get_stack()).body_json, call.base))
}

pub async fn show_output(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::OutputRequest { caller: call.caller(), stack: call.stack(), output_key: call.param("output_key") };
    Ok(document(&rpc!(call.engines, show_output, req).body_json, call.base))
}

pub async fn list_resources(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::ListResourcesRequest { caller: call.caller(), stack: call.stack(), query: call.query_params() };
    Ok(document(&rpc!(call.engines, list_resources, req).body_json, call.base))
}

pub async fn show_resource(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, show_resource, call.resource()).body_json, call.base))
}

pub async fn resource_metadata(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, resource_metadata, call.resource()).body_json, call.base))
}

pub async fn signal_resource(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::SignalResourceRequest {
        caller: call.caller(),
        stack: call.stack(),
        resource_name: call.param("resource_name"),
        // Signal details may be absent: `None` upstream.
        body_json: call.optional_body("null"),
    };
    Ok(document(&rpc!(call.engines, signal_resource, req).body_json, call.base))
}

pub async fn mark_unhealthy(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::MarkUnhealthyRequest {
        caller: call.caller(),
        stack: call.stack(),
        resource_name: call.param("resource_name"),
        body_json: call.required_body()?,
    };
    Ok(document(&rpc!(call.engines, mark_unhealthy, req).body_json, call.base))
}

pub async fn list_events(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::ListEventsRequest {
        caller: call.caller(),
        stack: call.stack(),
        resource_name: call.param("resource_name"),
        query: call.query_params(),
    };
    Ok(document(&rpc!(call.engines, list_events, req).body_json, call.base))
}

pub async fn show_event(call: Call<'_>) -> Result<Response, Fault> {
    let req = pb::ShowEventRequest {
        caller: call.caller(),
        stack: call.stack(),
        resource_name: call.param("resource_name"),
        event_id: call.param("event_id"),
    };
    Ok(document(&rpc!(call.engines, show_event, req).body_json, call.base))
}

pub async fn stack_action(call: Call<'_>) -> Result<Response, Fault> {
    // Upstream reads a missing body as `{}` ("No action specified").
    let req =
        pb::StackActionRequest { caller: call.caller(), stack: call.stack(), body_json: call.optional_body("{}") };
    Ok(document(&rpc!(call.engines, stack_action, req).body_json, call.base))
}

pub async fn build_info(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, build_info, pb::CallerOnly { caller: call.caller() }).body_json, call.base))
}

pub async fn list_services(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, list_services, pb::CallerOnly { caller: call.caller() }).body_json, call.base))
}

pub async fn list_software_configs(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, list_software_configs, call.software("", false)?).body_json, call.base))
}

pub async fn create_software_config(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, create_software_config, call.software("", true)?).body_json, call.base))
}

pub async fn show_software_config(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, show_software_config, call.software("config_id", false)?).body_json, call.base))
}

pub async fn delete_software_config(call: Call<'_>) -> Result<Response, Fault> {
    rpc!(call.engines, delete_software_config, call.software("config_id", false)?);
    Ok(no_content())
}

pub async fn list_software_deployments(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, list_software_deployments, call.software("", false)?).body_json, call.base))
}

pub async fn software_deployment_metadata(call: Call<'_>) -> Result<Response, Fault> {
    let req = call.software("server_id", false)?;
    Ok(document(&rpc!(call.engines, software_deployment_metadata, req).body_json, call.base))
}

pub async fn create_software_deployment(call: Call<'_>) -> Result<Response, Fault> {
    Ok(document(&rpc!(call.engines, create_software_deployment, call.software("", true)?).body_json, call.base))
}

pub async fn show_software_deployment(call: Call<'_>) -> Result<Response, Fault> {
    let req = call.software("deployment_id", false)?;
    Ok(document(&rpc!(call.engines, show_software_deployment, req).body_json, call.base))
}

pub async fn update_software_deployment(call: Call<'_>) -> Result<Response, Fault> {
    let req = call.software("deployment_id", true)?;
    Ok(document(&rpc!(call.engines, update_software_deployment, req).body_json, call.base))
}

pub async fn delete_software_deployment(call: Call<'_>) -> Result<Response, Fault> {
    rpc!(call.engines, delete_software_deployment, call.software("deployment_id", false)?);
    Ok(no_content())
}
