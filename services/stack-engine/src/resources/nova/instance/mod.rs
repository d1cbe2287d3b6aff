//! AWS::EC2::Instance: a Nova server described in CloudFormation terms,
//! after Heat 27.0.1's heat/engine/resources/aws/ec2/instance.py.
//!
//! Create boots the server (image and flavor by name or id, user data in
//! Heat's cfn-tools MIME form, `Tags` as the server's metadata,
//! `NovaSchedulerHints` as its scheduler hints, nics from
//! `NetworkInterfaces` or a port made on `SubnetId`), waits until it is
//! ACTIVE, then attaches `Volumes` and waits until Cinder shows them
//! in-use. Update in place: `Tags` (the metadata), `InstanceType` (resize
//! then confirm), `NetworkInterfaces` and `SubnetId` (interfaces detached
//! and attached); anything else replaces. Delete waits until Nova no
//! longer has the server, then removes the port made for `SubnetId`
//! (Heat the other way round, which Neutron's policy refuses). The
//! Nova calls, waits and texts are OS::Nova::Server's (`server/`).

use std::sync::Arc;

use keelson_openstack::compute::{Compute, ServerNetworks, ServerSpec};
use keelson_openstack::network::{self, Network};
use keelson_openstack::Session;
use serde_json::{json, Map, Value};

use super::super::context::reduce_physical_name;
use super::super::properties::property_error;
use super::super::schema::{AttributeSchema, Constraint, PropertySchema, PropertyType as T, ResourceSchema};
use super::super::{
    changed_properties, cinder, glance, neutron, validate_properties, ActionContext, ActionResult, HostSlot, Plugin,
    Properties, ResourceFailure, ResourceState,
};
use super::server::{ports, Doc, Server, NAME_LIMIT};
use super::{
    attribute_error, attribute_session, compute, create_in_stack, delete_in_stack, failure, ok_if_gone, stack_session,
    str_prop, update_in_stack, NovaActions,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// Resource data: the port made for `SubnetId` (Heat's `port_id`).
const PORT_DATA: &str = "port_id";

/// What Heat's texts call the server: "Failed to find instance ...".
const NOUN: &str = "instance";

/// Heat's `res_name` for `_check_active`: "Instance is not active".
const RES_NAME: &str = "Instance";

/// The properties Heat declares but does not implement (not shown in
/// the schema; a value for one fails validation).
const UNIMPLEMENTED: [&str; 8] = [
    "DisableApiTermination",
    "KernelId",
    "Monitoring",
    "PlacementGroupName",
    "PrivateIpAddress",
    "RamDiskId",
    "SourceDestCheck",
    "Tenancy",
];

pub struct Instance {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

fn list_prop<'a>(props: &'a Properties, name: &str) -> &'a [Value] {
    props.get(name).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn given(value: Option<&Value>) -> bool {
    value.is_some_and(|v| !v.is_null())
}

fn not_implemented(prop: &str) -> String {
    format!("Property {prop} not implemented yet")
}

/// Heat 27.0.1's properties (declaration order) and attributes.
fn instance_schema() -> ResourceSchema {
    let unimplemented = |name: &'static str, kind: T| PropertySchema::new(name, kind, "Not Implemented.").hidden();
    let key_value = |key: &'static str, value: &'static str| {
        PropertySchema::new("*", T::Map, "").map_of(vec![
            PropertySchema::new(key, T::String, "").required(),
            PropertySchema::new(value, T::String, "").required(),
        ])
    };
    let properties = vec![
        PropertySchema::new("ImageId", T::String, "Glance image ID or name.")
            .constraint(Constraint::custom("glance.image"))
            .required(),
        PropertySchema::new("InstanceType", T::String, "Nova instance type (flavor).")
            .required()
            .update_allowed()
            .constraint(Constraint::custom("nova.flavor")),
        PropertySchema::new("KeyName", T::String, "Optional Nova keypair name.")
            .constraint(Constraint::custom("nova.keypair")),
        PropertySchema::new("AvailabilityZone", T::String, "Availability zone to launch the instance in."),
        unimplemented("DisableApiTermination", T::String),
        unimplemented("KernelId", T::String),
        unimplemented("Monitoring", T::Boolean),
        unimplemented("PlacementGroupName", T::String),
        unimplemented("PrivateIpAddress", T::String),
        unimplemented("RamDiskId", T::String),
        PropertySchema::new("SecurityGroups", T::List, "Security group names to assign."),
        PropertySchema::new("SecurityGroupIds", T::List, "Security group IDs to assign."),
        PropertySchema::new("NetworkInterfaces", T::List, "Network interfaces to associate with instance.")
            .update_allowed(),
        unimplemented("SourceDestCheck", T::Boolean),
        PropertySchema::new("SubnetId", T::String, "Subnet ID to launch instance in.").update_allowed(),
        PropertySchema::new("Tags", T::List, "Tags to attach to instance.")
            .list_of(key_value("Key", "Value"))
            .update_allowed(),
        PropertySchema::new("NovaSchedulerHints", T::List, "Scheduler hints to pass to Nova (Heat extension).")
            .list_of(key_value("Key", "Value")),
        unimplemented("Tenancy", T::String).constraint(Constraint::allowed_values(["dedicated", "default"])),
        PropertySchema::new("UserData", T::String, "User data to pass to instance."),
        PropertySchema::new("Volumes", T::List, "Volumes to attach to instance.")
            .default_value(json!([]))
            .list_of(PropertySchema::new("*", T::Map, "").map_of(vec![
                PropertySchema::new("Device", T::String, "The device where the volume is exposed on the instance. This assignment may not be honored and it is advised that the path /dev/disk/by-id/virtio-<VolumeId> be used instead.")
                    .required(),
                PropertySchema::new("VolumeId", T::String, "The ID of the volume to be attached.")
                    .required()
                    .constraint(Constraint::custom("cinder.volume")),
            ])),
        PropertySchema::new("BlockDeviceMappings", T::List, "Block device mappings to attach to instance.").list_of(
            PropertySchema::new("*", T::Map, "").map_of(vec![
                PropertySchema::new("DeviceName", T::String, "A device name where the volume will be attached in the system at /dev/device_name.e.g. vdb")
                    .required(),
                PropertySchema::new("Ebs", T::Map, "The ebs volume to attach to the instance.").map_of(vec![
                    PropertySchema::new("DeleteOnTermination", T::Boolean, "Indicate whether the volume should be deleted when the instance is terminated.")
                        .default_value(json!(true)),
                    PropertySchema::new("Iops", T::Number, "The number of I/O operations per second that the volume supports."),
                    PropertySchema::new("SnapshotId", T::String, "The ID of the snapshot to create a volume from.")
                        .constraint(Constraint::custom("cinder.snapshot")),
                    PropertySchema::new("VolumeSize", T::String, "The size of the volume, in GB. Must be equal or greater than the size of the snapshot. It is safe to leave this blank and have the Compute service infer the size."),
                    PropertySchema::new("VolumeType", T::String, "The volume type."),
                ]),
                PropertySchema::new("NoDevice", T::Map, "The can be used to unmap a defined device."),
                PropertySchema::new("VirtualName", T::String, "The name of the virtual device. The name must be in the form ephemeralX where X is a number starting from zero (0); for example, ephemeral0."),
            ]),
        ),
    ];
    let attributes = vec![
        AttributeSchema::new(
            "AvailabilityZone",
            "The Availability Zone where the specified instance is launched.",
            Some("string"),
        ),
        AttributeSchema::new("PrivateDnsName", "Private DNS name of the specified instance.", Some("string")),
        AttributeSchema::new("PublicDnsName", "Public DNS name of the specified instance.", Some("string")),
        AttributeSchema::new("PrivateIp", "Private IP address of the specified instance.", Some("string")),
        AttributeSchema::new("PublicIp", "Public IP address of the specified instance.", Some("string")),
    ];
    ResourceSchema {
        properties,
        attributes,
        support_status: Default::default(),
        // The class has no docstring: Heat's `getdoc` text.
        description: "No description available",
    }
}

/// Heat's `_get_security_groups`: `SecurityGroups` then
/// `SecurityGroupIds`, as given.
fn security_groups(props: &Properties) -> Vec<String> {
    ["SecurityGroups", "SecurityGroupIds"]
        .iter()
        .flat_map(|name| list_prop(props, name))
        .map(keelson_pyfmt::str_of)
        .collect()
}

/// Heat's `_get_nova_metadata`: the tags as a Key → Value map; None
/// without `Tags`.
fn tags_metadata(props: &Properties) -> Option<Map<String, Value>> {
    let tags = props.get("Tags")?.as_array()?;
    Some(
        tags.iter()
            .map(|t| {
                let text = |k: &str| t.get(k).map(keelson_pyfmt::str_of).unwrap_or_default();
                (text("Key"), Value::String(text("Value")))
            })
            .collect(),
    )
}

/// `NovaSchedulerHints` as novaclient's shell folds them: a key given
/// again turns into the list of its values. None without hints.
fn scheduler_hints(props: &Properties) -> Option<Map<String, Value>> {
    let hints = list_prop(props, "NovaSchedulerHints");
    if hints.is_empty() {
        return None;
    }
    let mut folded = Map::new();
    for hint in hints {
        let key = hint.get("Key").map(keelson_pyfmt::str_of).unwrap_or_default();
        let value = hint.get("Value").cloned().unwrap_or(Value::Null);
        match folded.get_mut(&key) {
            Some(Value::Array(values)) => values.push(value),
            Some(first) => *first = json!([first.clone(), value]),
            None => {
                folded.insert(key, value);
            }
        }
    }
    Some(folded)
}

/// Heat's `_build_block_device_mapping` (`<snapshot>:snap:<size>:<delete>`
/// by device name) as novaclient parses it into Nova's legacy
/// `block_device_mapping` (validation asks every mapping for an
/// `Ebs.SnapshotId`).
fn block_devices(props: &Properties) -> Option<Vec<Value>> {
    let mappings = list_prop(props, "BlockDeviceMappings");
    if mappings.is_empty() {
        return None;
    }
    let mut by_device: Vec<(String, Value)> = Vec::new();
    for mapping in mappings {
        let Some(ebs) = mapping.get("Ebs").filter(|e| keelson_pyfmt::truthy(e)) else { continue };
        let device = mapping.get("DeviceName").map(keelson_pyfmt::str_of).unwrap_or_default();
        let mut entry = Map::new();
        entry.insert("device_name".into(), json!(device));
        match ebs.get("SnapshotId").filter(|s| keelson_pyfmt::truthy(s)) {
            Some(snapshot) => entry.insert("snapshot_id".into(), json!(keelson_pyfmt::str_of(snapshot))),
            None => entry.insert("volume_id".into(), json!("")),
        };
        if let Some(size) = ebs.get("VolumeSize").filter(|v| keelson_pyfmt::truthy(v)) {
            entry.insert("volume_size".into(), json!(keelson_pyfmt::str_of(size)));
        }
        if let Some(delete) = ebs.get("DeleteOnTermination").filter(|v| !v.is_null()) {
            entry.insert("delete_on_termination".into(), json!(keelson_pyfmt::str_of(delete)));
        }
        match by_device.iter_mut().find(|(d, _)| *d == device) {
            Some(slot) => slot.1 = Value::Object(entry),
            None => by_device.push((device, Value::Object(entry))),
        }
    }
    Some(by_device.into_iter().map(|(_, entry)| entry).collect())
}

/// The port ids `NetworkInterfaces` names, in `DeviceIndex` order (a bare
/// string is a port id at the next index), as Heat's `_build_nics`.
fn interface_ports(interfaces: &[Value]) -> Result<Vec<String>, ResourceFailure> {
    let mut indexed = Vec::new();
    for (position, entry) in interfaces.iter().enumerate() {
        let (port, index) = match entry {
            Value::String(port) => (port.clone(), position as i64),
            other => {
                let port = other.get("NetworkInterfaceId").map(keelson_pyfmt::str_of).unwrap_or_default();
                let index = other.get("DeviceIndex").unwrap_or(&Value::Null);
                let parsed = match index {
                    Value::Number(n) => n.as_i64(),
                    Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                };
                let Some(parsed) = parsed else {
                    let shown = keelson_pyfmt::str_of(index);
                    return Err(ResourceFailure::error(
                        "ValueError",
                        format!("invalid literal for int() with base 10: '{shown}'"),
                    ));
                };
                (port, parsed)
            }
        };
        indexed.push((index, port));
    }
    // Python's sort is stable, as this one.
    indexed.sort_by_key(|(index, _)| *index);
    Ok(indexed.into_iter().map(|(_, port)| port).collect())
}

/// Heat's `server_to_ipaddress`: the first address of the last network
/// by name that has one.
fn first_address(server: &Doc) -> Option<String> {
    let addresses = server.get("addresses").and_then(Value::as_object)?;
    let mut names: Vec<&String> = addresses.keys().collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names.into_iter().find_map(|name| {
        let first = addresses[name].as_array()?.first()?;
        first.get("addr").map(keelson_pyfmt::str_of)
    })
}

impl Instance {
    pub fn new(host: Arc<HostSlot>) -> Self {
        Instance { host, schema: instance_schema() }
    }

    /// Heat's `validate` and its check of unimplemented properties.
    fn check_properties(resource_name: &str, props: &Properties) -> Result<(), EngineError> {
        if let Some(name) = UNIMPLEMENTED.iter().find(|name| given(props.get(**name))) {
            return Err(property_error(resource_name, &[], &not_implemented(name)));
        }
        for (index, mapping) in list_prop(props, "BlockDeviceMappings").iter().enumerate() {
            let at = |path: &[&str]| -> Vec<String> {
                ["BlockDeviceMappings".to_string(), index.to_string()]
                    .into_iter()
                    .chain(path.iter().map(|p| p.to_string()))
                    .collect()
            };
            for name in ["NoDevice", "VirtualName"] {
                if given(mapping.get(name)) {
                    return Err(property_error(resource_name, &at(&[]), &not_implemented(name)));
                }
            }
            for name in ["Iops", "VolumeType"] {
                if given(mapping.get("Ebs").and_then(|e| e.get(name))) {
                    return Err(property_error(resource_name, &at(&["Ebs"]), &not_implemented(name)));
                }
            }
        }
        if !security_groups(props).is_empty() && !list_prop(props, "NetworkInterfaces").is_empty() {
            return Err(EngineError::Remote {
                heat_type: "ResourcePropertyConflict".into(),
                http_status: 400,
                message: "Cannot define the following properties at the same time: SecurityGroups/SecurityGroupIds, NetworkInterfaces.".into(),
            });
        }
        for mapping in list_prop(props, "BlockDeviceMappings") {
            let message = match mapping.get("Ebs").filter(|e| keelson_pyfmt::truthy(e)) {
                None => "Ebs is missing, this is required when specifying BlockDeviceMappings.",
                Some(ebs) if !ebs.get("SnapshotId").is_some_and(keelson_pyfmt::truthy) => {
                    "SnapshotId is missing, this is required when specifying BlockDeviceMappings."
                }
                Some(_) => continue,
            };
            return Err(EngineError::validation(message));
        }
        Ok(())
    }

    /// Heat's `_build_nics`: the ports of `NetworkInterfaces`, else a port
    /// made on `subnet` (its id kept as [`PORT_DATA`]), else None.
    async fn nics(
        session: &Session,
        ctx: &mut ActionContext,
        interfaces: &[Value],
        groups: &[String],
        subnet: Option<&str>,
    ) -> Result<Option<Vec<String>>, ResourceFailure> {
        if !interfaces.is_empty() {
            return interface_ports(interfaces).map(Some);
        }
        let Some(subnet) = subnet else { return Ok(None) };
        let neutron = Network::connect(session).await.map_err(neutron::failure)?;
        let shown = neutron.show(network::SUBNET, subnet).await.map_err(neutron::failure)?;
        let Some(network_id) = shown.get("network_id").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let mut port = Map::new();
        port.insert("admin_state_up".into(), json!(true));
        port.insert("network_id".into(), json!(network_id));
        port.insert("fixed_ips".into(), json!([{ "subnet_id": subnet }]));
        if !groups.is_empty() {
            let access = session.access().await.map_err(failure)?;
            let project = access.project_id.clone().unwrap_or_default();
            port.insert("security_groups".into(), json!(ports::secgroup_ids(&neutron, &project, groups).await?));
        }
        let id = ports::create_port(&neutron, port).await?;
        ctx.state.data.insert(PORT_DATA.into(), id.clone());
        Ok(Some(vec![id]))
    }

    /// Heat's `_port_data_delete`: the port made for `SubnetId` goes (one
    /// already gone is done).
    async fn delete_subnet_port(session: &Session, ctx: &mut ActionContext) -> ActionResult {
        let Some(port) = ctx.state.data.get(PORT_DATA).cloned() else { return Ok(()) };
        let neutron = Network::connect(session).await.map_err(neutron::failure)?;
        match neutron.delete(network::PORT, &port).await {
            Err(e) if !e.is_not_found() => return Err(neutron::failure(e)),
            _ => {}
        }
        ctx.state.data.remove(PORT_DATA);
        Ok(())
    }

    /// Heat's `_update_network_interfaces` and the interface updaters it
    /// runs in turn.
    async fn update_interfaces(
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        id: &str,
        old: &Properties,
    ) -> ActionResult {
        let props = ctx.properties.clone();
        let mut before = list_prop(old, "NetworkInterfaces").to_vec();
        let mut after = list_prop(&props, "NetworkInterfaces").to_vec();
        let interfaces_changed = changed_properties(old, &props).iter().any(|c| c == "NetworkInterfaces");
        if !before.is_empty() && !after.is_empty() {
            // Entries in both stay as they are.
            let common: Vec<Value> = before.iter().filter(|i| after.contains(i)).cloned().collect();
            for entry in &common {
                before.retain(|i| i != entry);
                if let Some(at) = after.iter().position(|i| i == entry) {
                    after.remove(at);
                }
            }
            for port in interface_ports(&before)? {
                ok_if_gone(compute.detach_interface(id, &port).await)?;
            }
            for port in interface_ports(&after)? {
                compute.attach_interface(id, Some(&port), None, None).await.map_err(failure)?;
            }
            return Ok(());
        }
        if !before.is_empty() && !interfaces_changed {
            // Heat logs that `NetworkInterfaces` rule and changes nothing.
            return Ok(());
        }
        // Heat's: the new subnet, else the one the instance had.
        let subnet = str_prop(&props, "SubnetId").or_else(|| str_prop(old, "SubnetId")).map(str::to_owned);
        let groups = security_groups(old);
        // Every interface comes off first, each detach waited for: Heat
        // 27.0.1 deletes the old subnet port while it is still bound, which
        // Neutron's policy refuses a project member since 2025.1.
        for interface in compute.interfaces(id).await.map_err(failure)? {
            // Heat's `interface_detach`: an interface already gone is done.
            ok_if_gone(compute.detach_interface(id, &interface.port_id).await)?;
            ports::wait_interface(compute, ctx, id, &interface.port_id, false).await?;
        }
        Self::delete_subnet_port(session, ctx).await?;
        let nics = Self::nics(session, ctx, &after, &groups, subnet.as_deref()).await?;
        match nics.filter(|n| !n.is_empty()) {
            None => {
                compute.attach_interface(id, None, None, None).await.map_err(failure)?;
            }
            Some(ports) => {
                for port in ports {
                    compute.attach_interface(id, Some(&port), None, None).await.map_err(failure)?;
                }
            }
        }
        Ok(())
    }

    /// Heat's `_attach_volumes`: every volume asked of Nova, then each
    /// waited for until Cinder shows it in-use.
    async fn attach_volumes(session: &Session, compute: &Compute<'_>, ctx: &ActionContext, id: &str) -> ActionResult {
        let volumes: Vec<(String, String)> = list_prop(&ctx.properties, "Volumes")
            .iter()
            .map(|v| {
                let text = |k: &str| v.get(k).map(keelson_pyfmt::str_of).unwrap_or_default();
                (text("VolumeId"), text("Device"))
            })
            .collect();
        if volumes.is_empty() {
            return Ok(());
        }
        for (volume, device) in &volumes {
            cinder::request_attach(compute, id, volume, Some(device)).await?;
        }
        let cinder = cinder::volume_client(session).await?;
        for (volume, _) in &volumes {
            cinder::wait_attached(&cinder, ctx, volume).await?;
        }
        Ok(())
    }
}

impl NovaActions for Instance {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, session: &Session, compute: &Compute<'_>, ctx: &mut ActionContext) -> ActionResult {
        let props = ctx.properties.clone();
        let groups = security_groups(&props);
        let user_text = props.get("UserData").and_then(Value::as_str).unwrap_or_default();
        let cfn_url = Server::cfn_url(&self.host, ctx).await?;
        let user_data = Server::user_data_as("HEAT_CFNTOOLS", user_text, &ctx.state.metadata, cfn_url.as_deref());
        let image = str_prop(&props, "ImageId").unwrap_or_default();
        let image_ref = glance::image_id(session, image).await?;
        let flavor_ref = Server::flavor_id(compute, str_prop(&props, "InstanceType").unwrap_or_default()).await?;
        let interfaces = list_prop(&props, "NetworkInterfaces");
        let networks = match Self::nics(session, ctx, interfaces, &groups, str_prop(&props, "SubnetId")).await? {
            Some(ports) => ServerNetworks::Nics(
                ports.into_iter().map(|port| [("port".to_string(), json!(port))].into_iter().collect()).collect(),
            ),
            None => Server::default_networks(compute)?,
        };
        let spec = ServerSpec {
            name: reduce_physical_name(&ctx.stable_physical_name(), NAME_LIMIT),
            image_ref: Some(image_ref),
            flavor_ref,
            key_name: str_prop(&props, "KeyName").map(str::to_owned),
            availability_zone: str_prop(&props, "AvailabilityZone").map(str::to_owned),
            security_groups: groups,
            // novaclient leaves out empty metadata.
            metadata: tags_metadata(&props).filter(|m| !m.is_empty()),
            scheduler_hints: scheduler_hints(&props),
            networks,
            user_data,
            block_device_mapping: block_devices(&props),
            block_device_mapping_v2: None,
            config_drive: None,
            admin_pass: None,
            disk_config: None,
            reservation_id: None,
            personality: Map::new(),
        };
        let id = Server::boot(&self.host, compute, ctx, &spec, RES_NAME).await?;
        Self::attach_volumes(session, compute, ctx, &id).await
    }

    /// Heat's `handle_update`: tags, then a resize, then the interfaces.
    async fn update_with(
        &self,
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        old: &Properties,
    ) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let changed = changed_properties(old, &ctx.properties);
        let has = |name: &str| changed.iter().any(|c| c == name);
        if has("Tags") {
            let wanted = tags_metadata(&ctx.properties).unwrap_or_default();
            Server::replace_metadata(compute, &id, &wanted).await?;
        }
        if has("InstanceType") {
            let flavor = str_prop(&ctx.properties, "InstanceType").unwrap_or_default();
            let flavor_id = Server::flavor_id(compute, flavor).await?;
            Server::resize(compute, ctx, &id, &flavor_id, &flavor_id).await?;
        }
        if has("NetworkInterfaces") || has("SubnetId") {
            Self::update_interfaces(session, compute, ctx, &id, old).await?;
        }
        Ok(())
    }

    async fn delete_with(&self, _: &Session, compute: &Compute<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        Server::delete_server(compute, ctx, id).await
    }
}

impl Plugin for Instance {
    const TYPE: &'static str = "AWS::EC2::Instance";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// After a signal elsewhere in the stack (upstream `metadata_update`):
    /// Heat sets the re-resolved template metadata.
    fn metadata_refresh(&self) -> crate::resources::MetadataRefresh {
        crate::resources::MetadataRefresh::Replace
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NOVA)
    }

    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let props = validate_properties(&self.schema, resource_name, given)?;
        Self::check_properties(resource_name, &props)?;
        Ok(props)
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    /// The server (until Nova has it no more), then the port made for
    /// `SubnetId`. Heat 27.0.1 deletes the port first, which Neutron's
    /// default policy since 2025.1 refuses a project member while the port
    /// is bound to a server (`not rule:compute_device`): its delete fails
    /// with `Forbidden: rule:delete_port is disallowed by policy`. Once the
    /// server is gone Nova has unbound the port.
    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        delete_in_stack(self, ctx).await?;
        if ctx.state.data.contains_key(PORT_DATA) {
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            Self::delete_subnet_port(&session, ctx).await?;
        }
        Ok(())
    }

    /// Heat's `handle_check`: the server is ACTIVE.
    fn check(&self, ctx: &mut ActionContext) -> Option<impl std::future::Future<Output = ActionResult> + Send> {
        Some(async move {
            let id = ctx.state.physical_id.clone().unwrap_or_default();
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            let compute = compute(&session).await?;
            let server = compute.server(&id).await.map_err(failure)?;
            if Server::is_active(&server, RES_NAME)? {
                return Ok(());
            }
            let shown = keelson_pyfmt::str_of(server.get("status").unwrap_or(&Value::Null));
            Err(ResourceFailure::error("Error", format!("Instance is not ACTIVE (was: {})", shown.trim())))
        })
    }

    async fn suspend(&self, ctx: &mut ActionContext) -> ActionResult {
        Server::suspend_in_stack(&self.host, ctx, NOUN).await
    }

    async fn resume(&self, ctx: &mut ActionContext) -> ActionResult {
        Server::resume_in_stack(&self.host, ctx, NOUN, RES_NAME).await
    }

    /// Heat's `_resolve_attribute`: the zone Nova placed the server in, or
    /// its first address for the other four (`0.0.0.0` without one).
    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let Some(id) = &state.physical_id else { return Ok(Value::Null) };
        if !self.schema.has_attribute(name) {
            return Ok(Value::Null);
        }
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let compute = Compute::connect(&session).await.map_err(attribute_error)?;
        let server = match compute.server(id).await {
            Ok(server) => Some(server),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(attribute_error(e)),
        };
        Ok(Self::attribute_of(server.as_ref(), name))
    }
}

impl Instance {
    /// An attribute's value from the server document (None: Nova no
    /// longer has the server); Heat shows `str(value)`, None when empty.
    fn attribute_of(server: Option<&Doc>, name: &str) -> Value {
        let value = if name == "AvailabilityZone" {
            server
                .and_then(|s| s.get("OS-EXT-AZ:availability_zone"))
                .filter(|z| keelson_pyfmt::truthy(z))
                .map(keelson_pyfmt::str_of)
        } else {
            Some(server.and_then(first_address).unwrap_or_else(|| "0.0.0.0".to_string()))
        };
        value.filter(|v| !v.is_empty()).map_or(Value::Null, Value::String)
    }
}

#[cfg(test)]
mod tests;
