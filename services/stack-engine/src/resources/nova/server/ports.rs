//! The ports a server makes for itself (Heat's "internal ports",
//! server_network_mixin.py): a `networks` entry with `subnet` or
//! `port_extra_properties` and no `port` gets a Neutron port named
//! `<resource>-port-<index>`, which the server boots on and which is
//! deleted once the server is gone. Their ids are kept in the resource
//! data as Heat keeps them (`internal_ports`: `[{"id": ...}]`).

use keelson_openstack::compute::Compute;
use keelson_openstack::network::{self, Network};
use keelson_openstack::OsError;
use serde_json::{json, Map, Value};

use super::super::super::{neutron, ActionContext, ResourceFailure, ResourceState};
use super::key_str;

/// Resource data: the ports the server made, as JSON.
pub(super) const INTERNAL_PORTS: &str = "internal_ports";

/// The port extra properties passed to Neutron as they are (Heat's
/// `Port.EXTRA_PROPERTIES` but `value_specs`, merged first, and
/// `allowed_address_pairs`, cleaned).
const EXTRA_KEYS: [&str; 7] = [
    "admin_state_up",
    "mac_address",
    "binding:vnic_type",
    "qos_policy",
    "port_security_enabled",
    "propagate_uplink_status",
    "no_fixed_ips",
];

/// Whether a `networks` entry makes the server a port of its own.
pub(super) fn makes_port(net: &Value) -> bool {
    key_str(net, "port").is_none()
        && (key_str(net, "subnet").is_some() || net.get("port_extra_properties").is_some_and(|v| !v.is_null()))
}

/// The ids of the ports the server made.
pub(super) fn internal_ports(state: &ResourceState) -> Vec<String> {
    let stored: Value =
        state.data.get(INTERNAL_PORTS).and_then(|d| serde_json::from_str(d).ok()).unwrap_or(Value::Null);
    stored
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Drops a deleted port from the resource data.
pub(super) fn forget_port(state: &mut ResourceState, id: &str) {
    let ports: Vec<Value> =
        internal_ports(state).into_iter().filter(|p| p != id).map(|id| json!({ "id": id })).collect();
    state.data.insert(INTERNAL_PORTS.into(), Value::Array(ports).to_string());
}

fn record_port(state: &mut ResourceState, id: &str) {
    let mut ports: Vec<Value> = internal_ports(state).into_iter().map(|id| json!({ "id": id })).collect();
    ports.push(json!({ "id": id }));
    state.data.insert(INTERNAL_PORTS.into(), Value::Array(ports).to_string());
}

/// Heat's `get_secgroup_uuids`: ids as they are, names among the
/// project's security groups.
pub(in super::super) async fn secgroup_ids(
    neutron: &Network<'_>,
    project_id: &str,
    groups: &[String],
) -> Result<Vec<String>, ResourceFailure> {
    let mut ids = Vec::new();
    let mut all: Option<Vec<Value>> = None;
    for group in groups {
        if uuid::Uuid::parse_str(group).is_ok() {
            ids.push(group.clone());
            continue;
        }
        if all.is_none() {
            let listed =
                neutron.list(network::SECURITY_GROUP, &[("project_id", project_id)]).await.map_err(neutron::failure)?;
            all = Some(listed);
        }
        let named: Vec<&str> = all
            .iter()
            .flatten()
            .filter(|g| g.get("name").and_then(Value::as_str) == Some(group.as_str()))
            .filter_map(|g| g.get("id").and_then(Value::as_str))
            .collect();
        match named.as_slice() {
            [one] => ids.push((*one).to_string()),
            [] => {
                return Err(ResourceFailure::error(
                    "EntityNotFound",
                    format!("The Resource ({group}) could not be found."),
                ))
            }
            _ => {
                return Err(ResourceFailure::error(
                    "PhysicalResourceNameAmbiguity",
                    format!("Multiple physical resources were found with name ({group})."),
                ))
            }
        }
    }
    Ok(ids)
}

/// Heat's `_create_internal_port` for entry `index` of the networks, on
/// `network_id`, with the server's security groups (ids).
pub(super) async fn create_internal_port(
    neutron: &Network<'_>,
    ctx: &mut ActionContext,
    index: usize,
    net: &Value,
    network_id: &str,
    security_group_ids: &[String],
    subnet_id: Option<&str>,
) -> Result<String, ResourceFailure> {
    let mut port = Map::new();
    port.insert("network_id".into(), json!(network_id));
    let mut fixed = Map::new();
    if let Some(ip) = key_str(net, "fixed_ip") {
        fixed.insert("ip_address".into(), json!(ip));
    }
    if let Some(subnet) = subnet_id {
        fixed.insert("subnet_id".into(), json!(subnet));
    }
    if !fixed.is_empty() {
        port.insert("fixed_ips".into(), json!([fixed]));
    }
    if !security_group_ids.is_empty() {
        port.insert("security_groups".into(), json!(security_group_ids));
    }
    if let Some(extra) = net.get("port_extra_properties").and_then(Value::as_object) {
        if let Some(specs) = extra.get("value_specs").and_then(Value::as_object) {
            port.extend(specs.clone());
        }
        for key in EXTRA_KEYS {
            if let Some(v) = extra.get(key).filter(|v| !v.is_null()) {
                port.insert(key.into(), v.clone());
            }
        }
        if let Some(pairs) = extra.get("allowed_address_pairs").and_then(Value::as_array) {
            let cleaned: Vec<Value> = pairs
                .iter()
                .map(|pair| {
                    let mut pair = pair.as_object().cloned().unwrap_or_default();
                    if pair.get("mac_address").is_some_and(Value::is_null) {
                        pair.remove("mac_address");
                    }
                    Value::Object(pair)
                })
                .collect();
            port.insert("allowed_address_pairs".into(), Value::Array(cleaned));
        }
    }
    port.insert("name".into(), json!(format!("{}-port-{index}", ctx.resource_name)));
    let id = create_port(neutron, port).await?;
    record_port(&mut ctx.state, &id);
    Ok(id)
}

/// Makes the port `body` describes; its id.
pub(in super::super) async fn create_port(
    neutron: &Network<'_>,
    body: Map<String, Value>,
) -> Result<String, ResourceFailure> {
    let created = neutron.create(network::PORT, body).await.map_err(neutron::failure)?;
    created
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| neutron::failure(OsError::InvalidResponse("no port id in Neutron's answer".into())))
}

/// Heat's `_delete_internal_ports`: a port already gone is done.
pub(super) async fn delete_internal_ports(
    neutron: &Network<'_>,
    state: &mut ResourceState,
) -> Result<(), ResourceFailure> {
    for id in internal_ports(state) {
        match neutron.delete(network::PORT, &id).await {
            Err(e) if !e.is_not_found() => return Err(neutron::failure(e)),
            _ => {}
        }
    }
    state.data.remove(INTERNAL_PORTS);
    Ok(())
}

/// Resource data: the ports a replacement took off the server, as JSON
/// (`[{"id": ...}]`, Heat's `external_ports` with its internal ones).
pub(super) const DETACHED_PORTS: &str = "external_ports";

/// Waits until Nova lists (`present`) or no longer lists port `port` on
/// server `server` (Heat's `check_interface_attach`/`_detach`).
pub(in super::super) async fn wait_interface(
    compute: &Compute<'_>,
    ctx: &ActionContext,
    server: &str,
    port: &str,
    present: bool,
) -> Result<(), ResourceFailure> {
    while compute.interfaces(server).await.map_err(super::failure)?.iter().any(|i| i.port_id == port) != present {
        ctx.sleep(super::POLL_SECS).await?;
    }
    Ok(())
}

/// Heat's `prepare_ports_for_replace`: the server gives up every port it
/// has, each detach waited for, so that its replacement can take them (a
/// port given by `networks` can be on one server only); their ids are
/// kept for a rollback. A server in ERROR (or gone) only deletes the ports
/// it made.
pub(super) async fn detach_for_replace(
    compute: &Compute<'_>,
    neutron: &Network<'_>,
    ctx: &mut ActionContext,
) -> Result<(), ResourceFailure> {
    let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
    let status = match compute.server(&id).await {
        Ok(server) => server.get("status").and_then(Value::as_str).map(str::to_string),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(super::failure(e)),
    };
    if status.as_deref().is_none_or(|s| s == "ERROR") {
        return delete_internal_ports(neutron, &mut ctx.state).await;
    }
    let ports: Vec<String> =
        compute.interfaces(&id).await.map_err(super::failure)?.into_iter().map(|i| i.port_id).collect();
    let kept: Vec<Value> = ports.iter().map(|p| json!({"id": p})).collect();
    ctx.state.data.insert(DETACHED_PORTS.into(), Value::Array(kept).to_string());
    for port in &ports {
        match compute.detach_interface(&id, port).await {
            Err(e) if !e.is_not_found() => return Err(super::failure(e)),
            _ => {}
        }
        wait_interface(compute, ctx, &id, port, false).await?;
    }
    Ok(())
}

/// How many times a rollback's attach meets a port still in use before it
/// fails (one poll apart: the replacement's delete frees it).
const ATTACH_CONFLICT_RETRIES: u32 = 120;

/// Whether server `id` exists once it has left BUILD (ACTIVE, ERROR or
/// any other settled status); false when Nova no longer has it.
async fn settled(compute: &Compute<'_>, ctx: &ActionContext, id: &str) -> Result<bool, ResourceFailure> {
    loop {
        match compute.server(id).await {
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(super::failure(e)),
            Ok(server) if server.get("status").and_then(Value::as_str) == Some("BUILD") => {
                ctx.sleep(super::POLL_SECS).await?
            }
            Ok(_) => return Ok(true),
        }
    }
}

/// Heat's `restore_ports_after_rollback`: the replacement (when there is
/// one) gives the ports back and the server takes them again, each waited
/// for.
pub(super) async fn reattach_after_rollback(
    compute: &Compute<'_>,
    ctx: &mut ActionContext,
    replacement: Option<&str>,
) -> Result<(), ResourceFailure> {
    let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
    let kept: Vec<String> = ctx
        .state
        .data
        .get(DETACHED_PORTS)
        .and_then(|v| serde_json::from_str::<Vec<Value>>(v).ok())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    // Nova detaches nothing from a server still building: as Heat, the
    // replacement is waited for until it is ACTIVE (or ERROR, or gone).
    let replacement = match replacement {
        Some(new) if settled(compute, ctx, new).await? => Some(new),
        _ => None,
    };
    for port in &kept {
        if let Some(new) = replacement {
            match compute.detach_interface(new, port).await {
                // Not on the replacement (or the replacement is gone).
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(super::failure(e)),
                Ok(()) => wait_interface(compute, ctx, new, port, false).await?,
            }
        }
        let mut conflicts = 0;
        loop {
            match compute.attach_interface(&id, Some(port), None, None).await {
                Ok(_) => break,
                // A replacement being deleted still holds the port.
                Err(OsError::Conflict(_)) if conflicts < ATTACH_CONFLICT_RETRIES => {
                    conflicts += 1;
                    ctx.sleep(super::POLL_SECS).await?;
                }
                Err(e) => return Err(super::failure(e)),
            }
        }
        wait_interface(compute, ctx, &id, port, true).await?;
    }
    ctx.state.data.remove(DETACHED_PORTS);
    Ok(())
}
