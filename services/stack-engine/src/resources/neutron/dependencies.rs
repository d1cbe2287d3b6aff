//! The dependencies Heat 27.0.1's Neutron types add to a stack's graph
//! beyond what the template names (upstream `add_dependencies`): Neutron
//! refuses a port, a router gateway or a floating IP whose network or
//! subnet is not ready, though nothing in the template says so.
//!
//! Each rule reads the resources' properties as resolved before anything
//! exists, so two references to one resource compare equal (its name).
//! Upstream's rules about OS::Neutron::RouterGateway (hidden in Heat, not
//! offered by keelson) have nothing to match.

use std::collections::BTreeSet;

use serde_json::Value;

use super::super::{Plugin, StackMember};
use super::port::Port;
use super::router::{Router, RouterInterface};
use super::subnet::Subnet;
use super::truthy;

/// The value of `key`, a null being no value (upstream's `None`).
fn value<'a>(member: &StackMember<'a>, key: &str) -> Option<&'a Value> {
    member.properties.get(key).filter(|v| !v.is_null())
}

fn of_type<'s, 'a>(stack: &'s [StackMember<'a>], type_name: &'s str) -> impl Iterator<Item = &'s StackMember<'a>> {
    stack.iter().filter(move |m| m.type_name == type_name)
}

/// The stack's subnets on `network`.
fn subnets_on(network: Option<&Value>, stack: &[StackMember<'_>]) -> Vec<String> {
    of_type(stack, <Subnet as Plugin>::TYPE)
        .filter(|s| value(s, "network") == network)
        .map(|s| s.name.to_string())
        .collect()
}

/// A port waits for every subnet of its network in the stack: which one
/// Neutron picks its address from is not known.
pub(super) fn port(this: &StackMember<'_>, stack: &[StackMember<'_>]) -> Vec<String> {
    subnets_on(value(this, "network"), stack)
}

/// A router with a gateway waits for the subnets of the gateway's network
/// (the gateway takes an address on one).
pub(super) fn router(this: &StackMember<'_>, stack: &[StackMember<'_>]) -> Vec<String> {
    let Some(gateway) = value(this, "external_gateway_info").filter(|g| truthy(g)) else {
        return Vec::new();
    };
    subnets_on(gateway.get("network").filter(|v| !v.is_null()), stack)
}

/// The subnet a router interface attaches.
fn interface_subnet<'a>(interface: &StackMember<'a>) -> Option<&'a Value> {
    value(interface, "subnet")
}

/// A floating IP waits for the routers whose gateway is its network, and
/// for the router interfaces on the subnet of a port it names.
pub(super) fn floating_ip(
    this: &StackMember<'_>,
    explicit: &BTreeSet<String>,
    stack: &[StackMember<'_>],
) -> Vec<String> {
    let floating_network = value(this, "floating_network");
    let mut names: Vec<String> = of_type(stack, <Router as Plugin>::TYPE)
        .filter(|r| {
            value(r, "external_gateway_info")
                .filter(|g| truthy(g))
                .is_some_and(|g| g.get("network").filter(|v| !v.is_null()) == floating_network)
        })
        .map(|r| r.name.to_string())
        .collect();
    let ports: Vec<&StackMember<'_>> = named_ports(explicit, stack);
    for interface in of_type(stack, <RouterInterface as Plugin>::TYPE) {
        let subnet = interface_subnet(interface);
        if ports.iter().any(|p| floating_port_on_subnet(p, subnet, stack)) {
            names.push(interface.name.to_string());
        }
    }
    names
}

/// The ports of the stack among `explicit`.
fn named_ports<'s, 'a>(explicit: &BTreeSet<String>, stack: &'s [StackMember<'a>]) -> Vec<&'s StackMember<'a>> {
    of_type(stack, <Port as Plugin>::TYPE).filter(|p| explicit.contains(p.name)).collect()
}

fn fixed_ip_subnets<'a>(port: &StackMember<'a>) -> impl Iterator<Item = Option<&'a Value>> {
    value(port, "fixed_ips")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|ip| ip.get("subnet").filter(|v| !v.is_null()))
}

/// Whether a floating IP's port may sit on the interface's `subnet`: one
/// of its fixed IPs names it; without fixed IPs, any interface without a
/// subnet, or the subnet is on the port's network. Heat asks Neutron for
/// that network's subnets; keelson decides from the template: a subnet
/// of the stack is on the network its `network` names, and one the stack
/// does not make may be on any (the edge is kept rather than missed).
fn floating_port_on_subnet(port: &StackMember<'_>, subnet: Option<&Value>, stack: &[StackMember<'_>]) -> bool {
    if value(port, "fixed_ips").is_some_and(truthy) {
        return fixed_ip_subnets(port).any(|s| s == subnet);
    }
    let Some(subnet) = subnet else {
        return true;
    };
    let Some(port_network) = value(port, "network") else {
        return false;
    };
    let made_here = subnet.as_str().and_then(|name| of_type(stack, <Subnet as Plugin>::TYPE).find(|s| s.name == name));
    match made_here {
        Some(made) => value(made, "network") == Some(port_network),
        None => true,
    }
}

/// An association waits for the router interfaces on the subnet of the
/// first fixed IP of a port it names (upstream reads only the first).
pub(super) fn floating_ip_association(explicit: &BTreeSet<String>, stack: &[StackMember<'_>]) -> Vec<String> {
    let ports = named_ports(explicit, stack);
    of_type(stack, <RouterInterface as Plugin>::TYPE)
        .filter(|interface| {
            let subnet = interface_subnet(interface);
            ports.iter().any(|p| fixed_ip_subnets(p).next().is_some_and(|first| first == subnet))
        })
        .map(|interface| interface.name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::Properties;

    fn props(v: Value) -> Properties {
        v.as_object().cloned().unwrap_or_default()
    }

    fn member<'a>(name: &'a str, type_name: &'a str, properties: &'a Properties) -> StackMember<'a> {
        StackMember { name, type_name, properties }
    }

    const SUBNET: &str = "OS::Neutron::Subnet";
    const PORT: &str = "OS::Neutron::Port";
    const ROUTER: &str = "OS::Neutron::Router";
    const INTERFACE: &str = "OS::Neutron::RouterInterface";
    const FIP: &str = "OS::Neutron::FloatingIP";

    #[test]
    fn a_port_needs_the_subnets_of_its_network() {
        let (s1, s2, other) =
            (props(json!({"network": "net"})), props(json!({"network": "net"})), props(json!({"network": "other"})));
        let p = props(json!({"network": "net"}));
        let stack =
            [member("s1", SUBNET, &s1), member("s2", SUBNET, &s2), member("s3", SUBNET, &other), member("p", PORT, &p)];
        assert_eq!(port(&stack[3], &stack), vec!["s1", "s2"]);
    }

    #[test]
    fn a_router_with_a_gateway_needs_the_subnets_of_the_gateway_network() {
        let (ext, int) = (props(json!({"network": "public"})), props(json!({"network": "private"})));
        let with_gateway = props(json!({"external_gateway_info": {"network": "public", "enable_snat": null}}));
        let without = props(json!({"external_gateway_info": null}));
        let stack = [
            member("ext", SUBNET, &ext),
            member("int", SUBNET, &int),
            member("r", ROUTER, &with_gateway),
            member("r0", ROUTER, &without),
        ];
        assert_eq!(router(&stack[2], &stack), vec!["ext"]);
        assert!(router(&stack[3], &stack).is_empty());
    }

    #[test]
    fn a_floating_ip_needs_the_gateway_router_of_its_network_and_the_interfaces_of_its_port() {
        let gw = props(json!({"external_gateway_info": {"network": "public"}}));
        let elsewhere = props(json!({"external_gateway_info": {"network": "other"}}));
        let sub = props(json!({"network": "net"}));
        let on_sub = props(json!({"router": "gw", "subnet": "sub"}));
        let on_other = props(json!({"router": "gw", "subnet": "sub2"}));
        let p = props(json!({"network": "net", "fixed_ips": [{"subnet": "sub", "ip_address": null}]}));
        let fip = props(json!({"floating_network": "public", "port_id": "p"}));
        let stack = [
            member("gw", ROUTER, &gw),
            member("r2", ROUTER, &elsewhere),
            member("sub", SUBNET, &sub),
            member("ri", INTERFACE, &on_sub),
            member("ri2", INTERFACE, &on_other),
            member("p", PORT, &p),
            member("fip", FIP, &fip),
        ];
        let explicit: BTreeSet<String> = ["p".to_string()].into();
        assert_eq!(floating_ip(&stack[6], &explicit, &stack), vec!["gw", "ri"]);
        // A port the floating IP does not name leads nowhere.
        assert_eq!(floating_ip(&stack[6], &BTreeSet::new(), &stack), vec!["gw"]);
    }

    #[test]
    fn a_floating_ip_port_without_fixed_ips_is_on_the_subnets_of_its_network() {
        let sub = props(json!({"network": "net"}));
        let sub_elsewhere = props(json!({"network": "other"}));
        let on_sub = props(json!({"router": "r", "subnet": "sub"}));
        let on_elsewhere = props(json!({"router": "r", "subnet": "sub_elsewhere"}));
        let on_existing = props(json!({"router": "r", "subnet": "a-cloud-subnet"}));
        let by_port = props(json!({"router": "r", "port": "q"}));
        let p = props(json!({"network": "net", "fixed_ips": []}));
        let fip = props(json!({"floating_network": "public", "port_id": "p"}));
        let stack = [
            member("sub", SUBNET, &sub),
            member("sub_elsewhere", SUBNET, &sub_elsewhere),
            member("ri", INTERFACE, &on_sub),
            member("ri_elsewhere", INTERFACE, &on_elsewhere),
            member("ri_existing", INTERFACE, &on_existing),
            member("ri_port", INTERFACE, &by_port),
            member("p", PORT, &p),
            member("fip", FIP, &fip),
        ];
        let explicit: BTreeSet<String> = ["p".to_string()].into();
        assert_eq!(floating_ip(&stack[7], &explicit, &stack), vec!["ri", "ri_existing", "ri_port"]);
    }

    #[test]
    fn an_association_needs_the_interfaces_on_its_port_first_subnet() {
        let first = props(json!({"router": "r", "subnet": "a"}));
        let second = props(json!({"router": "r", "subnet": "b"}));
        let p = props(json!({"network": "net", "fixed_ips": [{"subnet": "a"}, {"subnet": "b"}]}));
        let stack = [member("ri_a", INTERFACE, &first), member("ri_b", INTERFACE, &second), member("p", PORT, &p)];
        let explicit: BTreeSet<String> = ["p".to_string()].into();
        assert_eq!(floating_ip_association(&explicit, &stack), vec!["ri_a"]);
        assert!(floating_ip_association(&BTreeSet::new(), &stack).is_empty());
    }
}
