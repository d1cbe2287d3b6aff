//! The `Orchestration` gRPC service: a thin translation onto
//! [`crate::service::Orchestration`]. Bodies arrive as JSON text (bad JSON
//! is heat-api's 400), replies leave as JSON text, errors as
//! `keelson.common.v1.ErrorDetail` carrying Heat's exception type.

use std::sync::Arc;

use keelson_proto::orchestration::v1 as pb;
use keelson_proto::orchestration::v1::orchestration_server::Orchestration as OrchestrationRpc;
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::error::EngineError;
use crate::service::{self, Caller, QueryParams, StackIdentity, StackRef};

/// Serves `keelson.orchestration.v1.Orchestration`.
#[derive(Clone)]
pub struct OrchestrationApi {
    service: Arc<service::Orchestration>,
}

impl OrchestrationApi {
    pub fn new(service: Arc<service::Orchestration>) -> Self {
        OrchestrationApi { service }
    }

    /// The server, with the message sizes of the process's
    /// [`keelson_runtime::grpc::WireLimits`] (so a body within
    /// `max_json_body_size` always crosses, and a large answer too).
    pub fn into_server(self) -> pb::orchestration_server::OrchestrationServer<Self> {
        let limits = keelson_runtime::grpc::WireLimits::current();
        pb::orchestration_server::OrchestrationServer::new(self)
            .max_decoding_message_size(limits.request_message)
            .max_encoding_message_size(limits.response_message)
    }
}

fn caller(c: Option<pb::Caller>) -> Caller {
    let c = c.unwrap_or_default();
    Caller {
        project_id: c.project_id,
        user_id: c.user_id,
        user_name: c.user_name,
        roles: c.roles,
        is_admin: c.is_admin,
        auth_token: c.auth_token,
        path_project_id: c.path_project_id,
    }
}

fn stack_ref(s: Option<pb::StackRef>) -> StackRef {
    let s = s.unwrap_or_default();
    StackRef::new(&s.name, &s.id)
}

fn query(q: Vec<pb::QueryParam>) -> QueryParams {
    QueryParams::new(q.into_iter().map(|p| (p.key, p.values)).collect())
}

/// A request body as heat-api's JSON deserializer reads it: an empty body
/// is `{}`; text that is not JSON is 400 with the parser's complaint.
fn body(text: &str) -> Result<Value, Status> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| EngineError::BadRequest(keelson_pyfmt::json_loads_error(text, &e)).into())
}

/// A signal body may legitimately be empty or `null`.
fn signal_body(text: &str) -> Result<Value, Status> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    body(text)
}

fn reply(result: Result<Value, EngineError>) -> Result<Response<pb::JsonReply>, Status> {
    let value = result.map_err(Status::from)?;
    Ok(Response::new(pb::JsonReply { body_json: value.to_string() }))
}

fn identity(result: Result<StackIdentity, EngineError>) -> Result<Response<pb::StackIdentity>, Status> {
    let id = result.map_err(Status::from)?;
    Ok(Response::new(pb::StackIdentity {
        tenant: id.tenant,
        stack_name: id.stack_name,
        stack_id: id.stack_id,
        path: id.path,
    }))
}

#[tonic::async_trait]
impl OrchestrationRpc for OrchestrationApi {
    async fn create_stack(
        &self,
        request: Request<pb::CreateStackRequest>,
    ) -> Result<Response<pb::StackIdentity>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        identity(self.service.create_stack(&caller(r.caller), &body).await)
    }

    async fn preview_stack(&self, request: Request<pb::CreateStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.preview_stack(&caller(r.caller), &body).await)
    }

    async fn list_stacks(&self, request: Request<pb::ListStacksRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_stacks(&caller(r.caller), &query(r.query), r.detail).await)
    }

    async fn lookup_stack(
        &self,
        request: Request<pb::LookupStackRequest>,
    ) -> Result<Response<pb::StackIdentity>, Status> {
        let r = request.into_inner();
        identity(self.service.lookup_stack(&caller(r.caller), &r.name_or_id, r.show_deleted).await)
    }

    async fn show_stack(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.show_stack(&caller(r.caller), &stack_ref(r.stack), &query(r.query)).await)
    }

    async fn get_template(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.get_template(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn get_environment(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.get_environment(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn get_files(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.get_files(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn update_stack(&self, request: Request<pb::UpdateStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.update_stack(&caller(r.caller), &stack_ref(r.stack), &body, r.patch).await)
    }

    async fn preview_update(
        &self,
        request: Request<pb::PreviewUpdateRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(
            self.service.preview_update(&caller(r.caller), &stack_ref(r.stack), &body, r.patch, &query(r.query)).await,
        )
    }

    async fn delete_stack(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.delete_stack(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn abandon_stack(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.abandon_stack(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn stack_snapshot(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.stack_snapshot(&caller(r.caller), &stack_ref(r.stack), &body).await)
    }

    async fn list_snapshots(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_snapshots(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn show_snapshot(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.show_snapshot(&caller(r.caller), &stack_ref(r.stack), &r.snapshot_id).await)
    }

    async fn delete_snapshot(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.delete_snapshot(&caller(r.caller), &stack_ref(r.stack), &r.snapshot_id).await)
    }

    async fn restore_snapshot(&self, request: Request<pb::SnapshotRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.restore_snapshot(&caller(r.caller), &stack_ref(r.stack), &r.snapshot_id).await)
    }

    async fn export_stack(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.export_stack(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn stack_action(&self, request: Request<pb::StackActionRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.stack_action(&caller(r.caller), &stack_ref(r.stack), &body).await)
    }

    async fn list_outputs(&self, request: Request<pb::GetStackRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_outputs(&caller(r.caller), &stack_ref(r.stack)).await)
    }

    async fn show_output(&self, request: Request<pb::OutputRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.show_output(&caller(r.caller), &stack_ref(r.stack), &r.output_key).await)
    }

    async fn list_resources(
        &self,
        request: Request<pb::ListResourcesRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_resources(&caller(r.caller), &stack_ref(r.stack), &query(r.query)).await)
    }

    async fn show_resource(&self, request: Request<pb::ResourceRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(
            self.service.show_resource(&caller(r.caller), &stack_ref(r.stack), &r.resource_name, &query(r.query)).await,
        )
    }

    async fn resource_metadata(
        &self,
        request: Request<pb::ResourceRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.resource_metadata(&caller(r.caller), &stack_ref(r.stack), &r.resource_name).await)
    }

    async fn signal_resource(
        &self,
        request: Request<pb::SignalResourceRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let details = signal_body(&r.body_json)?;
        reply(self.service.signal_resource(&caller(r.caller), &stack_ref(r.stack), &r.resource_name, &details).await)
    }

    async fn mark_unhealthy(
        &self,
        request: Request<pb::MarkUnhealthyRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.mark_unhealthy(&caller(r.caller), &stack_ref(r.stack), &r.resource_name, &body).await)
    }

    async fn list_events(&self, request: Request<pb::ListEventsRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let resource = (!r.resource_name.is_empty()).then_some(r.resource_name.as_str());
        reply(self.service.list_events(&caller(r.caller), &stack_ref(r.stack), resource, &query(r.query)).await)
    }

    async fn show_event(&self, request: Request<pb::ShowEventRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.show_event(&caller(r.caller), &stack_ref(r.stack), &r.resource_name, &r.event_id).await)
    }

    async fn validate_template(
        &self,
        request: Request<pb::ValidateTemplateRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.validate_template(&caller(r.caller), &body, &query(r.query)).await)
    }

    async fn list_resource_types(
        &self,
        request: Request<pb::ListResourceTypesRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_resource_types(&caller(r.caller), &query(r.query)).await)
    }

    async fn resource_type_schema(
        &self,
        request: Request<pb::ResourceTypeRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.resource_type_schema(&caller(r.caller), &r.type_name, &query(r.query)).await)
    }

    async fn resource_type_template(
        &self,
        request: Request<pb::ResourceTypeRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.resource_type_template(&caller(r.caller), &r.type_name, &query(r.query)).await)
    }

    async fn list_template_versions(
        &self,
        request: Request<pb::CallerOnly>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_template_versions(&caller(r.caller)).await)
    }

    async fn list_template_functions(
        &self,
        request: Request<pb::TemplateVersionRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_template_functions(&caller(r.caller), &r.version, &query(r.query)).await)
    }

    async fn build_info(&self, request: Request<pb::CallerOnly>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.build_info(&caller(r.caller)).await)
    }

    async fn list_services(&self, request: Request<pb::CallerOnly>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        reply(self.service.list_services(&caller(r.caller)).await)
    }

    async fn presigned_signal(
        &self,
        request: Request<pb::PresignedSignalRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let details = signal_body(&r.body_json)?;
        let pairs: Vec<(String, String)> =
            r.query.into_iter().flat_map(|p| p.values.into_iter().map(move |v| (p.key.clone(), v))).collect();
        reply(self.service.presigned_signal(&r.method, &r.path, &pairs, details).await)
    }

    async fn cfn_signal(&self, request: Request<pb::CfnSignalRequest>) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let details = signal_body(&r.body_json)?;
        reply(self.service.cfn_signal(&caller(r.caller), &r.arn, r.wait_condition, details).await)
    }

    async fn list_software_configs(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.list_software_configs(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn create_software_config(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.create_software_config(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn show_software_config(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.show_software_config(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn delete_software_config(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.delete_software_config(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn list_software_deployments(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.list_software_deployments(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn create_software_deployment(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.create_software_deployment(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn show_software_deployment(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.show_software_deployment(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn update_software_deployment(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = body(&r.body_json)?;
        reply(self.service.update_software_deployment(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn delete_software_deployment(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.delete_software_deployment(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }

    async fn software_deployment_metadata(
        &self,
        request: Request<pb::SoftwareRequest>,
    ) -> Result<Response<pb::JsonReply>, Status> {
        let r = request.into_inner();
        let body = Value::Null;
        reply(self.service.software_deployment_metadata(&caller(r.caller), &r.id, &body, &query(r.query)).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_json_is_a_400_with_heat_type() {
        let status = body("{not json").unwrap_err();
        let e = EngineError::from_status(&status);
        assert_eq!((e.heat_type(), e.http_status()), ("HTTPBadRequest", 400));
        assert!(body("").unwrap().is_object());
    }

    #[test]
    fn bad_json_messages_read_like_python() {
        let e = EngineError::from_status(&body("{not json").unwrap_err());
        assert_eq!(e.message(), "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
        let e = EngineError::from_status(&body("{} x").unwrap_err());
        assert_eq!(e.message(), "Extra data: line 1 column 4 (char 3)");
    }
}
