//! OS::Heat::SoftwareDeployment (upstream `software_deployment.py`): on
//! each action listed in `actions`, a *derived* config (the config with
//! its inputs' values and the `deploy_*` inputs telling the agent where
//! and how to signal) and a software_deployment row IN_PROGRESS, published
//! in the server's metadata; the resource then waits, without holding a
//! check slot, until the agent's signal moves the row to COMPLETE or
//! FAILED. NO_SIGNAL completes at once.
//!
//! OS::Heat::StructuredDeployment (upstream `structured_config.py`) is the
//! same resource whose derived config is the (structured) config with each
//! `{<input_key>: <name>}` replaced by that input's value.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::host::{DeploymentSpec, HostSlot, NewSoftwareConfig};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState, SignalTarget};
use crate::error::EngineError;

pub const SIGNAL_TRANSPORTS: [&str; 5] = ["CFN_SIGNAL", "TEMP_URL_SIGNAL", "HEAT_SIGNAL", "NO_SIGNAL", "ZAQAR_SIGNAL"];
const ACTIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "SUSPEND", "RESUME"];

const POLL_FIRST: Duration = Duration::from_millis(100);
const POLL_MAX: Duration = Duration::from_secs(1);

pub struct SoftwareDeployment {
    structured: bool,
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

fn input(name: &str, description: &str, value: Value) -> Value {
    json!({"name": name, "description": description, "type": "String", "value": value})
}

impl SoftwareDeployment {
    pub const STRUCTURED: &'static str = "OS::Heat::StructuredDeployment";

    /// OS::Heat::StructuredDeployment: `input_key` and
    /// `input_values_validate` decide the substitution of inputs.
    pub fn structured(host: Arc<HostSlot>) -> Self {
        let mut deployment = Self::new(host);
        deployment.structured = true;
        deployment.schema.properties.extend(structured_properties());
        deployment.schema.description = "Like OS::Heat::SoftwareDeployment, but the inputs' values are substituted into the config.\n\nFor configuration tools without a notion of inputs (such as the metadata cfn-init\nreads): each {get_input: <name>} in the config of an OS::Heat::StructuredConfig is\nreplaced by that input's value; input_key names another function to replace when\nget_input itself must reach the server.";
        deployment
    }

    pub fn new(host: Arc<HostSlot>) -> Self {
        SoftwareDeployment {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("config", T::String, "ID of software configuration resource to execute when applying to the server.").update_allowed(),
                    PropertySchema::new("server", T::String, "ID of resource to apply configuration to. Normally this should be a Nova server ID.").required(),
                    PropertySchema::new("input_values", T::Map, "Input values to apply to the software configuration on this server.").update_allowed(),
                    PropertySchema::new("actions", T::List, "Which lifecycle actions of the deployment resource will result in this deployment being triggered.")
                        .default_value(json!(["CREATE", "UPDATE"]))
                        .constraint(Constraint::allowed_values(ACTIONS))
                        .update_allowed(),
                    PropertySchema::new("signal_transport", T::String, "How the server should signal to heat with the deployment output values. CFN_SIGNAL will allow an HTTP POST to a CFN keypair signed URL. TEMP_URL_SIGNAL will create a Swift TempURL to be signaled via HTTP PUT. HEAT_SIGNAL will allow calls to the Heat API resource-signal using the provided keystone credentials. ZAQAR_SIGNAL will create a dedicated zaqar queue to be signaled using the provided keystone credentials. NO_SIGNAL will result in the resource going to the COMPLETE state without waiting for any signal.")
                        .constraint(Constraint::allowed_values(SIGNAL_TRANSPORTS)),
                    PropertySchema::new("name", T::String, "Name of the derived config associated with this deployment. This is used to apply a sort order to the list of configurations currently deployed to a server.").update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema::new("deploy_stdout", "Captured stdout from the configuration execution.", Some("string")),
                    AttributeSchema::new("deploy_stderr", "Captured stderr from the configuration execution.", Some("string")),
                    AttributeSchema::new("deploy_status_code", "Returned status code from the configuration execution.", Some("string")),
                ],
                support_status: SupportStatus::supported("2014.1"),
                description: "This resource associates a server with some configuration.\n\nThe configuration is to be deployed to that server.",
            },
            structured: false,
            host,
        }
    }

    pub fn type_name_of(structured: bool) -> &'static str {
        if structured {
            Self::STRUCTURED
        } else {
            Self::TYPE
        }
    }

    fn actions(props: &Properties) -> Vec<String> {
        match props.get("actions") {
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => vec!["CREATE".into(), "UPDATE".into()],
        }
    }

    /// Upstream `_handle_action`: derived config + deployment row, then
    /// the wait for the agent's signal.
    async fn run(&self, ctx: &mut ActionContext, action: &str) -> Result<(), ResourceFailure> {
        if !Self::actions(&ctx.properties).iter().any(|a| a == action) {
            return Ok(());
        }
        let host = self.host.get();
        let config_id = ctx.properties.get("config").and_then(Value::as_str).unwrap_or_default().to_string();
        let config = if config_id.is_empty() {
            json!({"config": if self.structured { json!({}) } else { Value::Null }})
        } else {
            match host.software_config(&config_id).await {
                Ok(Some(c)) => c,
                Ok(None) => {
                    return Err(ResourceFailure::error(
                        "NotFound",
                        format!("Software config with id {config_id} not found"),
                    ))
                }
                Err(e) => return Err(ResourceFailure::from(e)),
            }
        };
        let urls = host.signal_urls(&ctx.stack_id, &ctx.resource_name).await?;
        let transport = ctx
            .properties
            .get("signal_transport")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| urls.default_deployment_transport.clone());
        if transport == "TEMP_URL_SIGNAL" || transport == "ZAQAR_SIGNAL" {
            let service = if transport == "TEMP_URL_SIGNAL" { "object-store" } else { "messaging" };
            return Err(ResourceFailure::error(
                "EndpointNotFound",
                format!("{transport} needs the {service} service, which is not in this cloud's catalog."),
            ));
        }
        let server = ctx.properties.get("server").and_then(Value::as_str).unwrap_or_default().to_string();

        // The derived inputs: declared inputs with their values, undeclared
        // values as String inputs, then the deploy_* inputs.
        let mut values: Map<String, Value> =
            ctx.properties.get("input_values").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut inputs: Vec<Value> = Vec::new();
        for declared in config.get("inputs").and_then(Value::as_array).cloned().unwrap_or_default() {
            let mut declared = declared.as_object().cloned().unwrap_or_default();
            let name = declared.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let value = values.remove(&name).unwrap_or_else(|| declared.get("default").cloned().unwrap_or(Value::Null));
            declared.insert("value".into(), value);
            inputs.push(Value::Object(declared));
        }
        for (k, v) in values {
            inputs.push(json!({"name": k, "type": "String", "value": v}));
        }
        inputs.push(input("deploy_server_id", "ID of the server being deployed to", json!(server)));
        inputs.push(input("deploy_action", "Name of the current action being deployed", json!(action)));
        inputs.push(input("deploy_stack_id", "ID of the stack this deployment belongs to", json!(urls.stack_path)));
        inputs.push(input(
            "deploy_resource_name",
            "Name of this deployment resource in the stack",
            json!(ctx.resource_name),
        ));
        inputs.push(input(
            "deploy_signal_transport",
            "How the server should signal to heat with the deployment output values.",
            json!(transport),
        ));
        let keystone = match &urls.identity {
            Some(identity) if transport == "HEAT_SIGNAL" || transport == "CFN_SIGNAL" => {
                Some(self.stack_user(ctx, identity, &transport).await?)
            }
            _ => None,
        };
        match (transport.as_str(), keystone) {
            ("CFN_SIGNAL", Some(StackUserInputs::Cfn { url })) => {
                inputs.push(input("deploy_signal_id", "ID of signal to use for signaling output values", json!(url)));
                inputs.push(input("deploy_signal_verb", "HTTP verb to use for signaling output values", json!("POST")));
            }
            ("HEAT_SIGNAL", Some(StackUserInputs::Heat { auth_url, username, user_id, password, project_id })) => {
                // Heat's credentials of the deployment's stack user: the
                // agent (heat-config-notify) authenticates with them and
                // signals through the catalog's orchestration endpoint.
                inputs.push(input("deploy_auth_url", "URL for API authentication", json!(auth_url)));
                inputs.push(input("deploy_username", "Username for API authentication", json!(username)));
                inputs.push(input("deploy_user_id", "User ID for API authentication", json!(user_id)));
                inputs.push(input("deploy_password", "Password for API authentication", json!(password)));
                inputs.push(input("deploy_project_id", "ID of project for API authentication", json!(project_id)));
                inputs.push(input("deploy_region_name", "Region name for API authentication", json!(urls.region_name)));
            }
            ("CFN_SIGNAL", _) => {
                inputs.push(input(
                    "deploy_signal_id",
                    "ID of signal to use for signaling output values",
                    json!(urls.signal_url),
                ));
                inputs.push(input("deploy_signal_verb", "HTTP verb to use for signaling output values", json!("POST")));
            }
            ("HEAT_SIGNAL", _) => {
                // No Keystone (noauth): the agent posts to the resource's
                // signal endpoint (any token is accepted).
                inputs.push(input("deploy_auth_url", "URL for API authentication", Value::Null));
                inputs.push(input("deploy_username", "Username for API authentication", Value::Null));
                inputs.push(input("deploy_user_id", "User ID for API authentication", json!(ctx.state.physical_id)));
                inputs.push(input("deploy_password", "Password for API authentication", Value::Null));
                inputs.push(input("deploy_project_id", "ID of project for API authentication", json!(urls.tenant)));
                inputs.push(input("deploy_region_name", "Region name for API authentication", json!(urls.region_name)));
                inputs.push(input(
                    "deploy_signal_id",
                    "URL to signal output values to (keelson)",
                    json!(format!("{}/signal", urls.resource_url)),
                ));
                inputs.push(input("deploy_signal_verb", "HTTP verb to use for signaling output values", json!("POST")));
            }
            _ => {}
        }
        let name = ctx
            .properties
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| config.get("name").and_then(Value::as_str).map(str::to_string));
        let mut derived_config = config.get("config").cloned().unwrap_or(Value::Null);
        if self.structured {
            let values: Map<String, Value> = inputs
                .iter()
                .filter_map(|i| {
                    Some((i.get("name")?.as_str()?.to_string(), i.get("value").cloned().unwrap_or(Value::Null)))
                })
                .collect();
            let key = ctx.properties.get("input_key").and_then(Value::as_str).unwrap_or("get_input");
            let strict = ctx.properties.get("input_values_validate").and_then(Value::as_str) == Some("STRICT");
            derived_config = substitute_inputs(&derived_config, key, &values, strict).map_err(|name| {
                ResourceFailure::error("UserParameterMissing", format!("The Parameter ({name}) was not provided."))
            })?;
        }
        let derived = NewSoftwareConfig {
            name,
            group: Some(config.get("group").and_then(Value::as_str).unwrap_or("Heat::Ungrouped").to_string()),
            config: json!({
                "config": derived_config,
                "inputs": inputs,
                "outputs": config.get("outputs").cloned().unwrap_or_else(|| json!([])),
                "options": config.get("options").cloned().unwrap_or_else(|| json!({})),
            }),
        };
        let derived_id = host.create_software_config(&ctx.stack_id, derived).await?;
        let previous = match &ctx.state.physical_id {
            Some(id) => host.deployment(id).await.ok().flatten().map(|d| d.config_id),
            None => None,
        };
        let id = match &ctx.state.physical_id {
            Some(id) => id.clone(),
            None => {
                let id = uuid::Uuid::new_v4().to_string();
                // Stored now: the agent's signal may come before the action ends.
                host.set_physical_id(&ctx.stack_id, &ctx.resource_name, &id).await?;
                ctx.state.physical_id = Some(id.clone());
                id
            }
        };
        let no_signal = transport == "NO_SIGNAL";
        let spec = DeploymentSpec {
            id: id.clone(),
            config_id: derived_id,
            server_id: server,
            input_values: ctx.properties.get("input_values").cloned().unwrap_or_else(|| json!({})),
            action: action.to_string(),
            status: if no_signal { "COMPLETE" } else { "IN_PROGRESS" }.to_string(),
            status_reason: if no_signal { "Not waiting for outputs signal" } else { "Deploy data available" }
                .to_string(),
        };
        host.write_deployment(&ctx.stack_id, spec).await?;
        if let Some(old) = previous {
            host.delete_software_config(&old).await?;
        }
        if no_signal {
            return Ok(());
        }
        // The agent may take long: give the slot back while it works.
        host.release_check_slot();
        let mut pause = POLL_FIRST;
        loop {
            let state = host.deployment(&id).await.map_err(ResourceFailure::from)?;
            match state {
                Some(s) if s.status == "COMPLETE" => return Ok(()),
                Some(s) if s.status == "FAILED" => {
                    return Err(ResourceFailure::error(
                        "Error",
                        format!("Deployment to server failed: {}", s.status_reason),
                    ));
                }
                Some(_) => {}
                None => return Err(ResourceFailure::error("NotFound", format!("Deployment with id {id} not found"))),
            }
            ctx.sleep(pause.as_secs_f64()).await?;
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}

/// What the agent signals with, for a deployment's stack user.
enum StackUserInputs {
    Heat { auth_url: String, username: String, user_id: String, password: String, project_id: String },
    Cfn { url: String },
}

impl SoftwareDeployment {
    /// Heat's `_get_heat_signal_credentials` / `_get_ec2_signed_url`: the
    /// deployment's stack user, made once and kept in its data (secrets
    /// sealed), with a password (HEAT_SIGNAL) or an EC2 keypair and a
    /// `POST …/signal/<arn>` URL signed with it (CFN_SIGNAL).
    async fn stack_user(
        &self,
        ctx: &mut ActionContext,
        identity: &super::host::IdentityUrls,
        transport: &str,
    ) -> Result<StackUserInputs, ResourceFailure> {
        let host = self.host.get();
        if !ctx.state.data.contains_key("user_id") {
            let password = crate::identity::random_password();
            let username = ctx.physical_name();
            let user = host.create_stack_user(&ctx.stack_id, &username, &password).await?;
            ctx.state.data.insert("user_id".into(), user.user_id);
            ctx.state.data.insert("project_id".into(), user.project_id);
            ctx.state.data.insert("username".into(), username);
            ctx.state.data.insert("password".into(), host.seal(&password)?);
        }
        let get = |k: &str| ctx.state.data.get(k).cloned().unwrap_or_default();
        let user = super::host::StackUser { user_id: get("user_id"), project_id: get("project_id") };
        if transport == "HEAT_SIGNAL" {
            return Ok(StackUserInputs::Heat {
                auth_url: identity.auth_url.clone(),
                username: get("username"),
                user_id: user.user_id,
                password: host.open(&get("password"))?,
                project_id: user.project_id,
            });
        }
        if let Some(url) = ctx.state.data.get("ec2_signed_url") {
            return Ok(StackUserInputs::Cfn { url: url.clone() });
        }
        let keypair = host.create_keypair(&user).await?;
        let timestamp = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
        let url = keelson_openstack::ec2::presigned_url(
            &identity.ec2_base(true),
            "POST",
            &identity.arn,
            &keypair.access,
            &keypair.secret,
            Some(&timestamp),
        );
        ctx.state.data.insert("credential_id".into(), keypair.id);
        ctx.state.data.insert("access_key".into(), host.seal(&keypair.access)?);
        ctx.state.data.insert("secret_key".into(), host.seal(&keypair.secret)?);
        ctx.state.data.insert("ec2_signed_url".into(), url.clone());
        Ok(StackUserInputs::Cfn { url })
    }
}

/// StructuredDeployment's own properties (its group's too).
pub fn structured_properties() -> Vec<PropertySchema> {
    vec![
        PropertySchema::new(
            "input_key",
            T::String,
            "The function name whose occurrences in the config are replaced by input values.",
        )
        .default_value("get_input"),
        PropertySchema::new(
            "input_values_validate",
            T::String,
            "STRICT fails the deployment when the config asks for an input that has no value; LAX substitutes null.",
        )
        .default_value("LAX")
        .constraint(Constraint::allowed_values(["LAX", "STRICT"])),
    ]
}

/// `config` with every single-entry map `{key: "<name>"}` replaced by the
/// value of input `name` (null when there is none, or `Err(name)` when
/// `strict`).
pub fn substitute_inputs(
    config: &Value,
    key: &str,
    values: &Map<String, Value>,
    strict: bool,
) -> Result<Value, String> {
    Ok(match config {
        Value::Object(m) => {
            if let (1, Some(Value::String(name))) = (m.len(), m.get(key)) {
                return match values.get(name) {
                    Some(v) => Ok(v.clone()),
                    None if strict => Err(name.clone()),
                    None => Ok(Value::Null),
                };
            }
            let mut out = Map::new();
            for (k, v) in m {
                out.insert(k.clone(), substitute_inputs(v, key, values, strict)?);
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| substitute_inputs(v, key, values, strict)).collect::<Result<_, _>>()?)
        }
        other => other.clone(),
    })
}

impl Plugin for SoftwareDeployment {
    const TYPE: &'static str = "OS::Heat::SoftwareDeployment";

    fn type_name(&self) -> &'static str {
        Self::type_name_of(self.structured)
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        self.run(ctx, "CREATE").await
    }

    async fn update(&self, ctx: &mut ActionContext, _old: &Properties) -> ActionResult {
        self.run(ctx, "UPDATE").await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let host = self.host.get();
        if Self::actions(&ctx.properties).iter().any(|a| a == "DELETE") {
            self.run(ctx, "DELETE").await?;
        }
        if let Ok(Some(d)) = host.deployment(&id).await {
            host.delete_deployment(&id).await?;
            host.delete_software_config(&d.config_id).await?;
        }
        // SignalResponder's handle_delete: the keypair, then the user.
        if let (Some(user_id), Some(project_id)) = (ctx.state.data.get("user_id"), ctx.state.data.get("project_id")) {
            if let Some(credential) = ctx.state.data.get("credential_id") {
                host.delete_keypair(credential).await?;
            }
            let user = super::host::StackUser { user_id: user_id.clone(), project_id: project_id.clone() };
            host.delete_stack_user(&user).await?;
        }
        Ok(())
    }

    /// Config outputs are attributes too: any name resolves (null until
    /// the agent reports it).
    fn accepts_any_attribute(&self) -> bool {
        true
    }

    /// The config's outputs the agent signalled (upstream resolves any
    /// output name from the deployment's `output_values`).
    async fn extra_attributes(&self, state: &ResourceState) -> Map<String, Value> {
        let Some(id) = &state.physical_id else { return Map::new() };
        match self.host.get().deployment(id).await {
            Ok(Some(d)) => d.output_values,
            _ => Map::new(),
        }
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let Some(id) = &state.physical_id else { return Ok(Value::Null) };
        let Some(d) = self.host.get().deployment(id).await? else { return Ok(Value::Null) };
        Ok(d.output_values.get(name).cloned().unwrap_or(Value::Null))
    }

    fn handles_signal(&self) -> bool {
        true
    }

    /// An agent's signal changes only the deployment itself.
    fn signal_needs_metadata_updates(&self) -> bool {
        false
    }

    async fn handle_signal(&self, target: &SignalTarget, details: &Value) -> Result<Option<String>, ResourceFailure> {
        let Some(id) = &target.state.physical_id else {
            return Err(ResourceFailure::error("ValueError", "deployment_id must be specified"));
        };
        self.host.get().signal_deployment(id, details).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values() -> Map<String, Value> {
        json!({"port": 8080, "deploy_server_id": "srv"}).as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn inputs_are_substituted_throughout_the_structure() {
        let config = json!({"listen": {"get_input": "port"}, "hosts": [{"get_input": "deploy_server_id"}, "x"], "keep": {"get_input": 1}});
        assert_eq!(
            substitute_inputs(&config, "get_input", &values(), false),
            Ok(json!({"listen": 8080, "hosts": ["srv", "x"], "keep": {"get_input": 1}}))
        );
        // A map with more than the function key is data, walked into.
        let config = json!({"get_input": "port", "other": {"get_input": "port"}});
        assert_eq!(
            substitute_inputs(&config, "get_input", &values(), false),
            Ok(json!({"get_input": "port", "other": 8080}))
        );
    }

    #[test]
    fn input_key_names_the_function_and_strict_requires_values() {
        let config = json!({"a": {"get_input": "port"}, "b": {"my_input": "port"}});
        assert_eq!(
            substitute_inputs(&config, "my_input", &values(), false),
            Ok(json!({"a": {"get_input": "port"}, "b": 8080}))
        );
        let missing = json!([{"get_input": "nope"}]);
        assert_eq!(substitute_inputs(&missing, "get_input", &values(), false), Ok(json!([null])));
        assert_eq!(substitute_inputs(&missing, "get_input", &values(), true), Err("nope".to_string()));
    }
}
