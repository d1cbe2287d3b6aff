//! OS::Neutron::FloatingIP and OS::Neutron::FloatingIPAssociation.
//!
//! A FloatingIP's physical id is the floating IP's id. Its network and
//! subnet are names or ids resolved through Neutron when it is created
//! (the hidden `floating_network_id` becomes `floating_network`); Neutron
//! shows it at once, so a create does not wait; a delete waits until
//! Neutron answers 404. An update moves it to `port_id` and
//! `fixed_ip_address` as they now are, whichever property changed (as
//! Heat does: a changed `dns_name` or `dns_domain` is not sent).
//!
//! Heat also makes a FloatingIP depend on the router gateways, routers
//! and router interfaces of the same stack that lead to its network or
//! its port's subnet; the engine has no hook for a type to add
//! dependencies, so a template says that with `depends_on`. The same
//! holds for a FloatingIPAssociation and the router interfaces on its
//! port's subnet.
//!
//! A FloatingIPAssociation moves an existing floating IP onto a port; as
//! in Heat its physical id is the resource's own row id, and its delete
//! takes the floating IP off whatever port it is on.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::network::{Network, FLOATING_IP, NETWORK, SUBNET};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, StackMember,
    SupportStatus,
};
use super::{
    conflict_retryable, create_fields, create_in_stack, delete_in_stack, delete_until_gone, failure,
    failure_as_attribute_error, find_id, object_attribute, remember, replace_deprecated, replace_failed, set_str,
    truthy, update_in_stack, with_delete_retries, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

const PORT_TEXT: &str = "ID of an existing port with at least one IP address to associate with this floating IP.";
const FIXED_IP_TEXT: &str = "IP address to use if the port has multiple addresses.";

pub struct FloatingIp {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl FloatingIp {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("floating_network_id", T::String, "")
                .constraint(Constraint::custom("neutron.network"))
                .hidden(),
            PropertySchema::new("floating_network", T::String, "Network to allocate floating IP from.")
                .required()
                .constraint(Constraint::custom("neutron.network")),
            PropertySchema::new("floating_subnet", T::String, "Subnet to allocate floating IP from.")
                .constraint(Constraint::custom("neutron.subnet")),
            PropertySchema::new(
                "value_specs",
                T::Map,
                "Extra parameters to include in the \"floatingip\" object in the creation request. Parameters are often specific to installed hardware or extensions.",
            )
            .default_value(json!({})),
            PropertySchema::new("port_id", T::String, PORT_TEXT)
                .update_allowed()
                .constraint(Constraint::custom("neutron.port")),
            PropertySchema::new("fixed_ip_address", T::String, FIXED_IP_TEXT)
                .update_allowed()
                .constraint(Constraint::custom("ip_addr")),
            PropertySchema::new(
                "floating_ip_address",
                T::String,
                "IP address of the floating IP. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
            )
            .constraint(Constraint::custom("ip_addr")),
            PropertySchema::new("dns_name", T::String, "DNS name associated with floating ip.")
                .update_allowed()
                .constraint(Constraint::custom("rel_dns_name")),
            PropertySchema::new("dns_domain", T::String, "DNS domain associated with floating ip.")
                .update_allowed()
                .constraint(Constraint::custom("dns_domain")),
        ];
        let attributes = vec![
            AttributeSchema::new(
                "router_id",
                "ID of the router used as gateway, set when associated with a port.",
                Some("string"),
            ),
            AttributeSchema::new("tenant_id", "The tenant owning this floating IP.", Some("string")),
            AttributeSchema::new(
                "floating_network_id",
                "ID of the network in which this IP is allocated.",
                Some("string"),
            ),
            AttributeSchema::new(
                "fixed_ip_address",
                "IP address of the associated port, if specified.",
                Some("string"),
            ),
            AttributeSchema::new("floating_ip_address", "The allocated address of this IP.", Some("string")),
            AttributeSchema::new("port_id", "ID of the port associated with this IP.", Some("string")),
        ];
        FloatingIp {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource for managing Neutron floating ips.\n\nFloating IP addresses can change their association between routers by\naction of the user. One of the most common use cases for floating IPs is\nto provide public IP addresses to a private cloud, where there are a\nlimited number of IP addresses available. Another is for a public cloud\nuser to have a \"static\" IP address that can be reassigned when an instance\nis upgraded or moved.",
            },
        }
    }

    /// Heat's create body: the set properties with `value_specs` merged,
    /// the network and subnet resolved to `floating_network_id` and
    /// `subnet_id`.
    async fn create_body(network: &Network<'_>, props: &Properties) -> Result<Map<String, Value>, ResourceFailure> {
        // No `name` property: the physical name is not part of the body.
        let mut fields = create_fields(props, String::new());
        fields.remove("floating_network_id");
        let net = fields.remove("floating_network").unwrap_or_default();
        let net_id = find_id(network, NETWORK, net.as_str().unwrap_or_default()).await?;
        fields.insert("floating_network_id".into(), json!(net_id));
        if let Some(subnet) = fields.remove("floating_subnet") {
            let subnet_id = find_id(network, SUBNET, subnet.as_str().unwrap_or_default()).await?;
            fields.insert("subnet_id".into(), json!(subnet_id));
        }
        Ok(fields)
    }
}

impl NeutronActions for FloatingIp {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let fields = Self::create_body(network, &ctx.properties).await?;
        let created = network.create(FLOATING_IP, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a floating IP without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id);
        remember(ctx, created);
        Ok(())
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        if super::changed(old, &ctx.properties).is_empty() {
            return Ok(());
        }
        let mut fields = Map::new();
        for key in ["port_id", "fixed_ip_address"] {
            fields.insert(key.into(), ctx.properties.get(key).cloned().unwrap_or(Value::Null));
        }
        network.update(FLOATING_IP, &id, fields).await.map_err(failure)
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        delete_until_gone(ctx, network, FLOATING_IP, id).await
    }
}

impl Plugin for FloatingIp {
    const TYPE: &'static str = "OS::Neutron::FloatingIP";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NEUTRON)
    }

    /// Upstream `add_dependencies` (see [`super::dependencies`]).
    fn implicit_requirements(
        &self,
        this: &StackMember<'_>,
        explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        super::dependencies::floating_ip(this, explicit, stack)
    }

    /// Heat's translation: a given `floating_network_id` is `floating_network`.
    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let given = replace_deprecated(given, &[("floating_network", "floating_network_id")])?;
        let props = super::super::validate_properties(&self.schema, resource_name, &given)?;
        self.validate(&props)?;
        Ok(props)
    }

    /// Heat's check; its `value_specs` check does not apply here (Heat
    /// drops that check's answer for floating IPs).
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        if set_str(props, "port_id").is_none() && props.get("fixed_ip_address").is_some_and(|v| !v.is_null()) {
            return Err(EngineError::validation("fixed_ip_address cannot be specified without port_id."));
        }
        Ok(())
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
        replace_failed(&self.host, ctx, FLOATING_IP).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        object_attribute(&self.host, state, FLOATING_IP, name).await
    }
}

pub struct FloatingIpAssociation {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// What Heat meets when it asks Neutron to show an association: it has
/// no Neutron object of its own, and Heat's lookup of one fails.
fn no_object_of_its_own() -> ResourceFailure {
    ResourceFailure::error("TypeError", "can only concatenate str (not \"NoneType\") to str")
}

/// Puts the floating IP `fip` onto `port_id` (`fixed_ip_address`).
async fn associate(network: &Network<'_>, fip: &str, fields: Map<String, Value>) -> Result<(), OsError> {
    network.update(FLOATING_IP, fip, fields).await
}

/// Takes the floating IP `fip` off its port; one Neutron no longer has is off.
async fn disassociate(network: &Network<'_>, fip: &str) -> Result<(), OsError> {
    let mut fields = Map::new();
    fields.insert("port_id".into(), Value::Null);
    match associate(network, fip, fields).await {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl FloatingIpAssociation {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("floatingip_id", T::String, "ID of the floating IP to associate.")
                .required()
                .update_allowed(),
            PropertySchema::new("port_id", T::String, PORT_TEXT)
                .required()
                .update_allowed()
                .constraint(Constraint::custom("neutron.port")),
            PropertySchema::new("fixed_ip_address", T::String, FIXED_IP_TEXT)
                .update_allowed()
                .constraint(Constraint::custom("ip_addr")),
        ];
        FloatingIpAssociation {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::default(),
                description: "A resource for associating floating ips and ports.\n\nThis resource allows associating a floating IP to a port with at least one\nIP address to associate with this floating IP.",
            },
        }
    }
}

impl NeutronActions for FloatingIpAssociation {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let mut fields = create_fields(&ctx.properties, String::new());
        let fip = fields.remove("floatingip_id").unwrap_or_default();
        associate(network, fip.as_str().unwrap_or_default(), fields).await.map_err(failure)?;
        ctx.state.physical_id = Some(ctx.resource_id.to_string());
        Ok(())
    }

    /// Heat's update: a new floating IP first frees the old one; then the
    /// (new) floating IP goes onto the port, each value the new one if it
    /// is set, else the old one.
    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let diff = super::changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let old_fip = set_str(old, "floatingip_id").unwrap_or_default();
        if diff.contains_key("floatingip_id") {
            disassociate(network, old_fip).await.map_err(failure)?;
        }
        let pick = |key: &str| diff.get(key).filter(|v| truthy(v)).or_else(|| old.get(key)).cloned();
        let fip = pick("floatingip_id").unwrap_or_default();
        let mut fields = Map::new();
        for key in ["port_id", "fixed_ip_address"] {
            fields.insert(key.into(), pick(key).unwrap_or(Value::Null));
        }
        associate(network, fip.as_str().unwrap_or_default(), fields).await.map_err(failure)?;
        ctx.state.physical_id = Some(ctx.resource_id.to_string());
        Ok(())
    }

    /// Takes the floating IP off its port.
    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, _id: &str) -> ActionResult {
        let fip = set_str(&ctx.properties, "floatingip_id").unwrap_or_default().to_string();
        let fip = &fip;
        with_delete_retries(ctx, move || async move { conflict_retryable(disassociate(network, fip).await) }).await
    }

    fn deletable_id(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.physical_id.clone().filter(|id| !id.is_empty())
    }
}

impl Plugin for FloatingIpAssociation {
    const TYPE: &'static str = "OS::Neutron::FloatingIPAssociation";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NEUTRON)
    }

    /// Upstream `add_dependencies` (see [`super::dependencies`]).
    fn implicit_requirements(
        &self,
        _this: &StackMember<'_>,
        explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        super::dependencies::floating_ip_association(explicit, stack)
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

    /// Heat's NeutronResource asks Neutron for the object, which an
    /// association does not have: with a physical id that fails.
    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        match ctx.state.physical_id {
            None => Ok(true),
            Some(_) => Err(no_object_of_its_own()),
        }
    }

    /// Only `show`, which fails in Heat the same way once there is a
    /// physical id.
    async fn attribute(&self, state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        match state.physical_id {
            None => Ok(Value::Null),
            Some(_) => Err(failure_as_attribute_error(no_object_of_its_own())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::network;
    use super::super::testing;
    use super::*;

    fn fip() -> FloatingIp {
        FloatingIp::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&fip(), "fip", &v).unwrap()
    }

    const FIPS: &str = "/network/v2.0/floatingips";

    #[tokio::test]
    async fn create_resolves_network_and_subnet_without_waiting() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=public&fields=id", 200, json!({"networks": [{"id": "ext"}]}));
        neutron.answer("GET /network/v2.0/subnets?name=pub-v4&fields=id", 200, json!({"subnets": [{"id": "s4"}]}));
        neutron.answer(
            &format!("POST {FIPS}"),
            201,
            json!({"floatingip": {"id": "f1", "floating_ip_address": "172.24.4.10", "status": "DOWN"}}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({
            "floating_network_id": "public", "floating_subnet": "pub-v4", "port_id": "p1",
            "value_specs": {"description": "web"}})));
        fip().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        assert_eq!(calls.len(), 3);
        assert_eq!(
            calls[2].2,
            json!({"floatingip": {"floating_network_id": "ext", "subnet_id": "s4", "port_id": "p1", "description": "web"}})
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("f1"));
        // Attributes answer from Neutron, as last seen without a trust.
        let (slot, _host) = testing::bound(None);
        let mut state = ctx.state.clone();
        state.data.remove(super::super::STACK_DATA);
        assert_eq!(FloatingIp::new(slot).attribute(&state, "floating_ip_address").await.unwrap(), json!("172.24.4.10"));
    }

    #[tokio::test]
    async fn update_moves_it_whatever_changed() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {FIPS}/f1"), 200, json!({"floatingip": {"id": "f1"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"floating_network": "public", "port_id": "p1", "fixed_ip_address": "10.0.0.5"}));
        let new = props(json!({"floating_network": "public", "port_id": "p1", "fixed_ip_address": "10.0.0.5",
            "dns_name": "web"}));
        assert_eq!(Plugin::update_decision(&fip(), &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.state.physical_id = Some("f1".into());
        fip().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[0].2, json!({"floatingip": {"port_id": "p1", "fixed_ip_address": "10.0.0.5"}}));
        // Leaving the port: both go null.
        let (mut ctx, _tx) = test_context(props(json!({"floating_network": "public"})));
        ctx.state.physical_id = Some("f1".into());
        fip().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[1].2, json!({"floatingip": {"port_id": null, "fixed_ip_address": null}}));
        let elsewhere = props(json!({"floating_network": "other"}));
        assert_eq!(Plugin::update_decision(&fip(), &old, &elsewhere), UpdateDecision::Replace);
    }

    #[tokio::test]
    async fn delete_waits_for_the_404() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("DELETE {FIPS}/f1"), 204, Value::Null);
        let (slot, _host) = testing::bound(Some(session));
        let (mut ctx, _tx) = test_context(props(json!({"floating_network": "public"})));
        ctx.state.physical_id = Some("f1".into());
        Plugin::delete(&FloatingIp::new(slot), &mut ctx).await.unwrap();
        let calls: Vec<_> = neutron.calls().into_iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(calls, [format!("DELETE {FIPS}/f1"), format!("GET {FIPS}/f1")]);
    }

    #[test]
    fn checks_as_heat() {
        let invalid = |v: Value| Plugin::validate_properties(&fip(), "fip", &v).unwrap_err().message();
        assert_eq!(
            invalid(json!({"floating_network": "public", "fixed_ip_address": "10.0.0.5"})),
            "fixed_ip_address cannot be specified without port_id."
        );
        assert_eq!(
            invalid(json!({"floating_network": "public", "floating_network_id": "other"})),
            "Cannot define the following properties at the same time: floating_network, floating_network_id"
        );
        // Heat does not check value_specs here.
        assert!(Plugin::validate_properties(
            &fip(),
            "fip",
            &json!({"floating_network": "n", "value_specs": {"port_id": "p"}})
        )
        .is_ok());
    }
    fn assoc() -> FloatingIpAssociation {
        FloatingIpAssociation::new(Arc::new(HostSlot::default()))
    }

    fn assoc_props(v: Value) -> Properties {
        Plugin::validate_properties(&assoc(), "a", &v).unwrap()
    }

    #[tokio::test]
    async fn an_association_puts_the_floating_ip_on_the_port() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {FIPS}/f1"), 200, json!({"floatingip": {"id": "f1"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(assoc_props(json!({"floatingip_id": "f1", "port_id": "p1"})));
        ctx.resource_id = 42;
        assoc().create_with(&network, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls()[0].2, json!({"floatingip": {"port_id": "p1"}}));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("42"));
        // Deleted: off the port; a floating IP Neutron no longer has is off.
        let (slot, _host) = testing::bound(Some(session));
        let plugin = FloatingIpAssociation::new(slot);
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls()[1], ("PUT".into(), format!("{FIPS}/f1"), json!({"floatingip": {"port_id": null}})));
        ctx.properties.insert("floatingip_id".into(), json!("gone"));
        Plugin::delete(&plugin, &mut ctx).await.unwrap();
        // No physical id, no object: show is null; with one Heat's lookup fails.
        assert_eq!(
            Plugin::needs_replace_failed(&plugin, &mut ctx).await,
            Err(ResourceFailure::error("TypeError", "can only concatenate str (not \"NoneType\") to str"))
        );
        assert_eq!(plugin.attribute(&ResourceState::default(), "show").await.unwrap(), Value::Null);
    }

    #[tokio::test]
    async fn an_association_update_frees_the_old_floating_ip() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {FIPS}/f1"), 200, json!({"floatingip": {"id": "f1"}}));
        neutron.answer(&format!("PUT {FIPS}/f2"), 200, json!({"floatingip": {"id": "f2"}}));
        let network = network(&session).await.unwrap();
        let old = assoc_props(json!({"floatingip_id": "f1", "port_id": "p1", "fixed_ip_address": "10.0.0.5"}));
        let new = assoc_props(json!({"floatingip_id": "f2", "port_id": "p1"}));
        assert_eq!(Plugin::update_decision(&assoc(), &old, &new), UpdateDecision::InPlace);
        let (mut ctx, _tx) = test_context(new);
        ctx.resource_id = 42;
        assoc().update_with(&network, &mut ctx, &old).await.unwrap();
        let calls = neutron.calls();
        assert_eq!(calls[0], ("PUT".into(), format!("{FIPS}/f1"), json!({"floatingip": {"port_id": null}})));
        // A cleared fixed_ip_address keeps the old one, as Heat's `or` does.
        assert_eq!(
            calls[1],
            (
                "PUT".into(),
                format!("{FIPS}/f2"),
                json!({"floatingip": {"port_id": "p1", "fixed_ip_address": "10.0.0.5"}})
            )
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("42"));
    }
}
