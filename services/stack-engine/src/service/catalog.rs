//! What the API says about templates and the engine itself: validate,
//! resource types, template versions and functions, build info, services.

use chrono::NaiveDateTime;
use serde_json::{json, Value};

use super::engine_port::DefinitionInput;
use super::instantiation::Purpose;
use super::params::{bad_request, QueryParams};
use super::records;
use super::{Caller, Orchestration, Reply};
use crate::error::{EngineError, HeatErrorCode};
use crate::resources::constraints;

impl Orchestration {
    /// `POST /validate` (`show_nested`, `ignore_errors=code,...`).
    pub async fn validate_template(&self, caller: &Caller, body: &Value, query: &QueryParams) -> Reply {
        let _show_nested = query.bool_or("show_nested", false)?;
        let request = self.read_instantiation(body, Purpose::Validate).await?;
        let template = request.template.clone().ok_or_else(|| bad_request("No template specified"))?;
        let ignorable = ignorable_errors(query.single("ignore_errors").as_deref())?;
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
        self.validate_definition(caller, input, &ignorable).await
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

/// heat-api's `ignore_errors` (split at every comma, as Heat does): Heat's
/// error codes whose errors validation passes over. A code Heat does not
/// know is refused, as Heat's engine refuses it (400, the unknown codes
/// as a Python list).
fn ignorable_errors(given: Option<&str>) -> Result<Vec<HeatErrorCode>, EngineError> {
    let Some(given) = given else { return Ok(Vec::new()) };
    let mut unknown: Vec<&str> = Vec::new();
    let mut codes = Vec::new();
    for code in given.split(',') {
        match HeatErrorCode::parse(code) {
            Some(known) => codes.push(known),
            None if !unknown.contains(&code) => unknown.push(code),
            None => {}
        }
    }
    if unknown.is_empty() {
        Ok(codes)
    } else {
        Err(bad_request(format!("Invalid codes in ignore_errors : {}", keelson_pyfmt::repr_str_list(&unknown))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_errors_are_heats_codes() {
        assert_eq!(ignorable_errors(None).unwrap(), Vec::new());
        assert_eq!(ignorable_errors(Some("99001")).unwrap(), vec![HeatErrorCode::ServiceUnavailable]);
        // Heat's text for codes it does not know, names included.
        for (given, unknown) in [
            ("99001,12345", "['12345']"),
            ("ResourceTypeUnavailable", "['ResourceTypeUnavailable']"),
            ("1,2,1", "['1', '2']"),
            // heat-api splits the empty value too.
            ("", "['']"),
            ("99001,", "['']"),
        ] {
            let e = ignorable_errors(Some(given)).unwrap_err();
            assert_eq!((e.heat_type(), e.http_status()), ("HTTPBadRequest", 400));
            assert_eq!(e.message(), format!("Invalid codes in ignore_errors : {unknown}"), "{given}");
        }
    }
}
