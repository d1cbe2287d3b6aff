//! The Orchestration REST API in-process, against a fake stack engine: a
//! real tonic server on a loopback port answering canned documents and
//! errors and recording what it was asked. The engine's own behaviour is
//! tested in the stack-engine crate; this checks the translation (routes,
//! status codes, headers, error bodies, the caller, links).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Method, Request, StatusCode};
use keelson_gateway::layers::metrics::Metrics;
use keelson_gateway::server::{channel, orchestration_app};
use keelson_proto::orchestration::v1 as pb;
use keelson_runtime::{ApiError, Config};
use pb::orchestration_server::{Orchestration, OrchestrationServer};
use serde_json::{json, Value};
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};
use tower::ServiceExt as _;

/// One call the fake engine received.
#[derive(Debug, Clone, Default)]
struct Recorded {
    method: &'static str,
    caller: pb::Caller,
    stack: Option<pb::StackRef>,
    query: Vec<pb::QueryParam>,
    body_json: String,
    /// Resource name, output key, patch flag, ...: whatever else mattered.
    extra: String,
    request_id: String,
    traceparent: String,
}

/// The fake engine: canned answers, every call recorded.
#[derive(Clone, Default)]
struct FakeEngine {
    calls: Arc<Mutex<Vec<Recorded>>>,
}

fn reply(doc: Value) -> Result<GrpcResponse<pb::JsonReply>, Status> {
    Ok(GrpcResponse::new(pb::JsonReply { body_json: doc.to_string() }))
}

fn engine_error(status: u16, code: &str, message: &str) -> Status {
    ApiError::new(status, code, message).to_status()
}

fn stack_doc(tenant: &str) -> Value {
    json!({"stack": {"id": "id-1", "stack_name": "s1", "stack_status": "CREATE_COMPLETE",
        "links": [{"href": format!("/v1/{tenant}/stacks/s1/id-1"), "rel": "self"}]}})
}

impl FakeEngine {
    fn record<T>(&self, method: &'static str, req: &GrpcRequest<T>, mut rec: Recorded) {
        let meta = |name: &str| req.metadata().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        rec.method = method;
        rec.request_id = meta("x-openstack-request-id");
        rec.traceparent = meta("traceparent");
        self.calls.lock().unwrap().push(rec);
    }

    /// Records a `SnapshotRequest` (the snapshot id as `extra`) and
    /// answers `doc`.
    fn snapshot_call(
        &self,
        method: &'static str,
        req: &GrpcRequest<pb::SnapshotRequest>,
        doc: Value,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            method,
            req,
            Recorded { stack: r.stack, body_json: r.body_json, extra: r.snapshot_id, ..Default::default() },
        );
        reply(doc)
    }

    fn last(&self) -> Recorded {
        self.calls.lock().unwrap().last().cloned().unwrap_or_default()
    }

    fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    /// Records a `GetStackRequest`-shaped call and answers `doc`.
    fn get_stack_call(
        &self,
        method: &'static str,
        req: &GrpcRequest<pb::GetStackRequest>,
        doc: Value,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            method,
            req,
            Recorded { caller: r.caller.unwrap_or_default(), stack: r.stack, query: r.query, ..Default::default() },
        );
        reply(doc)
    }
}

#[tonic::async_trait]
impl Orchestration for FakeEngine {
    async fn create_stack(
        &self,
        req: GrpcRequest<pb::CreateStackRequest>,
    ) -> Result<GrpcResponse<pb::StackIdentity>, Status> {
        let r = req.get_ref().clone();
        let caller = r.caller.clone().unwrap_or_default();
        self.record(
            "create_stack",
            &req,
            Recorded { caller: caller.clone(), body_json: r.body_json.clone(), ..Default::default() },
        );
        let body: Value = serde_json::from_str(&r.body_json).unwrap_or(Value::Null);
        let name = body["stack_name"].as_str().unwrap_or("").to_string();
        if name == "dup" {
            return Err(engine_error(409, "StackExists", "The Stack (dup) already exists."));
        }
        Ok(GrpcResponse::new(pb::StackIdentity {
            tenant: caller.project_id,
            stack_name: name,
            stack_id: "id-9".into(),
            path: String::new(),
        }))
    }

    async fn preview_stack(
        &self,
        req: GrpcRequest<pb::CreateStackRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record(
            "preview_stack",
            &req,
            Recorded { body_json: req.get_ref().body_json.clone(), ..Default::default() },
        );
        reply(json!({"stack": {"resources": []}}))
    }

    async fn list_stacks(
        &self,
        req: GrpcRequest<pb::ListStacksRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        let caller = r.caller.unwrap_or_default();
        let tenant = caller.project_id.clone();
        self.record(
            "list_stacks",
            &req,
            Recorded { caller, query: r.query, extra: format!("detail={}", r.detail), ..Default::default() },
        );
        reply(
            json!({"stacks": [{"id": "id-1", "links": [{"href": format!("/v1/{tenant}/stacks/s1/id-1"), "rel": "self"}]}],
            "links": [{"href": format!("/v1/{tenant}/stacks?marker=id-1"), "rel": "next"}]}),
        )
    }

    async fn lookup_stack(
        &self,
        req: GrpcRequest<pb::LookupStackRequest>,
    ) -> Result<GrpcResponse<pb::StackIdentity>, Status> {
        let r = req.get_ref().clone();
        let caller = r.caller.unwrap_or_default();
        self.record(
            "lookup_stack",
            &req,
            Recorded { caller: caller.clone(), extra: r.name_or_id.clone(), ..Default::default() },
        );
        match r.name_or_id.as_str() {
            "s1" | "id-1" => Ok(GrpcResponse::new(pb::StackIdentity {
                tenant: caller.project_id,
                stack_name: "s1".into(),
                stack_id: "id-1".into(),
                path: String::new(),
            })),
            other => Err(engine_error(404, "EntityNotFound", &format!("The Stack ({other}) could not be found."))),
        }
    }

    async fn show_stack(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        let caller = r.caller.unwrap_or_default();
        let tenant = caller.project_id.clone();
        self.record(
            "show_stack",
            &req,
            Recorded { caller, stack: r.stack.clone(), query: r.query, ..Default::default() },
        );
        if r.stack.is_some_and(|s| s.name == "nope") {
            return Err(engine_error(404, "EntityNotFound", "The Stack (nope) could not be found."));
        }
        reply(stack_doc(&tenant))
    }

    async fn get_template(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("get_template", &req, json!({"heat_template_version": "2021-04-16"}))
    }
    async fn get_environment(
        &self,
        req: GrpcRequest<pb::GetStackRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("get_environment", &req, json!({"parameters": {}}))
    }
    async fn get_files(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("get_files", &req, json!({}))
    }

    async fn update_stack(
        &self,
        req: GrpcRequest<pb::UpdateStackRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "update_stack",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                stack: r.stack,
                body_json: r.body_json,
                extra: format!("patch={}", r.patch),
                ..Default::default()
            },
        );
        reply(Value::Null)
    }

    async fn preview_update(
        &self,
        req: GrpcRequest<pb::PreviewUpdateRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "preview_update",
            &req,
            Recorded { stack: r.stack, extra: format!("patch={}", r.patch), ..Default::default() },
        );
        reply(json!({"resource_changes": {"added": [], "deleted": [], "replaced": [], "updated": [], "unchanged": []}}))
    }

    async fn delete_stack(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("delete_stack", &req, Value::Null)
    }

    async fn abandon_stack(
        &self,
        req: GrpcRequest<pb::GetStackRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record("abandon_stack", &req, Recorded::default());
        Err(engine_error(400, "NotSupported", "Stack Abandon is not supported."))
    }

    async fn export_stack(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("export_stack", &req, json!({}))
    }

    async fn stack_snapshot(
        &self,
        req: GrpcRequest<pb::SnapshotRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.snapshot_call("stack_snapshot", &req, json!({"id": "snap-1", "status": "IN_PROGRESS"}))
    }

    async fn list_snapshots(
        &self,
        req: GrpcRequest<pb::SnapshotRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.snapshot_call("list_snapshots", &req, json!({"snapshots": []}))
    }

    async fn show_snapshot(
        &self,
        req: GrpcRequest<pb::SnapshotRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        if req.get_ref().snapshot_id == "gone" {
            self.record("show_snapshot", &req, Recorded::default());
            return Err(engine_error(404, "NotFound", "Snapshot with id gone not found"));
        }
        self.snapshot_call("show_snapshot", &req, json!({"snapshot": {"id": "snap-1"}}))
    }

    async fn delete_snapshot(
        &self,
        req: GrpcRequest<pb::SnapshotRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.snapshot_call("delete_snapshot", &req, Value::Null)
    }

    async fn restore_snapshot(
        &self,
        req: GrpcRequest<pb::SnapshotRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.snapshot_call("restore_snapshot", &req, Value::Null)
    }

    async fn stack_action(
        &self,
        req: GrpcRequest<pb::StackActionRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record("stack_action", &req, Recorded { stack: r.stack, body_json: r.body_json, ..Default::default() });
        reply(Value::Null)
    }

    async fn list_outputs(&self, req: GrpcRequest<pb::GetStackRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.get_stack_call("list_outputs", &req, json!({"outputs": []}))
    }

    async fn show_output(&self, req: GrpcRequest<pb::OutputRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "show_output",
            &req,
            Recorded { stack: r.stack, extra: r.output_key.clone(), ..Default::default() },
        );
        Err(engine_error(404, "NotFound", &format!("Specified output key {} not found.", r.output_key)))
    }

    async fn list_resources(
        &self,
        req: GrpcRequest<pb::ListResourcesRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record("list_resources", &req, Recorded { stack: r.stack, query: r.query, ..Default::default() });
        reply(json!({"resources": [{"resource_name": "r", "links": [
            {"href": "/v1/admin/stacks/s1/id-1/resources/r", "rel": "self"},
            {"href": "/v1/admin/stacks/s1/id-1", "rel": "stack"}]}]}))
    }

    async fn show_resource(
        &self,
        req: GrpcRequest<pb::ResourceRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "show_resource",
            &req,
            Recorded { stack: r.stack, query: r.query, extra: r.resource_name, ..Default::default() },
        );
        reply(json!({"resource": {}}))
    }

    async fn resource_metadata(
        &self,
        req: GrpcRequest<pb::ResourceRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record(
            "resource_metadata",
            &req,
            Recorded { extra: req.get_ref().resource_name.clone(), ..Default::default() },
        );
        reply(json!({"metadata": {}}))
    }

    async fn signal_resource(
        &self,
        req: GrpcRequest<pb::SignalResourceRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "signal_resource",
            &req,
            Recorded { stack: r.stack, body_json: r.body_json, extra: r.resource_name, ..Default::default() },
        );
        reply(Value::Null)
    }

    async fn mark_unhealthy(
        &self,
        req: GrpcRequest<pb::MarkUnhealthyRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "mark_unhealthy",
            &req,
            Recorded { body_json: r.body_json, extra: r.resource_name, ..Default::default() },
        );
        reply(Value::Null)
    }

    async fn list_events(
        &self,
        req: GrpcRequest<pb::ListEventsRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "list_events",
            &req,
            Recorded { stack: r.stack, query: r.query, extra: r.resource_name, ..Default::default() },
        );
        reply(json!({"events": []}))
    }

    async fn show_event(&self, req: GrpcRequest<pb::ShowEventRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "show_event",
            &req,
            Recorded { stack: r.stack, extra: format!("{}/{}", r.resource_name, r.event_id), ..Default::default() },
        );
        reply(json!({"event": {}}))
    }

    async fn validate_template(
        &self,
        req: GrpcRequest<pb::ValidateTemplateRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "validate_template",
            &req,
            Recorded { body_json: r.body_json.clone(), query: r.query, ..Default::default() },
        );
        if r.body_json.contains("2099-01-01") {
            return Err(engine_error(
                400,
                "InvalidTemplateVersion",
                "The template version is invalid: \"heat_template_version: 2099-01-01\".",
            ));
        }
        reply(json!({"Description": "No description", "Parameters": {}}))
    }

    async fn list_resource_types(
        &self,
        req: GrpcRequest<pb::ListResourceTypesRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record("list_resource_types", &req, Recorded { query: r.query, ..Default::default() });
        reply(json!({"resource_types": ["OS::Heat::None"]}))
    }

    async fn resource_type_schema(
        &self,
        req: GrpcRequest<pb::ResourceTypeRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record(
            "resource_type_schema",
            &req,
            Recorded { extra: req.get_ref().type_name.clone(), ..Default::default() },
        );
        reply(json!({"resource_type": req.get_ref().type_name}))
    }

    async fn resource_type_template(
        &self,
        req: GrpcRequest<pb::ResourceTypeRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record("resource_type_template", &req, Recorded::default());
        Err(engine_error(500, "KeyError", "'hot'"))
    }

    async fn list_template_versions(
        &self,
        req: GrpcRequest<pb::CallerOnly>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record("list_template_versions", &req, Recorded::default());
        reply(json!({"template_versions": []}))
    }

    async fn list_template_functions(
        &self,
        req: GrpcRequest<pb::TemplateVersionRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record(
            "list_template_functions",
            &req,
            Recorded { extra: req.get_ref().version.clone(), ..Default::default() },
        );
        reply(json!({"template_functions": []}))
    }

    async fn build_info(&self, req: GrpcRequest<pb::CallerOnly>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record("build_info", &req, Recorded::default());
        reply(json!({"api": {"revision": "x"}, "engine": {"revision": "x"}}))
    }

    async fn list_services(&self, req: GrpcRequest<pb::CallerOnly>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        self.record(
            "list_services",
            &req,
            Recorded { caller: req.get_ref().caller.clone().unwrap_or_default(), ..Default::default() },
        );
        reply(json!({"services": []}))
    }

    async fn presigned_signal(
        &self,
        req: GrpcRequest<pb::PresignedSignalRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        let rec = Recorded {
            query: r.query,
            body_json: r.body_json,
            extra: format!("{} {}", r.method, r.path),
            ..Default::default()
        };
        self.record("presigned_signal", &req, rec);
        reply(json!(null))
    }

    async fn cfn_signal(&self, req: GrpcRequest<pb::CfnSignalRequest>) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        let rec = Recorded {
            caller: r.caller.unwrap_or_default(),
            body_json: r.body_json,
            extra: format!("{} {}", r.arn, r.wait_condition),
            ..Default::default()
        };
        self.record("cfn_signal", &req, rec);
        reply(json!(null))
    }

    async fn list_software_configs(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "list_software_configs",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn create_software_config(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "create_software_config",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn show_software_config(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "show_software_config",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn delete_software_config(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "delete_software_config",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn list_software_deployments(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "list_software_deployments",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn create_software_deployment(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "create_software_deployment",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn show_software_deployment(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "show_software_deployment",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn update_software_deployment(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "update_software_deployment",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn delete_software_deployment(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "delete_software_deployment",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }

    async fn software_deployment_metadata(
        &self,
        req: GrpcRequest<pb::SoftwareRequest>,
    ) -> Result<GrpcResponse<pb::JsonReply>, Status> {
        let r = req.get_ref().clone();
        self.record(
            "software_deployment_metadata",
            &req,
            Recorded {
                caller: r.caller.unwrap_or_default(),
                body_json: r.body_json,
                query: r.query,
                extra: r.id,
                ..Default::default()
            },
        );
        reply(json!({}))
    }
}

/// Starts the fake engine on a loopback port; its gRPC URL.
async fn start_fake_engine(engine: FakeEngine) -> String {
    let incoming = tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(OrchestrationServer::new(engine))
            .serve_with_incoming(incoming)
            .await
    });
    format!("http://{addr}")
}

struct Harness {
    app: axum::Router,
    engine: FakeEngine,
}

async fn harness_with(config: Config) -> Harness {
    let engine = FakeEngine::default();
    let url = start_fake_engine(engine.clone()).await;
    let app = orchestration_app(&config, vec![channel(&url, None).unwrap()], Metrics::default()).unwrap();
    Harness { app, engine }
}

async fn noauth_harness() -> Harness {
    let mut config = Config::default();
    config.set("orchestration", "auth_strategy", "noauth");
    harness_with(config).await
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

impl Harness {
    async fn send(&self, req: Request<Body>) -> Answer {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 24).await.unwrap();
        Answer { status, headers, text: String::from_utf8(bytes.to_vec()).unwrap() }
    }

    async fn call(&self, method: Method, uri: &str, body: Option<&str>) -> Answer {
        let mut req = Request::builder().method(method).uri(uri).header("host", "heat.test:8004");
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        self.send(req.body(body.map(|b| Body::from(b.to_string())).unwrap_or_else(Body::empty)).unwrap()).await
    }
}

fn fault(code: u16, title: &str, explanation: &str, error_type: &str, message: &str) -> Value {
    json!({"code": code, "title": title, "explanation": explanation,
        "error": {"type": error_type, "traceback": null, "message": message}})
}

const BAD_REQUEST: &str =
    "The server could not comply with the request since it is either malformed or otherwise incorrect.";

#[tokio::test]
async fn version_document_and_unknown_routes() {
    let h = noauth_harness().await;
    let a = h.call(Method::GET, "/", None).await;
    assert_eq!(a.status, StatusCode::MULTIPLE_CHOICES);
    assert_eq!(
        a.json(),
        json!({"versions": [{"id": "v1.0", "status": "CURRENT", "links": [{"rel": "self", "href": "http://heat.test:8004/v1/"}]}]})
    );
    // Routes that do not exist: the router's bare webob 404, no engine call.
    for uri in ["/v1/", "/v1/admin/nothing", "/nothing"] {
        let a = h.call(Method::GET, uri, None).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(
            a.json(),
            json!({"message": "The resource could not be found.<br /><br />\n\n\n", "code": "404 Not Found", "title": "Not Found"})
        );
    }
    assert_eq!(h.engine.count(), 0);
}

#[tokio::test]
async fn lookups_redirect_to_the_canonical_url() {
    let h = noauth_harness().await;
    let a = h.call(Method::GET, "/v1/admin/stacks/s1", None).await;
    assert_eq!(a.status, StatusCode::FOUND);
    let canonical = "http://heat.test:8004/v1/admin/stacks/s1/id-1";
    assert_eq!(a.header("location"), canonical);
    assert_eq!(a.header("content-type"), "application/json");
    assert_eq!(
        a.json(),
        json!({"message": format!("The resource was found at <a href=\"{canonical}\">{canonical}</a>;\nyou should be redirected automatically.\n\n"),
            "code": "302 Found", "title": "Found"})
    );
    assert_eq!(h.engine.last().method, "lookup_stack");
    assert_eq!(h.engine.last().extra, "s1");

    // By id, with a sub-path and the query kept (repeated keys too).
    let a = h
        .call(Method::GET, "/v1/admin/stacks/id-1/events?sort_dir=asc&marker=e%201&sort_keys=a&sort_keys=b", None)
        .await;
    assert_eq!(a.status, StatusCode::FOUND);
    assert_eq!(a.header("location"), format!("{canonical}/events?sort_dir=asc&marker=e+1&sort_keys=a&sort_keys=b"));

    // Writes are redirected too (the client re-sends them).
    for method in [Method::PUT, Method::PATCH, Method::DELETE, Method::POST] {
        let a = h.call(method.clone(), "/v1/admin/stacks/s1", Some("{}")).await;
        assert_eq!((a.status, a.header("location")), (StatusCode::FOUND, canonical), "{method}");
    }
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/actions", Some(r#"{"check": null}"#)).await;
    assert_eq!(a.header("location"), format!("{canonical}/actions"));

    // The ARN form needs no lookup.
    let calls = h.engine.count();
    let a = h.call(Method::GET, "/v1/admin/stacks/arn:openstack:heat::admin:stacks/s2/id-2/resources", None).await;
    assert_eq!(
        (a.status, a.header("location")),
        (StatusCode::FOUND, "http://heat.test:8004/v1/admin/stacks/s2/id-2/resources")
    );
    assert_eq!(h.engine.count(), calls);

    // Behind a proxy: the client's scheme, host and prefix.
    let req = Request::get("/v1/admin/stacks/s1")
        .header("host", "internal:8004")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "cloud.example")
        .header("x-forwarded-prefix", "/heat")
        .body(Body::empty())
        .unwrap();
    let a = h.send(req).await;
    assert_eq!(a.header("location"), "https://cloud.example/heat/v1/admin/stacks/s1/id-1");

    let a = h.call(Method::GET, "/v1/admin/stacks/nope", None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(
        a.json(),
        fault(
            404,
            "Not Found",
            "The resource could not be found.",
            "EntityNotFound",
            "The Stack (nope) could not be found."
        )
    );
}

#[tokio::test]
async fn create_update_delete_status_codes() {
    let h = noauth_harness().await;
    let a = h.call(Method::POST, "/v1/admin/stacks", Some(r#"{"stack_name": "new", "template": {}}"#)).await;
    assert_eq!(a.status, StatusCode::CREATED);
    let url = "http://heat.test:8004/v1/admin/stacks/new/id-9";
    assert_eq!(a.header("location"), url);
    assert_eq!(a.json(), json!({"stack": {"id": "id-9", "links": [{"href": url, "rel": "self"}]}}));
    assert_eq!(serde_json::from_str::<Value>(&h.engine.last().body_json).unwrap()["stack_name"], "new");

    let a = h.call(Method::POST, "/v1/admin/stacks", Some(r#"{"stack_name": "dup", "template": {}}"#)).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert_eq!(
        a.json(),
        fault(
            409,
            "Conflict",
            "There was a conflict when trying to complete your request.",
            "StackExists",
            "The Stack (dup) already exists."
        )
    );

    let a = h.call(Method::PUT, "/v1/admin/stacks/s1/id-1", Some(r#"{"template": {}}"#)).await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    assert_eq!(
        a.json(),
        json!({"message": "The request is accepted for processing.<br /><br />\n\n\n", "code": "202 Accepted", "title": "Accepted"})
    );
    let rec = h.engine.last();
    assert_eq!((rec.method, rec.extra.as_str()), ("update_stack", "patch=false"));
    assert_eq!(rec.stack, Some(pb::StackRef { name: "s1".into(), id: "id-1".into() }));

    let a = h.call(Method::PATCH, "/v1/admin/stacks/s1/id-1", Some(r#"{"parameters": {"n": 2}}"#)).await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    assert_eq!(h.engine.last().extra, "patch=true");

    let a = h.call(Method::DELETE, "/v1/admin/stacks/s1/id-1", None).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert_eq!(a.text, "");
    assert!(a.headers.get("content-type").is_none());
    assert_eq!(h.engine.last().method, "delete_stack");

    // A handler that needs a body and got none.
    let a = h.call(Method::POST, "/v1/admin/stacks", None).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.json(), fault(400, "Bad Request", BAD_REQUEST, "HTTPBadRequest", BAD_REQUEST));
}

#[tokio::test]
async fn actions_signals_and_mark_unhealthy_answer_null() {
    let h = noauth_harness().await;
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/actions", Some(r#"{"suspend": null}"#)).await;
    assert_eq!((a.status, a.text.as_str()), (StatusCode::OK, "null"));
    assert_eq!(a.header("content-type"), "application/json");
    assert_eq!(h.engine.last().body_json, r#"{"suspend":null}"#);
    // No body: the engine sees `{}` and names what is missing.
    let _ = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/actions", None).await;
    assert_eq!(h.engine.last().body_json, "{}");

    let a = h
        .call(Method::POST, "/v1/admin/stacks/s1/id-1/resources/handle/signal", Some(r#"{"status": "SUCCESS"}"#))
        .await;
    assert_eq!((a.status, a.text.as_str()), (StatusCode::OK, "null"));
    assert_eq!(
        (h.engine.last().extra.as_str(), h.engine.last().body_json.as_str()),
        ("handle", r#"{"status":"SUCCESS"}"#)
    );
    // A signal without details reaches the engine as `null`.
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/resources/handle/signal", None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(h.engine.last().body_json, "null");

    let a = h.call(Method::PATCH, "/v1/admin/stacks/s1/id-1/resources/tr", Some(r#"{"mark_unhealthy": true}"#)).await;
    assert_eq!((a.status, a.text.as_str()), (StatusCode::OK, "null"));
    assert_eq!(h.engine.last().method, "mark_unhealthy");
}

/// heat-api hands `ignore_errors` to the engine as it came; the engine
/// reads the codes.
#[tokio::test]
async fn validate_passes_ignore_errors_to_the_engine() {
    let h = noauth_harness().await;
    let body = r#"{"template": {"heat_template_version": "2015-10-15"}}"#;
    let a = h.call(Method::POST, "/v1/admin/validate?ignore_errors=99001,12345", Some(body)).await;
    assert_eq!(a.status, StatusCode::OK);
    let rec = h.engine.last();
    assert_eq!(rec.method, "validate_template");
    assert_eq!(rec.query, vec![pb::QueryParam { key: "ignore_errors".into(), values: vec!["99001,12345".into()] }]);
}

#[tokio::test]
async fn engine_errors_are_fault_wrapped() {
    let h = noauth_harness().await;
    let a = h
        .call(Method::POST, "/v1/admin/validate", Some(r#"{"template": {"heat_template_version": "2099-01-01"}}"#))
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.json(),
        fault(
            400,
            "Bad Request",
            BAD_REQUEST,
            "InvalidTemplateVersion",
            "The template version is invalid: \"heat_template_version: 2099-01-01\"."
        )
    );

    let a = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/outputs/nope", None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(
        a.json(),
        fault(404, "Not Found", "The resource could not be found.", "NotFound", "Specified output key nope not found.")
    );

    let a = h.call(Method::DELETE, "/v1/admin/stacks/s1/id-1/abandon", None).await;
    assert_eq!(a.json()["error"]["type"], "NotSupported");

    // 500: the message stays hidden.
    let a = h.call(Method::GET, "/v1/admin/resource_types/OS::Heat::Value/template?template_type=hot", None).await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        a.json(),
        json!({"code": 500, "title": "Internal Server Error", "explanation": "The server has either erred or is incapable of performing the requested operation.",
            "error": {"type": "KeyError", "traceback": null}})
    );
}

#[tokio::test]
async fn an_unreachable_engine_is_a_500() {
    let mut config = Config::default();
    config.set("orchestration", "auth_strategy", "noauth");
    // Nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let app = orchestration_app(&config, vec![channel(&url, None).unwrap()], Metrics::default()).unwrap();
    let h = Harness { app, engine: FakeEngine::default() };
    let a = h.call(Method::GET, "/v1/admin/stacks", None).await;
    assert_eq!(a.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(a.json()["error"]["type"], "MessagingTimeout");
    assert!(a.json()["error"].get("message").is_none());
}

#[tokio::test]
async fn undeclared_methods_and_options() {
    let h = noauth_harness().await;
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/resources", None).await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(a.header("allow"), "GET");
    assert_eq!(a.json(), fault(405, "Method Not Allowed", BAD_REQUEST, "HTTPMethodNotAllowed", BAD_REQUEST));

    let a = h.call(Method::OPTIONS, "/v1/admin/stacks", None).await;
    assert_eq!((a.status, a.header("allow"), a.text.as_str()), (StatusCode::NO_CONTENT, "GET,POST", ""));
    let a = h.call(Method::OPTIONS, "/v1/admin/stacks/s1/id-1", None).await;
    assert_eq!(a.header("allow"), "GET,PUT,PATCH,DELETE");
    assert_eq!(h.engine.count(), 0);
}

#[tokio::test]
async fn request_bodies() {
    let h = noauth_harness().await;
    // Bad JSON: Python's json error text.
    let a = h.call(Method::POST, "/v1/admin/stacks", Some("{not json")).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.json(),
        fault(
            400,
            "Bad Request",
            BAD_REQUEST,
            "HTTPBadRequest",
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        )
    );

    // text/plain and a missing content type are JSON.
    for content_type in [Some("text/plain"), None] {
        let mut req = Request::post("/v1/admin/stacks").header("host", "heat.test");
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let a = h.send(req.body(Body::from(r#"{"stack_name": "plain", "template": {}}"#)).unwrap()).await;
        assert_eq!(a.status, StatusCode::CREATED, "{content_type:?}");
    }

    // Over `max_json_body_size`.
    let mut config = Config::default();
    config.set("orchestration", "auth_strategy", "noauth");
    config.set("orchestration", "max_json_body_size", "64");
    let small = harness_with(config).await;
    let body = format!(r#"{{"stack_name": "big", "template": {{"description": "{}"}}}}"#, "x".repeat(100));
    let a = small.call(Method::POST, "/v1/admin/stacks", Some(&body)).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.json(),
        fault(
            400,
            "Bad Request",
            BAD_REQUEST,
            "RequestLimitExceeded",
            &format!(
                "Request limit exceeded: JSON body size ({} bytes) exceeds maximum allowed size (64 bytes).",
                body.len()
            )
        )
    );
    assert_eq!(small.engine.count(), 0);
}

#[tokio::test]
async fn links_are_prefixed_with_the_host() {
    let h = noauth_harness().await;
    let a = h.call(Method::GET, "/v1/admin/stacks?limit=1&sort_keys=name&sort_keys=status", None).await;
    assert_eq!(a.status, StatusCode::OK);
    let doc = a.json();
    assert_eq!(doc["stacks"][0]["links"][0]["href"], "http://heat.test:8004/v1/admin/stacks/s1/id-1");
    assert_eq!(doc["links"][0]["href"], "http://heat.test:8004/v1/admin/stacks?marker=id-1");
    let rec = h.engine.last();
    assert_eq!(rec.extra, "detail=false");
    assert_eq!(
        rec.query,
        vec![
            pb::QueryParam { key: "limit".into(), values: vec!["1".into()] },
            pb::QueryParam { key: "sort_keys".into(), values: vec!["name".into(), "status".into()] },
        ]
    );

    let a = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/resources", None).await;
    assert_eq!(a.json()["resources"][0]["links"][1]["href"], "http://heat.test:8004/v1/admin/stacks/s1/id-1");

    let a = h.call(Method::GET, "/v1/admin/stacks/detail", None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(h.engine.last().extra, "detail=true");
}

#[tokio::test]
async fn noauth_admins_are_retargeted_to_their_project() {
    let h = noauth_harness().await;
    let a = h.call(Method::GET, "/v1/othertenant/stacks", None).await;
    assert_eq!(a.status, StatusCode::OK);
    let caller = h.engine.last().caller;
    assert_eq!((caller.project_id.as_str(), caller.path_project_id.as_str()), ("admin", "othertenant"));
    assert_eq!(
        (caller.user_id.as_str(), caller.is_admin, caller.roles.clone()),
        ("admin", true, vec!["admin".to_string()])
    );

    let req = Request::get("/v1/p1/stacks/s1/id-1")
        .header("host", "heat.test")
        .header("x-auth-project", "p1")
        .header("x-auth-user", "alice")
        .body(Body::empty())
        .unwrap();
    let a = h.send(req).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["stack"]["links"][0]["href"], "http://heat.test/v1/p1/stacks/s1/id-1");
    let caller = h.engine.last().caller;
    assert_eq!((caller.project_id.as_str(), caller.user_name.as_str()), ("p1", "alice"));
}

#[tokio::test]
async fn request_id_and_trace_context_reach_the_engine() {
    let h = noauth_harness().await;
    let req = Request::get("/v1/admin/build_info")
        .header("host", "heat.test")
        .header("x-openstack-request-id", "req-0123abcd-0000-0000-0000-000000000000")
        .header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        .body(Body::empty())
        .unwrap();
    let a = h.send(req).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.header("x-openstack-request-id"), "req-0123abcd-0000-0000-0000-000000000000");
    let rec = h.engine.last();
    assert_eq!(rec.request_id, "req-0123abcd-0000-0000-0000-000000000000");
    assert!(rec.traceparent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"), "{}", rec.traceparent);

    // Without one, a fresh id is made and still reaches the engine.
    let a = h.call(Method::GET, "/v1/admin/template_versions", None).await;
    assert!(a.header("x-openstack-request-id").starts_with("req-"));
    assert_eq!(h.engine.last().request_id, a.header("x-openstack-request-id"));
}

#[tokio::test]
async fn every_canonical_route_reaches_its_rpc() {
    let h = noauth_harness().await;
    let cases: &[(Method, &str, Option<&str>, &str)] = &[
        (Method::GET, "/v1/admin/resource_types?with_description=False", None, "list_resource_types"),
        (Method::GET, "/v1/admin/resource_types/OS::Heat::None", None, "resource_type_schema"),
        (
            Method::GET,
            "/v1/admin/template_versions/heat_template_version.2021-04-16/functions",
            None,
            "list_template_functions",
        ),
        (Method::POST, "/v1/admin/stacks/preview", Some(r#"{"stack_name": "p"}"#), "preview_stack"),
        (Method::GET, "/v1/admin/stacks/s1/id-1?resolve_outputs=False", None, "show_stack"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/template", None, "get_template"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/environment", None, "get_environment"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/files", None, "get_files"),
        (Method::PUT, "/v1/admin/stacks/s1/id-1/preview", Some("{}"), "preview_update"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/export", None, "export_stack"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/outputs", None, "list_outputs"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/resources/r?with_attr=a&with_attr=b", None, "show_resource"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/resources/r/metadata", None, "resource_metadata"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/events?sort_dir=asc", None, "list_events"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/resources/r/events", None, "list_events"),
        (Method::GET, "/v1/admin/stacks/s1/id-1/resources/r/events/e1", None, "show_event"),
        (Method::GET, "/v1/admin/build_info", None, "build_info"),
        (Method::GET, "/v1/admin/services", None, "list_services"),
    ];
    for (method, uri, body, rpc) in cases {
        let a = h.call(method.clone(), uri, *body).await;
        assert_eq!(a.status, StatusCode::OK, "{method} {uri}: {}", a.text);
        assert_eq!(h.engine.last().method, *rpc, "{method} {uri}");
    }
    let rec = h.engine.last();
    assert_eq!(rec.caller.path_project_id, "admin");
    // Path parameters arrive decoded.
    let _ = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/resources/my%20res/events/e1", None).await;
    assert_eq!(h.engine.last().extra, "my res/e1");
}

#[tokio::test]
async fn snapshot_routes_answer_as_heat_api() {
    let h = noauth_harness().await;
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/snapshots", Some(r#"{"name": "n"}"#)).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let rec = h.engine.last();
    assert_eq!((rec.method, rec.body_json.as_str()), ("stack_snapshot", r#"{"name":"n"}"#));
    assert_eq!(rec.stack.map(|s| s.id).as_deref(), Some("id-1"));
    let a = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/snapshots", None).await;
    assert_eq!((a.status, h.engine.last().method), (StatusCode::OK, "list_snapshots"));
    let a = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/snapshots/snap-1", None).await;
    assert_eq!((a.status, h.engine.last().method), (StatusCode::OK, "show_snapshot"));
    assert_eq!(h.engine.last().extra, "snap-1");
    let a = h.call(Method::DELETE, "/v1/admin/stacks/s1/id-1/snapshots/snap-1", None).await;
    assert_eq!((a.status, h.engine.last().method), (StatusCode::NO_CONTENT, "delete_snapshot"));
    let a = h.call(Method::POST, "/v1/admin/stacks/s1/id-1/snapshots/snap-1/restore", None).await;
    assert_eq!((a.status, h.engine.last().method), (StatusCode::ACCEPTED, "restore_snapshot"));
    assert_eq!(h.engine.last().extra, "snap-1");
    let a = h.call(Method::GET, "/v1/admin/stacks/s1/id-1/snapshots/gone", None).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.text.contains("Snapshot with id gone not found"), "{}", a.text);
}

/// A Keystone that issues the service token and knows two user tokens:
/// "member" (project p, role member) and "admin" (project p, role admin).
/// (A fake: the real Keystone runs in tests/integration/test_hostile_authz.py.)
async fn start_fake_keystone() -> String {
    use axum::routing::get;
    let token = |roles: &[&str]| {
        let roles: Vec<Value> = roles.iter().map(|r| json!({"id": r, "name": r})).collect();
        json!({"token": {"user": {"id": "u1", "domain": {"id": "default"}}, "project": {"id": "p", "domain": {"id": "default"}},
            "roles": roles, "expires_at": "2999-01-01T00:00:00Z"}})
        .to_string()
    };
    let issue = move || async move { (StatusCode::CREATED, [("x-subject-token", "svc")], token(&["service"])) };
    let validate = move |headers: http::HeaderMap| async move {
        match headers.get("x-subject-token").and_then(|v| v.to_str().ok()) {
            // Keystone lists the implied roles too (admin > member > reader),
            // which Heat's default rules name.
            Some("member") => (StatusCode::OK, token(&["member", "reader"])),
            Some("admin") => (StatusCode::OK, token(&["admin", "member", "reader"])),
            _ => (StatusCode::NOT_FOUND, String::new()),
        }
    };
    let app = axum::Router::new().route("/v3/auth/tokens", get(validate).post(issue));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test]
async fn keystone_callers_and_the_project_check() {
    let keystone = start_fake_keystone().await;
    let mut config = Config::default();
    config.set("orchestration", "auth_strategy", "keystone");
    config.set("keystone_authtoken", "auth_url", &keystone);
    config.set("keystone_authtoken", "username", "heat");
    config.set("keystone_authtoken", "password", "secret");
    let h = harness_with(config).await;
    let get = |uri: &str, token: Option<&str>| {
        let mut req = Request::get(uri).header("host", "heat.test");
        if let Some(t) = token {
            req = req.header("x-auth-token", t);
        }
        req.body(Body::empty()).unwrap()
    };

    // The version document needs no token.
    assert_eq!(h.send(get("/", None)).await.status, StatusCode::MULTIPLE_CHOICES);
    let a = h.send(get("/v1/p/stacks", None)).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.header("www-authenticate").starts_with("Keystone uri="));
    assert_eq!(a.json()["error"]["message"], "The request you have made requires authentication.");

    let a = h.send(get("/v1/p/stacks", Some("member"))).await;
    assert_eq!(a.status, StatusCode::OK);
    let caller = h.engine.last().caller;
    assert_eq!((caller.project_id.as_str(), caller.user_id.as_str(), caller.is_admin), ("p", "u1", false));
    assert_eq!(caller.auth_token, "member");

    // A member naming another project is refused before any engine call.
    let calls = h.engine.count();
    let a = h.send(get("/v1/other/stacks", Some("member"))).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(
        a.json(),
        fault(
            403,
            "Forbidden",
            "Access was denied to this resource.",
            "HTTPForbidden",
            "Access was denied to this resource."
        )
    );
    assert_eq!(h.engine.count(), calls);

    // An admin is re-targeted to its own project.
    let a = h.send(get("/v1/other/stacks", Some("admin"))).await;
    assert_eq!(a.status, StatusCode::OK);
    let caller = h.engine.last().caller;
    assert_eq!((caller.project_id.as_str(), caller.path_project_id.as_str(), caller.is_admin), ("p", "other", true));
}
