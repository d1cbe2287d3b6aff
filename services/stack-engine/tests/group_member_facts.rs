//! A group's members' attributes are asked of their service once, when
//! each member's action completes: the group then reads what the members
//! reported (their stored attributes, as Heat's cached attributes), not
//! every attribute of every member again (a group of 100 servers was 2,000
//! more calls to Nova after the last server was ACTIVE).

// Fixture helpers outside #[test] functions fail the test by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod service_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use keelson_stack_engine::resources::{
    ActionContext, ActionResult, AttributeSchema, Plugin, Registry, ResourceSchema, ResourceState, SupportStatus,
};
use keelson_stack_engine::service::{ServiceSettings, StackRef};
use keelson_stack_engine::EngineError;
use service_support::*;

/// A resource that counts how often its attribute `value` is asked.
struct Counted {
    schema: ResourceSchema,
    asked: Arc<AtomicUsize>,
}

impl Plugin for Counted {
    const TYPE: &'static str = "Test::Counted";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        ctx.state.physical_id = Some(ctx.resource_name.clone());
        Ok(())
    }

    async fn delete(&self, _: &mut ActionContext) -> ActionResult {
        Ok(())
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name == "value" {
            self.asked.fetch_add(1, Ordering::SeqCst);
        }
        Ok(match name {
            "value" => json!(format!("v-{}", state.physical_id.clone().unwrap_or_default())),
            _ => Value::Null,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_reads_what_its_members_reported() {
    let asked = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::builtin();
    let schema = ResourceSchema {
        properties: Vec::new(),
        attributes: vec![AttributeSchema::new("value", "the member's value", Some("string"))],
        support_status: SupportStatus::default(),
        description: "",
    };
    registry.register(Arc::new(Counted { schema, asked: asked.clone() }));
    let h = Harness::start_with_registry(ServiceSettings::default(), registry).await;
    let caller = admin("admin");
    let template = json!({
        "heat_template_version": "2016-10-14",
        "resources": {"group": {"type": "OS::Heat::ResourceGroup",
            "properties": {"count": 3, "resource_def": {"type": "Test::Counted"}}}},
        "outputs": {"values": {"value": {"get_attr": ["group", "value"]}}},
    });
    let identity = h.api.create_stack(&caller, &json!({"stack_name": "counted", "template": template})).await.unwrap();
    let stack = StackRef::new("counted", &identity.stack_id);
    h.wait_for_status(&caller, &stack, "CREATE_COMPLETE").await;
    // Once per member, when its create completed.
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    let output = h.api.show_output(&caller, &stack, "values").await.unwrap();
    let mut values: Vec<String> =
        serde_json::from_value(output["output"]["output_value"].clone()).unwrap_or_else(|_| panic!("{output}"));
    values.sort();
    assert_eq!(values.len(), 3, "{output}");
    assert!(values.iter().all(|v| v.starts_with("v-")), "{output}");
}
