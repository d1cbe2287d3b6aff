//! OS::Neutron::Port: a Neutron port.
//!
//! Physical id = the port's id. `network` (or the hidden `network_id`),
//! each fixed IP's `subnet` (or its hidden `subnet_id`) and `qos_policy`
//! are names or ids resolved through Neutron; `security_groups` names
//! resolve in the stack's project. Unset `security_groups` leaves Neutron
//! its `default` group at create, and asks for `default` again when an
//! update unsets them; `[]` is no group. An empty `fixed_ips` lets Neutron
//! choose (create) or keeps the addresses (update); `no_fixed_ips` asks
//! for none. A create or update waits until the port is ACTIVE or DOWN;
//! `replacement_policy: REPLACE_ALWAYS` (hidden, deprecated) replaces it
//! on every update; before a replacement the old port gives up its fixed
//! IPs so that the new one can take them.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::network::{Network, NETWORK, PORT, QOS_POLICY, SUBNET};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    default_update_decision, ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState,
    StackMember, SupportStatus, UpdateDecision,
};
use super::{
    attribute_session, changed, create_fields, create_in_stack, delete_in_stack, delete_until_gone, failure, find_id,
    network, object_attribute, replace_deprecated, replace_deprecated_in_items, replace_failed, security_group_ids,
    set_tags, stack_session, truthy, update_fields, update_in_stack, wait_built, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct Port {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

/// Resource data: the fixed IPs the port had before it gave them up for
/// its replacement (Heat's `port_fip`).
const FREED_FIXED_IPS_DATA: &str = "port_fip";

impl Port {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let subnet = || Constraint::custom("neutron.subnet");
        let properties = vec![
            PropertySchema::new("name", T::String, "A symbolic name for this port.").update_allowed(),
            PropertySchema::new("network_id", T::String, "").constraint(Constraint::custom("neutron.network")).hidden(),
            PropertySchema::new(
                "network",
                T::String,
                "Network this port belongs to. If you plan to use current port to assign Floating IP, you should specify fixed_ips with subnet. Note if this changes to a different network update, the port will be replaced.",
            )
            .required()
            .constraint(Constraint::custom("neutron.network")),
            PropertySchema::new("device_id", T::String, "Device ID of this port.").default_value("").update_allowed(),
            PropertySchema::new(
                "device_owner",
                T::String,
                "Name of the network owning the port. The value is typically network:floatingip or network:router_interface or network:dhcp.",
            )
            .default_value("")
            .update_allowed(),
            PropertySchema::new("fixed_ips", T::List, "Desired IPs for this port.").update_allowed().list_of(
                PropertySchema::new("*", T::Map, "").map_of(vec![
                    PropertySchema::new("subnet_id", T::String, "").constraint(subnet()),
                    PropertySchema::new("subnet", T::String, "Subnet in which to allocate the IP address for this port.")
                        .constraint(subnet()),
                    PropertySchema::new("ip_address", T::String, "IP address desired in the subnet for this port.")
                        .constraint(Constraint::custom("ip_addr")),
                ]),
            ),
            PropertySchema::new("security_groups", T::List, "Security group IDs to associate with this port.")
                .update_allowed(),
            PropertySchema::new(
                "replacement_policy",
                T::String,
                "Policy on how to respond to a stack-update for this resource. REPLACE_ALWAYS will replace the port regardless of any property changes. AUTO will update the existing port for any changed update-allowed property.",
            )
            .default_value("AUTO")
            .constraint(Constraint::allowed_values(["REPLACE_ALWAYS", "AUTO"]))
            .update_allowed()
            .hidden(),
            PropertySchema::new("dns_name", T::String, "DNS name associated with the port.")
                .update_allowed()
                .constraint(Constraint::custom("dns_name")),
            PropertySchema::new("tags", T::List, "The tags to be added to the port.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::String, "")),
            PropertySchema::new("value_specs", T::Map, "Extra parameters to include in the request.")
                .default_value(json!({}))
                .update_allowed(),
            PropertySchema::new("admin_state_up", T::Boolean, "The administrative state of this port.")
                .default_value(true)
                .update_allowed(),
            PropertySchema::new(
                "mac_address",
                T::String,
                "MAC address to give to this port. The default update policy of this property in neutron is that allow admin role only.",
            )
            .constraint(Constraint::custom("mac_addr")),
            PropertySchema::new(
                "allowed_address_pairs",
                T::List,
                "Additional MAC/IP address pairs allowed to pass through the port.",
            )
            .update_allowed()
            .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                PropertySchema::new("mac_address", T::String, "MAC address to allow through this port.")
                    .constraint(Constraint::custom("mac_addr")),
                PropertySchema::new("ip_address", T::String, "IP address to allow through this port.")
                    .required()
                    .constraint(Constraint::custom("ip_or_cidr")),
            ])),
            PropertySchema::new(
                "binding:vnic_type",
                T::String,
                "The vnic type to be bound on the neutron port. To support SR-IOV PCI passthrough networking, you can request that the neutron port to be realized as normal (virtual nic), direct (pci passthrough), or macvtap (virtual interface with a tap-like software interface). Note that this only works for Neutron deployments that support the bindings extension.",
            )
            .constraint(Constraint::allowed_values([
                "normal",
                "direct",
                "macvtap",
                "direct-physical",
                "baremetal",
                "virtio-forwarder",
                "smart-nic",
            ]))
            .update_allowed()
            .default_value("normal"),
            PropertySchema::new(
                "port_security_enabled",
                T::Boolean,
                "Flag to enable/disable port security on the port. When disable this feature(set it to False), there will be no packages filtering, like security-group and address-pairs.",
            )
            .update_allowed(),
            PropertySchema::new("qos_policy", T::String, "The name or ID of QoS policy to attach to this port.")
                .constraint(Constraint::custom("neutron.qos_policy"))
                .update_allowed(),
            PropertySchema::new(
                "propagate_uplink_status",
                T::Boolean,
                "Flag to enable/disable propagate uplink status on the port.",
            )
            .update_allowed(),
            PropertySchema::new("no_fixed_ips", T::Boolean, "Flag to disable all fixed ips on the port.")
                .update_allowed()
                .default_value(false),
        ];
        let attributes = vec![
            AttributeSchema::new("admin_state_up", "The administrative state of this port.", Some("string")),
            AttributeSchema::new("device_id", "Unique identifier for the device.", Some("string")),
            AttributeSchema::new("device_owner", "Name of the network owning the port.", Some("string")),
            AttributeSchema::new("fixed_ips", "Fixed IP addresses.", Some("list")),
            AttributeSchema::new("mac_address", "MAC address of the port.", Some("string")),
            AttributeSchema::new("name", "Friendly name of the port.", Some("string")),
            AttributeSchema::new("network_id", "Unique identifier for the network owning the port.", Some("string")),
            AttributeSchema::new("security_groups", "A list of security groups for the port.", Some("list")),
            AttributeSchema::new("status", "The status of the port.", Some("string")),
            AttributeSchema::new("tenant_id", "Tenant owning the port.", Some("string")),
            AttributeSchema::new(
                "allowed_address_pairs",
                "Additional MAC/IP address pairs allowed to pass through a port.",
                Some("list"),
            ),
            AttributeSchema::new("subnets", "A list of all subnet attributes for the port.", Some("list")),
            AttributeSchema::new("port_security_enabled", "Port security enabled of the port.", Some("boolean")),
            AttributeSchema::new("qos_policy_id", "The QoS policy ID attached to this port.", Some("string")),
            AttributeSchema::new("dns_assignment", "The DNS assigned to this port.", Some("map")),
            AttributeSchema::new(
                "network",
                "The attributes of the network owning the port. (The full list of response parameters can be found in the `Openstack Networking service API reference <https://docs.openstack.org/api-ref/network/>`_.) The following examples demonstrate some (not all) possible expressions. (Obtains the network, the MTU (Maximum transmission unit), the network tags and the l2_adjacency property): ``{get_attr: [<port>, network]}``, ``{get_attr: [<port>, network, mtu]}``, ``{get_attr: [<port>, network, tags]}?``, ``{get_attr: [<port>, network, l2_adjacency]}``.",
                Some("map"),
            ),
            AttributeSchema::new(
                "propagate_uplink_status",
                "Enable/Disable propagate uplink status for the port.",
                Some("boolean"),
            ),
        ];
        Port {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource for managing Neutron ports.\n\nA port represents a virtual switch port on a logical network switch.\nVirtual instances attach their interfaces into ports. The logical port also\ndefines the MAC address and the IP address(es) to be assigned to the\ninterfaces plugged into them. When IP addresses are associated to a port,\nthis also implies the port is associated with a subnet, as the IP address\nwas taken from the allocation pool for a specific subnet.",
            },
        }
    }

    /// Heat's `prepare_for_replace`: the fixed IPs are kept in the data
    /// and taken off the port; a port Neutron no longer has has none.
    async fn free_fixed_ips_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let port = match network.show(PORT, &id).await {
            Ok(port) => port,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(failure(e)),
        };
        let fixed_ips = port.get("fixed_ips").cloned().unwrap_or_else(|| json!([]));
        ctx.state.data.insert(FREED_FIXED_IPS_DATA.into(), fixed_ips.to_string());
        let mut none = Map::new();
        none.insert("fixed_ips".into(), json!([]));
        match network.update(PORT, &id, none).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other.map_err(failure),
        }
    }

    /// Heat's `restore_prev_rsrc`: a rollback brings this port back in
    /// place of `replacement`, which gives up its fixed IPs so that this
    /// one takes back those it freed. A replacement Neutron no longer has
    /// holds none (Heat fails there; nothing is left to free).
    async fn restore_fixed_ips_with(
        &self,
        network: &Network<'_>,
        ctx: &mut ActionContext,
        replacement: Option<&str>,
    ) -> ActionResult {
        if let Some(new_port) = replacement {
            let mut none = Map::new();
            none.insert("fixed_ips".into(), json!([]));
            match network.update(PORT, new_port, none).await {
                Err(e) if e.is_not_found() => {}
                other => other.map(drop).map_err(failure)?,
            }
        }
        let freed = ctx.state.data.get(FREED_FIXED_IPS_DATA).and_then(|v| serde_json::from_str::<Value>(v).ok());
        let (Some(id), Some(freed)) = (ctx.state.physical_id.clone(), freed) else { return Ok(()) };
        if freed.as_array().is_none_or(Vec::is_empty) {
            return Ok(());
        }
        let mut restored = Map::new();
        restored.insert("fixed_ips".into(), freed);
        network.update(PORT, &id, restored).await.map(drop).map_err(failure)
    }

    /// Heat's `subnets`: each fixed IP's subnet as Neutron shows it;
    /// nothing when any of them cannot be read.
    async fn subnets(&self, state: &ResourceState) -> Result<Value, EngineError> {
        let (Some(id), Some(session)) = (&state.physical_id, attribute_session(&self.host, state).await?) else {
            return Ok(Value::Null);
        };
        let Ok(network) = Network::connect(&session).await else { return Ok(Value::Null) };
        let Ok(port) = network.show(PORT, id).await else { return Ok(Value::Null) };
        let mut subnets = Vec::new();
        let fixed_ips = port.get("fixed_ips").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        for subnet_id in fixed_ips.iter().filter_map(|ip| ip.get("subnet_id").and_then(Value::as_str)) {
            let Ok(subnet) = network.show(SUBNET, subnet_id).await else { return Ok(Value::Null) };
            subnets.push(Value::Object(subnet));
        }
        Ok(Value::Array(subnets))
    }

    /// Heat's `network`: the port's network as Neutron shows it; nothing
    /// when it cannot be read.
    async fn owning_network(&self, state: &ResourceState) -> Result<Value, EngineError> {
        let (Some(id), Some(session)) = (&state.physical_id, attribute_session(&self.host, state).await?) else {
            return Ok(Value::Null);
        };
        let Ok(network) = Network::connect(&session).await else { return Ok(Value::Null) };
        let Ok(port) = network.show(PORT, id).await else { return Ok(Value::Null) };
        let network_id = port.get("network_id").and_then(Value::as_str).unwrap_or_default();
        Ok(network.show(NETWORK, network_id).await.map(Value::Object).unwrap_or(Value::Null))
    }
}

impl NeutronActions for Port {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&ctx.properties, name);
        let net = fields.remove("network").map(|n| keelson_pyfmt::str_of(&n)).unwrap_or_default();
        fields.insert("network_id".into(), json!(find_id(network, NETWORK, &net).await?));
        port_fields(network, &mut fields, false).await?;
        let tags = fields.remove("tags");
        if let Some(policy) = fields.remove("qos_policy").filter(truthy) {
            let policy = keelson_pyfmt::str_of(&policy);
            fields.insert("qos_policy_id".into(), json!(find_id(network, QOS_POLICY, &policy).await?));
        }
        let created = network.create(PORT, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a port without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id.clone());
        if let Some(tags) = tags.filter(truthy) {
            set_tags(network, PORT, &id, &tags).await?;
        }
        wait_built(ctx, network, PORT, &id).await
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let mut diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let old = merge_binding_profile(network, &id, old, &mut diff).await?;
        let mut fields = update_fields(ctx, &old, diff);
        if let Some(policy) = fields.remove("qos_policy") {
            let policy_id = match policy.as_str().filter(|p| !p.is_empty()) {
                Some(p) => json!(find_id(network, QOS_POLICY, p).await?),
                None => Value::Null,
            };
            fields.insert("qos_policy_id".into(), policy_id);
        }
        if let Some(tags) = fields.remove("tags") {
            set_tags(network, PORT, &id, &tags).await?;
        }
        port_fields(network, &mut fields, true).await?;
        if !fields.is_empty() {
            network.update(PORT, &id, fields).await.map_err(failure)?;
        }
        wait_built(ctx, network, PORT, &id).await
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        delete_until_gone(ctx, network, PORT, id).await
    }
}

/// Heat's `_prepare_port_properties` on a create body or an update's
/// changes: fixed IPs (their subnets resolved and named `subnet_id`),
/// address pairs without an unset MAC, security groups as ids (unset on
/// update: the project's `default`), `replacement_policy` left out.
async fn port_fields(network: &Network<'_>, fields: &mut Map<String, Value>, for_update: bool) -> ActionResult {
    if fields.remove("no_fixed_ips").is_some_and(|v| truthy(&v)) {
        fields.insert("fixed_ips".into(), json!([]));
    } else if let Some(fixed_ips) = fields.remove("fixed_ips").filter(truthy) {
        let mut resolved = Vec::new();
        for fixed_ip in fixed_ips.as_array().map_or(&[][..], Vec::as_slice) {
            resolved.push(fixed_ip_fields(network, fixed_ip).await?);
        }
        fields.insert("fixed_ips".into(), Value::Array(resolved));
    }
    if let Some(pairs) = fields.get_mut("allowed_address_pairs") {
        match pairs {
            Value::Array(pairs) if !pairs.is_empty() => {
                for pair in pairs.iter_mut().filter_map(Value::as_object_mut) {
                    if pair.get("mac_address").is_some_and(Value::is_null) {
                        pair.remove("mac_address");
                    }
                }
            }
            other => *other = json!([]),
        }
    }
    match fields.get("security_groups") {
        Some(Value::Array(groups)) => {
            let ids = security_group_ids(network, groups).await?;
            fields.insert("security_groups".into(), Value::Array(ids));
        }
        Some(_) if for_update => {
            let ids = security_group_ids(network, &[json!("default")]).await?;
            fields.insert("security_groups".into(), Value::Array(ids));
        }
        _ => {}
    }
    fields.remove("replacement_policy");
    Ok(())
}

/// One fixed IP as Neutron takes it: unset keys left out, the subnet's
/// name or id resolved into `subnet_id`.
async fn fixed_ip_fields(network: &Network<'_>, fixed_ip: &Value) -> Result<Value, ResourceFailure> {
    let Value::Object(fixed_ip) = fixed_ip else { return Ok(fixed_ip.clone()) };
    let mut out: Map<String, Value> =
        fixed_ip.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
    if let Some(subnet) = out.remove("subnet") {
        let id = match subnet.as_str().filter(|s| !s.is_empty()) {
            Some(name_or_id) => json!(find_id(network, SUBNET, name_or_id).await?),
            None => subnet,
        };
        out.insert("subnet_id".into(), id);
    }
    Ok(Value::Object(out))
}

/// Heat's three-way merge of `value_specs`' `binding:profile`: the keys
/// the template changed are applied to the profile Neutron has now, so
/// that what Neutron set there itself (an SR-IOV `pci_slot`) stays. Fills
/// the merged profile into `diff` and answers the old properties to
/// compare `value_specs` with (without the profile, which is sent whole).
async fn merge_binding_profile(
    network: &Network<'_>,
    id: &str,
    old: &Properties,
    diff: &mut Map<String, Value>,
) -> Result<Properties, ResourceFailure> {
    const PROFILE: &str = "binding:profile";
    let Some(Value::Object(new_profile)) = diff.get("value_specs").and_then(|s| s.get(PROFILE)).cloned() else {
        return Ok(old.clone());
    };
    let current = network.show(PORT, id).await.map_err(failure)?;
    let Some(Value::Object(mut merged)) = current.get(PROFILE).cloned() else { return Ok(old.clone()) };
    let old_specs = old.get("value_specs").and_then(Value::as_object);
    let old_profile = old_specs.and_then(|s| s.get(PROFILE)).and_then(Value::as_object);
    for (key, value) in new_profile {
        if old_profile.and_then(|p| p.get(&key)).unwrap_or(&Value::Null) == &value {
            continue;
        }
        if value.is_null() {
            merged.remove(&key);
        } else {
            merged.insert(key, value);
        }
    }
    if let Some(Value::Object(specs)) = diff.get_mut("value_specs") {
        specs.insert(PROFILE.into(), Value::Object(merged));
    }
    let mut old = old.clone();
    if let Some(Value::Object(specs)) = old.get_mut("value_specs") {
        specs.remove(PROFILE);
    }
    Ok(old)
}

impl Plugin for Port {
    const TYPE: &'static str = "OS::Neutron::Port";

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
        _explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        super::dependencies::port(this, stack)
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let given = replace_deprecated(given, &[("network", "network_id")])?;
        let given = replace_deprecated_in_items(&given, "fixed_ips", &[("subnet", "subnet_id")])?;
        let props = super::super::validate_properties(&self.schema, resource_name, &given)?;
        self.validate(&props)?;
        Ok(props)
    }

    /// Heat's Port check. Its `value_specs` check is not applied: Port's
    /// `validate` drops the message its parent answers.
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        if props.get("fixed_ips").is_some_and(truthy) && props.get("no_fixed_ips").is_some_and(truthy) {
            return Err(EngineError::validation(
                "Cannot define the following properties at the same time: fixed_ips, no_fixed_ips.",
            ));
        }
        Ok(())
    }

    /// Heat's `needs_replace`: REPLACE_ALWAYS replaces the port on every
    /// update, changed or not.
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        if new.get("replacement_policy").and_then(Value::as_str) == Some("REPLACE_ALWAYS") {
            return UpdateDecision::Replace;
        }
        default_update_decision(&self.schema, old, new)
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

    async fn prepare_for_replace(&self, ctx: &mut ActionContext) -> ActionResult {
        if ctx.state.physical_id.is_none() {
            return Ok(());
        }
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        self.free_fixed_ips_with(&network, ctx).await
    }

    async fn restore_prev_rsrc(&self, ctx: &mut ActionContext, replacement: Option<&str>) -> ActionResult {
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let network = network(&session).await?;
        self.restore_fixed_ips_with(&network, ctx, replacement).await
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        replace_failed(&self.host, ctx, PORT).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        match name {
            "subnets" => self.subnets(state).await,
            "network" => self.owning_network(state).await,
            _ => object_attribute(&self.host, state, PORT, name).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::testing;
    use super::*;

    fn port() -> Port {
        Port::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&port(), "port", &v).unwrap()
    }

    const PORTS: &str = "/network/v2.0/ports";
    const GROUP_UUID: &str = "8a2d5c1e-3b4f-4e6a-9c7d-0e1f2a3b4c5d";

    #[tokio::test]
    async fn create_posts_the_resolved_port_and_waits_until_active() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
        neutron.answer("GET /network/v2.0/subnets?name=sub&fields=id", 200, json!({"subnets": [{"id": "s1"}]}));
        neutron.answer(
            "GET /network/v2.0/security-groups?project_id=p1&name=web",
            200,
            json!({"security_groups": [{"id": "g1"}]}),
        );
        neutron.answer("GET /network/v2.0/qos/policies?name=gold&fields=id", 200, json!({"policies": [{"id": "q1"}]}));
        neutron.answer(&format!("POST {PORTS}"), 201, json!({"port": {"id": "p1", "status": "BUILD"}}));
        neutron.answer(&format!("PUT {PORTS}/p1/tags"), 200, json!({"tags": ["x"]}));
        neutron.answer(&format!("GET {PORTS}/p1"), 200, json!({"port": {"id": "p1", "status": "BUILD"}}));
        neutron.answer(
            &format!("GET {PORTS}/p1"),
            200,
            json!({"port": {"id": "p1", "status": "DOWN", "mac_address": "fa:16:3e:00:00:01"}}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({
            "network": "private",
            "fixed_ips": [{"subnet": "sub", "ip_address": "10.0.0.5"}, {"ip_address": "10.0.0.6"}],
            "security_groups": ["web", GROUP_UUID],
            "allowed_address_pairs": [{"ip_address": "10.0.0.0/24"}],
            "qos_policy": "gold", "tags": ["x"], "replacement_policy": "AUTO",
            "value_specs": {"binding:host_id": "h1"}})));
        port().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        let (_, _, body) = calls.iter().find(|(m, _, _)| m == "POST").unwrap();
        let name = ctx.state.data.get(crate::resources::PHYSICAL_NAME_DATA).unwrap();
        assert_eq!(
            body,
            &json!({"port": {
                "name": name, "network_id": "n1", "device_id": "", "device_owner": "",
                "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.5"}, {"ip_address": "10.0.0.6"}],
                "security_groups": ["g1", GROUP_UUID],
                "allowed_address_pairs": [{"ip_address": "10.0.0.0/24"}],
                "admin_state_up": true, "binding:vnic_type": "normal", "qos_policy_id": "q1",
                "binding:host_id": "h1"}})
        );
        let paths: Vec<String> = calls.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(
            paths[paths.len() - 3..],
            [format!("PUT {PORTS}/p1/tags"), format!("GET {PORTS}/p1"), format!("GET {PORTS}/p1")]
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("p1"));
        let (slot, _host) = testing::bound(Some(session));
        assert_eq!(Port::new(slot).attribute(&ctx.state, "mac_address").await.unwrap(), json!("fa:16:3e:00:00:01"));
    }

    #[tokio::test]
    async fn unset_security_groups_are_left_to_neutron_and_an_empty_list_is_none() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
        neutron.answer(&format!("POST {PORTS}"), 201, json!({"port": {"id": "p1"}}));
        neutron.answer(&format!("GET {PORTS}/p1"), 200, json!({"port": {"id": "p1", "status": "ACTIVE"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"network": "private", "fixed_ips": []})));
        port().create_with(&network, &mut ctx).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"network": "private", "security_groups": []})));
        port().create_with(&network, &mut ctx).await.unwrap();
        let posted: Vec<Value> =
            neutron.calls().into_iter().filter(|(m, _, _)| m == "POST").map(|(_, _, b)| b["port"].clone()).collect();
        assert!(posted[0].get("security_groups").is_none() && posted[0].get("fixed_ips").is_none(), "{}", posted[0]);
        assert_eq!(posted[1]["security_groups"], json!([]));
    }

    #[tokio::test]
    async fn an_update_that_unsets_security_groups_asks_for_default() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            "GET /network/v2.0/security-groups?project_id=p1&name=default",
            200,
            json!({"security_groups": [{"id": "gd"}]}),
        );
        neutron.answer(&format!("PUT {PORTS}/p1"), 200, json!({"port": {"id": "p1"}}));
        neutron.answer(&format!("GET {PORTS}/p1"), 200, json!({"port": {"id": "p1", "status": "ACTIVE"}}));
        let network = network(&session).await.unwrap();
        let old =
            props(json!({"network": "n", "security_groups": [GROUP_UUID], "fixed_ips": [{"ip_address": "10.0.0.5"}],
            "name": "a"}));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n", "name": "b"})));
        ctx.state.physical_id = Some("p1".into());
        port().update_with(&network, &mut ctx, &old).await.unwrap();
        let calls = neutron.calls();
        let (_, _, body) = calls.iter().find(|(m, _, _)| m == "PUT").unwrap();
        // The removed fixed_ips are not sent: the port keeps its addresses.
        assert_eq!(body, &json!({"port": {"name": "b", "security_groups": ["gd"]}}));
    }

    #[tokio::test]
    async fn no_fixed_ips_takes_the_addresses_away() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {PORTS}/p1"), 200, json!({"port": {"id": "p1"}}));
        neutron.answer(&format!("GET {PORTS}/p1"), 200, json!({"port": {"id": "p1", "status": "ACTIVE"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"network": "n", "fixed_ips": [{"ip_address": "10.0.0.5"}]}));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n", "no_fixed_ips": true})));
        ctx.state.physical_id = Some("p1".into());
        port().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[0].2, json!({"port": {"fixed_ips": []}}));
    }

    #[tokio::test]
    async fn an_update_keeps_what_neutron_put_in_the_binding_profile() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            &format!("GET {PORTS}/p1"),
            200,
            json!({"port": {"id": "p1", "status": "ACTIVE",
                "binding:profile": {"pci_slot": "0000:05:00.1", "capabilities": ["switchdev"], "trusted": true}}}),
        );
        neutron.answer(&format!("PUT {PORTS}/p1"), 200, json!({"port": {"id": "p1"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"network": "n", "value_specs": {"binding:profile": {"capabilities": ["switchdev"],
            "trusted": true}, "k": 1}}));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n", "value_specs": {
            "binding:profile": {"capabilities": ["switchdev"], "trusted": null}, "k": 1}})));
        ctx.state.physical_id = Some("p1".into());
        port().update_with(&network, &mut ctx, &old).await.unwrap();
        let calls = neutron.calls();
        let (_, _, body) = calls.iter().find(|(m, _, _)| m == "PUT").unwrap();
        assert_eq!(
            body,
            &json!({"port": {"binding:profile": {"pci_slot": "0000:05:00.1", "capabilities": ["switchdev"]}}})
        );
    }

    #[tokio::test]
    async fn an_unknown_security_group_fails_as_heat() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
        neutron.answer(
            "GET /network/v2.0/security-groups?project_id=p1&name=nope",
            200,
            json!({"security_groups": []}),
        );
        neutron.answer(
            "GET /network/v2.0/security-groups?project_id=p1&name=twice",
            200,
            json!({"security_groups": [{"id": "g1"}, {"id": "g2"}]}),
        );
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"network": "private", "security_groups": ["nope"]})));
        assert_eq!(
            port().create_with(&network, &mut ctx).await,
            Err(ResourceFailure::error("EntityNotFound", "The Resource (nope) could not be found."))
        );
        let (mut ctx, _tx) = test_context(props(json!({"network": "private", "security_groups": ["twice"]})));
        assert_eq!(
            port().create_with(&network, &mut ctx).await,
            Err(ResourceFailure::error(
                "PhysicalResourceNameAmbiguity",
                "Multiple physical resources were found with name (twice)."
            ))
        );
        assert!(neutron.calls().iter().all(|(m, _, _)| m == "GET"));
    }

    #[tokio::test]
    async fn a_replacement_frees_the_fixed_ips_first() {
        let (neutron, session) = testing::neutron().await;
        let fixed_ips = json!([{"subnet_id": "s1", "ip_address": "10.0.0.5"}]);
        neutron.answer(&format!("GET {PORTS}/p1"), 200, json!({"port": {"id": "p1", "fixed_ips": fixed_ips}}));
        neutron.answer(&format!("PUT {PORTS}/p1"), 200, json!({"port": {"id": "p1"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"network": "n"})));
        ctx.state.physical_id = Some("p1".into());
        port().free_fixed_ips_with(&network, &mut ctx).await.unwrap();
        assert_eq!(neutron.calls()[1], ("PUT".into(), format!("{PORTS}/p1"), json!({"port": {"fixed_ips": []}})));
        assert_eq!(ctx.state.data.get(FREED_FIXED_IPS_DATA), Some(&fixed_ips.to_string()));
        // A port Neutron no longer has has nothing to free.
        ctx.state.physical_id = Some("gone".into());
        port().free_fixed_ips_with(&network, &mut ctx).await.unwrap();
    }

    #[tokio::test]
    async fn a_rollback_gives_the_freed_fixed_ips_back() {
        let (neutron, session) = testing::neutron().await;
        let fixed_ips = json!([{"subnet_id": "s1", "ip_address": "10.0.0.5"}]);
        neutron.answer(&format!("PUT {PORTS}/new"), 200, json!({"port": {"id": "new"}}));
        neutron.answer(&format!("PUT {PORTS}/p1"), 200, json!({"port": {"id": "p1"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({"network": "n"})));
        ctx.state.physical_id = Some("p1".into());
        ctx.state.data.insert(FREED_FIXED_IPS_DATA.into(), fixed_ips.to_string());
        port().restore_fixed_ips_with(&network, &mut ctx, Some("new")).await.unwrap();
        let calls = neutron.calls();
        assert_eq!(calls[0], ("PUT".into(), format!("{PORTS}/new"), json!({"port": {"fixed_ips": []}})));
        assert_eq!(calls[1], ("PUT".into(), format!("{PORTS}/p1"), json!({"port": {"fixed_ips": fixed_ips}})));
        // Nothing freed and no replacement: nothing to ask.
        let (mut ctx, _tx) = test_context(props(json!({"network": "n"})));
        ctx.state.physical_id = Some("p1".into());
        port().restore_fixed_ips_with(&network, &mut ctx, None).await.unwrap();
        assert_eq!(neutron.calls().len(), 2);
    }

    #[tokio::test]
    async fn a_delete_waits_for_the_404() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("DELETE {PORTS}/p1"), 204, Value::Null);
        let (slot, _host) = testing::bound(Some(session));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n"})));
        ctx.state.physical_id = Some("p1".into());
        Port::new(slot).delete(&mut ctx).await.unwrap();
        let calls: Vec<_> = neutron.calls().into_iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(calls, [format!("DELETE {PORTS}/p1"), format!("GET {PORTS}/p1")]);
    }

    #[tokio::test]
    async fn subnets_and_network_are_read_from_neutron() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            &format!("GET {PORTS}/p1"),
            200,
            json!({"port": {"id": "p1", "network_id": "n1", "fixed_ips": [{"subnet_id": "s1", "ip_address": "10.0.0.5"}]}}),
        );
        neutron.answer("GET /network/v2.0/subnets/s1", 200, json!({"subnet": {"id": "s1", "cidr": "10.0.0.0/24"}}));
        neutron.answer("GET /network/v2.0/networks/n1", 200, json!({"network": {"id": "n1", "mtu": 1450}}));
        let (slot, _host) = testing::bound(Some(session));
        let port = Port::new(slot);
        let mut state = ResourceState { physical_id: Some("p1".into()), ..Default::default() };
        state.data.insert(super::super::STACK_DATA.into(), "sid".into());
        assert_eq!(port.attribute(&state, "subnets").await.unwrap(), json!([{"id": "s1", "cidr": "10.0.0.0/24"}]));
        assert_eq!(port.attribute(&state, "network").await.unwrap(), json!({"id": "n1", "mtu": 1450}));
        assert_eq!(port.attribute(&state, "fixed_ips").await.unwrap()[0]["ip_address"], json!("10.0.0.5"));
        // Neutron no longer has the port: nothing, as Heat answers.
        state.physical_id = Some("gone".into());
        assert_eq!(port.attribute(&state, "subnets").await.unwrap(), Value::Null);
        assert_eq!(port.attribute(&state, "network").await.unwrap(), Value::Null);
    }

    #[test]
    fn deprecated_properties_translate_as_heat() {
        let p = props(json!({"network_id": "n", "fixed_ips": [{"subnet_id": "s"}]}));
        assert_eq!(p["network"], json!("n"));
        assert_eq!(p["fixed_ips"][0]["subnet"], json!("s"));
        assert_eq!(p["fixed_ips"][0]["subnet_id"], Value::Null);
        let e = Plugin::validate_properties(&port(), "port", &json!({"network": "a", "network_id": "b"})).unwrap_err();
        assert_eq!(e.message(), "Cannot define the following properties at the same time: network, network_id");
        let e = Plugin::validate_properties(
            &port(),
            "port",
            &json!({"network": "a", "fixed_ips": [{"subnet": "s", "subnet_id": "t"}]}),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Cannot define the following properties at the same time: fixed_ips.subnet, fixed_ips.subnet_id"
        );
    }

    #[test]
    fn checks_and_replacement_rules() {
        let e = Plugin::validate_properties(
            &port(),
            "port",
            &json!({"network": "a", "fixed_ips": [{"ip_address": "10.0.0.5"}], "no_fixed_ips": true}),
        )
        .unwrap_err();
        assert_eq!(e.message(), "Cannot define the following properties at the same time: fixed_ips, no_fixed_ips.");
        // Heat's Port does not apply the value_specs check.
        props(json!({"network": "a", "value_specs": {"name": "x"}}));
        let base = props(json!({"network": "a"}));
        let decide = |new: Value| Plugin::update_decision(&port(), &base, &props(new));
        assert_eq!(decide(json!({"network": "a"})), UpdateDecision::Unchanged);
        assert_eq!(decide(json!({"network": "a", "security_groups": []})), UpdateDecision::InPlace);
        assert_eq!(decide(json!({"network": "b"})), UpdateDecision::Replace);
        assert_eq!(decide(json!({"network": "a", "mac_address": "fa:16:3e:00:00:01"})), UpdateDecision::Replace);
        let always = props(json!({"network": "a", "replacement_policy": "REPLACE_ALWAYS"}));
        assert_eq!(Plugin::update_decision(&port(), &always, &always), UpdateDecision::Replace);
    }
}
