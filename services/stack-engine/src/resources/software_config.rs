//! OS::Heat::SoftwareConfig (upstream `software_config.py`) and the types
//! upstream derives from it, OS::Heat::StructuredConfig, CloudConfig and
//! MultipartMime: an immutable software_config row; any change of a
//! property replaces it. They differ only in how the stored config is made
//! from the properties (`ConfigKind`).

use std::sync::Arc;

use serde_json::{json, Value};

use super::config_formats::{cloud_config_text, multipart_message, MimePart};
use super::host::{HostSlot, NewSoftwareConfig, PluginHost};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceFailure, ResourceState};
use crate::error::EngineError;

pub const INPUT_TYPES: [&str; 5] = ["String", "Number", "CommaDelimitedList", "Json", "Boolean"];

const UNGROUPED: &str = "Heat::Ungrouped";

pub struct SoftwareConfig {
    kind: ConfigKind,
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

/// How the stored config is made from the properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConfigKind {
    /// `config` (a string), `group`, `inputs`, `outputs`, `options` as given.
    Script,
    /// As Script, but `config` is a map kept as structured data.
    Structured,
    /// `cloud_config` rendered as a `#cloud-config` YAML document.
    CloudConfig,
    /// `parts` assembled into one MIME multipart message.
    Multipart,
}

impl SoftwareConfig {
    pub const STRUCTURED: &'static str = "OS::Heat::StructuredConfig";
    pub const CLOUD_CONFIG: &'static str = "OS::Heat::CloudConfig";
    pub const MULTIPART_MIME: &'static str = "OS::Heat::MultipartMime";

    /// OS::Heat::StructuredConfig: `config` is a map (for tools whose
    /// configuration is YAML or JSON data).
    pub fn structured(host: Arc<HostSlot>) -> Self {
        let mut config = Self::new(host);
        config.kind = ConfigKind::Structured;
        // Upstream declares the map-typed `config` after the inherited ones.
        config.schema.properties.retain(|p| p.name != "config");
        config.schema.properties.push(PropertySchema::new(
            "config",
            T::Map,
            "The configuration as a data structure, stored and delivered as JSON.",
        ));
        config.schema.description = "Like OS::Heat::SoftwareConfig, but the config is a map rather than a string.\n\nMeant for configuration tools whose input is YAML or JSON data; the config is\nstored and returned by the software_configs API as structured data.";
        config
    }

    /// OS::Heat::CloudConfig: a cloud-init `#cloud-config` document.
    pub fn cloud_config(host: Arc<HostSlot>) -> Self {
        SoftwareConfig {
            kind: ConfigKind::CloudConfig,
            schema: ResourceSchema {
                properties: vec![PropertySchema::new("cloud_config", T::Map, "The cloud-config data structure, rendered as YAML.")],
                attributes: vec![config_attribute()],
                support_status: SupportStatus::supported("2014.1"),
                description: "A cloud-init cloud-config document kept by the software_configs API.\n\nUsually given to a server's user_data or to a part of an OS::Heat::MultipartMime;\nas cloud-init only runs at boot, changing it replaces the servers that use it.",
            },
            host,
        }
    }

    /// OS::Heat::MultipartMime: several configs in one MIME message.
    pub fn multipart_mime(host: Arc<HostSlot>) -> Self {
        SoftwareConfig {
            kind: ConfigKind::Multipart,
            schema: ResourceSchema {
                properties: vec![PropertySchema::new("parts", T::List, "The parts of the message.").default_value(json!([])).list_of(
                    PropertySchema::new("*", T::Map, "").map_of(vec![
                        PropertySchema::new("config", T::String, "The part's content: inline text, or the id of another software config whose config is used.").required(),
                        PropertySchema::new("filename", T::String, "File name to attach the part under."),
                        PropertySchema::new("type", T::String, "Whether the content is text, or a multipart message whose parts are appended.")
                            .default_value("text")
                            .constraint(Constraint::allowed_values(["text", "multipart"])),
                        PropertySchema::new("subtype", T::String, "MIME subtype of a text part."),
                    ]),
                )],
                attributes: vec![config_attribute()],
                support_status: SupportStatus::supported("2014.1"),
                description: "Software configs assembled into one multipart MIME message.\n\nA part is inline text or another config by id; a part of type multipart has its\nown parts appended. Usually given to a server's user_data for cloud-init.",
            },
            host,
        }
    }

    pub fn new(host: Arc<HostSlot>) -> Self {
        let io_type = || {
            PropertySchema::new("type", T::String, "Type of the value of the input.")
                .default_value("String")
                .constraint(Constraint::allowed_values(INPUT_TYPES))
        };
        SoftwareConfig {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("group", T::String, "Namespace to group this software config by when delivered to a server. This may imply what configuration tool is going to perform the configuration.")
                        .default_value(UNGROUPED),
                    PropertySchema::new("config", T::String, "Configuration script or manifest which specifies what actual configuration is performed."),
                    PropertySchema::new("options", T::Map, "Map containing options specific to the configuration management tool used by this resource."),
                    PropertySchema::new("inputs", T::List, "Schema representing the inputs that this software config is expecting.").list_of(
                        PropertySchema::new("*", T::Map, "").map_of(vec![
                            PropertySchema::new("name", T::String, "Name of the input.").required(),
                            PropertySchema::new("description", T::String, "Description of the input."),
                            io_type(),
                            PropertySchema::new("default", T::Any, "Default value for the input if none is specified."),
                            PropertySchema::new("replace_on_change", T::Boolean, "Replace the deployment instead of updating it when the input value changes.").default_value(false),
                        ]),
                    ),
                    PropertySchema::new("outputs", T::List, "Schema representing the outputs that this software config will produce.").list_of(
                        PropertySchema::new("*", T::Map, "").map_of(vec![
                            PropertySchema::new("name", T::String, "Name of the output.").required(),
                            PropertySchema::new("description", T::String, "Description of the output."),
                            io_type(),
                            PropertySchema::new("error_output", T::Boolean, "Denotes that the deployment is in an error state if this output has a value.").default_value(false),
                        ]),
                    ),
                ],
                attributes: vec![config_attribute()],
                support_status: SupportStatus::supported("2014.1"),
                description: "A resource for describing and storing software configuration.\n\nThe software_configs API which backs this resource creates immutable\nconfigs, so any change to the template resource definition will result\nin a new config being created, and the old one being deleted.",
            },
            kind: ConfigKind::Script,
            host,
        }
    }

    /// The row to store: the properties as given, or the rendered document.
    async fn stored_config(
        &self,
        host: &dyn PluginHost,
        props: &Properties,
    ) -> Result<(Option<String>, Value), ResourceFailure> {
        let rendered = match self.kind {
            ConfigKind::Script | ConfigKind::Structured => {
                let group = props.get("group").and_then(Value::as_str).map(str::to_string);
                return Ok((group, config_document(props)));
            }
            ConfigKind::CloudConfig => {
                let data = props.get("cloud_config").cloned().unwrap_or(Value::Null);
                cloud_config_text(&data).map_err(|e| ResourceFailure::error("ValueError", e))?
            }
            ConfigKind::Multipart => multipart_message(&resolve_parts(host, props).await?),
        };
        Ok((Some(UNGROUPED.to_string()), json!({"config": rendered, "inputs": [], "outputs": [], "options": {}})))
    }
}

fn config_attribute() -> AttributeSchema {
    AttributeSchema::new("config", "The config value of the software config.", None)
}

/// The message's parts, a part naming a stored config by id replaced by
/// that config's text (an id that names none is kept as text, as upstream).
async fn resolve_parts(host: &dyn PluginHost, props: &Properties) -> Result<Vec<MimePart>, ResourceFailure> {
    let mut parts = Vec::new();
    for item in props.get("parts").and_then(Value::as_array).into_iter().flatten() {
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let mut content = field("config");
        if uuid::Uuid::parse_str(&content).is_ok() {
            let stored = host.software_config(&content).await.map_err(ResourceFailure::from)?;
            if let Some(text) = stored.as_ref().and_then(|c| c.get("config")) {
                content = match text {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
            }
        }
        parts.push(MimePart {
            content,
            multipart: field("type") == "multipart",
            subtype: field("subtype"),
            filename: field("filename"),
        });
    }
    Ok(parts)
}

/// `{config, inputs, outputs, options}` of the properties.
pub fn config_document(props: &Properties) -> Value {
    let get = |k: &str, default: Value| props.get(k).cloned().filter(|v| !v.is_null()).unwrap_or(default);
    json!({
        "config": get("config", Value::Null),
        "inputs": get("inputs", json!([])),
        "outputs": get("outputs", json!([])),
        "options": get("options", json!({})),
    })
}

impl Plugin for SoftwareConfig {
    const TYPE: &'static str = "OS::Heat::SoftwareConfig";

    fn type_name(&self) -> &'static str {
        match self.kind {
            ConfigKind::Script => Self::TYPE,
            ConfigKind::Structured => Self::STRUCTURED,
            ConfigKind::CloudConfig => Self::CLOUD_CONFIG,
            ConfigKind::Multipart => Self::MULTIPART_MIME,
        }
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let host = self.host.get();
        let (group, config) = self.stored_config(host.as_ref(), &ctx.properties).await?;
        let new = NewSoftwareConfig { name: Some(ctx.physical_name()), group, config };
        let id = host.create_software_config(&ctx.stack_id, new).await?;
        ctx.state.physical_id = Some(id);
        Ok(())
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        match &ctx.state.physical_id {
            Some(id) => self.host.get().delete_software_config(id).await,
            None => Ok(()),
        }
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name != "config" {
            return Err(super::invalid_attribute("", name));
        }
        let Some(id) = &state.physical_id else { return Ok(Value::Null) };
        Ok(self.host.get().software_config(id).await?.and_then(|c| c.get("config").cloned()).unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::host::NoHost;

    fn props(v: Value) -> Properties {
        v.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test]
    async fn each_kind_stores_its_own_document() {
        let host = Arc::new(HostSlot::default());
        let structured = SoftwareConfig::structured(host.clone());
        assert_eq!(structured.type_name(), "OS::Heat::StructuredConfig");
        let names: Vec<&str> = structured.schema().properties.iter().map(|p| p.name).collect();
        assert_eq!(names, ["group", "options", "inputs", "outputs", "config"]);
        let (group, doc) =
            structured.stored_config(&NoHost, &props(json!({"group": "ansible", "config": {"a": [1]}}))).await.unwrap();
        assert_eq!(group.as_deref(), Some("ansible"));
        assert_eq!(doc, json!({"config": {"a": [1]}, "inputs": [], "outputs": [], "options": {}}));

        let cloud = SoftwareConfig::cloud_config(host.clone());
        let (group, doc) =
            cloud.stored_config(&NoHost, &props(json!({"cloud_config": {"runcmd": ["ls"]}}))).await.unwrap();
        assert_eq!(group.as_deref(), Some("Heat::Ungrouped"));
        assert_eq!(doc["config"], json!("#cloud-config\nruncmd:\n- ls\n"));

        let mime = SoftwareConfig::multipart_mime(host);
        // An id no config has is kept as the part's text, as upstream.
        let id = uuid::Uuid::new_v4().to_string();
        let (_, doc) =
            mime.stored_config(&NoHost, &props(json!({"parts": [{"config": id, "type": "text"}]}))).await.unwrap();
        let message = doc["config"].as_str().unwrap_or_default();
        assert!(message.starts_with("Content-Type: multipart/mixed; boundary="));
        assert!(message.contains(&format!("Content-Type: text/plain; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\n\n{id}\n")));
    }
}
