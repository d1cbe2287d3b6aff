//! Software configs and deployments (upstream
//! `service_software_config.py`): rows stored for the plugins and the
//! API, a server's deployments published in its resource metadata
//! (`deployments`, under the row's compare-and-swap) for agents polling
//! `GET …/resources/<server>/metadata`, and the agent's signal recorded
//! on the deployment.

use serde_json::{json, Map, Value};

use super::Engine;
use crate::error::EngineError;
use crate::resources::host::{DeploymentSpec, DeploymentState, NewSoftwareConfig};
use crate::store::software::{self, DeploymentChange, SoftwareConfigRow, SoftwareDeploymentRow};

/// The outputs every deployment has (upstream `SOFTWARE_DEPLOYMENT_OUTPUTS`).
pub const DEPLOY_OUTPUTS: [&str; 3] = ["deploy_stdout", "deploy_stderr", "deploy_status_code"];

fn time_text(t: Option<chrono::NaiveDateTime>) -> Value {
    t.map(|t| json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string())).unwrap_or(Value::Null)
}

/// A config as the API and the agents see it (`format_software_config`).
pub fn config_view(row: &SoftwareConfigRow) -> Value {
    let doc = &row.config;
    let get = |k: &str, default: Value| doc.get(k).cloned().filter(|v| !v.is_null()).unwrap_or(default);
    json!({
        "id": row.id,
        "name": row.name,
        "group": row.group,
        "config": get("config", Value::Null),
        "inputs": get("inputs", json!([])),
        "outputs": get("outputs", json!([])),
        "options": get("options", json!({})),
        "creation_time": time_text(row.created_at),
    })
}

/// A deployment as the API shows it (`format_software_deployment`).
pub fn deployment_view(row: &SoftwareDeploymentRow) -> Value {
    json!({
        "id": row.id,
        "config_id": row.config_id,
        "server_id": row.server_id,
        "input_values": row.input_values,
        "output_values": row.output_values,
        "action": row.action,
        "status": row.status,
        "status_reason": row.status_reason,
        "creation_time": time_text(row.created_at),
        "updated_time": time_text(row.updated_at),
    })
}

/// Upstream `signal_software_deployment`'s decision: the new outputs,
/// status and reason, and the event text.
pub fn deployment_outcome(
    id: &str,
    outputs_schema: &[Value],
    current: &Value,
    details: &Value,
) -> (Value, String, String, String) {
    let empty = Map::new();
    let details_map = details.as_object().unwrap_or(&empty);
    let mut ov: Map<String, Value> = current.as_object().cloned().unwrap_or_default();
    let mut failed = false;
    let mut reasons: Vec<(String, String)> = Vec::new();
    let code = details_map.get("deploy_status_code").cloned().unwrap_or(Value::Null);
    let code_text = match &code {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    // Python truthiness: 0, "", null are "no code".
    let truthy = !matches!(&code, Value::Null | Value::Bool(false)) && code_text != "0" && !code_text.is_empty();
    let mut event = if truthy && code_text != "0" {
        failed = true;
        reasons
            .push(("deploy_status_code".into(), format!("Deployment exited with non-zero status code: {code_text}")));
        format!("deployment {id} failed ({code_text})")
    } else {
        format!("deployment {id} succeeded")
    };
    for output in outputs_schema {
        let Some(key) = output.get("name").and_then(Value::as_str) else { continue };
        if let Some(v) = details_map.get(key) {
            ov.insert(key.to_string(), v.clone());
            if output.get("error_output").and_then(Value::as_bool).unwrap_or(false) {
                failed = true;
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                reasons.push((key.to_string(), text));
                event = format!("deployment {id} failed");
            }
        }
    }
    for key in DEPLOY_OUTPUTS {
        ov.insert(key.to_string(), details_map.get(key).cloned().unwrap_or(Value::Null));
    }
    let (status, reason) = if failed {
        let joined: Vec<String> = reasons.iter().map(|(k, v)| format!("{k} : {v}")).collect();
        ("FAILED".to_string(), joined.join(", "))
    } else {
        ("COMPLETE".to_string(), "Outputs received".to_string())
    };
    (Value::Object(ov), status, reason, event)
}

impl Engine {
    pub(super) async fn create_config_for(
        &self,
        stack_id: &str,
        new: NewSoftwareConfig,
    ) -> Result<String, EngineError> {
        let tenant = match crate::store::stacks::get(&self.db, stack_id).await? {
            Some(s) => s.tenant,
            None => return Err(EngineError::stack_not_found(stack_id)),
        };
        let row = SoftwareConfigRow {
            id: uuid::Uuid::new_v4().to_string(),
            name: new.name,
            group: new.group,
            config: new.config,
            tenant,
            created_at: None,
        };
        Ok(software::create_config(&self.db, &row).await?.id)
    }

    pub(super) async fn config_doc(&self, id: &str) -> Result<Option<Value>, EngineError> {
        Ok(software::get_config(&self.db, id).await?.as_ref().map(config_view))
    }

    pub(super) async fn delete_config_row(&self, id: &str) -> Result<(), EngineError> {
        software::delete_config(&self.db, id).await?;
        Ok(())
    }

    /// The derived configs of every deployment of `server_id`, sorted by
    /// config name (upstream `metadata_software_deployments`).
    pub async fn server_deployments(&self, server_id: &str, tenant: Option<&str>) -> Result<Vec<Value>, EngineError> {
        let mut configs: Vec<SoftwareConfigRow> = Vec::new();
        for d in software::list_deployments(&self.db, tenant, Some(server_id)).await? {
            if let Some(c) = software::get_config(&self.db, &d.config_id).await? {
                configs.push(c);
            }
        }
        configs.sort_by_key(|c| c.name.clone().unwrap_or_default());
        Ok(configs.iter().map(config_view).collect())
    }

    /// Publishes the deployments of `server_id` in the metadata of the
    /// resource whose physical id it is (a server of a stack), if any.
    pub async fn push_server_metadata(&self, server_id: &str) -> Result<(), EngineError> {
        let Some(row) = software::resource_by_physical_id(&self.db, server_id).await? else {
            return Ok(());
        };
        let deployments = Value::Array(self.server_deployments(server_id, None).await?);
        let merge = Box::new(move |current: &Value| {
            let mut md = current.as_object().cloned().unwrap_or_default();
            md.insert("deployments".into(), deployments.clone());
            Ok(Value::Object(md))
        });
        self.merge_metadata_of(row.id, merge)
            .await
            .map(|_| ())
            .map_err(|f| EngineError::ConcurrentTransaction(f.to_string()))
    }

    pub(super) async fn write_deployment_row(&self, stack_id: &str, spec: DeploymentSpec) -> Result<(), EngineError> {
        let tenant = match crate::store::stacks::get(&self.db, stack_id).await? {
            Some(s) => s.tenant,
            None => return Err(EngineError::stack_not_found(stack_id)),
        };
        match software::get_deployment(&self.db, &spec.id).await? {
            None => {
                let row = SoftwareDeploymentRow {
                    id: spec.id.clone(),
                    config_id: spec.config_id,
                    server_id: spec.server_id.clone(),
                    input_values: spec.input_values,
                    output_values: json!({}),
                    tenant,
                    stack_user_project_id: None,
                    action: Some(spec.action),
                    status: Some(spec.status),
                    status_reason: Some(spec.status_reason),
                    created_at: None,
                    updated_at: None,
                };
                software::create_deployment(&self.db, &row).await?;
            }
            Some(_) => {
                let change = DeploymentChange {
                    config_id: Some(spec.config_id),
                    input_values: Some(spec.input_values),
                    output_values: None,
                    action: Some(spec.action),
                    status: Some(spec.status),
                    status_reason: Some(spec.status_reason),
                };
                software::update_deployment(&self.db, &spec.id, &change).await?;
            }
        }
        self.push_server_metadata(&spec.server_id).await
    }

    pub(super) async fn deployment_state_of(&self, id: &str) -> Result<Option<DeploymentState>, EngineError> {
        Ok(software::get_deployment(&self.db, id).await?.map(|d| DeploymentState {
            config_id: d.config_id,
            server_id: d.server_id,
            status: d.status.unwrap_or_default(),
            status_reason: d.status_reason.unwrap_or_default(),
            output_values: d.output_values.as_object().cloned().unwrap_or_default(),
        }))
    }

    pub(super) async fn delete_deployment_row(&self, id: &str) -> Result<(), EngineError> {
        if let Some(d) = software::get_deployment(&self.db, id).await? {
            software::delete_deployment(&self.db, id).await?;
            self.push_server_metadata(&d.server_id).await?;
        }
        Ok(())
    }

    /// Upstream `signal_software_deployment`; None when the deployment is
    /// not IN_PROGRESS (outputs are only expected then).
    pub async fn signal_deployment_row(&self, id: &str, details: &Value) -> Result<Option<String>, EngineError> {
        let Some(d) = software::get_deployment(&self.db, id).await? else {
            return Err(EngineError::entity_not_found("Software Deployment", id));
        };
        if d.status.as_deref() != Some("IN_PROGRESS") {
            return Ok(None);
        }
        let outputs: Vec<Value> = match software::get_config(&self.db, &d.config_id).await? {
            Some(c) => c.config.get("outputs").and_then(Value::as_array).cloned().unwrap_or_default(),
            None => Vec::new(),
        };
        let (ov, status, reason, event) = deployment_outcome(id, &outputs, &d.output_values, details);
        let change = DeploymentChange {
            output_values: Some(ov),
            status: Some(status),
            status_reason: Some(reason),
            ..Default::default()
        };
        software::update_deployment(&self.db, id, &change).await?;
        Ok(Some(event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_as_upstream() {
        let (ov, status, reason, event) =
            deployment_outcome("d1", &[], &json!({}), &json!({"deploy_stdout": "hi", "deploy_status_code": 0}));
        assert_eq!(
            (status.as_str(), reason.as_str(), event.as_str()),
            ("COMPLETE", "Outputs received", "deployment d1 succeeded")
        );
        assert_eq!(ov, json!({"deploy_stdout": "hi", "deploy_stderr": null, "deploy_status_code": 0}));
        let (ov, status, reason, event) =
            deployment_outcome("d1", &[], &json!({}), &json!({"deploy_stderr": "boom", "deploy_status_code": 3}));
        assert_eq!(status, "FAILED");
        assert_eq!(reason, "deploy_status_code : Deployment exited with non-zero status code: 3");
        assert_eq!(event, "deployment d1 failed (3)");
        assert_eq!(ov["deploy_stderr"], json!("boom"));
        let schema = vec![json!({"name": "result"}), json!({"name": "err", "error_output": true})];
        let (ov, status, reason, _) =
            deployment_outcome("d", &schema, &json!({}), &json!({"result": "r", "err": "bad"}));
        assert_eq!((status.as_str(), reason.as_str()), ("FAILED", "err : bad"));
        assert_eq!(ov["result"], json!("r"));
        let (_, status, _, _) = deployment_outcome("d", &[], &json!({}), &json!({"deploy_status_code": "0"}));
        assert_eq!(status, "COMPLETE");
    }
}
