//! OS::Neutron::Subnet: a Neutron subnet.
//!
//! Physical id = the subnet's id. `network` (or the deprecated, hidden
//! `network_id`), `subnetpool` and `segment` are names or ids resolved
//! through Neutron; the create body names them `network_id`,
//! `subnetpool_id` and `segment_id`. A `gateway_ip` of `""` (or null) asks
//! for no gateway, `auto` for Neutron's choice (create only). Subnets have
//! no status: nothing is waited for but the delete.

use std::net::IpAddr;
use std::sync::Arc;

use keelson_openstack::network::{Network, NETWORK, SUBNET, SUBNETPOOL};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    changed, create_fields, create_in_stack, delete_in_stack, delete_until_gone, failure, find_id, find_segment,
    object_attribute, remember, replace_deprecated, replace_failed, set_str, set_tags, truthy, update_fields,
    update_in_stack, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct Subnet {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

const IPV6_MODES: [&str; 3] = ["dhcpv6-stateful", "dhcpv6-stateless", "slaac"];

impl Subnet {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let ip_addr = || Constraint::custom("ip_addr");
        let properties = vec![
            PropertySchema::new("network_id", T::String, "").constraint(Constraint::custom("neutron.network")).hidden(),
            PropertySchema::new("network", T::String, "The ID of the attached network.")
                .required()
                .constraint(Constraint::custom("neutron.network")),
            PropertySchema::new("subnetpool", T::String, "The name or ID of the subnet pool.")
                .constraint(Constraint::custom("neutron.subnetpool")),
            PropertySchema::new("prefixlen", T::Integer, "Prefix length for subnet allocation from subnet pool.")
                .constraint(Constraint::range(Some(0), None)),
            PropertySchema::new("cidr", T::String, "The CIDR.").constraint(Constraint::custom("net_cidr")),
            PropertySchema::new("value_specs", T::Map, "Extra parameters to include in the request.")
                .default_value(json!({}))
                .update_allowed(),
            PropertySchema::new("name", T::String, "The name of the subnet.").update_allowed(),
            PropertySchema::new("ip_version", T::Integer, "The IP version, which is 4 or 6.")
                .default_value(4)
                .constraint(Constraint::allowed_values([json!(4), json!(6)])),
            PropertySchema::new("dns_nameservers", T::List, "A specified set of DNS name servers to be used.")
                .default_value(json!([]))
                .update_allowed(),
            PropertySchema::new(
                "gateway_ip",
                T::String,
                "The gateway IP address. Set to any of [ null | ~ | \"\" ] to create/update a subnet without a gateway. If omitted when creation, neutron will assign the first free IP address within the subnet to the gateway automatically. If remove this from template when update, the old gateway IP address will be detached.",
            )
            .update_allowed(),
            PropertySchema::new(
                "enable_dhcp",
                T::Boolean,
                "Set to true if DHCP is enabled and false if DHCP is disabled.",
            )
            .default_value(true)
            .update_allowed(),
            PropertySchema::new("allocation_pools", T::List, "The start and end addresses for the allocation pools.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                    PropertySchema::new("start", T::String, "Start address for the allocation pool.")
                        .required()
                        .constraint(ip_addr()),
                    PropertySchema::new("end", T::String, "End address for the allocation pool.")
                        .required()
                        .constraint(ip_addr()),
                ])),
            PropertySchema::new(
                "tenant_id",
                T::String,
                "The ID of the tenant who owns the network. Only administrative users can specify a tenant ID other than their own.",
            ),
            PropertySchema::new("host_routes", T::List, "A list of host route dictionaries for the subnet.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                    PropertySchema::new("destination", T::String, "The destination for static route.")
                        .required()
                        .constraint(Constraint::custom("net_cidr")),
                    PropertySchema::new("nexthop", T::String, "The next hop for the destination.")
                        .required()
                        .constraint(ip_addr()),
                ])),
            PropertySchema::new("ipv6_ra_mode", T::String, "IPv6 RA (Router Advertisement) mode.")
                .constraint(Constraint::allowed_values(IPV6_MODES)),
            PropertySchema::new("ipv6_address_mode", T::String, "IPv6 address mode.")
                .constraint(Constraint::allowed_values(IPV6_MODES)),
            PropertySchema::new("segment", T::String, "The name/ID of the segment to associate.")
                .update_allowed()
                .constraint(Constraint::custom("neutron.segment")),
            PropertySchema::new("tags", T::List, "The tags to be added to the subnet.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::String, "")),
        ];
        let attributes = vec![
            AttributeSchema::new("name", "Friendly name of the subnet.", Some("string")),
            AttributeSchema::new("network_id", "Parent network of the subnet.", Some("string")),
            AttributeSchema::new("tenant_id", "Tenant owning the subnet.", Some("string")),
            AttributeSchema::new("allocation_pools", "Ip allocation pools and their ranges.", Some("list")),
            AttributeSchema::new("gateway_ip", "Ip of the subnet's gateway.", Some("string")),
            AttributeSchema::new("host_routes", "Additional routes for this subnet.", Some("list")),
            AttributeSchema::new("ip_version", "Ip version for the subnet.", Some("string")),
            AttributeSchema::new("cidr", "CIDR block notation for this subnet.", Some("string")),
            AttributeSchema::new("dns_nameservers", "List of dns nameservers.", Some("list")),
            AttributeSchema::new(
                "enable_dhcp",
                "'true' if DHCP is enabled for this subnet; 'false' otherwise.",
                Some("string"),
            ),
        ];
        Subnet {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource for managing Neutron subnets.\n\nA subnet represents an IP address block that can be used for assigning IP\naddresses to virtual instances. Each subnet must have a CIDR and must be\nassociated with a network. IPs can be either selected from the whole subnet\nCIDR, or from \"allocation pools\" that can be specified by the user.",
            },
        }
    }
}

impl NeutronActions for Subnet {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let mut props = ctx.properties.clone();
        let net = set_str(&props, "network").unwrap_or_default().to_string();
        props.insert("network".into(), json!(find_id(network, NETWORK, &net).await?));
        if let Some(pool) = set_str(&props, "subnetpool").filter(|p| !p.is_empty()).map(str::to_owned) {
            props.insert("subnetpool".into(), json!(find_id(network, SUBNETPOOL, &pool).await?));
        }
        if let Some(segment) = set_str(&props, "segment").filter(|s| !s.is_empty()).map(str::to_owned) {
            props.insert("segment".into(), json!(find_segment(network, &segment).await?));
        }
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&props, name);
        if let Some(net) = fields.remove("network") {
            fields.insert("network_id".into(), net);
        }
        if fields.get("segment").is_some_and(truthy) {
            let segment = fields.remove("segment").unwrap_or_default();
            fields.insert("segment_id".into(), segment);
        }
        let tags = fields.remove("tags");
        if fields.get("subnetpool").is_some_and(truthy) {
            let pool = fields.remove("subnetpool").unwrap_or_default();
            fields.insert("subnetpool_id".into(), pool);
        }
        normalize_gateway(&mut fields);
        let created = network.create(SUBNET, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a subnet without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id.clone());
        remember(ctx, created);
        if let Some(tags) = tags.filter(truthy) {
            set_tags(network, SUBNET, &id, &tags).await?;
        }
        Ok(())
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let diff = changed(old, &ctx.properties);
        if diff.is_empty() {
            return Ok(());
        }
        let mut fields = update_fields(ctx, old, diff);
        if fields.get("allocation_pools").is_some_and(Value::is_null) {
            fields.insert("allocation_pools".into(), json!([]));
        }
        if let Some(segment) = fields.get("segment").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            if old.get("segment").is_some_and(|s| !s.is_null()) {
                return Err(not_supported(
                    "Updating the subnet segment assciation only allowed when the current segment_id is None. The subnet is currently associated with segment. In this state update",
                ));
            }
            let segment = find_segment(network, segment).await?;
            fields.remove("segment");
            fields.insert("segment_id".into(), json!(segment));
        }
        if fields.get("gateway_ip").and_then(Value::as_str) == Some("auto") {
            return Err(not_supported(
                "The value \"auto\" for gateway_ip cannot be used to update an existing subnet. It is only supported during subnet creation.",
            ));
        }
        normalize_gateway(&mut fields);
        if let Some(tags) = fields.remove("tags") {
            set_tags(network, SUBNET, &id, &tags).await?;
        }
        network.update(SUBNET, &id, fields).await.map_err(failure)
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        delete_until_gone(ctx, network, SUBNET, id).await
    }
}

/// Heat's `ResourceActionNotSupported`.
fn not_supported(action: &str) -> ResourceFailure {
    ResourceFailure::error("ResourceActionNotSupported", format!("{action} is not supported for resource."))
}

/// `""` asks Neutron for no gateway (null); `auto` leaves it to Neutron.
fn normalize_gateway(fields: &mut Map<String, Value>) {
    match fields.get("gateway_ip").and_then(Value::as_str) {
        Some("") => {
            fields.insert("gateway_ip".into(), Value::Null);
        }
        Some("auto") => {
            fields.remove("gateway_ip");
        }
        _ => {}
    }
}

impl Plugin for Subnet {
    const TYPE: &'static str = "OS::Neutron::Subnet";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NEUTRON)
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let given = replace_deprecated(given, &[("network", "network_id")])?;
        let props = super::super::validate_properties(&self.schema, resource_name, &given)?;
        self.validate(&props)?;
        Ok(props)
    }

    /// Heat's checks (its `value_specs` check does not apply to subnets).
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let pool = props.get("subnetpool").filter(|v| !v.is_null());
        let cidr = props.get("cidr").is_some_and(truthy);
        if pool.is_some() && cidr {
            return Err(EngineError::validation(
                "Cannot define the following properties at the same time: subnetpool, cidr.",
            ));
        }
        if pool.is_none() && !cidr {
            return Err(EngineError::validation(
                "At least one of the following properties must be specified: subnetpool, cidr.",
            ));
        }
        if props.get("prefixlen").is_some_and(truthy) && cidr {
            return Err(EngineError::validation(
                "Cannot define the following properties at the same time: prefixlen, cidr.",
            ));
        }
        let ra_mode = set_str(props, "ipv6_ra_mode").filter(|m| !m.is_empty());
        let address_mode = set_str(props, "ipv6_address_mode").filter(|m| !m.is_empty());
        if props.get("ip_version") == Some(&json!(4)) && (ra_mode.is_some() || address_mode.is_some()) {
            return Err(EngineError::validation("ipv6_ra_mode and ipv6_address_mode are not supported for ipv4."));
        }
        if let (Some(ra), Some(address)) = (ra_mode, address_mode) {
            if ra != address {
                return Err(EngineError::validation(
                    "When both ipv6_ra_mode and ipv6_address_mode are set, they must be equal.",
                ));
            }
        }
        if let Some(gateway) = set_str(props, "gateway_ip") {
            if !["", "~", "auto"].contains(&gateway) && gateway.parse::<IpAddr>().is_err() {
                // Heat passes a tuple as the message; its text is the tuple's.
                return Err(EngineError::validation(format!(
                    "('Gateway IP address \"%(gateway)s\" is in invalid format.', '{gateway}')"
                )));
            }
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
        replace_failed(&self.host, ctx, SUBNET).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        object_attribute(&self.host, state, SUBNET, name).await
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::context::test_context;
    use super::super::super::UpdateDecision;
    use super::super::network;
    use super::super::testing;
    use super::*;

    fn subnet() -> Subnet {
        Subnet::new(Arc::new(HostSlot::default()))
    }

    fn props(v: Value) -> Properties {
        Plugin::validate_properties(&subnet(), "sub", &v).unwrap()
    }

    fn invalid(v: Value) -> String {
        Plugin::validate_properties(&subnet(), "sub", &v).unwrap_err().message()
    }

    const SUBNETS: &str = "/network/v2.0/subnets";

    #[tokio::test]
    async fn create_resolves_names_and_renames_the_fields() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=private&fields=id", 200, json!({"networks": [{"id": "n1"}]}));
        neutron.answer("GET /network/v2.0/segments?name=seg", 200, json!({"segments": [{"id": "s1"}]}));
        neutron.answer(&format!("POST {SUBNETS}"), 201, json!({"subnet": {"id": "sn1", "cidr": "10.0.0.0/24"}}));
        neutron.answer(&format!("PUT {SUBNETS}/sn1/tags"), 200, json!({"tags": ["a"]}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(json!({
            "network_id": "private", "cidr": "10.0.0.0/24", "name": "sub", "gateway_ip": "",
            "segment": "seg", "tags": ["a"], "allocation_pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}]})));
        subnet().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        let post = calls.iter().find(|(m, _, _)| m == "POST").unwrap();
        assert_eq!(
            post.2,
            json!({"subnet": {"network_id": "n1", "cidr": "10.0.0.0/24", "name": "sub", "ip_version": 4,
                "dns_nameservers": [], "gateway_ip": null, "enable_dhcp": true, "segment_id": "s1",
                "allocation_pools": [{"start": "10.0.0.10", "end": "10.0.0.20"}]}})
        );
        assert_eq!(calls.last().unwrap().1, format!("{SUBNETS}/sn1/tags"));
        assert_eq!(ctx.state.physical_id.as_deref(), Some("sn1"));
    }

    #[tokio::test]
    async fn update_rules() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {SUBNETS}/sn1"), 200, json!({"subnet": {"id": "sn1"}}));
        let network = network(&session).await.unwrap();
        let old = props(json!({"network": "n", "cidr": "10.0.0.0/24", "allocation_pools": [
            {"start": "10.0.0.10", "end": "10.0.0.20"}]}));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n", "cidr": "10.0.0.0/24", "gateway_ip": ""})));
        ctx.state.physical_id = Some("sn1".into());
        subnet().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[0].2, json!({"subnet": {"gateway_ip": null, "allocation_pools": []}}));
        let (mut ctx, _tx) = test_context(props(json!({"network": "n", "cidr": "10.0.0.0/24", "gateway_ip": "auto"})));
        ctx.state.physical_id = Some("sn1".into());
        let e = subnet().update_with(&network, &mut ctx, &old).await.unwrap_err();
        assert_eq!(e.exception().unwrap().0, "ResourceActionNotSupported");
        assert_eq!(
            Plugin::update_decision(&subnet(), &old, &props(json!({"network": "m", "cidr": "10.0.0.0/24"}))),
            UpdateDecision::Replace
        );
    }

    #[test]
    fn heats_checks() {
        assert_eq!(
            invalid(json!({"network": "n"})),
            "At least one of the following properties must be specified: subnetpool, cidr."
        );
        assert_eq!(
            invalid(json!({"network": "n", "subnetpool": "p", "cidr": "10.0.0.0/24"})),
            "Cannot define the following properties at the same time: subnetpool, cidr."
        );
        assert_eq!(
            invalid(json!({"network": "n", "network_id": "m", "cidr": "10.0.0.0/24"})),
            "Cannot define the following properties at the same time: network, network_id"
        );
        assert_eq!(
            invalid(json!({"network": "n", "cidr": "10.0.0.0/24", "ipv6_ra_mode": "slaac"})),
            "ipv6_ra_mode and ipv6_address_mode are not supported for ipv4."
        );
        assert_eq!(
            invalid(json!({"network": "n", "cidr": "::/64", "ip_version": 6, "ipv6_ra_mode": "slaac",
                "ipv6_address_mode": "dhcpv6-stateful"})),
            "When both ipv6_ra_mode and ipv6_address_mode are set, they must be equal."
        );
        assert_eq!(
            invalid(json!({"network": "n", "cidr": "10.0.0.0/24", "gateway_ip": "10.0.0"})),
            "('Gateway IP address \"%(gateway)s\" is in invalid format.', '10.0.0')"
        );
        // The subnet pool alone (with a prefix length) is enough.
        props(json!({"network": "n", "subnetpool": "p", "prefixlen": 26}));
    }
}
