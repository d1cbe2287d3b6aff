//! An update of a server's `networks` in place, as Heat's
//! `calculate_networks` (server_network_mixin.py) decides it: entries
//! that did not change keep their interfaces (old entries are first
//! matched to the server's interfaces, so an entry naming only a network
//! learns its port); the ports of the old entries left are detached, then
//! the new entries left are attached (a port, a port the server makes,
//! or a network with an optional fixed IP). `allocate_network` detaches
//! everything and, for `auto`, attaches the one network the project may
//! use. Ports the server made are deleted once detached.

use keelson_openstack::compute::{Compute, Interface};
use keelson_openstack::network::{self, Kind, Network};
use keelson_openstack::Session;
use serde_json::{json, Map, Value};

use super::super::super::{neutron, ActionContext, ActionResult, ResourceFailure};
use super::super::failure;
use super::{ports, POLL_SECS};

/// The keys an interface of the server answers for.
const IFACE_KEYS: [&str; 4] = ["port", "network", "fixed_ip", "subnet"];

/// The keys of a `networks` entry once `uuid` is moved to `network`.
const NET_KEYS: [&str; 8] =
    ["network", "fixed_ip", "port", "subnet", "port_extra_properties", "floating_ip", "allocate_network", "tag"];

type Net = Map<String, Value>;

/// One interface to attach.
#[derive(Debug, Clone, Default, PartialEq)]
struct Attach {
    port_id: Option<String>,
    net_id: Option<String>,
    fixed_ip: Option<String>,
}

fn text(net: &Net, key: &str) -> Option<String> {
    net.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// `specified` ⊆ `candidate` (Heat's `_net_is_subset`).
fn is_subset(specified: &Net, candidate: &Net) -> bool {
    specified.iter().all(|(k, v)| candidate.get(k) == Some(v))
}

fn matching_items(specified: &Net, candidate: &Net) -> usize {
    specified.iter().filter(|(k, v)| candidate.get(*k) == Some(v)).count()
}

/// Heat's `_find_best_match`: by port, else by fixed IP, else the subset
/// sharing the most items.
fn best_match(candidates: &[Net], specified: &Net) -> Option<usize> {
    for key in ["port", "fixed_ip"] {
        if let Some(want) = specified.get(key).filter(|v| !v.is_null()) {
            return candidates.iter().position(|c| c.get(key) == Some(want) && is_subset(specified, c));
        }
    }
    let (mut best, mut most) = (None, 0);
    for (i, candidate) in candidates.iter().enumerate() {
        if is_subset(specified, candidate) {
            let n = matching_items(specified, candidate);
            if n > most {
                (best, most) = (Some(i), n);
            }
        }
    }
    best
}

/// The entries with Heat's translations applied (`uuid` into `network`;
/// network, subnet and port names resolved to ids) and every key present,
/// empty values as null.
async fn resolved(neutron: &Network<'_>, nets: &[Value]) -> Result<Vec<Net>, ResourceFailure> {
    let mut out = Vec::new();
    for entry in nets {
        let mut net = Net::new();
        for key in NET_KEYS {
            let value = match key {
                "network" => entry.get("network").filter(|v| !v.is_null()).or_else(|| entry.get("uuid")),
                _ => entry.get(key),
            };
            let value = value.filter(|v| keelson_pyfmt::truthy(v)).cloned().unwrap_or(Value::Null);
            net.insert(key.into(), value);
        }
        for (key, kind) in [("network", network::NETWORK), ("subnet", network::SUBNET), ("port", network::PORT)] {
            if let Some(name) = text(&net, key) {
                net.insert(key.into(), json!(find(neutron, kind, &name).await?));
            }
        }
        out.push(net);
    }
    Ok(out)
}

async fn find(neutron: &Network<'_>, kind: Kind, name: &str) -> Result<String, ResourceFailure> {
    neutron::lookup_result(kind, name, neutron.lookup(kind, name).await.map_err(neutron::failure)?)
}

/// Heat's `_get_network_id`: the network, else the subnet's.
async fn network_id(neutron: &Network<'_>, net: &Net) -> Result<Option<String>, ResourceFailure> {
    if let Some(id) = text(net, "network") {
        return Ok(Some(id));
    }
    match text(net, "subnet") {
        Some(subnet) => {
            let found = neutron.show(network::SUBNET, &subnet).await.map_err(neutron::failure)?;
            Ok(found.get("network_id").and_then(Value::as_str).map(str::to_owned))
        }
        None => Ok(None),
    }
}

/// Heat's `update_networks_matching_iface_port`: each old entry takes the
/// port (and what else the interface says) of the interface it matches.
async fn match_interfaces(neutron: &Network<'_>, old: &mut [Net], ifaces: &[Interface]) -> Result<(), ResourceFailure> {
    let mut props: Vec<Net> = ifaces
        .iter()
        .map(|i| {
            let mut m = Net::new();
            m.insert("port".into(), json!(i.port_id));
            m.insert("network".into(), json!(i.net_id));
            m.insert("fixed_ip".into(), i.ip_address.as_ref().map_or(Value::Null, |ip| json!(ip)));
            m.insert("subnet".into(), i.subnet_id.as_ref().map_or(Value::Null, |s| json!(s)));
            m
        })
        .collect();
    for net in old.iter_mut() {
        if net.get("port").is_none_or(Value::is_null) {
            let id = network_id(neutron, net).await?;
            net.insert("network".into(), id.map_or(Value::Null, Value::String));
        }
        let reduced: Net = net
            .iter()
            .filter(|(k, v)| IFACE_KEYS.contains(&k.as_str()) && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(i) = best_match(&props, &reduced) {
            let matched = props.remove(i);
            net.extend(matched);
        }
    }
    Ok(())
}

/// What to detach (ports) and attach, as Heat's `calculate_networks`.
async fn plan(
    session: &Session,
    neutron: &Network<'_>,
    ctx: &mut ActionContext,
    old: Vec<Net>,
    new: Vec<Net>,
    ifaces: &[Interface],
    security_groups: &[String],
) -> Result<(Vec<String>, Vec<Attach>), ResourceFailure> {
    let all_ports = || ifaces.iter().map(|i| i.port_id.clone()).collect::<Vec<_>>();
    let str_net = |nets: &[Net]| nets.iter().find_map(|n| text(n, "allocate_network"));
    if let Some(how) = str_net(&new) {
        let mut attach = Vec::new();
        if how == "auto" {
            attach.push(Attach { net_id: Some(auto_network(session, neutron).await?), ..Attach::default() });
        }
        return Ok((all_ports(), attach));
    }
    if old.is_empty() && new.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let (mut old, mut new) = (old, new);
    let mut detach = Vec::new();
    let mut kept = 0;
    if old.is_empty() || str_net(&old).is_some() {
        detach = all_ports();
    } else {
        match_interfaces(neutron, &mut old, ifaces).await?;
        let mut remaining = Vec::new();
        for net in new {
            let reduced: Net = net
                .iter()
                .filter(|(k, v)| !IFACE_KEYS.contains(&k.as_str()) || !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match best_match(&old, &reduced) {
                Some(i) => {
                    old.remove(i);
                    kept += 1;
                }
                None => remaining.push(net),
            }
        }
        new = remaining;
        detach.extend(old.iter().filter_map(|n| text(n, "port")));
        for fip in old.iter().filter_map(|n| text(n, "floating_ip")) {
            let mut fields = Map::new();
            fields.insert("port_id".into(), Value::Null);
            match neutron.update(network::FLOATING_IP, &fip, fields).await {
                Err(e) if !e.is_not_found() => return Err(neutron::failure(e)),
                _ => {}
            }
        }
    }
    let mut attach = Vec::new();
    if new.is_empty() && kept == 0 {
        attach.push(Attach::default());
    }
    let mut group_ids: Option<Vec<String>> = None;
    for (index, net) in new.iter().enumerate() {
        let mut a = Attach::default();
        if let Some(port) = text(net, "port") {
            a.port_id = Some(port);
        } else if ports::makes_port(&Value::Object(net.clone())) {
            let net_id = network_id(neutron, net).await?.unwrap_or_default();
            if group_ids.is_none() && !security_groups.is_empty() {
                let project = project_id(session).await?;
                group_ids = Some(ports::secgroup_ids(neutron, &project, security_groups).await?);
            }
            let subnet = text(net, "subnet");
            let entry = Value::Object(net.clone());
            let groups = group_ids.clone().unwrap_or_default();
            a.port_id = Some(
                ports::create_internal_port(neutron, ctx, index, &entry, &net_id, &groups, subnet.as_deref()).await?,
            );
        } else {
            a.net_id = network_id(neutron, net).await?;
            a.fixed_ip = a.net_id.as_ref().and(text(net, "fixed_ip"));
        }
        if let (Some(fip), Some(port)) = (text(net, "floating_ip"), &a.port_id) {
            let mut fields = Map::new();
            fields.insert("port_id".into(), json!(port));
            if let Some(ip) = text(net, "fixed_ip") {
                fields.insert("fixed_ip_address".into(), json!(ip));
            }
            neutron.update(network::FLOATING_IP, &fip, fields).await.map_err(neutron::failure)?;
        }
        attach.push(a);
    }
    Ok((detach, attach))
}

async fn project_id(session: &Session) -> Result<String, ResourceFailure> {
    Ok(session.access().await.map_err(failure)?.project_id.clone().unwrap_or_default())
}

/// Heat's `allocate_network: auto` on update: the one network the project
/// may use (its own, else a shared one), else Neutron's auto-allocated
/// topology.
async fn auto_network(session: &Session, neutron: &Network<'_>) -> Result<String, ResourceFailure> {
    let project = project_id(session).await?;
    let own = [("tenant_id", project.as_str()), ("shared", "False"), ("admin_state_up", "True")];
    let mut nets = neutron.list(network::NETWORK, &own).await.map_err(neutron::failure)?;
    nets.extend(neutron.list(network::NETWORK, &[("shared", "True")]).await.map_err(neutron::failure)?);
    let ids: Vec<String> = nets.iter().filter_map(|n| n.get("id").and_then(Value::as_str).map(str::to_owned)).collect();
    match ids.as_slice() {
        [one] => Ok(one.clone()),
        [] => {
            let topology = neutron.show(AUTO_TOPOLOGY, &project).await.map_err(neutron::failure)?;
            Ok(topology.get("id").and_then(Value::as_str).unwrap_or_default().to_string())
        }
        _ => Err(ResourceFailure::error("UnableToAutoAllocateNetwork", "Multiple possible networks found.")),
    }
}

/// Neutron's `GET /auto-allocated-topology/{project}`.
const AUTO_TOPOLOGY: Kind =
    Kind { key: "auto_allocated_topology", collection: "auto_allocated_topologies", path: "/auto-allocated-topology" };

/// Applies the update of `networks` from `old` to `new` on server `id`:
/// detaches, then attaches, each waited for.
pub(super) async fn update_networks(
    session: &Session,
    compute: &Compute<'_>,
    ctx: &mut ActionContext,
    id: &str,
    old: &[Value],
    new: &[Value],
    security_groups: &[String],
) -> ActionResult {
    let neutron = Network::connect(session).await.map_err(neutron::failure)?;
    let ifaces = compute.interfaces(id).await.map_err(failure)?;
    let old = resolved(&neutron, old).await?;
    let new = resolved(&neutron, new).await?;
    let (detach, attach) = plan(session, &neutron, ctx, old, new, &ifaces, security_groups).await?;
    let internal = ports::internal_ports(&ctx.state);
    for port in &detach {
        match compute.detach_interface(id, port).await {
            Err(e) if !e.is_not_found() => return Err(failure(e)),
            _ => {}
        }
        while compute.interfaces(id).await.map_err(failure)?.iter().any(|i| &i.port_id == port) {
            ctx.sleep(POLL_SECS).await?;
        }
        // Only once Nova has let go of it.
        if internal.contains(port) {
            match neutron.delete(network::PORT, port).await {
                Err(e) if !e.is_not_found() => return Err(neutron::failure(e)),
                _ => {}
            }
            ports::forget_port(&mut ctx.state, port);
        }
    }
    let mut group_ids: Option<Vec<String>> = None;
    for a in attach {
        let port = compute
            .attach_interface(id, a.port_id.as_deref(), a.net_id.as_deref(), a.fixed_ip.as_deref())
            .await
            .map_err(failure)?;
        // A port Nova made gets the server's security groups.
        if a.port_id.is_none() && !security_groups.is_empty() && !port.is_empty() {
            if group_ids.is_none() {
                let project = project_id(session).await?;
                group_ids = Some(ports::secgroup_ids(&neutron, &project, security_groups).await?);
            }
            let mut fields = Map::new();
            fields.insert("security_groups".into(), json!(group_ids.clone().unwrap_or_default()));
            neutron.update(network::PORT, &port, fields).await.map_err(neutron::failure)?;
        }
        if let Some(port) = a.port_id.as_deref().or(Some(port.as_str()).filter(|p| !p.is_empty())) {
            while !compute.interfaces(id).await.map_err(failure)?.iter().any(|i| i.port_id == port) {
                ctx.sleep(POLL_SECS).await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(v: Value) -> Net {
        let mut n = Net::new();
        for key in NET_KEYS {
            n.insert(key.into(), v.get(key).cloned().unwrap_or(Value::Null));
        }
        n
    }

    #[test]
    fn best_match_by_port_fixed_ip_then_most_items() {
        let candidates = vec![
            net(json!({"port": "p1", "network": "n1", "fixed_ip": "10.0.0.1"})),
            net(json!({"port": "p2", "network": "n2", "fixed_ip": "10.0.1.1"})),
        ];
        let only = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(best_match(&candidates, &only(json!({"port": "p2"}))), Some(1));
        assert_eq!(best_match(&candidates, &only(json!({"port": "p3"}))), None);
        assert_eq!(best_match(&candidates, &only(json!({"fixed_ip": "10.0.0.1", "network": "n1"}))), Some(0));
        assert_eq!(best_match(&candidates, &only(json!({"network": "n2"}))), Some(1));
        assert_eq!(best_match(&candidates, &only(json!({"network": "n3"}))), None);
    }
}
