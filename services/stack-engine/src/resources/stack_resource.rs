//! OS::Heat::Stack (upstream `remote_stack.py`): a nested stack from an
//! inline template. Upstream creates it through the Orchestration API of
//! the (possibly remote) cloud; here the stack is this engine's own child
//! stack, as a template resource's is (`context.region_name` other than
//! this region is refused: there is no other cloud to reach).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::host::{HostSlot, NestedStackSpec, PluginHost};
use super::schema::{AttributeSchema, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::template_resource::stored_outputs;
use super::{ActionContext, Plugin, ResourceFailure, ResourceState, SpecResult};
use crate::error::EngineError;

pub struct StackResource {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

impl StackResource {
    pub fn new(host: Arc<HostSlot>) -> Self {
        StackResource {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("context", T::Map, "Context for this stack.").map_of(vec![PropertySchema::new(
                        "region_name",
                        T::String,
                        "Region name in which this stack will be created.",
                    )]),
                    PropertySchema::new("template", T::String, "Template that specifies the stack to be created as a resource.")
                        .required()
                        .update_allowed(),
                    PropertySchema::new("timeout", T::Integer, "Number of minutes to wait for this stack creation.")
                        .update_allowed(),
                    PropertySchema::new("parameters", T::Map, "Set of parameters passed to this stack.")
                        .default_value(Value::Object(Map::new()))
                        .update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema::new("stack_name", "Name of the stack.", Some("string")),
                    AttributeSchema::new("outputs", "A dict of key-value pairs output from the stack.", Some("map")),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("2014.1"),
                description: "A Resource representing a stack.\n\nA resource that allowing for the creating stack, where should be defined\nstack template in HOT format, parameters (if template has any parameters\nwith no default value), and timeout of creating. After creating current\nstack will have remote stack.",
            },
            host,
        }
    }
}

impl Plugin for StackResource {
    const TYPE: &'static str = "OS::Heat::Stack";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    async fn child_stack_spec(&self, _host: &dyn PluginHost, ctx: &ActionContext) -> SpecResult {
        let text = ctx.properties.get("template").and_then(Value::as_str).unwrap_or_default();
        let template = keelson_hot::parse_document(text).map_err(ResourceFailure::from)?;
        let parameters = ctx.properties.get("parameters").cloned().unwrap_or(Value::Object(Map::new()));
        let timeout_mins = ctx.properties.get("timeout").and_then(Value::as_i64);
        let mut environment = Map::new();
        environment.insert("parameters".into(), parameters);
        Ok(Some(NestedStackSpec {
            template,
            files: Map::new(),
            environment: Value::Object(environment),
            timeout_mins,
            adopt: None,
        }))
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        Ok(match name {
            super::MEMBERS_FACT => Value::Array(super::template_resource::stored_members(state)),
            "outputs" => Value::Object(stored_outputs(state)),
            "stack_name" => state
                .data
                .get(super::template_resource::REFERENCE_KEY)
                .and_then(|arn| arn.rsplit('/').nth(1))
                .map(|n| Value::String(n.to_string()))
                .unwrap_or(Value::Null),
            _ => Value::Null,
        })
    }
}
