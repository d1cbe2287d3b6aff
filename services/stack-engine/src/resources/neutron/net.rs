//! OS::Neutron::Net: a Neutron network.
//!
//! Physical id = the network's id. Create posts the set properties
//! (`qos_policy` resolved to `qos_policy_id`), then schedules the
//! `dhcp_agent_ids` and sets `tags`, and waits until the network is
//! ACTIVE or DOWN; an update puts what changed and waits the same way.
//! Only `tenant_id` and `availability_zone_hints` replace the network.

use std::sync::Arc;

use keelson_openstack::network::{Network, NETWORK, QOS_POLICY, SEGMENT};
use keelson_openstack::OsError;
use serde_json::{json, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    attribute_error, attribute_session, changed, check_value_specs, create_fields, create_in_stack, delete_in_stack,
    delete_until_gone, failure, find_id, object_attribute, replace_failed, set_tags, update_fields, update_in_stack,
    wait_built, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct Net {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl Net {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new(
                "name",
                T::String,
                "A string specifying a symbolic name for the network, which is not required to be unique.",
            )
            .update_allowed(),
            PropertySchema::new(
                "value_specs",
                T::Map,
                "Extra parameters to include in the request. Parameters are often specific to installed hardware or extensions.",
            )
            .default_value(json!({}))
            .update_allowed(),
            PropertySchema::new(
                "admin_state_up",
                T::Boolean,
                "A boolean value specifying the administrative status of the network.",
            )
            .default_value(true)
            .update_allowed(),
            PropertySchema::new(
                "tenant_id",
                T::String,
                "The ID of the tenant which will own the network. Only administrative users can set the tenant identifier; this cannot be changed using authorization policies.",
            ),
            PropertySchema::new(
                "shared",
                T::Boolean,
                "Whether this network should be shared across all tenants. Note that the default policy setting restricts usage of this attribute to administrative users only.",
            )
            .default_value(false)
            .update_allowed(),
            PropertySchema::new(
                "dhcp_agent_ids",
                T::List,
                "The IDs of the DHCP agent to schedule the network. Note that the default policy setting in Neutron restricts usage of this property to administrative users only.",
            )
            .update_allowed(),
            PropertySchema::new(
                "port_security_enabled",
                T::Boolean,
                "Flag to enable/disable port security on the network. It provides the default value for the attribute of the ports created on this network.",
            )
            .update_allowed(),
            PropertySchema::new("qos_policy", T::String, "The name or ID of QoS policy to attach to this network.")
                .update_allowed()
                .constraint(Constraint::custom("neutron.qos_policy")),
            PropertySchema::new("dns_domain", T::String, "DNS domain associated with this network.")
                .update_allowed()
                .constraint(Constraint::custom("dns_domain")),
            PropertySchema::new(
                "availability_zone_hints",
                T::List,
                "Availability zone candidates for the network. It requires the availability_zone extension to be available.",
            ),
            PropertySchema::new("tags", T::List, "The tags to be added to the network.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::String, "")),
        ];
        let attributes = vec![
            AttributeSchema::new("status", "The status of the network.", Some("string")),
            AttributeSchema::new("name", "The name of the network.", Some("string")),
            AttributeSchema::new("subnets", "Subnets of this network.", Some("list")),
            AttributeSchema::new("admin_state_up", "The administrative status of the network.", Some("string")),
            AttributeSchema::new("tenant_id", "The tenant owning this network.", Some("string")),
            AttributeSchema::new("port_security_enabled", "Port security enabled of the network.", Some("boolean")),
            AttributeSchema::new(
                "mtu",
                "The maximum transmission unit size(in bytes) for the network.",
                Some("integer"),
            ),
            AttributeSchema::new("qos_policy_id", "The QoS policy ID attached to this network.", Some("string")),
            AttributeSchema::new(
                "l2_adjacency",
                "A boolean value for L2 adjacency, True means that you can expect L2 connectivity throughout the Network.",
                Some("boolean"),
            ),
            AttributeSchema::new("segments", "The segments of this network.", Some("list")),
        ];
        Net {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource for managing Neutron net.\n\nA network is a virtual isolated layer-2 broadcast domain which is typically\nreserved to the tenant who created it, unless the network has been\nexplicitly configured to be shared.",
            },
        }
    }
}

impl NeutronActions for Net {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&ctx.properties, name);
        let agents = fields.remove("dhcp_agent_ids");
        let qos_policy = fields.remove("qos_policy");
        let tags = fields.remove("tags");
        if let Some(policy) = qos_policy.as_ref().and_then(Value::as_str).filter(|p| !p.is_empty()) {
            fields.insert("qos_policy_id".into(), json!(find_id(network, QOS_POLICY, policy).await?));
        }
        let created = network.create(NETWORK, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a network without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id.clone());
        if let Some(agents) = agents.as_ref().and_then(Value::as_array).filter(|a| !a.is_empty()) {
            replace_dhcp_agents(network, &id, agents).await?;
        }
        if let Some(tags) = tags.filter(|t| t.as_array().is_some_and(|t| !t.is_empty())) {
            set_tags(network, NETWORK, &id, &tags).await?;
        }
        wait_built(ctx, network, NETWORK, &id).await
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let mut fields = update_fields(ctx, old, diff);
        if let Some(agents) = fields.remove("dhcp_agent_ids") {
            replace_dhcp_agents(network, &id, agents.as_array().map_or(&[][..], Vec::as_slice)).await?;
        }
        if let Some(policy) = fields.remove("qos_policy") {
            let policy_id = match policy.as_str().filter(|p| !p.is_empty()) {
                Some(p) => json!(find_id(network, QOS_POLICY, p).await?),
                None => Value::Null,
            };
            fields.insert("qos_policy_id".into(), policy_id);
        }
        if let Some(tags) = fields.remove("tags") {
            set_tags(network, NETWORK, &id, &tags).await?;
        }
        if !fields.is_empty() {
            network.update(NETWORK, &id, fields).await.map_err(failure)?;
        }
        wait_built(ctx, network, NETWORK, &id).await
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        delete_until_gone(ctx, network, NETWORK, id).await
    }
}

/// Schedules the network on exactly `wanted` DHCP agents: a 409 on add
/// (already there) and a 404 or 409 on removal (gone, not scheduled) are
/// what was wanted.
async fn replace_dhcp_agents(network: &Network<'_>, id: &str, wanted: &[Value]) -> Result<(), ResourceFailure> {
    let current = network.dhcp_agent_ids(id).await.map_err(failure)?;
    let wanted: Vec<&str> = wanted.iter().filter_map(Value::as_str).collect();
    for agent in wanted.iter().filter(|a| !current.iter().any(|c| c == *a)) {
        match network.add_network_to_dhcp_agent(agent, id).await {
            Ok(()) | Err(OsError::Conflict(_)) => {}
            Err(e) => return Err(failure(e)),
        }
    }
    for agent in current.iter().filter(|c| !wanted.contains(&c.as_str())) {
        match network.remove_network_from_dhcp_agent(agent, id).await {
            Ok(()) | Err(OsError::Conflict(_) | OsError::NotFound(_)) => {}
            Err(e) => return Err(failure(e)),
        }
    }
    Ok(())
}

impl Plugin for Net {
    const TYPE: &'static str = "OS::Neutron::Net";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NEUTRON)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        check_value_specs(props)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        replace_failed(&self.host, ctx, NETWORK).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        if name != "segments" {
            return object_attribute(&self.host, state, NETWORK, name).await;
        }
        let (Some(id), Some(session)) = (&state.physical_id, attribute_session(&self.host, state).await?) else {
            return Ok(Value::Null);
        };
        let network = Network::connect(&session).await.map_err(attribute_error)?;
        let mut segments = network.list(SEGMENT, &[("network_id", id)]).await.map_err(attribute_error)?;
        // Heat lists the segments without a name first.
        segments.sort_by_key(|s| !s.get("name").is_none_or(Value::is_null));
        Ok(Value::Array(segments))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::network;
    use super::super::testing;
    use super::*;

    fn net() -> Net {
        Net::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&net(), "net", &v).unwrap()
    }

    const NETS: &str = "/network/v2.0/networks";

    #[tokio::test]
    async fn create_posts_the_set_properties_and_waits_until_active() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/qos/policies?name=gold&fields=id", 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(&format!("POST {NETS}"), 201, json!({"network": {"id": "n1", "status": "BUILD"}}));
        neutron.answer(&format!("GET {NETS}/n1/dhcp-agents"), 200, json!({"agents": [{"id": "a0"}]}));
        neutron.answer("POST /network/v2.0/agents/a1/dhcp-networks", 201, json!({}));
        neutron.answer("DELETE /network/v2.0/agents/a0/dhcp-networks/n1", 204, Value::Null);
        neutron.answer(&format!("PUT {NETS}/n1/tags"), 200, json!({"tags": ["x"]}));
        neutron.answer(&format!("GET {NETS}/n1"), 200, json!({"network": {"id": "n1", "status": "BUILD"}}));
        neutron.answer(
            &format!("GET {NETS}/n1"),
            200,
            json!({"network": {"id": "n1", "status": "ACTIVE", "mtu": 1450}}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({
            "qos_policy": "gold", "dhcp_agent_ids": ["a1"], "tags": ["x"],
            "value_specs": {"provider:network_type": "vxlan"}})));
        net().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        let (_, _, body) = &calls[1];
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap();
        assert!(name.starts_with("st-r-"));
        assert_eq!(
            body,
            &json!({"network": {"name": name, "admin_state_up": true, "shared": false,
                "qos_policy_id": "q1", "provider:network_type": "vxlan"}})
        );
        let paths: Vec<String> = calls.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(
            paths[2..],
            [
                format!("GET {NETS}/n1/dhcp-agents"),
                "POST /network/v2.0/agents/a1/dhcp-networks".into(),
                "DELETE /network/v2.0/agents/a0/dhcp-networks/n1".into(),
                format!("PUT {NETS}/n1/tags"),
                format!("GET {NETS}/n1"),
                format!("GET {NETS}/n1"),
            ]
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("n1"));
        let (slot, _host) = testing::bound(Some(session));
        assert_eq!(Net::new(slot).attribute(&ctx.state, "mtu").await.unwrap(), json!(1450));
    }

    #[tokio::test]
    async fn a_network_in_error_fails_the_create() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("POST {NETS}"), 201, json!({"network": {"id": "n1", "status": "BUILD"}}));
        neutron.answer(&format!("GET {NETS}/n1"), 200, json!({"network": {"id": "n1", "status": "ERROR"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"name": "net"})));
        assert_eq!(
            net().create_with(&network, &mut ctx).await,
            Err(ResourceFailure::error("ResourceInError", "Went to status ERROR due to \"Unknown\""))
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("n1"));
    }

    #[tokio::test]
    async fn update_puts_what_changed() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {NETS}/n1"), 200, json!({"network": {"id": "n1"}}));
        neutron.answer(&format!("PUT {NETS}/n1/tags"), 200, json!({"tags": []}));
        neutron.answer(&format!("GET {NETS}/n1"), 200, json!({"network": {"id": "n1", "status": "ACTIVE"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"name": "a", "tags": ["x"], "qos_policy": "q"}));
        let (mut ctx, _tx) = test_context(props(json!({"name": "b", "admin_state_up": false})));
        ctx.state.physical_id = Some("n1".into());
        net().update_with(&network, &mut ctx, &old).await.unwrap();
        let calls = neutron.calls();
        assert_eq!(calls[0], ("PUT".into(), format!("{NETS}/n1/tags"), json!({"tags": []})));
        assert_eq!(
            calls[1],
            (
                "PUT".into(),
                format!("{NETS}/n1"),
                json!({"network": {"name": "b", "admin_state_up": false, "qos_policy_id": null}})
            )
        );
    }

    #[test]
    fn replacement_and_value_specs_rules() {
        assert_eq!(
            Plugin::update_decision(&net(), &props(json!({})), &props(json!({"tenant_id": "t"}))),
            UpdateDecision::Replace
        );
        assert_ne!(
            Plugin::update_decision(&net(), &props(json!({})), &props(json!({"shared": true}))),
            UpdateDecision::Replace
        );
        let e = Plugin::validate_properties(&net(), "net", &json!({"value_specs": {"shared": true}})).unwrap_err();
        assert_eq!(e.message(), "shared not allowed in value_specs");
    }

    #[tokio::test]
    async fn segments_list_unnamed_first() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            "GET /network/v2.0/segments?network_id=n1",
            200,
            json!({"segments": [{"id": "s1", "name": "named"}, {"id": "s2", "name": null}]}),
        );
        let (slot, _host) = testing::bound(Some(session));
        let net = Net::new(slot);
        let mut state = ResourceState { physical_id: Some("n1".into()), ..Default::default() };
        state.data.insert(super::super::STACK_DATA.into(), "sid".into());
        assert_eq!(
            net.attribute(&state, "segments").await.unwrap(),
            json!([{"id": "s2", "name": null}, {"id": "s1", "name": "named"}])
        );
    }
}
