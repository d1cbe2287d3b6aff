//! OS::Neutron::SecurityGroup and OS::Neutron::SecurityGroupRule.
//!
//! A SecurityGroup's physical id is the group's id. Its `rules` are
//! created in one bulk request (an egress rule among them first removes
//! the egress rules Neutron adds to every new group); an update
//! reconciles the group's rules with the wanted ones (compared on
//! direction, ethertype, protocol, ports, remotes), keeping Neutron's
//! default egress rules when no egress rule is wanted. `stateful: false`
//! needs Neutron's `stateful-security-group` extension; it cannot change
//! while ports use the group. A SecurityGroupRule is one rule of a group
//! named by name or id; every change replaces it.

use std::sync::Arc;

use keelson_openstack::network::{Network, PORT, SECURITY_GROUP, SECURITY_GROUP_RULE};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::schema::{Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    ActionContext, ActionResult, HostSlot, Plugin, Properties, ResourceFailure, ResourceState, SupportStatus,
};
use super::{
    changed, conflict_retryable, create_fields, create_in_stack, delete_in_stack, failure, find_id, replace_failed,
    set_str, update_fields, update_in_stack, with_delete_retries, NeutronActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// The protocol names Heat allows besides the numbers 0 to 255.
const PROTOCOL_NAMES: [&str; 22] = [
    "ah",
    "dccp",
    "egp",
    "esp",
    "gre",
    "icmp",
    "icmpv6",
    "igmp",
    "ipv6-encap",
    "ipv6-frag",
    "ipv6-icmp",
    "ipv6-nonxt",
    "ipv6-opts",
    "ipv6-route",
    "ospf",
    "pgm",
    "rsvp",
    "sctp",
    "tcp",
    "udp",
    "udplite",
    "vrrp",
];

/// Neutron's extension that allows stateless groups.
const STATEFUL_EXTENSION: &str = "stateful-security-group";

/// The rule fields two rules are compared on.
const COMPARED_RULE_KEYS: [&str; 8] = [
    "direction",
    "ethertype",
    "protocol",
    "port_range_min",
    "port_range_max",
    "remote_group_id",
    "remote_ip_prefix",
    "security_group_id",
];

fn protocols() -> Constraint {
    Constraint::allowed_values((0..256).map(|n| json!(n)).chain(PROTOCOL_NAMES.iter().map(|p| json!(p))))
}

const DIRECTION_TEXT: &str = "The direction in which the security group rule is applied. For a compute instance, an ingress security group rule matches traffic that is incoming (ingress) for that instance. An egress rule is applied to traffic leaving the instance.";
const PORT_MIN_TEXT: &str = "The minimum port number in the range that is matched by the security group rule. If the protocol is TCP or UDP, this value must be less than or equal to the value of the port_range_max attribute. If the protocol is ICMP, this value must be an ICMP type.";
const PROTOCOL_TEXT: &str = "The protocol that is matched by the security group rule. Allowed values are ah, dccp, egp, esp, gre, icmp, icmpv6, igmp, ipv6-encap, ipv6-frag, ipv6-icmp, ipv6-nonxt, ipv6-opts, ipv6-route, ospf, pgm, rsvp, sctp, tcp, udp, udplite, vrrp and integer representations [0-255].";
const REMOTE_PREFIX_TEXT: &str = "The remote IP prefix (CIDR) to be associated with this security group rule.";

fn direction() -> PropertySchema {
    PropertySchema::new("direction", T::String, DIRECTION_TEXT)
        .default_value("ingress")
        .constraint(Constraint::allowed_values(["ingress", "egress"]))
}

fn ethertype() -> PropertySchema {
    PropertySchema::new("ethertype", T::String, "Ethertype of the traffic.")
        .default_value("IPv4")
        .constraint(Constraint::allowed_values(["IPv4", "IPv6"]))
}

fn port(name: &'static str, description: &'static str) -> PropertySchema {
    PropertySchema::new(name, T::Integer, description).constraint(Constraint::range(Some(0), Some(65535)))
}

/// Python's `str()` of a rule field, as Heat compares them.
fn py_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(true) => Some("True".into()),
        Value::Bool(false) => Some("False".into()),
        other => Some(other.to_string()),
    }
}

/// A rule's identity for reconciling.
fn rule_key(rule: &Map<String, Value>) -> Vec<Option<String>> {
    COMPARED_RULE_KEYS.iter().map(|k| rule.get(*k).and_then(py_text)).collect()
}

/// Ports are sent as strings, as Heat sends them.
fn ports_as_text(rule: &mut Map<String, Value>) {
    for key in ["port_range_min", "port_range_max"] {
        if let Some(port) = rule.get(key).filter(|p| !p.is_null()).and_then(py_text) {
            rule.insert(key.into(), json!(port));
        }
    }
}

pub struct SecurityGroup {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl SecurityGroup {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let rule = vec![
            direction(),
            ethertype(),
            port("port_range_min", PORT_MIN_TEXT),
            port(
                "port_range_max",
                "The maximum port number in the range that is matched by the security group rule. The port_range_min attribute constrains the port_range_max attribute. If the protocol is ICMP, this value must be an ICMP type.",
            ),
            PropertySchema::new(
                "protocol",
                T::String,
                "The protocol that is matched by the security group rule. Allowed values are ah, dccp, egp, esp, gre, icmp, icmpv6, igmp, ipv6-encap, ipv6-frag, ipv6-icmp, ipv6-nonxt, ipv6-opts, ipv6-route, ospf, pgm, rsvp, sctp, tcp, udp, udplite, vrrp and integer representations [0-255]. If not specified, all protocols will be matched.",
            )
            .constraint(protocols()),
            PropertySchema::new("remote_mode", T::String, "Whether to specify a remote group or a remote IP prefix.")
                .default_value("remote_ip_prefix")
                .constraint(Constraint::allowed_values(["remote_ip_prefix", "remote_group_id"])),
            PropertySchema::new(
                "remote_group_id",
                T::String,
                "The remote group ID to be associated with this security group rule. If no value is specified then this rule will use this security group for the remote_group_id. The remote mode parameter must be set to \"remote_group_id\".",
            )
            .constraint(Constraint::custom("neutron.security_group")),
            PropertySchema::new("remote_ip_prefix", T::String, REMOTE_PREFIX_TEXT)
                .constraint(Constraint::custom("net_cidr")),
            PropertySchema::new("description", T::String, "Description of the security group rule."),
        ];
        let properties = vec![
            PropertySchema::new(
                "name",
                T::String,
                "A string specifying a symbolic name for the security group, which is not required to be unique.",
            )
            .update_allowed(),
            PropertySchema::new("description", T::String, "Description of the security group.").update_allowed(),
            PropertySchema::new("rules", T::List, "List of security group rules.")
                .default_value(json!([]))
                .update_allowed()
                .list_of(PropertySchema::new("*", T::Map, "").map_of(rule)),
            PropertySchema::new(
                "stateful",
                T::Boolean,
                "Whether to create this security group as stateful or stateless.",
            )
            .update_allowed(),
        ];
        SecurityGroup {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::supported("2014.1"),
                description: "A resource for managing Neutron security groups.\n\nSecurity groups are sets of IP filter rules that are applied to an\ninstance's networking. They are project specific, and project members can\nedit the default rules for their group and add new rules sets. All projects\nhave a \"default\" security group, which is applied to instances that have no\nother security group defined.",
            },
        }
    }

    /// Heat's `_format_rule`: the group's id, the remote the mode names
    /// (a remote group defaults to the group itself), ports as strings,
    /// no null description.
    fn format_rule(rule: &Value, group_id: &str) -> Value {
        let mut rule = rule.as_object().cloned().unwrap_or_default();
        rule.insert("security_group_id".into(), json!(group_id));
        if let Some(mode) = rule.remove("remote_mode") {
            if mode == "remote_group_id" {
                rule.insert("remote_ip_prefix".into(), Value::Null);
                if !rule.get("remote_group_id").is_some_and(super::truthy) {
                    rule.insert("remote_group_id".into(), json!(group_id));
                }
            } else {
                rule.insert("remote_group_id".into(), Value::Null);
            }
        }
        ports_as_text(&mut rule);
        if rule.get("description").is_none_or(Value::is_null) {
            rule.remove("description");
        }
        Value::Object(rule)
    }

    /// The group's rules as Neutron shows them (none when it is gone).
    async fn current_rules(network: &Network<'_>, id: &str) -> Result<Vec<Map<String, Value>>, ResourceFailure> {
        match network.show(SECURITY_GROUP, id).await {
            Ok(group) => Ok(group
                .get("security_group_rules")
                .and_then(Value::as_array)
                .map(|rules| rules.iter().filter_map(Value::as_object).cloned().collect())
                .unwrap_or_default()),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(failure(e)),
        }
    }

    /// Deletes the group's rules `which` picks (404s are done).
    async fn delete_rules(
        network: &Network<'_>,
        id: &str,
        which: impl Fn(&Map<String, Value>) -> bool,
    ) -> Result<(), ResourceFailure> {
        for rule in Self::current_rules(network, id).await? {
            let Some(rule_id) = rule.get("id").and_then(Value::as_str).filter(|_| which(&rule)) else { continue };
            match network.delete(SECURITY_GROUP_RULE, rule_id).await {
                Err(e) if !e.is_not_found() => return Err(failure(e)),
                _ => {}
            }
        }
        Ok(())
    }

    async fn stateless_supported(network: &Network<'_>) -> Result<bool, ResourceFailure> {
        Ok(network.extension_aliases().await.map_err(failure)?.iter().any(|a| a == STATEFUL_EXTENSION))
    }

    /// Heat's validation of `stateful: false` (it asks Neutron).
    async fn check_stateless(network: &Network<'_>, props: &Properties) -> Result<(), ResourceFailure> {
        if props.get("stateful") == Some(&json!(false)) && !Self::stateless_supported(network).await? {
            return Err(ResourceFailure::error(
                "StackValidationFailed",
                "Neutron does not support stateless security groups; remove the \"stateful\" property or set it to true.",
            ));
        }
        Ok(())
    }

    /// Heat's `_update_rules`: deletes the rules not wanted, creates the
    /// wanted ones missing.
    async fn update_rules(network: &Network<'_>, id: &str, rules: &[Value]) -> Result<(), ResourceFailure> {
        let mut wanted = rules.to_vec();
        if !wanted.iter().any(|r| r.get("direction") == Some(&json!("egress"))) {
            wanted.push(json!({"direction": "egress", "ethertype": "IPv4"}));
            wanted.push(json!({"direction": "egress", "ethertype": "IPv6"}));
        }
        let wanted: Vec<Map<String, Value>> =
            wanted.iter().filter_map(|r| Self::format_rule(r, id).as_object().cloned()).collect();
        let wanted_keys: Vec<_> = wanted.iter().map(rule_key).collect();
        let current = Self::current_rules(network, id).await?;
        let current_keys: Vec<_> = current.iter().map(rule_key).collect();
        for rule in current.iter().filter(|r| !wanted_keys.contains(&rule_key(r))) {
            let Some(rule_id) = rule.get("id").and_then(Value::as_str) else { continue };
            match network.delete(SECURITY_GROUP_RULE, rule_id).await {
                Err(e) if !e.is_not_found() => return Err(failure(e)),
                _ => {}
            }
        }
        let missing: Vec<Value> =
            wanted.into_iter().filter(|r| !current_keys.contains(&rule_key(r))).map(Value::Object).collect();
        if missing.is_empty() {
            return Ok(());
        }
        network.create_many(SECURITY_GROUP_RULE, missing).await.map_err(failure)
    }
}

impl NeutronActions for SecurityGroup {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        Self::check_stateless(network, &ctx.properties).await?;
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&ctx.properties, name);
        let rules = fields.remove("rules").and_then(|r| r.as_array().cloned()).unwrap_or_default();
        if !Self::stateless_supported(network).await? {
            fields.remove("stateful");
        }
        let created = network.create(SECURITY_GROUP, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a security group without an id".into())))?
            .to_string();
        ctx.state.physical_id = Some(id.clone());
        if rules.is_empty() {
            return Ok(());
        }
        if rules.iter().any(|r| r.get("direction") == Some(&json!("egress"))) {
            Self::delete_rules(network, &id, |r| r.get("direction") == Some(&json!("egress"))).await?;
        }
        let formatted = rules.iter().map(|r| Self::format_rule(r, &id)).collect();
        network.create_many(SECURITY_GROUP_RULE, formatted).await.map_err(failure)
    }

    async fn update_with(&self, network: &Network<'_>, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let mut diff = changed(old, &ctx.properties);
        let rules = diff.remove("rules");
        if let Some(stateful) = diff.get("stateful") {
            Self::check_stateless(network, &ctx.properties).await?;
            if old.get("stateful").unwrap_or(&Value::Null) != stateful {
                let ports = network.list(PORT, &[("security_groups", &id)]).await.map_err(failure)?;
                if !ports.is_empty() {
                    return Err(ResourceFailure::error(
                        "NotSupported",
                        format!(
                            "Updating the \"stateful\" property while security group \"{id}\" is attached to ports. Detach all ports from the security group and retry. is not supported."
                        ),
                    ));
                }
            }
        }
        if !diff.is_empty() {
            let fields = update_fields(ctx, old, diff);
            network.update(SECURITY_GROUP, &id, fields).await.map_err(failure)?;
        }
        if let Some(rules) = rules {
            Self::update_rules(network, &id, rules.as_array().map_or(&[][..], Vec::as_slice)).await?;
        }
        Ok(())
    }

    /// The rules first, then the group.
    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        with_delete_retries(ctx, || async {
            Self::delete_rules(network, id, |_| true).await?;
            conflict_retryable(network.delete(SECURITY_GROUP, id).await)
        })
        .await
    }
}

impl Plugin for SecurityGroup {
    const TYPE: &'static str = "OS::Neutron::SecurityGroup";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(&["security-group"]))
    }

    /// Heat's name check (the `stateful` one asks Neutron: at create and
    /// update here). Its `value_specs` check has nothing to look at.
    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        if set_str(props, "name") == Some("default") {
            return Err(EngineError::validation("Security groups cannot be assigned the name \"default\"."));
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
        replace_failed(&self.host, ctx, SECURITY_GROUP).await
    }

    async fn attribute(&self, _state: &ResourceState, _name: &str) -> Result<Value, EngineError> {
        Ok(Value::Null)
    }
}

pub struct SecurityGroupRule {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

impl SecurityGroupRule {
    pub fn new(host: Arc<HostSlot>) -> Self {
        let properties = vec![
            PropertySchema::new("security_group", T::String, "Security group name or ID to add rule.")
                .required()
                .constraint(Constraint::custom("neutron.security_group")),
            PropertySchema::new("description", T::String, "Description of the security group rule."),
            direction(),
            ethertype(),
            port("port_range_min", PORT_MIN_TEXT),
            port(
                "port_range_max",
                "The maximum port number in the range that is matched by the security group rule. The port_range_min attribute constrains the port_range_max attribute. If the protocol is ICMP, this value must be an ICMP code.",
            ),
            PropertySchema::new("protocol", T::String, PROTOCOL_TEXT).default_value("tcp").constraint(protocols()),
            PropertySchema::new(
                "remote_group",
                T::String,
                "The remote group name or ID to be associated with this security group rule.",
            )
            .constraint(Constraint::custom("neutron.security_group")),
            PropertySchema::new("remote_ip_prefix", T::String, REMOTE_PREFIX_TEXT)
                .constraint(Constraint::custom("net_cidr")),
        ];
        SecurityGroupRule {
            host,
            schema: ResourceSchema {
                properties,
                attributes: Vec::new(),
                support_status: SupportStatus::supported("7.0.0"),
                description:
                    "A resource for managing Neutron security group rules.\n\nRules to use in security group resource.",
            },
        }
    }
}

impl NeutronActions for SecurityGroupRule {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, network: &Network<'_>, ctx: &mut ActionContext) -> ActionResult {
        let mut props = ctx.properties.clone();
        let group = find_id(network, SECURITY_GROUP, set_str(&props, "security_group").unwrap_or_default()).await?;
        props.insert("security_group".into(), json!(group));
        if let Some(remote) = set_str(&props, "remote_group").filter(|r| !r.is_empty()).map(str::to_owned) {
            props.insert("remote_group".into(), json!(find_id(network, SECURITY_GROUP, &remote).await?));
        }
        let name = ctx.stable_physical_name();
        let mut fields = create_fields(&props, name);
        if let Some(group) = fields.remove("security_group") {
            fields.insert("security_group_id".into(), group);
        }
        if let Some(remote) = fields.remove("remote_group") {
            fields.insert("remote_group_id".into(), remote);
        }
        ports_as_text(&mut fields);
        let created = network.create(SECURITY_GROUP_RULE, fields).await.map_err(failure)?;
        let id = created
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| failure(OsError::InvalidResponse("a security group rule without an id".into())))?;
        ctx.state.physical_id = Some(id.to_string());
        Ok(())
    }

    async fn delete_with(&self, network: &Network<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        with_delete_retries(ctx, || async { conflict_retryable(network.delete(SECURITY_GROUP_RULE, id).await) }).await
    }
}

impl Plugin for SecurityGroupRule {
    const TYPE: &'static str = "OS::Neutron::SecurityGroupRule";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::neutron_with(&["security-group"]))
    }

    fn validate(&self, props: &Properties) -> Result<(), EngineError> {
        let set = |k: &str| props.get(k).is_some_and(|v| !v.is_null());
        if set("remote_group") && set("remote_ip_prefix") {
            return Err(EngineError::validation(
                "Cannot define the following properties at the same time: remote_group, remote_ip_prefix.",
            ));
        }
        let min = props.get("port_range_min").and_then(Value::as_i64);
        let max = props.get("port_range_max").and_then(Value::as_i64);
        let icmp = matches!(set_str(props, "protocol"), Some("icmp" | "icmpv6" | "ipv6-icmp"));
        if let (Some(min), Some(max)) = (min, max) {
            if !icmp && max < min {
                return Err(EngineError::validation(
                    "The minimum port number must be less than or equal to the maximum port number.",
                ));
            }
        }
        Ok(())
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await
    }

    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        replace_failed(&self.host, ctx, SECURITY_GROUP_RULE).await
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

    fn group() -> SecurityGroup {
        SecurityGroup::new(Arc::new(HostSlot::default()))
    }

    fn rule() -> SecurityGroupRule {
        SecurityGroupRule::new(Arc::new(HostSlot::default()))
    }

    fn props<P: Plugin>(p: &P, v: Value) -> Properties {
        Plugin::validate_properties(p, "r", &v).unwrap()
    }

    const GROUPS: &str = "/network/v2.0/security-groups";
    const RULES: &str = "/network/v2.0/security-group-rules";

    #[tokio::test]
    async fn create_replaces_the_default_egress_rules_in_one_bulk_request() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/extensions", 200, json!({"extensions": [{"alias": "security-group"}]}));
        neutron.answer(&format!("POST {GROUPS}"), 201, json!({"security_group": {"id": "g1"}}));
        neutron.answer(
            &format!("GET {GROUPS}/g1"),
            200,
            json!({"security_group": {"id": "g1", "security_group_rules": [
                {"id": "e4", "direction": "egress", "ethertype": "IPv4"},
                {"id": "i4", "direction": "ingress", "ethertype": "IPv4"}]}}),
        );
        neutron.answer(&format!("DELETE {RULES}/e4"), 204, Value::Null);
        neutron.answer(&format!("POST {RULES}"), 201, json!({"security_group_rules": []}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(
            &group(),
            json!({"name": "web", "rules": [
                {"direction": "egress", "protocol": "tcp", "port_range_min": 80, "port_range_max": 80},
                {"remote_mode": "remote_group_id"}]}),
        ));
        group().create_with(&network, &mut ctx).await.unwrap();
        let calls = neutron.calls();
        assert_eq!(calls[1].2, json!({"security_group": {"name": "web"}}));
        let paths: Vec<String> = calls.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(paths[2..], [format!("GET {GROUPS}/g1"), format!("DELETE {RULES}/e4"), format!("POST {RULES}")]);
        assert_eq!(
            calls.last().unwrap().2,
            json!({"security_group_rules": [
                {"direction": "egress", "ethertype": "IPv4", "protocol": "tcp", "port_range_min": "80",
                 "port_range_max": "80", "remote_group_id": null, "remote_ip_prefix": null, "security_group_id": "g1"},
                {"direction": "ingress", "ethertype": "IPv4", "protocol": null, "port_range_min": null,
                 "port_range_max": null, "remote_group_id": "g1", "remote_ip_prefix": null, "security_group_id": "g1"}]})
        );
    }

    #[tokio::test]
    async fn stateless_needs_the_extension() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer("GET /network/v2.0/extensions", 200, json!({"extensions": []}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(&group(), json!({"stateful": false})));
        let e = group().create_with(&network, &mut ctx).await.unwrap_err();
        assert_eq!(e.exception().unwrap().0, "StackValidationFailed");
        assert!(neutron.calls().iter().all(|(m, _, _)| m == "GET"));
    }

    #[tokio::test]
    async fn an_update_reconciles_the_rules() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            &format!("GET {GROUPS}/g1"),
            200,
            json!({"security_group": {"id": "g1", "security_group_rules": [
                {"id": "e4", "direction": "egress", "ethertype": "IPv4", "security_group_id": "g1"},
                {"id": "e6", "direction": "egress", "ethertype": "IPv6", "security_group_id": "g1"},
                {"id": "ssh", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                 "port_range_min": 22, "port_range_max": 22, "security_group_id": "g1"}]}}),
        );
        neutron.answer(&format!("DELETE {RULES}/ssh"), 204, Value::Null);
        neutron.answer(&format!("POST {RULES}"), 201, json!({"security_group_rules": []}));
        let network = network(&session).await.unwrap();
        let ssh = json!({"protocol": "tcp", "port_range_min": 22, "port_range_max": 22});
        let old = props(&group(), json!({"rules": [ssh]}));
        let (mut ctx, _tx) = test_context(props(&group(), json!({"rules": [{"protocol": "icmp"}]})));
        ctx.state.physical_id = Some("g1".into());
        group().update_with(&network, &mut ctx, &old).await.unwrap();
        let calls = neutron.calls();
        let paths: Vec<String> = calls.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
        assert_eq!(paths, [format!("GET {GROUPS}/g1"), format!("DELETE {RULES}/ssh"), format!("POST {RULES}")]);
        let created = &calls[2].2["security_group_rules"];
        assert_eq!(created.as_array().unwrap().len(), 1);
        assert_eq!(created[0]["protocol"], json!("icmp"));
    }

    #[test]
    fn group_checks() {
        let e = Plugin::validate_properties(&group(), "g", &json!({"name": "default"})).unwrap_err();
        assert_eq!(e.message(), "Security groups cannot be assigned the name \"default\".");
        let e = Plugin::validate_properties(&group(), "g", &json!({"rules": [{"protocol": "nope"}]})).unwrap_err();
        assert!(e.message().contains("is not an allowed value"), "{}", e.message());
        props(&group(), json!({"rules": [{"protocol": 6}, {"protocol": "6"}]}));
    }

    #[tokio::test]
    async fn a_rule_resolves_its_groups() {
        let (neutron, session) = testing::neutron().await;
        neutron.answer(
            "GET /network/v2.0/security-groups?name=web&fields=id",
            200,
            json!({"security_groups": [{"id": "g1"}]}),
        );
        neutron.answer(
            "GET /network/v2.0/security-groups?name=lb&fields=id",
            200,
            json!({"security_groups": [{"id": "g2"}]}),
        );
        neutron.answer(&format!("POST {RULES}"), 201, json!({"security_group_rule": {"id": "r1"}}));
        let network = network(&session).await.unwrap();
        let (mut ctx, _tx) = test_context(props(
            &rule(),
            json!({"security_group": "web", "remote_group": "lb", "port_range_min": 443, "port_range_max": 443}),
        ));
        rule().create_with(&network, &mut ctx).await.unwrap();
        assert_eq!(
            neutron.calls().last().unwrap().2,
            json!({"security_group_rule": {"security_group_id": "g1", "remote_group_id": "g2", "direction": "ingress",
                "ethertype": "IPv4", "protocol": "tcp", "port_range_min": "443", "port_range_max": "443"}})
        );
        assert_eq!(ctx.state.physical_id.as_deref(), Some("r1"));
    }

    #[test]
    fn rule_checks() {
        let e = Plugin::validate_properties(
            &rule(),
            "r",
            &json!({"security_group": "g", "remote_group": "a", "remote_ip_prefix": "10.0.0.0/8"}),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Cannot define the following properties at the same time: remote_group, remote_ip_prefix."
        );
        let e = Plugin::validate_properties(
            &rule(),
            "r",
            &json!({"security_group": "g", "port_range_min": 90, "port_range_max": 80}),
        )
        .unwrap_err();
        assert_eq!(e.message(), "The minimum port number must be less than or equal to the maximum port number.");
        props(&rule(), json!({"security_group": "g", "protocol": "icmp", "port_range_min": 8, "port_range_max": 0}));
        let a = props(&rule(), json!({"security_group": "g"}));
        let b = props(&rule(), json!({"security_group": "g", "description": "d"}));
        assert_eq!(Plugin::update_decision(&rule(), &a, &b), UpdateDecision::Replace);
    }
}
