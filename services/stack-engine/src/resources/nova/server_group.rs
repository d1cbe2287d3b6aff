//! OS::Nova::ServerGroup: a Nova server group.
//!
//! Physical id (and `get_resource`) = the group's id; its name is `name`,
//! else the physical name. Every change replaces the group; a FAILED
//! group is replaced only when Nova no longer has it. From
//! microversion 2.64 Nova takes one `policy` (the first of `policies`)
//! and `rules`; before it the `policies` list. The soft policies need
//! 2.15 and `rules` needs 2.64: Heat checks both at validation, where it
//! asks Nova; this engine asks at create.

use std::sync::Arc;

use keelson_openstack::compute::{Compute, SERVER_GROUP_RULES, SOFT_POLICIES};
use keelson_openstack::Session;
use serde_json::{json, Value};

use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{ActionContext, ActionResult, HostSlot, Plugin, ResourceFailure, ResourceState, SupportStatus};
use super::{compute, create_in_stack, delete_in_stack, failure, ok_if_gone, stack_session, str_prop, NovaActions};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct ServerGroup {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl ServerGroup {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("name", T::String, "Server Group name."),
            PropertySchema::new(
                "policies",
                T::List,
                "A list of exactly one policy to apply. Defaults to anti-affinity.",
            )
            .default_value(json!(["anti-affinity"]))
            .constraint(Constraint::allowed_values([
                "anti-affinity",
                "affinity",
                "soft-anti-affinity",
                "soft-affinity",
            ]))
            .list_of(PropertySchema::new("*", T::String, "")),
            PropertySchema::new("rules", T::Map, "Rules for a policy.").map_of(vec![PropertySchema::new(
                "max_server_per_host",
                T::Number,
                "Maximum servers in a group on a given host. Rule for anti-affinity policy.",
            )]),
        ];
        ServerGroup {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::supported("2014.2"),
                description: "A resource for managing a Nova server group.\n\nServer groups allow you to make sure instances (VM/VPS) are on the same\nhypervisor host or on a different one.",
            },
        }
    }

    fn policies(ctx: &ActionContext) -> Vec<String> {
        let given = ctx.properties.get("policies").and_then(Value::as_array);
        given.into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    }
}

impl NovaActions for ServerGroup {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, _: &Session, compute: &Compute<'_>, ctx: &mut ActionContext) -> ActionResult {
        let policies = Self::policies(ctx);
        if policies.iter().any(|p| p.starts_with("soft-")) && !compute.supports(SOFT_POLICIES) {
            return Err(ResourceFailure::error(
                "StackValidationFailed",
                "Required microversion for soft policies not supported.",
            ));
        }
        let rules = ctx.properties.get("rules").and_then(Value::as_object).filter(|r| !r.is_empty());
        if rules.is_some() && !compute.supports(SERVER_GROUP_RULES) {
            return Err(ResourceFailure::error(
                "StackValidationFailed",
                "Required microversion for rules not supported.",
            ));
        }
        let name = str_prop(&ctx.properties, "name").map_or_else(|| ctx.physical_name(), str::to_owned);
        let body = compute.server_group_body(&name, &policies, rules);
        let id = compute.create_server_group(&body).await.map_err(failure)?;
        ctx.state.physical_id = Some(id);
        Ok(())
    }

    async fn delete_with(&self, _: &Session, compute: &Compute<'_>, _: &mut ActionContext, id: &str) -> ActionResult {
        ok_if_gone(compute.delete_server_group(id).await)
    }
}

impl Plugin for ServerGroup {
    const TYPE: &'static str = "OS::Nova::ServerGroup";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NOVA)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    /// Heat's: a FAILED group still in Nova is kept (not replaced).
    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(true) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        compute.server_group_exists(&id).await.map(|exists| !exists).map_err(failure)
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::{Properties, UpdateDecision};
    use super::super::testing;
    use super::*;

    fn group() -> ServerGroup {
        ServerGroup::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&group(), "g", &v).unwrap()
    }

    const GROUPS: &str = "/compute/v2.1/os-server-groups";

    #[tokio::test]
    async fn policy_and_rules_from_2_64() {
        let (nova, session) = testing::nova("2.96").await;
        nova.answer(&format!("POST {GROUPS}"), 200, json!({"server_group": {"id": "gid", "name": "web"}}));
        let (mut ctx, _tx) = test_context(props(json!({"name": "web", "rules": {"max_server_per_host": 2}})));
        let compute = super::super::compute(&session).await.unwrap();
        group().create_with(&session, &compute, &mut ctx).await.unwrap();
        assert_eq!(
            nova.calls(),
            [(
                "POST".into(),
                GROUPS.into(),
                json!({"server_group": {"name": "web", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}})
            )]
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("gid"));
    }

    #[tokio::test]
    async fn policies_before_2_64_and_version_checks() {
        let (nova, session) = testing::nova("2.15").await;
        nova.answer(&format!("POST {GROUPS}"), 200, json!({"server_group": {"id": "gid"}}));
        let compute = super::super::compute(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"policies": ["soft-affinity"]})));
        group().create_with(&session, &compute, &mut ctx).await.unwrap();
        let body = &nova.calls()[0].2;
        assert_eq!(body["server_group"]["policies"], json!(["soft-affinity"]));
        assert!(body["server_group"]["name"].as_str().unwrap().starts_with("st-r-"));
        let (mut ctx, _tx) = test_context(props(json!({"rules": {"max_server_per_host": 1}})));
        assert_eq!(
            group().create_with(&session, &compute, &mut ctx).await,
            Err(ResourceFailure::error("StackValidationFailed", "Required microversion for rules not supported."))
        );
        let (_old, session) = testing::nova("2.14").await;
        let compute = super::super::compute(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"policies": ["soft-anti-affinity"]})));
        assert_eq!(
            group().create_with(&session, &compute, &mut ctx).await,
            Err(ResourceFailure::error(
                "StackValidationFailed",
                "Required microversion for soft policies not supported."
            ))
        );
    }

    #[test]
    fn policies_are_checked_and_every_change_replaces() {
        let e = Plugin::validate_properties(&group(), "g", &json!({"policies": ["spread"]})).unwrap_err();
        assert!(e.message().contains("spread"), "{}", e.message());
        assert_eq!(
            Plugin::update_decision(&group(), &props(json!({})), &props(json!({"name": "x"}))),
            UpdateDecision::Replace
        );
    }

    #[tokio::test]
    async fn a_failed_group_still_in_nova_is_kept() {
        let (nova, session) = testing::nova("2.96").await;
        nova.answer(&format!("GET {GROUPS}/gid"), 200, json!({"server_group": {"id": "gid"}}));
        let (slot, _host) = testing::bound(Some(session));
        let g = ServerGroup::new(slot);
        let (mut ctx, _tx) = test_context(props(json!({})));
        assert_eq!(Plugin::needs_replace_failed(&g, &mut ctx).await, Ok(true));
        ctx.state.physical_id = Some("gid".into());
        assert_eq!(Plugin::needs_replace_failed(&g, &mut ctx).await, Ok(false));
        ctx.state.physical_id = Some("gone".into());
        assert_eq!(Plugin::needs_replace_failed(&g, &mut ctx).await, Ok(true));
    }

    #[tokio::test]
    async fn delete_of_a_gone_group_is_done() {
        let (_nova, session) = testing::nova("2.96").await;
        let compute = super::super::compute(&session).await.unwrap();
        assert_eq!(ok_if_gone(compute.delete_server_group("gone").await), Ok(()));
    }
}
