//! AWS::CloudFormation::Stack (upstream `aws/cfn/stack.py`, NestedStack):
//! a nested stack whose template is fetched from `TemplateURL` on every
//! create and update, run as this engine's child stack with the parent's
//! files and environment and the resource's `Parameters`. Its attributes
//! are `Outputs.<name>`, the child's outputs; its reference is the child's
//! ARN (the resource's name until the child exists).

use std::sync::Arc;

use keelson_hot::Environment;
use serde_json::{Map, Value};

use super::host::{HostSlot, NestedStackSpec, PluginHost};
use super::schema::{PropertySchema, PropertyType as T, ResourceSchema, SupportStatus};
use super::template_resource::{child_environment, documents_for, stored_members, stored_outputs, ARN_KEY};
use super::{ActionContext, Plugin, Properties, ResourceFailure, ResourceState, SpecResult};
use crate::error::EngineError;
use crate::template_fetch::TemplateFetcher;

/// The prefix of every attribute name (upstream `get_attribute`).
const OUTPUTS_PREFIX: &str = "Outputs.";

pub struct CfnStack {
    schema: ResourceSchema,
    host: Arc<HostSlot>,
    fetcher: Arc<TemplateFetcher>,
}

impl CfnStack {
    pub fn new(host: Arc<HostSlot>, fetcher: Arc<TemplateFetcher>) -> Self {
        CfnStack {
            schema: ResourceSchema {
                properties: vec![
                    PropertySchema::new(
                        "TemplateURL",
                        T::String,
                        "The URL of a template that specifies the stack to be created as a resource.",
                    )
                    .required()
                    .update_allowed(),
                    PropertySchema::new(
                        "TimeoutInMinutes",
                        T::Integer,
                        "The length of time, in minutes, to wait for the nested stack creation.",
                    )
                    .update_allowed(),
                    PropertySchema::new("Parameters", T::Map, "The set of parameters passed to this nested stack.")
                        .update_allowed(),
                ],
                attributes: Vec::new(),
                support_status: SupportStatus::default(),
                description: "Represents a child stack to allow composition of templates.",
            },
            host,
            fetcher,
        }
    }

    /// Upstream `child_template`: the template at `TemplateURL`, parsed.
    async fn child_template(&self, properties: &Properties) -> Result<Value, ResourceFailure> {
        let url = properties.get("TemplateURL").and_then(Value::as_str).unwrap_or_default();
        let text = self.fetcher.fetch(url).await.map_err(|e| {
            ResourceFailure::error("ValueError", format!("Could not fetch remote template '{url}': {e}"))
        })?;
        let template = keelson_hot::parse_document(&text).map_err(ResourceFailure::from)?;
        // template_format.parse's own check, before any template class.
        let versioned = ["HeatTemplateFormatVersion", "heat_template_version", "AWSTemplateFormatVersion"]
            .iter()
            .any(|key| template.get(key).is_some());
        if !versioned {
            return Err(ResourceFailure::error("ValueError", "Template format version not found."));
        }
        Ok(template)
    }
}

impl Plugin for CfnStack {
    const TYPE: &'static str = "AWS::CloudFormation::Stack";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// A nested stack, so always updated: the template at the same URL
    /// may have changed.
    fn child_stack_host(&self) -> Option<&HostSlot> {
        Some(&self.host)
    }

    /// The child stack of `ctx`: the fetched template, the parent's files
    /// and environment (upstream `get_child_environment`) with `Parameters`.
    async fn child_stack_spec(&self, host: &dyn PluginHost, ctx: &ActionContext) -> SpecResult {
        let template = self.child_template(&ctx.properties).await?;
        let url = ctx.properties.get("TemplateURL").and_then(Value::as_str).unwrap_or_default();
        let (files, parent_env) = documents_for(host, &ctx.stack_id, ctx.state.physical_id.as_deref()).await?;
        let parent_env = Environment::from_value(&parent_env).map_err(ResourceFailure::from)?;
        let mut environment = child_environment(&parent_env, &ctx.resource_name, Self::TYPE, url);
        let parameters = match ctx.properties.get("Parameters") {
            Some(Value::Object(p)) => p.clone(),
            _ => Map::new(),
        };
        if let Value::Object(env) = &mut environment {
            env.insert("parameters".into(), Value::Object(parameters));
        }
        Ok(Some(NestedStackSpec {
            template,
            files,
            environment,
            timeout_mins: ctx.properties.get("TimeoutInMinutes").and_then(Value::as_i64),
            adopt: None,
        }))
    }

    /// Upstream overrides `get_attribute`, so a template's get_attr is not
    /// checked against a schema: any name validates, and resolving it
    /// decides (only `Outputs.<an output of the child>`).
    fn accepts_any_attribute(&self) -> bool {
        true
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name == super::MEMBERS_FACT {
            return Ok(Value::Array(stored_members(state)));
        }
        let Some(output) = name.strip_prefix(OUTPUTS_PREFIX) else {
            return Err(EngineError::InvalidTemplateAttribute(name.to_string()));
        };
        // No child yet: upstream's get_output answers None.
        if state.physical_id.is_none() {
            return Ok(Value::Null);
        }
        stored_outputs(state)
            .get(output)
            .cloned()
            .ok_or_else(|| EngineError::InvalidTemplateAttribute(name.to_string()))
    }

    /// The child's outputs as `Outputs.<name>`, the names get_attr uses.
    async fn extra_attributes(&self, state: &ResourceState) -> Map<String, Value> {
        stored_outputs(state).into_iter().map(|(name, value)| (format!("{OUTPUTS_PREFIX}{name}"), value)).collect()
    }

    /// Upstream `get_reference_id`: the child's ARN, else the resource's
    /// name (the engine answers the name for a resource with no reference).
    fn reference_id(&self, state: &ResourceState) -> Value {
        state.data.get(ARN_KEY).map(|arn| Value::String(arn.clone())).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stack() -> CfnStack {
        CfnStack::new(Arc::new(HostSlot::default()), Arc::new(TemplateFetcher::default()))
    }

    #[tokio::test]
    async fn attributes_are_the_childs_outputs_under_outputs_dot() {
        let mut state = ResourceState::default();
        let plugin = stack();
        assert_eq!(plugin.attribute(&state, "Outputs.Foo").await.unwrap(), Value::Null);
        state.physical_id = Some("child".into());
        state.data.insert(super::super::template_resource::OUTPUTS_KEY.into(), json!({"Foo": "bar"}).to_string());
        assert_eq!(plugin.attribute(&state, "Outputs.Foo").await.unwrap(), json!("bar"));
        for bad in ["Foo", "Outputs.Bar", "outputs.Foo"] {
            let e = plugin.attribute(&state, bad).await.unwrap_err();
            assert!(matches!(e, EngineError::InvalidTemplateAttribute(_)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn the_reference_is_the_childs_arn() {
        let mut state = ResourceState::default();
        assert_eq!(stack().reference_id(&state), Value::Null);
        state.data.insert(ARN_KEY.into(), "arn:openstack:heat::t:stacks/s-n-x/1".into());
        assert_eq!(stack().reference_id(&state), json!("arn:openstack:heat::t:stacks/s-n-x/1"));
    }
}
