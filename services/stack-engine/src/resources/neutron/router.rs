//! OS::Neutron::Router and OS::Neutron::RouterInterface.
//!
//! A Router's physical id is the router's id; its gateway's `network`
//! and fixed IPs' `subnet` are names or ids resolved through Neutron, the
//! L3 agents it is scheduled on are replaced as a whole (the hidden
//! `l3_agent_id` joins `l3_agent_ids`), and a create waits until it is
//! ACTIVE or DOWN. A RouterInterface attaches a subnet or a port to a
//! router; its physical id is `<router>:subnet_id=<id>` (or `port_id`),
//! which its delete detaches; every change replaces it.

use std::collections::BTreeSet;
use std::sync::Arc;

use keelson_openstack::network::{Network, NETWORK, PORT, ROUTER, SUBNET};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, StackMember,
    SupportStatus,
};
use super::{
    changed, conflict_retryable, create_fields, create_in_stack, delete_in_stack, delete_until_gone, failure, find_id,
    object_attribute, replace_deprecated, replace_failed, set_str, set_tags, truthy, update_fields, update_in_stack,
    wait_built, with_delete_retries, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

pub struct Router {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl Router {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let gateway = vec![
            PropertySchema::new("network", T::String, "ID or name of the external network for the gateway.")
                .required()
                .update_allowed(),
            PropertySchema::new(
                "enable_snat",
                T::Boolean,
                "Enables Source NAT on the router gateway. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
            )
            .update_allowed(),
            PropertySchema::new("external_fixed_ips", T::List, "External fixed IP addresses for the gateway.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                    PropertySchema::new("ip_address", T::String, "External fixed IP address.")
                        .constraint(Constraint::custom("ip_addr")),
                    PropertySchema::new("subnet", T::String, "Subnet of external fixed IP address.")
                        .constraint(Constraint::custom("neutron.subnet")),
                ])),
        ];
        let properties = vec![
            PropertySchema::new("name", T::String, "The name of the router.").update_allowed(),
            PropertySchema::new("external_gateway_info", T::Map, "External network gateway configuration for a router.")
                .update_allowed()
                .map_of(gateway),
            PropertySchema::new("value_specs", T::Map, "Extra parameters to include in the creation request.")
                .default_value(json!({}))
                .update_allowed(),
            PropertySchema::new("admin_state_up", T::Boolean, "The administrative state of the router.")
                .default_value(true)
                .update_allowed(),
            PropertySchema::new(
                "l3_agent_id",
                T::String,
                "ID of the L3 agent. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
            )
            .update_allowed()
            .hidden(),
            PropertySchema::new(
                "l3_agent_ids",
                T::List,
                "ID list of the L3 agent. User can specify multi-agents for highly available router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only.",
            )
            .update_allowed()
            .list_of(PropertySchema::new("*", T::String, "")),
            PropertySchema::new(
                "distributed",
                T::Boolean,
                "Indicates whether or not to create a distributed router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only. This property can not be used in conjunction with the L3 agent ID.",
            ),
            PropertySchema::new(
                "ha",
                T::Boolean,
                "Indicates whether or not to create a highly available router. NOTE: The default policy setting in Neutron restricts usage of this property to administrative users only. And now neutron do not support distributed and ha at the same time.",
            ),
            PropertySchema::new(
                "availability_zone_hints",
                T::List,
                "Availability zone candidates for the router. It requires the availability_zone extension to be available.",
            )
            .update_allowed(),
            PropertySchema::new("tags", T::List, "The tags to be added to the router.")
                .update_allowed()
                .list_of(PropertySchema::new("*", T::String, "")),
            PropertySchema::new(
                "tenant_id",
                T::String,
                "The ID of the tenant which will own the router. Only administrative users can set the tenant identifier; this cannot be changed using authorization policies.",
            ),
        ];
        let attributes = vec![
            AttributeSchema::new("status", "The status of the router.", Some("string")),
            AttributeSchema::new("external_gateway_info", "Gateway network for the router.", Some("map")),
            AttributeSchema::new("name", "Friendly name of the router.", Some("string")),
            AttributeSchema::new("admin_state_up", "Administrative state of the router.", Some("string")),
            AttributeSchema::new("tenant_id", "Tenant owning the router.", Some("string")),
        ];
        Router {
            host,
            schema: ResourceSchema {
                properties,
                attributes,
                support_status: SupportStatus::default(),
                description: "A resource that implements Neutron router.\n\nRouter is a physical or virtual network device that passes network traffic\nbetween different networks.",
            },
        }
    }
}

impl NeutronActions for Router {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&ctx.properties, name);
        if let Some(gateway) = fields.get_mut("external_gateway_info") {
            gateway_body(network, gateway).await?;
        }
        let agents = agent_list(&mut fields);
        let tags = fields.remove("tags");
        let created = network.create(ROUTER, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a router without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id.clone());
        if !agents.is_empty() {
            replace_agents(network, &id, &agents).await?;
        }
        if let Some(tags) = tags.filter(truthy) {
            set_tags(network, ROUTER, &id, &tags).await?;
        }
        wait_built(ctx, network, ROUTER, &id).await
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let mut diff = changed(old, &ctx.properties);
        if let Some(gateway) = diff.get_mut("external_gateway_info") {
            gateway_body(network, gateway).await?;
        }
        if diff.contains_key("l3_agent_ids") || diff.contains_key("l3_agent_id") {
            let agents = agent_list(&mut diff);
            replace_agents(network, &id, &agents).await?;
        }
        if let Some(tags) = diff.remove("tags") {
            set_tags(network, ROUTER, &id, &tags).await?;
        }
        if diff.is_empty() {
            return Ok(());
        }
        let fields = update_fields(ctx, old, diff);
        network.update(ROUTER, &id, fields).await.map_err(failure)
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        delete_until_gone(ctx, network, ROUTER, id).await
    }
}

/// Heat's `_resolve_gateway`: `network` resolved and sent as
/// `network_id`, unset `enable_snat` and `external_fixed_ips` left out,
/// each fixed IP without its unset keys and with `subnet` as `subnet_id`.
async fn gateway_body(network: &Network<'_>, gateway: &mut Value) -> Result<(), ResourceFailure> {
    let Value::Object(info) = gateway else { return Ok(()) };
    let net = info.remove("network").unwrap_or_default();
    let net_id = match net.as_str().filter(|n| !n.is_empty()) {
        Some(n) => json!(find_id(network, NETWORK, n).await?),
        None => net,
    };
    info.insert("network_id".into(), net_id);
    if info.get("enable_snat").is_some_and(Value::is_null) {
        info.remove("enable_snat");
    }
    match info.get_mut("external_fixed_ips") {
        Some(Value::Array(ips)) => {
            for ip in ips.iter_mut() {
                let Value::Object(ip) = ip else { continue };
                ip.retain(|_, v| !v.is_null());
                if let Some(subnet) = ip.remove("subnet") {
                    let subnet_id = match subnet.as_str().filter(|s| !s.is_empty()) {
                        Some(s) => json!(find_id(network, SUBNET, s).await?),
                        None => subnet,
                    };
                    ip.insert("subnet_id".into(), subnet_id);
                }
            }
        }
        _ => {
            info.remove("external_fixed_ips");
        }
    }
    Ok(())
}

/// Takes `l3_agent_ids` (or the deprecated `l3_agent_id`) out of `fields`.
fn agent_list(fields: &mut Map<String, Value>) -> Vec<String> {
    let single = fields.remove("l3_agent_id");
    let listed = fields.remove("l3_agent_ids");
    let ids: Vec<String> =
        listed.iter().filter_map(Value::as_array).flatten().filter_map(Value::as_str).map(str::to_owned).collect();
    if ids.is_empty() {
        single
            .as_ref()
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| vec![s.to_string()])
            .unwrap_or_default()
    } else {
        ids
    }
}

/// Heat's `_replace_agent`: off every agent hosting it, then onto `agents`.
async fn replace_agents(network: &Network<'_>, id: &str, agents: &[String]) -> Result<(), ResourceFailure> {
    for agent in network.l3_agent_ids(id).await.map_err(failure)? {
        network.remove_router_from_l3_agent(&agent, id).await.map_err(failure)?;
    }
    for agent in agents {
        network.add_router_to_l3_agent(agent, id).await.map_err(failure)?;
    }
    Ok(())
}

impl Plugin for Router {
    const TYPE: &'static str = "OS::Neutron::Router";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(&["router"]))
    }

    /// Upstream `add_dependencies` (see [`super::dependencies`]).
    fn implicit_requirements(
        &self,
        this: &StackMember<'_>,
        _explicit: &BTreeSet<String>,
        stack: &[StackMember<'_>],
    ) -> Vec<String> {
        super::dependencies::router(this, stack)
    }

    /// Heat's translation: a given `l3_agent_id` joins `l3_agent_ids`.
    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let mut given = given.clone();
        if let Some(map) = given.as_object_mut() {
            if let Some(agent) = map.get("l3_agent_id").filter(|a| truthy(a)).cloned() {
                map.remove("l3_agent_id");
                let mut agents = map.get("l3_agent_ids").and_then(Value::as_array).cloned().unwrap_or_default();
                agents.push(agent);
                map.insert("l3_agent_ids".into(), Value::Array(agents));
            }
        }
        let props = super::super::validate_properties(&self.schema, resource_name, &given)?;
        self.validate(&props)?;
        Ok(props)
    }

    /// Heat's checks (its `value_specs` check does not apply to routers).
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let distributed = props.get("distributed").is_some_and(truthy);
        let ha = props.get("ha").is_some_and(truthy);
        let agent = props.get("l3_agent_id").is_some_and(truthy);
        let agents = props.get("l3_agent_ids").and_then(Value::as_array).map_or(0, Vec::len);
        let conflict = |a: &str, b: &str| {
            Err(EngineError::validation(format!("Cannot define the following properties at the same time: {a}, {b}.")))
        };
        if agent && agents > 0 {
            return conflict("l3_agent_id", "l3_agent_ids");
        }
        if distributed && (agent || agents > 0) {
            return conflict("distributed", "l3_agent_id/l3_agent_ids");
        }
        if ha && distributed {
            return conflict("distributed", "ha");
        }
        if !ha && agents > 1 {
            return Err(EngineError::validation("Non HA routers can only have one L3 agent."));
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
        replace_failed(&self.host, ctx, ROUTER).await
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        object_attribute(&self.host, state, ROUTER, name).await
    }
}

pub struct RouterInterface {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl RouterInterface {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("router", T::String, "The router.")
                .required()
                .constraint(Constraint::custom("neutron.router")),
            PropertySchema::new("router_id", T::String, "ID of the router.")
                .constraint(Constraint::custom("neutron.router"))
                .hidden(),
            PropertySchema::new("subnet_id", T::String, "").constraint(Constraint::custom("neutron.subnet")).hidden(),
            PropertySchema::new("subnet", T::String, "The subnet, either subnet or port should be specified.")
                .constraint(Constraint::custom("neutron.subnet")),
            PropertySchema::new("port_id", T::String, "The port id, either subnet or port_id should be specified.")
                .constraint(Constraint::custom("neutron.port"))
                .hidden(),
            PropertySchema::new("port", T::String, "The port, either subnet or port should be specified.")
                .constraint(Constraint::custom("neutron.port")),
        ];
        RouterInterface {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::default(),
                description: "A resource for managing Neutron router interfaces.\n\nRouter interfaces associate routers with existing subnets or ports.",
            },
        }
    }

    /// Attaches; answers the physical id `<router>:<key>=<id>`.
    async fn attach_with(&self, network: &Network<'_>, props: &Properties) -> Result<String, ResourceFailure> {
        let router = find_id(network, ROUTER, set_str(props, "router").unwrap_or_default()).await?;
        let (key, value) = match set_str(props, "subnet").filter(|s| !s.is_empty()) {
            Some(subnet) => ("subnet_id", find_id(network, SUBNET, subnet).await?),
            None => ("port_id", find_id(network, PORT, set_str(props, "port").unwrap_or_default()).await?),
        };
        let mut target = Map::new();
        target.insert(key.into(), json!(value));
        network.router_interface(&router, true, &target).await.map_err(failure)?;
        Ok(format!("{router}:{key}={value}"))
    }
}

impl NeutronActions for RouterInterface {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let id = self.attach_with(network, &ctx.properties).await?;
        ctx.state.physical_id = Some(id);
        Ok(())
    }

    /// Detaches what the physical id names.
    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        let (router, key, value) = interface_of(id)?;
        let mut target = Map::new();
        target.insert(key, json!(value));
        let (router, target) = (&router, &target);
        with_delete_retries(ctx, move || async move {
            conflict_retryable(network.router_interface(router, false, target).await)
        })
        .await
    }

    fn deletable_id(&self, ctx: &ActionContext) -> Option<String> {
        ctx.state.physical_id.clone().filter(|id| !id.is_empty())
    }
}

/// The router, key and id a RouterInterface's physical id names (an old
/// `<router>:<subnet>` one names a subnet).
fn interface_of(physical_id: &str) -> Result<(String, String, String), ResourceFailure> {
    let normalized = physical_id.replace('=', ":");
    let mut tokens: Vec<&str> = normalized.split(':').collect();
    if tokens.len() == 2 {
        tokens.insert(1, "subnet_id");
    }
    match tokens.as_slice() {
        [router, key, value] => Ok(((*router).to_string(), (*key).to_string(), (*value).to_string())),
        more if more.len() > 3 => Err(ResourceFailure::error("ValueError", "too many values to unpack (expected 3)")),
        fewer => Err(ResourceFailure::error(
            "ValueError",
            format!("not enough values to unpack (expected 3, got {})", fewer.len()),
        )),
    }
}

impl Plugin for RouterInterface {
    const TYPE: &'static str = "OS::Neutron::RouterInterface";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(&["router"]))
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let given =
            replace_deprecated(given, &[("port", "port_id"), ("router", "router_id"), ("subnet", "subnet_id")])?;
        let props = super::super::validate_properties(&self.schema, resource_name, &given)?;
        self.validate(&props)?;
        Ok(props)
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let subnet = props.get("subnet").is_some_and(|v| !v.is_null());
        let port = props.get("port").is_some_and(|v| !v.is_null());
        match (subnet, port) {
            (true, true) => {
                Err(EngineError::validation("Cannot define the following properties at the same time: subnet, port."))
            }
            (false, false) => Err(EngineError::validation(
                "At least one of the following properties must be specified: subnet, port.",
            )),
            _ => Ok(()),
        }
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
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
    use super::super::super::UpdateDecision;
    use super::super::network;
    use super::super::testing;
    use super::*;

    fn router() -> Router {
        Router::new(Arc::new(HostSlot::default()))
    }

    fn interface() -> RouterInterface {
        RouterInterface::new(Arc::new(HostSlot::default()))
    }

    fn invalid<P: Plugin>(p: &P, v: Value) -> String {
        Plugin::validate_properties(p, "r", &v).unwrap_err().message()
    }

    const ROUTERS: &str = "/network/v2.0/routers";

    #[tokio::test]
    async fn create_resolves_the_gateway_schedules_and_waits() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/networks?name=public&fields=id", 200, json!({"networks": [{"id": "ext"}]}));
        neutron.answer("GET /network/v2.0/subnets?name=pub-sub&fields=id", 200, json!({"subnets": [{"id": "ps"}]}));
        neutron.answer(&format!("POST {ROUTERS}"), 201, json!({"router": {"id": "r1", "status": "ACTIVE"}}));
        neutron.answer(&format!("GET {ROUTERS}/r1/l3-agents"), 200, json!({"agents": [{"id": "old"}]}));
        neutron.answer("DELETE /network/v2.0/agents/old/l3-routers/r1", 204, Value::Null);
        neutron.answer("POST /network/v2.0/agents/a1/l3-routers", 201, Value::Null);
        neutron.answer(&format!("GET {ROUTERS}/r1"), 200, json!({"router": {"id": "r1", "status": "ACTIVE"}}));
        let network = network(&session).await.unwrap();
        let props = Plugin::validate_properties(
            &router(),
            "r",
            &json!({"name": "gw", "l3_agent_id": "a1", "external_gateway_info": {
                "network": "public", "external_fixed_ips": [{"subnet": "pub-sub"}]}}),
        )
        .unwrap();
        let (mut ctx, _tx) = test_context(props);
        router().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        let post = calls.iter().find(|(m, _, _)| m == "POST").unwrap();
        assert_eq!(
            post.2,
            json!({"router": {"name": "gw", "admin_state_up": true, "external_gateway_info": {
                "network_id": "ext", "external_fixed_ips": [{"subnet_id": "ps"}]}}})
        );
        let paths: Vec<String> = calls.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(
            paths[3..],
            [
                format!("GET {ROUTERS}/r1/l3-agents"),
                "DELETE /network/v2.0/agents/old/l3-routers/r1".into(),
                "POST /network/v2.0/agents/a1/l3-routers".into(),
                format!("GET {ROUTERS}/r1"),
            ]
        );
    }

    #[tokio::test]
    async fn update_clears_a_removed_gateway() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(&format!("PUT {ROUTERS}/r1"), 200, json!({"router": {"id": "r1"}}));
        let network = network(&session).await.unwrap();
        let old =
            Plugin::validate_properties(&router(), "r", &json!({"external_gateway_info": {"network": "ext"}})).unwrap();
        let (mut ctx, _tx) = test_context(Plugin::validate_properties(&router(), "r", &json!({})).unwrap());
        ctx.state.physical_id = Some("r1".into());
        router().update_with(&network, &mut ctx, &old).await.unwrap();
        assert_eq!(neutron.calls()[0].2, json!({"router": {"external_gateway_info": null}}));
        assert_eq!(
            Plugin::update_decision(
                &router(),
                &old,
                &Plugin::validate_properties(&router(), "r", &json!({"ha": true})).unwrap()
            ),
            UpdateDecision::Replace
        );
    }

    #[test]
    fn router_checks() {
        assert_eq!(
            invalid(&router(), json!({"distributed": true, "l3_agent_ids": ["a"]})),
            "Cannot define the following properties at the same time: distributed, l3_agent_id/l3_agent_ids."
        );
        assert_eq!(
            invalid(&router(), json!({"distributed": true, "ha": true})),
            "Cannot define the following properties at the same time: distributed, ha."
        );
        assert_eq!(
            invalid(&router(), json!({"l3_agent_ids": ["a", "b"]})),
            "Non HA routers can only have one L3 agent."
        );
    }

    #[tokio::test]
    async fn interface_attaches_and_detaches() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/routers?name=r&fields=id", 200, json!({"routers": [{"id": "r1"}]}));
        neutron.answer("GET /network/v2.0/subnets?name=s&fields=id", 200, json!({"subnets": [{"id": "s1"}]}));
        neutron.answer(&format!("PUT {ROUTERS}/r1/add_router_interface"), 200, json!({"id": "r1"}));
        let network = network(&session).await.unwrap();
        let props = Plugin::validate_properties(&interface(), "ri", &json!({"router_id": "r", "subnet": "s"})).unwrap();
        let id = interface().attach_with(&network, &props).await.unwrap();
        assert_eq!(id, "r1:subnet_id=s1");
        assert_eq!(neutron.calls().last().unwrap().2, json!({"subnet_id": "s1"}));
        assert_eq!(interface_of("r1:s1").unwrap(), ("r1".into(), "subnet_id".into(), "s1".into()));
        assert_eq!(interface_of("r1:port_id=p1").unwrap(), ("r1".into(), "port_id".into(), "p1".into()));
        // Detaching what Neutron no longer has is done.
        let (slot, _host) = testing::bound(Some(session));
        let (mut ctx, _tx) = test_context(props);
        ctx.state.physical_id = Some(id);
        Plugin::delete(&RouterInterface::new(slot), &mut ctx).await.unwrap();
        assert_eq!(neutron.calls().last().unwrap().1, format!("{ROUTERS}/r1/remove_router_interface"));
    }

    #[test]
    fn interface_checks() {
        assert_eq!(
            invalid(&interface(), json!({"router": "r"})),
            "At least one of the following properties must be specified: subnet, port."
        );
        assert_eq!(
            invalid(&interface(), json!({"router": "r", "subnet": "s", "port_id": "p"})),
            "Cannot define the following properties at the same time: subnet, port."
        );
        assert_eq!(
            invalid(&interface(), json!({"router": "r", "router_id": "q", "subnet": "s"})),
            "Cannot define the following properties at the same time: router, router_id"
        );
    }
}
