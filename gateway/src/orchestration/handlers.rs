//! One engine call per route: builds the rpc request from the path, query
//! and body, and shapes the answer as heat-api does (status codes,
//! `Location`, absolute links). Validation of the documents themselves is
//! the engine's.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use keelson_proto::orchestration::v1 as pb;
use keelson_runtime::ApiError;

use super::engines::Engines;
use super::fault::{self, Fault};
use super::routes::{Action, Matched};
use super::urls;

/// One authorized, routed request.
pub struct Call<'a> {
    pub caller: pb::Caller,
    pub matched: &'a Matched,
    /// The decoded query pairs, in order.
    pub query: Vec<(String, String)>,
    /// The JSON body, when heat-api would have deserialized one.
    pub body: Option<serde_json::Value>,
    /// `scheme://host[/prefix]` of the request.
    pub base: &'a str,
}

impl Call<'_> {
    fn param(&self, name: &str) -> String {
        self.matched.param(name).to_string()
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
async fn lookup(client: &Engines, call: &Call<'_>) -> Result<Response, Fault> {
    let name_or_id = call.param("stack_name");
    let identity = match urls::parse_arn(&name_or_id) {
        Some(arn) => {
            pb::StackIdentity { tenant: arn.tenant, stack_name: arn.stack_name, stack_id: arn.stack_id, path: arn.path }
        }
        None => rpc!(
            client,
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

/// The software_configs / software_deployments routes: one rpc each,
/// 204 for deletes, the engine's document otherwise.
async fn software(client: &Engines, call: &Call<'_>) -> Result<Response, Fault> {
    use Action::*;
    let action = call.matched.action;
    let id = [call.param("config_id"), call.param("deployment_id"), call.param("server_id")]
        .into_iter()
        .find(|p| !p.is_empty())
        .unwrap_or_default();
    let body_json = match action {
        CreateSoftwareConfig | CreateSoftwareDeployment | UpdateSoftwareDeployment => call.required_body()?,
        _ => String::new(),
    };
    let req = pb::SoftwareRequest { caller: call.caller(), id, body_json, query: call.query_params() };
    let reply = match action {
        ListSoftwareConfigs => rpc!(client, list_software_configs, req),
        CreateSoftwareConfig => rpc!(client, create_software_config, req),
        ShowSoftwareConfig => rpc!(client, show_software_config, req),
        DeleteSoftwareConfig => {
            rpc!(client, delete_software_config, req);
            return Ok(no_content());
        }
        ListSoftwareDeployments => rpc!(client, list_software_deployments, req),
        SoftwareDeploymentMetadata => rpc!(client, software_deployment_metadata, req),
        CreateSoftwareDeployment => rpc!(client, create_software_deployment, req),
        ShowSoftwareDeployment => rpc!(client, show_software_deployment, req),
        UpdateSoftwareDeployment => rpc!(client, update_software_deployment, req),
        DeleteSoftwareDeployment => {
            rpc!(client, delete_software_deployment, req);
            return Ok(no_content());
        }
        _ => return Err(Fault::new(500, "HTTPInternalServerError", "")),
    };
    Ok(document(&reply.body_json, call.base))
}

/// Runs the engine operation of a matched route.
pub async fn dispatch(client: &Engines, call: Call<'_>) -> Result<Response, Fault> {
    use Action::*;
    let base = call.base;
    let resp = match call.matched.action {
        Lookup => return lookup(client, &call).await,
        ValidateTemplate => {
            let req = pb::ValidateTemplateRequest {
                caller: call.caller(),
                body_json: call.required_body()?,
                query: call.query_params(),
            };
            document(&rpc!(client, validate_template, req).body_json, base)
        }
        ListResourceTypes => {
            let req = pb::ListResourceTypesRequest { caller: call.caller(), query: call.query_params() };
            document(&rpc!(client, list_resource_types, req).body_json, base)
        }
        ResourceSchema | GenerateTemplate => {
            let req = pb::ResourceTypeRequest {
                caller: call.caller(),
                type_name: call.param("type_name"),
                query: call.query_params(),
            };
            let reply = if call.matched.action == ResourceSchema {
                rpc!(client, resource_type_schema, req)
            } else {
                rpc!(client, resource_type_template, req)
            };
            document(&reply.body_json, base)
        }
        ListTemplateVersions => {
            document(&rpc!(client, list_template_versions, pb::CallerOnly { caller: call.caller() }).body_json, base)
        }
        ListTemplateFunctions => {
            let req = pb::TemplateVersionRequest {
                caller: call.caller(),
                version: call.param("template_version"),
                query: call.query_params(),
            };
            document(&rpc!(client, list_template_functions, req).body_json, base)
        }
        ListStacks | ListStacksDetail => {
            let req = pb::ListStacksRequest {
                caller: call.caller(),
                query: call.query_params(),
                detail: call.matched.action == ListStacksDetail,
            };
            document(&rpc!(client, list_stacks, req).body_json, base)
        }
        CreateStack => {
            let req = pb::CreateStackRequest { caller: call.caller(), body_json: call.required_body()? };
            created(&rpc!(client, create_stack, req), base)
        }
        PreviewStack => {
            let req = pb::CreateStackRequest { caller: call.caller(), body_json: call.required_body()? };
            document(&rpc!(client, preview_stack, req).body_json, base)
        }
        ShowStack => document(&rpc!(client, show_stack, call.get_stack()).body_json, base),
        GetTemplate => document(&rpc!(client, get_template, call.get_stack()).body_json, base),
        GetEnvironment => document(&rpc!(client, get_environment, call.get_stack()).body_json, base),
        GetFiles => document(&rpc!(client, get_files, call.get_stack()).body_json, base),
        UpdateStack | UpdateStackPatch => {
            let req = pb::UpdateStackRequest {
                caller: call.caller(),
                stack: call.stack(),
                body_json: call.required_body()?,
                patch: call.matched.action == UpdateStackPatch,
            };
            rpc!(client, update_stack, req);
            fault::accepted()
        }
        PreviewUpdate | PreviewUpdatePatch => {
            let req = pb::PreviewUpdateRequest {
                caller: call.caller(),
                stack: call.stack(),
                body_json: call.required_body()?,
                patch: call.matched.action == PreviewUpdatePatch,
                query: call.query_params(),
            };
            document(&rpc!(client, preview_update, req).body_json, base)
        }
        DeleteStack => {
            rpc!(client, delete_stack, call.get_stack());
            no_content()
        }
        AbandonStack => document(&rpc!(client, abandon_stack, call.get_stack()).body_json, base),
        ExportStack => document(&rpc!(client, export_stack, call.get_stack()).body_json, base),
        ListOutputs => document(&rpc!(client, list_outputs, call.get_stack()).body_json, base),
        ShowOutput => {
            let req =
                pb::OutputRequest { caller: call.caller(), stack: call.stack(), output_key: call.param("output_key") };
            document(&rpc!(client, show_output, req).body_json, base)
        }
        ListResources => {
            let req =
                pb::ListResourcesRequest { caller: call.caller(), stack: call.stack(), query: call.query_params() };
            document(&rpc!(client, list_resources, req).body_json, base)
        }
        ShowResource | ResourceMetadata => {
            let req = pb::ResourceRequest {
                caller: call.caller(),
                stack: call.stack(),
                resource_name: call.param("resource_name"),
                query: call.query_params(),
            };
            let reply = if call.matched.action == ShowResource {
                rpc!(client, show_resource, req)
            } else {
                rpc!(client, resource_metadata, req)
            };
            document(&reply.body_json, base)
        }
        SignalResource => {
            let req = pb::SignalResourceRequest {
                caller: call.caller(),
                stack: call.stack(),
                resource_name: call.param("resource_name"),
                // Signal details may be absent: `None` upstream.
                body_json: call.optional_body("null"),
            };
            document(&rpc!(client, signal_resource, req).body_json, base)
        }
        MarkUnhealthy => {
            let req = pb::MarkUnhealthyRequest {
                caller: call.caller(),
                stack: call.stack(),
                resource_name: call.param("resource_name"),
                body_json: call.required_body()?,
            };
            document(&rpc!(client, mark_unhealthy, req).body_json, base)
        }
        ListEvents => {
            let req = pb::ListEventsRequest {
                caller: call.caller(),
                stack: call.stack(),
                resource_name: call.param("resource_name"),
                query: call.query_params(),
            };
            document(&rpc!(client, list_events, req).body_json, base)
        }
        ShowEvent => {
            let req = pb::ShowEventRequest {
                caller: call.caller(),
                stack: call.stack(),
                resource_name: call.param("resource_name"),
                event_id: call.param("event_id"),
            };
            document(&rpc!(client, show_event, req).body_json, base)
        }
        StackAction => {
            // Upstream reads a missing body as `{}` ("No action specified").
            let req = pb::StackActionRequest {
                caller: call.caller(),
                stack: call.stack(),
                body_json: call.optional_body("{}"),
            };
            document(&rpc!(client, stack_action, req).body_json, base)
        }
        BuildInfo => document(&rpc!(client, build_info, pb::CallerOnly { caller: call.caller() }).body_json, base),
        ListServices => {
            document(&rpc!(client, list_services, pb::CallerOnly { caller: call.caller() }).body_json, base)
        }
        ListSoftwareConfigs
        | CreateSoftwareConfig
        | ShowSoftwareConfig
        | DeleteSoftwareConfig
        | ListSoftwareDeployments
        | SoftwareDeploymentMetadata
        | CreateSoftwareDeployment
        | ShowSoftwareDeployment
        | UpdateSoftwareDeployment
        | DeleteSoftwareDeployment => return software(client, &call).await,
        // Answered before dispatch (no engine call, no project check).
        Reject => fault::reject(call.matched.allow.as_deref().unwrap_or("")),
        Options => fault::options(call.matched.allow.as_deref().unwrap_or("")),
    };
    Ok(resp)
}
