//! Signals through pre-signed URLs (heat-api-cfn's `waitcondition` and
//! `signal` routes), and the software_configs / software_deployments API
//! (`heat/api/openstack/v1/software_configs.py`,
//! `software_deployments.py`, `heat/engine/service_software_config.py`).
//! Configs and deployments belong to the caller's project; an admin sees
//! every project's.

use serde_json::{json, Map, Value};

use super::params::{bad_request, QueryParams};
use super::{Caller, Orchestration, Reply};
use crate::convergence::software::{config_view, deployment_view};
use crate::error::EngineError;
use crate::store::software::{self, DeploymentChange, SoftwareConfigRow, SoftwareDeploymentRow};

fn config_not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("Software config with id {id} not found"))
}

fn deployment_not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("Deployment with id {id} not found"))
}

/// The body as an object (heat-api's `body` is a dict).
fn object(body: &Value) -> Result<Map<String, Value>, EngineError> {
    match body {
        Value::Object(m) => Ok(m.clone()),
        _ => Err(bad_request("The request body must be a JSON object.")),
    }
}

/// An optional string field; anything else is a 400.
fn opt_string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, EngineError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_request(format!("Invalid value {other} for {key}: a string is required."))),
    }
}

/// Inputs/outputs: lists of objects that each have a string `name`.
fn io_list(body: &Map<String, Value>, key: &str) -> Result<Value, EngineError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(json!([])),
        Some(Value::Array(items)) => {
            for item in items {
                if !item.get("name").is_some_and(Value::is_string) {
                    return Err(bad_request(format!("Invalid {key}: each item must be an object with a \"name\".")));
                }
            }
            Ok(Value::Array(items.clone()))
        }
        Some(_) => Err(bad_request(format!("Invalid {key}: a list is required."))),
    }
}

impl Orchestration {
    /// A pre-signed signal: no caller; the engine checks the signature.
    pub async fn presigned_signal(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        details: Value,
    ) -> Reply {
        self.engine.presigned_signal(method, path, query, details).await
    }

    fn tenant_filter<'a>(&self, caller: &'a Caller) -> Option<&'a str> {
        (!caller.is_admin).then_some(caller.project_id.as_str())
    }

    async fn visible_config(&self, caller: &Caller, id: &str) -> Result<SoftwareConfigRow, EngineError> {
        match software::get_config(&self.db, id).await? {
            Some(c) if caller.is_admin || c.tenant == caller.project_id => Ok(c),
            _ => Err(config_not_found(id)),
        }
    }

    async fn visible_deployment(&self, caller: &Caller, id: &str) -> Result<SoftwareDeploymentRow, EngineError> {
        match software::get_deployment(&self.db, id).await? {
            Some(d) if caller.is_admin || d.tenant == caller.project_id => Ok(d),
            _ => Err(deployment_not_found(id)),
        }
    }

    /// `GET /software_configs` (`limit`, `marker`): id, name, group,
    /// creation_time of each.
    pub async fn list_software_configs(&self, caller: &Caller, _id: &str, _body: &Value, query: &QueryParams) -> Reply {
        let limit = query.int("limit")?;
        let marker = match query.single("marker") {
            Some(m) => Some(self.visible_config(caller, &m).await?),
            None => None,
        };
        let rows = software::list_configs(&self.db, self.tenant_filter(caller), marker.as_ref(), limit).await?;
        let items: Vec<Value> = rows
            .iter()
            .map(|r| {
                let v = config_view(r);
                json!({"id": v["id"], "name": v["name"], "group": v["group"], "creation_time": v["creation_time"]})
            })
            .collect();
        Ok(json!({ "software_configs": items }))
    }

    /// `POST /software_configs`.
    pub async fn create_software_config(
        &self,
        caller: &Caller,
        _id: &str,
        body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        let body = object(body)?;
        let options = match body.get("options") {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(bad_request("Invalid options: a map is required.")),
        };
        let row = SoftwareConfigRow {
            id: uuid::Uuid::new_v4().to_string(),
            name: opt_string(&body, "name")?,
            group: Some(opt_string(&body, "group")?.unwrap_or_else(|| "Heat::Ungrouped".into())),
            config: json!({
                "config": body.get("config").cloned().unwrap_or(Value::Null),
                "inputs": io_list(&body, "inputs")?,
                "outputs": io_list(&body, "outputs")?,
                "options": options,
            }),
            tenant: caller.project_id.clone(),
            created_at: None,
        };
        let stored = software::create_config(&self.db, &row).await?;
        Ok(json!({ "software_config": config_view(&stored) }))
    }

    pub async fn show_software_config(&self, caller: &Caller, id: &str, _body: &Value, _query: &QueryParams) -> Reply {
        Ok(json!({ "software_config": config_view(&self.visible_config(caller, id).await?) }))
    }

    pub async fn delete_software_config(
        &self,
        caller: &Caller,
        id: &str,
        _body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        self.visible_config(caller, id).await?;
        software::delete_config(&self.db, id).await?;
        Ok(Value::Null)
    }

    /// `GET /software_deployments` (`server_id`).
    pub async fn list_software_deployments(
        &self,
        caller: &Caller,
        _id: &str,
        _body: &Value,
        query: &QueryParams,
    ) -> Reply {
        let server = query.single("server_id");
        let rows = software::list_deployments(&self.db, self.tenant_filter(caller), server.as_deref()).await?;
        Ok(json!({ "software_deployments": rows.iter().map(deployment_view).collect::<Vec<_>>() }))
    }

    /// `GET /software_deployments/metadata/{server_id}`.
    pub async fn software_deployment_metadata(
        &self,
        caller: &Caller,
        server_id: &str,
        _body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        let configs = self.engine.server_deployments(server_id, self.tenant_filter(caller)).await?;
        Ok(json!({ "metadata": configs }))
    }

    /// `POST /software_deployments`.
    pub async fn create_software_deployment(
        &self,
        caller: &Caller,
        _id: &str,
        body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        let body = object(body)?;
        let config_id =
            opt_string(&body, "config_id")?.ok_or_else(|| bad_request("Missing required parameter config_id."))?;
        let server_id =
            opt_string(&body, "server_id")?.ok_or_else(|| bad_request("Missing required parameter server_id."))?;
        self.visible_config(caller, &config_id).await?;
        let input_values = match body.get("input_values") {
            None | Some(Value::Null) => json!({}),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(bad_request("Invalid input_values: a map is required.")),
        };
        let row = SoftwareDeploymentRow {
            id: opt_string(&body, "id")?.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            config_id,
            server_id: server_id.clone(),
            input_values,
            output_values: json!({}),
            tenant: caller.project_id.clone(),
            stack_user_project_id: opt_string(&body, "stack_user_project_id")?,
            action: Some(opt_string(&body, "action")?.unwrap_or_else(|| "INIT".into())),
            status: Some(opt_string(&body, "status")?.unwrap_or_else(|| "COMPLETE".into())),
            status_reason: Some(opt_string(&body, "status_reason")?.unwrap_or_default()),
            created_at: None,
            updated_at: None,
        };
        let stored = software::create_deployment(&self.db, &row).await?;
        self.engine.push_server_metadata(&server_id).await?;
        Ok(json!({ "software_deployment": deployment_view(&stored) }))
    }

    pub async fn show_software_deployment(
        &self,
        caller: &Caller,
        id: &str,
        _body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        Ok(json!({ "software_deployment": deployment_view(&self.visible_deployment(caller, id).await?) }))
    }

    /// `PUT /software_deployments/{id}`: the given fields only; a new
    /// config republishes the server's metadata.
    pub async fn update_software_deployment(
        &self,
        caller: &Caller,
        id: &str,
        body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        let body = object(body)?;
        let current = self.visible_deployment(caller, id).await?;
        let map_field = |key: &str| -> Result<Option<Value>, EngineError> {
            match body.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
                Some(_) => Err(bad_request(format!("Invalid {key}: a map is required."))),
            }
        };
        let change = DeploymentChange {
            config_id: opt_string(&body, "config_id")?,
            input_values: map_field("input_values")?,
            output_values: map_field("output_values")?,
            action: opt_string(&body, "action")?,
            status: opt_string(&body, "status")?,
            status_reason: opt_string(&body, "status_reason")?,
        };
        if let Some(c) = &change.config_id {
            self.visible_config(caller, c).await?;
        }
        software::update_deployment(&self.db, id, &change).await?;
        if change.config_id.is_some() {
            self.engine.push_server_metadata(&current.server_id).await?;
        }
        let updated = software::get_deployment(&self.db, id).await?.ok_or_else(|| deployment_not_found(id))?;
        Ok(json!({ "software_deployment": deployment_view(&updated) }))
    }

    pub async fn delete_software_deployment(
        &self,
        caller: &Caller,
        id: &str,
        _body: &Value,
        _query: &QueryParams,
    ) -> Reply {
        let current = self.visible_deployment(caller, id).await?;
        software::delete_deployment(&self.db, id).await?;
        self.engine.push_server_metadata(&current.server_id).await?;
        Ok(Value::Null)
    }
}
