//! OS::Neutron::QoSPolicy and its rules (OS::Neutron::QoSBandwidthLimitRule,
//! OS::Neutron::QoSMinimumBandwidthRule).
//!
//! A policy's physical id is the policy's id; Neutron shows it at once,
//! so nothing is waited for, and a delete is done when Neutron accepts it
//! (or no longer has it). A rule lives under its policy, named by name
//! or id and resolved each time the rule is acted on; its physical id is
//! the rule's id. A rule whose policy is gone is gone too.

use std::sync::Arc;

use keelson_openstack::network::{Network, QOS_POLICY};
use keelson_openstack::OsError;
use serde_json::Value;

use super::super::schema::{AttributeSchema, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    changed, conflict_retryable, create_fields, failure, network, object_attribute, remember, replace_failed,
    stack_session, update_fields, with_delete_retries,
};
use crate::error::EngineError;

pub struct QosPolicy {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl QosPolicy {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("name", T::String, "The name for the QoS policy.").update_allowed(),
            PropertySchema::new("description", T::String, "The description for the QoS policy.").update_allowed(),
            PropertySchema::new("shared", T::Boolean, "Whether this QoS policy should be shared to other tenants.")
                .default_value(false)
                .update_allowed(),
            PropertySchema::new("tenant_id", T::String, "The owner tenant ID of this QoS policy."),
        ];
        let attributes = vec![AttributeSchema::new("rules", "A list of all rules for the QoS policy.", Some("list"))];
        QosPolicy {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::supported("6.0.0"),
                description: "A resource for Neutron QoS Policy.\n\nThis QoS policy can be associated with neutron resources,\nsuch as port and network, to provide QoS capabilities.\n\nThe default policy usage of this resource is limited to\nadministrators only.",
            },
        }
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.stable_physical_name();
        let fields = create_fields(&ctx.properties, name);
        let created = network.create(QOS_POLICY, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a QoS policy without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id);
        remember(ctx, created);
        Ok(())
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let fields = update_fields(ctx, old, diff);
        network.update(QOS_POLICY, &id, fields).await.map_err(failure)
    }
}

impl Plugin for QosPolicy {
    const TYPE: &'static str = "OS::Neutron::QoSPolicy";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        self.create_with(&network, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        self.update_with(&network, ctx, old).await
    }

    /// Heat does not wait for the 404 here: the accepted delete is done.
    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        let (network, id) = (&network, &id);
        with_delete_retries(ctx, move || async move { conflict_retryable(network.delete(QOS_POLICY, id).await) }).await
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        replace_failed(&self.host, ctx, QOS_POLICY).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        object_attribute(&self.host, state, QOS_POLICY, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::testing;
    use super::*;
    use serde_json::json;

    fn policy() -> QosPolicy {
        QosPolicy::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&policy(), "qp", &v).unwrap()
    }

    const POLICIES: &str = "/network/v2.0/qos/policies";

    #[tokio::test]
    async fn create_posts_the_policy_without_waiting() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            &format!("POST {POLICIES}"),
            201,
            json!({"policy": {"id": "q1", "rules": [{"id": "r1", "type": "bandwidth_limit"}]}}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"description": "gold"})));
        policy().create_with(&network, &mut ctx).await.unwrap();
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap().clone();
        let calls = neutron.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].2, json!({"policy": {"name": name, "description": "gold", "shared": false}}));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("q1"));
        // Attributes answer from Neutron.
        neutron.answer(&format!("GET {POLICIES}/q1"), 200, json!({"policy": {"id": "q1", "rules": []}}));
        let (slot, _host) = testing::bound(Some(session));
        let bound = QosPolicy::new(slot);
        assert_eq!(bound.attribute(&ctx.state, "rules").await.unwrap(), json!([]));
        assert_eq!(bound.attribute(&ctx.state, "show").await.unwrap(), json!({"id": "q1", "rules": []}));
    }

    #[tokio::test]
    async fn update_puts_what_changed_and_a_cleared_name_is_the_physical_one() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {POLICIES}/q1"), 200, json!({"policy": {"id": "q1"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"name": "gold", "description": "d"}));
        let (mut ctx, _tx) = test_context(props(json!({"description": "d", "shared": true})));
        ctx.state.physical_id = Some("q1".into());
        policy().update_with(&network, &mut ctx, &old).await.unwrap();
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap().clone();
        assert_eq!(
            neutron.calls()[0],
            ("PUT".into(), format!("{POLICIES}/q1"), json!({"policy": {"name": name, "shared": true}}))
        );
        assert_eq!(
            Plugin::update_decision(&policy(), &old, &props(json!({"tenant_id": "t"}))),
            UpdateDecision::Replace
        );
        assert_eq!(Plugin::update_decision(&policy(), &old, &props(json!({"name": "x"}))), UpdateDecision::InPlace);
    }

    #[tokio::test]
    async fn delete_is_done_when_accepted_or_gone() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("DELETE {POLICIES}/q1"), 204, Value::Null);
        let (slot, _host) = testing::bound(Some(session));
        let plugin = QosPolicy::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({})));
        ctx.state.physical_id = Some("q1".into());
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls().len(), 1, "no look after the delete");
        ctx.state.physical_id = Some("gone".into());
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
    }
}
