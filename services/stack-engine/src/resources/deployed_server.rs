//! OS::Heat::DeployedServer (upstream `deployed_server.py`): a server
//! keelson does not boot (no Nova), which software deployments target.
//! Its metadata carries the agent's collector settings
//! (`os-collect-config`) and, once deployments exist, `deployments`;
//! agents poll it at `GET …/resources/<server>/metadata`
//! (POLL_SERVER_HEAT).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host::HostSlot;
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState};
use crate::error::EngineError;

pub const CONFIG_TRANSPORTS: [&str; 4] = ["POLL_SERVER_CFN", "POLL_SERVER_HEAT", "POLL_TEMP_URL", "ZAQAR_MESSAGE"];

pub struct DeployedServer {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

impl DeployedServer {
    pub fn new(host: Arc<HostSlot>) -> Self {
        DeployedServer {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("name", T::String, "Server name.").update_allowed(),
                    PropertySchema::new("metadata", T::Map, "Arbitrary key/value metadata to store for this server. Both keys and values must be 255 characters or less. Non-string values will be serialized to JSON (and the serialized string must be 255 characters or less).").update_allowed(),
                    PropertySchema::new("software_config_transport", T::String, "How the server should receive the metadata required for software configuration. POLL_SERVER_CFN will allow calls to the cfn API action DescribeStackResource authenticated with the provided keypair. POLL_SERVER_HEAT will allow calls to the Heat API resource-show using the provided keystone credentials. POLL_TEMP_URL will create and populate a Swift TempURL with metadata for polling. ZAQAR_MESSAGE will create a dedicated zaqar queue and post the metadata for polling.")
                        .constraint(Constraint::allowed_values(CONFIG_TRANSPORTS))
                        .update_allowed(),
                    PropertySchema::new("deployment_swift_data", T::Map, "Swift container and object to use for storing deployment data for the server resource. The parameter is a map value with the keys \"container\" and \"object\", and the values are the corresponding container and object names. The software_config_transport parameter must be set to POLL_TEMP_URL for swift to be used. If not specified, and software_config_transport is set to POLL_TEMP_URL, a container will be automatically created from the resource name, and the object name will be a generated uuid.")
                        .update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema::new("networks", "The networks of the server.", Some("map")),
                    AttributeSchema::new("name", "Name of the server.", Some("string")),
                    AttributeSchema::new("os_collect_config", "The os-collect-config configuration for the server's local agent to be configured to connect to Heat to retrieve deployment data.", Some("map")),
                ],
                support_status: SupportStatus::supported("8.0.0"),
                description: "A resource for managing servers that are already deployed.\n\nA DeployedServer resource manages resources for servers that have been\ndeployed externally from OpenStack. These servers can be associated with\nSoftwareDeployments for further orchestration via Heat.",
            },
            host,
        }
    }

    /// The collector settings for the transport, in the server's metadata.
    async fn publish_transport(&self, ctx: &mut ActionContext) -> Result<(), ResourceFailure> {
        let transport = ctx.properties.get("software_config_transport").and_then(Value::as_str).map(str::to_string);
        publish_collect_config(&self.host, ctx, transport.as_deref(), &[]).await
    }
}

/// Heat's `_create_transport_credentials` and
/// `_populate_deployments_metadata` (server_base.py), shared by
/// OS::Heat::DeployedServer and OS::Nova::Server: the server's stack user
/// (and, for POLL_SERVER_CFN, its EC2 keypair) made once, kept in the
/// resource data (secrets sealed), and the agent's collector settings for
/// `transport` (None: the engine's default) in the resource metadata, the
/// type's `default_collectors` first.
pub(crate) async fn publish_collect_config(
    host: &HostSlot,
    ctx: &mut ActionContext,
    transport: Option<&str>,
    default_collectors: &[&str],
) -> Result<(), ResourceFailure> {
    let urls = host.get().signal_urls(&ctx.stack_id, &ctx.resource_name).await?;
    let transport = transport.map_or_else(|| urls.default_config_transport.clone(), str::to_string);
    let mut collectors: Vec<Value> = default_collectors.iter().map(|c| json!(c)).collect();
    let mut collect = Map::new();
    match (transport.as_str(), &urls.identity) {
        // What os-collect-config's heat collector authenticates with.
        ("POLL_SERVER_HEAT", Some(identity)) => {
            let password = transport_user(host, ctx, false).await?;
            collect.insert(
                "heat".into(),
                json!({
                    "user_id": ctx.state.data.get("user_id"),
                    "password": password,
                    "auth_url": identity.auth_url,
                    "project_id": identity.stack_user_project_id,
                    "stack_id": urls.stack_path,
                    "resource_name": ctx.resource_name,
                    "region_name": urls.region_name,
                }),
            );
            collectors.extend([json!("heat"), json!("local")]);
        }
        ("POLL_SERVER_HEAT", None) => {
            collect.insert(
                "heat".into(),
                json!({
                    "auth_url": Value::Null,
                    "user_id": ctx.state.physical_id,
                    "password": ctx.state.data.get("password"),
                    "project_id": urls.tenant,
                    "stack_id": urls.stack_path,
                    "resource_name": ctx.resource_name,
                    "region_name": urls.region_name,
                    // keelson: where the agent polls (no Keystone catalog needed).
                    "metadata_url": format!("{}/metadata", urls.resource_url),
                }),
            );
            collectors.push(json!("heat"));
        }
        // The cfn collector: heat-api-cfn's DescribeStackResource signed
        // with the stack user's EC2 keypair.
        ("POLL_SERVER_CFN", Some(identity)) => {
            transport_user(host, ctx, true).await?;
            let h = host.get();
            let secret = |key: &str| h.open(ctx.state.data.get(key).map(String::as_str).unwrap_or_default());
            collect.insert(
                "cfn".into(),
                json!({
                    "metadata_url": format!("{}/", identity.cfn_url.trim_end_matches('/')),
                    "access_key_id": secret("access_key")?,
                    "secret_access_key": secret("secret_key")?,
                    "stack_name": ctx.stack_name,
                    "path": format!("{}.Metadata", ctx.resource_name),
                }),
            );
            collectors.extend([json!("cfn"), json!("local")]);
        }
        // The other transports need Swift or Zaqar: the metadata is still
        // readable through the Heat API.
        _ => {}
    }
    collect.insert("collectors".into(), Value::Array(collectors));
    let mut md: Map<String, Value> = ctx.state.metadata.as_object().cloned().unwrap_or_default();
    md.insert("os-collect-config".into(), Value::Object(collect));
    md.entry("deployments").or_insert_with(|| json!([]));
    ctx.state.metadata = Value::Object(md);
    Ok(())
}

/// The server's stack user, made once (its password sealed in the
/// resource data), with an EC2 keypair when `keypair`; answers the
/// password.
async fn transport_user(host: &HostSlot, ctx: &mut ActionContext, keypair: bool) -> Result<String, ResourceFailure> {
    let h = host.get();
    if !ctx.state.data.contains_key("user_id") {
        let password = crate::identity::random_password();
        let user = h.create_stack_user(&ctx.stack_id, &ctx.physical_name(), &password).await?;
        ctx.state.data.insert("user_id".into(), user.user_id);
        ctx.state.data.insert("project_id".into(), user.project_id);
        ctx.state.data.insert("password".into(), h.seal(&password)?);
    }
    if keypair && !ctx.state.data.contains_key("credential_id") {
        let user = super::host::StackUser {
            user_id: ctx.state.data.get("user_id").cloned().unwrap_or_default(),
            project_id: ctx.state.data.get("project_id").cloned().unwrap_or_default(),
        };
        let pair = h.create_keypair(&user).await?;
        ctx.state.data.insert("credential_id".into(), pair.id);
        ctx.state.data.insert("access_key".into(), h.seal(&pair.access)?);
        ctx.state.data.insert("secret_key".into(), h.seal(&pair.secret)?);
    }
    h.open(ctx.state.data.get("password").map(String::as_str).unwrap_or_default())
}

/// Heat's `_delete_user`: the server's EC2 keypair, then its stack user.
pub(crate) async fn delete_transport_user(host: &HostSlot, state: &ResourceState) -> Result<(), ResourceFailure> {
    let (Some(user_id), Some(project_id)) = (state.data.get("user_id"), state.data.get("project_id")) else {
        return Ok(());
    };
    let h = host.get();
    if let Some(credential) = state.data.get("credential_id") {
        h.delete_keypair(credential).await?;
    }
    let user = super::host::StackUser { user_id: user_id.clone(), project_id: project_id.clone() };
    h.delete_stack_user(&user).await
}

impl Plugin for DeployedServer {
    const TYPE: &'static str = "OS::Heat::DeployedServer";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        ctx.state.physical_id = Some(uuid::Uuid::new_v4().to_string());
        self.publish_transport(ctx).await
    }

    /// Heat's `_delete`: the server's stack user goes with it.
    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_transport_user(&self.host, &ctx.state).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        if old.get("software_config_transport") != ctx.properties.get("software_config_transport") {
            self.publish_transport(ctx).await?;
        }
        Ok(())
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        Ok(match name {
            "networks" => json!({}),
            "name" => state.properties.get("name").cloned().unwrap_or(Value::Null),
            "os_collect_config" => state.metadata.get("os-collect-config").cloned().unwrap_or_else(|| json!({})),
            _ => return Err(super::invalid_attribute("", name)),
        })
    }
}
