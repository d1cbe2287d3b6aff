//! OS::Heat::None (upstream `none_resource.py`): stubs out any other type
//! via `resource_registry`. Accepts any properties, every attribute is
//! null, and an update never does anything.

use serde_json::Value;
use uuid::Uuid;

use super::schema::{ResourceSchema, SupportStatus};
use super::{ActionContext, ActionResult, Plugin, Properties, ResourceState, UpdateDecision};
use crate::error::EngineError;

pub struct NoneResource {
    schema: ResourceSchema,
}

impl Default for NoneResource {
    fn default() -> Self {
        Self::new()
    }
}

impl NoneResource {
    pub fn new() -> Self {
        NoneResource {
            schema: ResourceSchema {
                properties: Vec::new(),
                attributes: Vec::new(),
                support_status: SupportStatus::supported("5.0.0"),
                description: "Enables easily disabling certain resources via the resource_registry.\n\nIt does nothing, but can effectively stub out any other resource because it\nwill accept any properties and return any attribute (as None). Note this\nresource always does nothing on update (e.g it is not replaced even if a\nchange to the stubbed resource properties would cause replacement).",
            },
        }
    }
}

impl Plugin for NoneResource {
    const TYPE: &'static str = "OS::Heat::None";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// Upstream freezes a None resource with empty properties, whatever the
    /// template says: nothing is validated or kept.
    fn validate_properties(&self, _resource_name: &str, _given: &Value) -> Result<Properties, EngineError> {
        Ok(Properties::new())
    }

    fn update_decision(&self, _old: &Properties, _new: &Properties) -> UpdateDecision {
        UpdateDecision::Unchanged
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        ctx.state.physical_id = Some(Uuid::new_v4().to_string());
        // Marks the row as a placeholder: deleting it never touches a
        // real resource.
        ctx.state.data.insert("is_placeholder".into(), "True".into());
        Ok(())
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }

    fn accepts_any_attribute(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::context::test_context;
    use serde_json::json;

    #[tokio::test]
    async fn accepts_anything_and_does_nothing() {
        let rt = NoneResource::new();
        let props = rt.validate_properties("r", &json!({"anything": [1, 2], "flavor": "m1"})).unwrap();
        assert!(props.is_empty());
        assert_eq!(
            rt.update_decision(&Properties::new(), &json!({"x": 1}).as_object().unwrap().clone()),
            UpdateDecision::Unchanged
        );
        let (mut ctx, _tx) = test_context(props.clone());
        rt.create(&mut ctx).await.unwrap();
        let id = ctx.state.physical_id.clone().unwrap();
        assert_eq!(Uuid::parse_str(&id).unwrap().get_version_num(), 4);
        assert_eq!(rt.reference_id(&ctx.state), json!(id));
        assert_eq!(crate::resources::resolve_attribute(&rt, "r", &ctx.state, "whatever").await.unwrap(), Value::Null);
        rt.update(&mut ctx, &props).await.unwrap();
        rt.delete(&mut ctx).await.unwrap();
        assert!(rt.check(&mut ctx).is_none());
    }
}
