//! OS::Heat::SoftwareConfig (upstream `software_config.py`): an immutable
//! software_config row; any change of a property replaces it.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::host::{HostSlot, NewSoftwareConfig};
use super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::{ActionContext, Properties, ResourceFailure, ResourceState, ResourceType};
use crate::EngineError;

pub const INPUT_TYPES: [&str; 5] = ["String", "Number", "CommaDelimitedList", "Json", "Boolean"];

pub struct SoftwareConfig {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

impl SoftwareConfig {
    pub const TYPE: &'static str = "OS::Heat::SoftwareConfig";

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
                        .default_value("Heat::Ungrouped"),
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
                attributes: vec![AttributeSchema::new("config", "The config value of the software config.", None)],
                support_status: SupportStatus::supported("2014.1"),
                description: "A resource for describing and storing software configuration.\n\nThe software_configs API which backs this resource creates immutable\nconfigs, so any change to the template resource definition will result\nin a new config being created, and the old one being deleted.",
            },
            host,
        }
    }
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

impl ResourceType for SoftwareConfig {
    fn type_name(&self) -> &'static str {
        Self::TYPE
    }

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn create<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            let new = NewSoftwareConfig {
                name: Some(ctx.physical_name()),
                group: ctx.properties.get("group").and_then(Value::as_str).map(str::to_string),
                config: config_document(&ctx.properties),
            };
            let id = self.host.get().create_software_config(&ctx.stack_id, new).await?;
            ctx.state.physical_id = Some(id);
            Ok(())
        })
    }

    fn update<'a>(&'a self, _ctx: &'a mut ActionContext, _old: &'a Properties) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        // No property is update_allowed: every change is a replacement.
        Box::pin(async { Ok(()) })
    }

    fn delete<'a>(&'a self, ctx: &'a mut ActionContext) -> BoxFuture<'a, Result<(), ResourceFailure>> {
        Box::pin(async move {
            match &ctx.state.physical_id {
                Some(id) => self.host.get().delete_software_config(id).await,
                None => Ok(()),
            }
        })
    }

    fn attribute<'a>(&'a self, state: &'a ResourceState, name: &'a str) -> BoxFuture<'a, Result<Value, EngineError>> {
        Box::pin(async move {
            if name != "config" {
                return Err(super::invalid_attribute("", name));
            }
            let Some(id) = &state.physical_id else { return Ok(Value::Null) };
            Ok(self.host.get().software_config(id).await?.and_then(|c| c.get("config").cloned()).unwrap_or(Value::Null))
        })
    }
}
