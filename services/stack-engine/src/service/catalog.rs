//! What the API says about templates and the engine itself: validate,
//! resource types, template versions and functions, build info, services.

use chrono::NaiveDateTime;
use serde_json::{json, Value};

use super::engine_port::DefinitionInput;
use super::instantiation::Purpose;
use super::params::{bad_request, QueryParams};
use super::records;
use super::{Caller, Orchestration, Reply};
use crate::error::EngineError;
use crate::resources::constraints;

impl Orchestration {
    /// `POST /validate` (`show_nested`, `ignore_errors=code,...`).
    pub async fn validate_template(&self, caller: &Caller, body: &Value, query: &QueryParams) -> Reply {
        let _show_nested = query.bool_or("show_nested", false)?;
        let ignore_errors: Vec<String> = query
            .single("ignore_errors")
            .map(|v| v.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let request = self.read_instantiation(body, Purpose::Validate).await?;
        let template = request.template.clone().ok_or_else(|| bad_request("No template specified"))?;
        let input = DefinitionInput {
            template,
            files: request.files.clone(),
            environment: request.environment.clone(),
            environment_files: request.environment_files.clone(),
            parameters: request.parameters.clone(),
            stack_name: "validate".to_string(),
            stack_id: "None".to_string(),
            tenant: caller.project_id.clone(),
        };
        match self.validate_definition(caller, input).await {
            Ok(view) => Ok(view),
            // The caller names the error types to ignore (heat-api's `ignore_errors`).
            Err(e) if ignore_errors.iter().any(|name| name == e.heat_type()) => Ok(json!({})),
            Err(e) => Err(e),
        }
    }

    /// `GET /resource_types` (`name`, `support_status`, `version`,
    /// `with_description`).
    /// The types whose service is not in the caller's catalog are left
    /// out, as upstream does (only engines with Keystone offer such types).
    pub async fn list_resource_types(&self, caller: &Caller, query: &QueryParams) -> Reply {
        let unavailable = match self.caller_session(caller) {
            Some(session) => constraints::unavailable_types(&session, self.registry.service_types()).await,
            None => Vec::new(),
        };
        self.registry.list_view(caller, &query.0, &unavailable)
    }

    /// `GET /resource_types/{type}` (`with_description`): the type's rule,
    /// its existence, then its service's availability, as upstream. One
    /// of Heat's types keelson does not implement is unavailable as in
    /// Heat when its service is missing, else unknown (404).
    pub async fn resource_type_schema(&self, caller: &Caller, type_name: &str, query: &QueryParams) -> Reply {
        let with_description = query.bool_or("with_description", false)?;
        let view = self.registry.schema_view(caller, type_name, with_description);
        let required = match &view {
            Ok(_) => self.registry.get(type_name).and_then(|rt| rt.required_service()),
            Err(e) if e.is_not_found() => crate::resources::unimplemented::lookup(type_name).flatten(),
            Err(_) => None,
        };
        if let (Some(required), Some(session)) = (required, self.caller_session(caller)) {
            constraints::check_type_shown(&session, type_name, required).await?;
        }
        view
    }

    /// `GET /resource_types/{type}/template` (`template_type=hot|cfn`).
    pub async fn resource_type_template(&self, caller: &Caller, type_name: &str, query: &QueryParams) -> Reply {
        let template_type = query.single("template_type").unwrap_or_else(|| "cfn".to_string());
        let lowered = template_type.to_lowercase();
        if lowered != "cfn" && lowered != "hot" {
            return Err(bad_request(format!(
                "Template type is not supported: Invalid template type \"{template_type}\", valid types are: cfn, hot."
            )));
        }
        self.registry.template_view(caller, type_name, &lowered)
    }

    /// `GET /template_versions`.
    pub async fn list_template_versions(&self, _caller: &Caller) -> Reply {
        Ok(keelson_hot::template_versions())
    }

    /// `GET /template_versions/{version}/functions` (`with_condition_func`).
    pub async fn list_template_functions(&self, _caller: &Caller, version: &str, query: &QueryParams) -> Reply {
        let with_condition = query.bool_or("with_condition_func", false)?;
        Ok(keelson_hot::template_functions(version, with_condition)?)
    }

    /// `GET /build_info`.
    pub async fn build_info(&self, _caller: &Caller) -> Reply {
        let revision = &self.settings.revision;
        Ok(json!({"api": {"revision": revision}, "engine": {"revision": revision}}))
    }

    /// `GET /services` (admin only): the engine processes and whether each
    /// reported within two report intervals.
    pub async fn list_services(&self, caller: &Caller) -> Reply {
        if !caller.is_admin {
            return Err(EngineError::forbidden("You are not authorized to complete this action."));
        }
        let now = keelson_db::now();
        let services: Vec<Value> = records::services(&self.db)
            .await?
            .into_iter()
            .map(|s| {
                let last = s.updated_at.or(s.created_at);
                let up = last.is_some_and(|t| (now - t).num_seconds() <= 2 * s.report_interval);
                json!({
                    "id": s.id,
                    "binary": s.binary_name,
                    "engine_id": s.engine_id,
                    "host": s.host,
                    "hostname": s.hostname,
                    "topic": s.topic,
                    "report_interval": s.report_interval,
                    "created_at": isoformat(s.created_at),
                    "updated_at": isoformat(s.updated_at),
                    "deleted_at": isoformat(s.deleted_at),
                    "status": if up { "up" } else { "down" },
                })
            })
            .collect();
        Ok(json!({ "services": services }))
    }
}

/// Python's `datetime.isoformat()` as heat's JSON serializer writes it.
fn isoformat(t: Option<NaiveDateTime>) -> Value {
    match t {
        Some(t) => Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()),
        None => Value::Null,
    }
}
