//! OS::Heat::ResourceChain (upstream `resource_chain.py`): the types of
//! `resources` as members "0", "1", … of a nested stack, each depending on
//! the one before unless `concurrent`, all with `resource_properties`.
//! Attributes as a group's (`refs`, `refs_map`, `attributes`,
//! `resource.<n>[.<attr>]`).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host::{HostSlot, PluginHost};
use super::resource_group::group_attribute;
use super::schema::{AttributeSchema, PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::template_resource::{group_spec, nested_reference};
use super::{ActionContext, Plugin, Properties, ResourceState, SpecResult};
use crate::error::EngineError;

pub struct ResourceChain {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
}

impl ResourceChain {
    pub fn new(host: Arc<HostSlot>) -> Self {
        ResourceChain {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new("resources", T::List, "The list of resource types to create. This list may contain type names or aliases defined in the resource registry. Specific template names are not supported.")
                        .required()
                        .update_allowed()
                        .list_of(PropertySchema::new("*", T::String, "")),
                    PropertySchema::new("concurrent", T::Boolean, "If true, the resources in the chain will be created concurrently. If false or omitted, each resource will be treated as having a dependency on the previous resource in the list.")
                        .default_value(false),
                    PropertySchema::new("resource_properties", T::Map, "Properties to pass to each resource being created in the chain.")
                        .update_allowed(),
                ],
                attributes: vec![
                    AttributeSchema::new("refs", "A list of resource IDs for the resources in the chain.", Some("list")),
                    AttributeSchema::new("attributes", "A map of resource names to the specified attribute of each individual resource.", Some("map")),
                    super::show_attribute(),
                ],
                support_status: SupportStatus::supported("6.0.0"),
                description: "Creates one or more resources with the same configuration.",
            },
            host,
        }
    }
}

impl Plugin for ResourceChain {
    const TYPE: &'static str = "OS::Heat::ResourceChain";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    async fn child_stack_spec(&self, host: &dyn PluginHost, ctx: &ActionContext) -> SpecResult {
        let types = ctx.properties.get("resources").and_then(Value::as_array).cloned().unwrap_or_default();
        let concurrent = ctx.properties.get("concurrent").and_then(Value::as_bool).unwrap_or(false);
        let props = ctx.properties.get("resource_properties").filter(|p| !p.is_null()).cloned();
        let mut resources = Map::new();
        for (i, t) in types.iter().enumerate() {
            let mut defn = Map::new();
            defn.insert("type".into(), t.clone());
            if let Some(p) = &props {
                defn.insert("properties".into(), p.clone());
            }
            if i > 0 && !concurrent {
                defn.insert("depends_on".into(), json!((i - 1).to_string()));
            }
            resources.insert(i.to_string(), Value::Object(defn));
        }
        let template = json!({"heat_template_version": "2015-04-30", "resources": resources});
        let spec = group_spec(host, &ctx.stack_id, ctx.state.physical_id.as_deref(), template).await?;
        Ok(Some(spec))
    }

    fn nested_resource_count(&self, properties: &Properties) -> Option<u64> {
        let types = properties.get("resources").and_then(Value::as_array).map_or(0, Vec::len);
        Some(u64::try_from(types).unwrap_or(u64::MAX))
    }

    fn accepts_any_attribute(&self) -> bool {
        true
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        Ok(group_attribute(state, name).unwrap_or(Value::Null))
    }

    fn reference_id(&self, state: &ResourceState) -> Value {
        nested_reference(state)
    }
}
