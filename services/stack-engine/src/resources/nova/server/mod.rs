//! OS::Nova::Server: a Nova server booted from an image (or a volume of
//! its block device mapping) with a flavor, both given by name or id.
//!
//! Create boots the server as Heat 27.0.1's `handle_create` asks
//! novaclient to (the body follows the negotiated microversion; from
//! 2.37 novaclient refuses to boot without nics, so a server without
//! `networks` fails as it does under Heat), then waits, as
//! `check_create_complete`, until Nova shows it ACTIVE: ERROR fails it
//! with Nova's fault, a status Heat does not know fails it too. The
//! physical id is the server id; an unnamed server is named after the
//! resource (Heat's physical name, at most 53 characters).
//!
//! Update in place: name, metadata (items removed, then set), tags,
//! admin_pass, networks (interfaces detached and attached,
//! `network_update.rs`), the software config transport; a new flavor
//! resizes then confirms the resize, a new image
//! rebuilds (REPLACE policies, and a user_data change under the REPLACE
//! user_data_update_policy, replace the server instead). Delete waits
//! until Nova no longer has the server (a 404 is done). Attributes are
//! read from Nova (and the addresses' ports from Neutron) each time.

mod attributes;
mod network_update;
pub(super) mod ports;
mod schema;
mod validation;

use std::sync::Arc;

use keelson_openstack::compute::{
    Compute, Rebuild, ServerNetworks, ServerSpec, AUTO_ALLOCATE_NETWORK, BDM_VOLUME_TYPE, NIC_TAGS, NO_PERSONALITY,
    SERVER_TAGS,
};
use keelson_openstack::network::{self, Kind, Network};
use keelson_openstack::{OsError, Session};
use serde_json::{json, Map, Value};

use super::super::client_errors::{resource_in_error, resource_unknown_status};
use super::super::config_formats::{multipart_message, MimePart};
use super::super::context::reduce_physical_name;
use super::super::deployed_server::{delete_transport_user, publish_collect_config};
use super::super::schema::ResourceSchema;
use super::super::{
    changed_properties, default_update_decision, glance, neutron, validate_properties, ActionContext, ActionResult,
    HostSlot, Plugin, Properties, ResourceFailure, ResourceState, UpdateDecision,
};
use super::{
    attribute_error, attribute_session, compute, create_in_stack, delete_in_stack, failure, flavor_lookup,
    flavor_result, stack_session, str_prop, update_in_stack, NovaActions, STACK_DATA,
};
use crate::error::EngineError;
use crate::resources::RequiredService;

/// The collectors a server's agent is told of before its transport's
/// (Heat's `default_collectors` for servers).
const DEFAULT_COLLECTORS: &[&str] = &["ec2"];

/// Seconds between two looks at a server Nova is working on.
pub(super) const POLL_SECS: f64 = 1.0;

/// The resource data key of the image a stack snapshot made of the server.
const SNAPSHOT_IMAGE_ID: &str = "snapshot_image_id";
/// Nova's task states while it uploads a server's snapshot image.
const IMAGE_UPLOAD_TASKS: &[&str] =
    &["image_uploading", "image_snapshot_pending", "image_snapshot", "image_pending_upload"];

/// Heat's `physical_resource_name_limit` for servers: a host name of 64
/// characters less `.novalocal`.
pub(super) const NAME_LIMIT: usize = 53;

/// The statuses Heat waits through (`deferred_server_statuses`).
pub(super) const DEFERRED: [&str; 10] = [
    "BUILD",
    "HARD_REBOOT",
    "PASSWORD",
    "REBOOT",
    "RESCUE",
    "RESIZE",
    "REVERT_RESIZE",
    "SHUTOFF",
    "SUSPENDED",
    "VERIFY_RESIZE",
];

pub struct Server {
    host: Arc<HostSlot>,
    schema: ResourceSchema,
}

pub(super) type Doc = Map<String, Value>;

/// The server's status, without the `(...)` some clouds append.
pub(super) fn status(server: &Doc) -> &str {
    let s = server.get("status").and_then(Value::as_str).unwrap_or_default();
    s.split('(').next().unwrap_or(s)
}

pub(super) fn field<'a>(server: &'a Doc, key: &str) -> &'a Value {
    server.get(key).unwrap_or(&Value::Null)
}

/// A fault's `message` or `code` as Python formats it, `default` when
/// absent.
fn fault_text(server: &Doc, key: &str, default: &str) -> String {
    match server.get("fault").and_then(|f| f.get(key)) {
        None => default.to_string(),
        Some(v) => keelson_pyfmt::str_of(v),
    }
}

/// Heat's `meta_serialize`: values that are not strings go as JSON.
pub(super) fn serialized_metadata(meta: &Map<String, Value>) -> Map<String, Value> {
    meta.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => keelson_pyfmt::json_dumps(other, false),
            };
            (k.clone(), Value::String(text))
        })
        .collect()
}

fn map_prop<'a>(props: &'a Properties, name: &str) -> Option<&'a Map<String, Value>> {
    props.get(name).and_then(Value::as_object)
}

fn list_prop<'a>(props: &'a Properties, name: &str) -> &'a [Value] {
    props.get(name).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A nested string key, None when absent, null or empty.
fn key_str<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Heat's `_build_block_device_mapping_v2`: each mapping as Nova's
/// `block_device_mapping_v2` entry (images already resolved to ids).
fn block_devices_v2(mappings: &[Value], image_ids: &[Option<String>]) -> Option<Vec<Value>> {
    if mappings.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (mapping, image_id) in mappings.iter().zip(image_ids) {
        let source = |uuid: &str, source_type: &str| {
            json!({"uuid": uuid, "source_type": source_type, "destination_type": "volume",
                "boot_index": 0, "delete_on_termination": false})
        };
        let given = |k: &str| mapping.get(k).filter(|v| !v.is_null() && *v != &json!(0) && *v != &json!(""));
        let mut entry = if let Some(id) = key_str(mapping, "volume_id") {
            source(id, "volume")
        } else if let Some(id) = key_str(mapping, "snapshot_id") {
            source(id, "snapshot")
        } else if let Some(id) = image_id {
            source(id, "image")
        } else if let Some(size) = given("swap_size") {
            json!({"source_type": "blank", "destination_type": "local", "boot_index": -1,
                "delete_on_termination": true, "guest_format": "swap", "volume_size": size})
        } else if given("ephemeral_size").is_some() || given("ephemeral_format").is_some() {
            let mut e = json!({"source_type": "blank", "destination_type": "local", "boot_index": -1,
                "delete_on_termination": true});
            if let Some(size) = given("ephemeral_size") {
                e["volume_size"] = size.clone();
            }
            if let Some(format) = given("ephemeral_format") {
                e["guest_format"] = format.clone();
            }
            e
        } else {
            continue;
        };
        if let Some(name) = key_str(mapping, "device_name") {
            entry["device_name"] = json!(name);
        }
        for key in ["device_type", "disk_bus", "boot_index", "volume_size", "delete_on_termination", "volume_type"] {
            if let Some(v) = mapping.get(key).filter(|v| !v.is_null()) {
                entry[key] = v.clone();
            }
        }
        out.push(entry);
    }
    Some(out)
}

/// Heat's `_build_block_device_mapping` (`<id>:[snap]:[size]:[delete]` by
/// device name) as novaclient then parses it into Nova's legacy
/// `block_device_mapping`: the size and the delete flag go as strings.
fn block_devices_v1(mappings: &[Value]) -> Option<Vec<Value>> {
    if mappings.is_empty() {
        return None;
    }
    let mut by_device: Vec<(String, Value)> = Vec::new();
    for mapping in mappings {
        let device = mapping.get("device_name").map(keelson_pyfmt::str_of).unwrap_or_default();
        let mut entry = Map::new();
        entry.insert("device_name".into(), json!(device));
        match key_str(mapping, "snapshot_id") {
            Some(snapshot) => entry.insert("snapshot_id".into(), json!(snapshot)),
            None => entry.insert("volume_id".into(), mapping.get("volume_id").cloned().unwrap_or(Value::Null)),
        };
        if let Some(size) = mapping.get("volume_size").filter(|v| keelson_pyfmt::truthy(v)) {
            entry.insert("volume_size".into(), json!(keelson_pyfmt::str_of(size)));
        }
        if let Some(delete) = mapping.get("delete_on_termination").filter(|v| keelson_pyfmt::truthy(v)) {
            entry.insert("delete_on_termination".into(), json!(keelson_pyfmt::str_of(delete)));
        }
        // A later mapping of the same device replaces the earlier one.
        match by_device.iter_mut().find(|(d, _)| *d == device) {
            Some(slot) => slot.1 = Value::Object(entry),
            None => by_device.push((device, Value::Object(entry))),
        }
    }
    Some(by_device.into_iter().map(|(_, entry)| entry).collect())
}

/// The image a block device mapping names (`image`, else `image_id`).
fn mapping_image(mapping: &Value) -> Option<&str> {
    key_str(mapping, "image").or_else(|| key_str(mapping, "image_id"))
}

impl Server {
    pub fn new(host: Arc<HostSlot>) -> Self {
        Server { host, schema: schema::server_schema() }
    }

    /// The `name` property, else the resource's physical name.
    fn server_name(ctx: &mut ActionContext) -> String {
        match str_prop(&ctx.properties, "name") {
            Some(name) => name.to_string(),
            None => reduce_physical_name(&ctx.stable_physical_name(), NAME_LIMIT),
        }
    }

    /// The name an attribute shows: the property, else the physical name
    /// the resource was created with.
    fn shown_name(state: &ResourceState) -> Value {
        match str_prop(&state.properties, "name") {
            Some(name) => json!(name),
            None => state
                .data
                .get(super::super::PHYSICAL_NAME_DATA)
                .map_or(Value::Null, |n| json!(reduce_physical_name(n, NAME_LIMIT))),
        }
    }

    /// Heat's `_build_nics` and novaclient's translation of them into
    /// Nova's `networks`: names resolved to ids through Neutron.
    async fn networks(
        session: &Session,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        props: &Properties,
    ) -> Result<ServerNetworks, ResourceFailure> {
        let nets = list_prop(props, "networks");
        if let Some(how) = nets.iter().find_map(|n| key_str(n, "allocate_network")) {
            return Ok(ServerNetworks::Allocate(how.to_string()));
        }
        if nets.is_empty() {
            return Self::default_networks(compute);
        }
        let neutron = Network::connect(session).await.map_err(neutron::failure)?;
        let find = |kind: Kind, value: String| {
            let neutron = &neutron;
            async move {
                neutron::lookup_result(kind, &value, neutron.lookup(kind, &value).await.map_err(neutron::failure)?)
            }
        };
        let groups: Vec<String> = list_prop(props, "security_groups").iter().map(keelson_pyfmt::str_of).collect();
        let mut group_ids: Option<Vec<String>> = None;
        let mut nics = Vec::new();
        for (index, net) in nets.iter().enumerate() {
            let subnet = match key_str(net, "subnet") {
                Some(subnet) => Some(find(network::SUBNET, subnet.to_string()).await?),
                None => None,
            };
            let mut network_id = match key_str(net, "network").or_else(|| key_str(net, "uuid")) {
                Some(network) => Some(find(network::NETWORK, network.to_string()).await?),
                None => None,
            };
            // Heat's `_get_network_id` and `_validate_belonging_subnet_to_net`.
            if let (Some(subnet), None) = (&subnet, key_str(net, "port")) {
                let owner = neutron.show(network::SUBNET, subnet).await.map_err(neutron::failure)?;
                let owner = owner.get("network_id").and_then(Value::as_str).unwrap_or_default().to_string();
                match &network_id {
                    Some(net_id) if *net_id != owner => {
                        return Err(ResourceFailure::error(
                            "StackValidationFailed",
                            format!("Specified subnet {subnet} does not belongs to network {net_id}."),
                        ))
                    }
                    Some(_) => {}
                    None => network_id = Some(owner),
                }
            }
            let mut nic = Map::new();
            if let Some(id) = &network_id {
                nic.insert("uuid".into(), json!(id));
            }
            if let Some(port) = key_str(net, "port") {
                nic.insert("port".into(), json!(find(network::PORT, port.to_string()).await?));
            } else if ports::makes_port(net) {
                if group_ids.is_none() && !groups.is_empty() {
                    let access = session.access().await.map_err(failure)?;
                    let project = access.project_id.clone().unwrap_or_default();
                    group_ids = Some(ports::secgroup_ids(&neutron, &project, &groups).await?);
                }
                let port = ports::create_internal_port(
                    &neutron,
                    ctx,
                    index,
                    net,
                    network_id.as_deref().unwrap_or_default(),
                    group_ids.as_deref().unwrap_or_default(),
                    subnet.as_deref(),
                )
                .await?;
                nic.insert("port".into(), json!(port));
            } else if let Some(ip) = key_str(net, "fixed_ip") {
                nic.insert("fixed_ip".into(), json!(ip));
            }
            // Heat associates the floating IP with the nic's port before
            // the server boots.
            if let (Some(fip), Some(port)) = (key_str(net, "floating_ip"), nic.get("port").and_then(Value::as_str)) {
                let mut association = Map::new();
                association.insert("port_id".into(), json!(port));
                if let Some(ip) = key_str(net, "fixed_ip") {
                    association.insert("fixed_ip_address".into(), json!(ip));
                }
                neutron.update(network::FLOATING_IP, fip, association).await.map_err(neutron::failure)?;
            }
            if let Some(tag) = key_str(net, "tag") {
                nic.insert("tag".into(), json!(tag));
            }
            nics.push(nic);
        }
        Ok(ServerNetworks::Nics(nics))
    }

    /// A boot without nics: Nova's default networks, which novaclient
    /// refuses from microversion 2.37.
    pub(super) fn default_networks(compute: &Compute<'_>) -> Result<ServerNetworks, ResourceFailure> {
        if compute.supports(AUTO_ALLOCATE_NETWORK) {
            return Err(ResourceFailure::error("ValueError", "nics are required after microversion 2.36"));
        }
        Ok(ServerNetworks::Default)
    }

    /// The flavor's id (by id, else by its unique name).
    pub(super) async fn flavor_id(compute: &Compute<'_>, flavor: &str) -> Result<String, ResourceFailure> {
        flavor_result(flavor, flavor_lookup(compute, flavor).await.map_err(failure)?)
    }

    /// The user data Nova gets, as Heat's `build_userdata` makes it for
    /// the format: RAW as given; HEAT_CFNTOOLS and SOFTWARE_CONFIG as a
    /// MIME multipart message of the user's data and the resource
    /// metadata (without Heat's own cloud-init boot files), for
    /// HEAT_CFNTOOLS with where heat-api-cfn is (`cfn_url`, its `/v1`
    /// root; None without Keystone) and the boto settings cfntools read.
    fn user_data(props: &Properties, text: &str, metadata: &Value, cfn_url: Option<&str>) -> Option<String> {
        let format = str_prop(props, "user_data_format").unwrap_or("HEAT_CFNTOOLS");
        Self::user_data_as(format, text, metadata, cfn_url)
    }

    /// [`Server::user_data`] in user data format `format`.
    pub(super) fn user_data_as(format: &str, text: &str, metadata: &Value, cfn_url: Option<&str>) -> Option<String> {
        if format == "RAW" {
            return Some(text.to_string()).filter(|t| !t.is_empty());
        }
        let part = |content: &str, filename: &str, subtype: &str| MimePart {
            content: content.to_string(),
            multipart: false,
            subtype: subtype.to_string(),
            filename: filename.to_string(),
        };
        let mut parts = Vec::new();
        if format == "SOFTWARE_CONFIG" {
            let multipart = text.starts_with("Content-Type: multipart/");
            parts.push(MimePart { multipart, ..part(text, "", "") });
        } else {
            parts.push(part(text, "cfn-userdata", "x-cfninitdata"));
        }
        if metadata.as_object().is_some_and(|m| !m.is_empty()) {
            parts.push(part(&keelson_pyfmt::json_dumps(metadata, false), "cfn-init-data", "x-cfninitdata"));
        }
        if let (Some(url), "HEAT_CFNTOOLS") = (cfn_url, format) {
            let metadata_url = format!("{}/", url.trim_end_matches('/'));
            let host = metadata_url.parse::<http::Uri>().ok().and_then(|u| u.host().map(str::to_lowercase));
            parts.push(part(&metadata_url, "cfn-metadata-server", "x-cfninitdata"));
            // `instance_connection_is_secure` and
            // `instance_connection_https_validate_certificates` at
            // Heat's defaults.
            let boto = format!(
                "[Boto]\ndebug = 0\nis_secure = False\nhttps_validate_certificates = True\ncfn_region_name = heat\ncfn_region_endpoint = {}",
                host.unwrap_or_default()
            );
            parts.push(part(&boto, "cfn-boto-cfg", "x-cfninitdata"));
        }
        Some(multipart_message(&parts))
    }

    /// Where heat-api-cfn is for the resource's cfntools (None without
    /// Keystone).
    pub(super) async fn cfn_url(host: &HostSlot, ctx: &ActionContext) -> Result<Option<String>, ResourceFailure> {
        let urls = host.get().signal_urls(&ctx.stack_id, &ctx.resource_name).await?;
        Ok(urls.identity.map(|identity| identity.cfn_url))
    }

    fn software_config(props: &Properties) -> bool {
        str_prop(props, "user_data_format") == Some("SOFTWARE_CONFIG")
    }

    /// The `user_data` property; for RAW and SOFTWARE_CONFIG, a software
    /// config's id stands for that config's text (Heat's
    /// `get_software_config`, which keeps the id when there is none).
    async fn user_data_text(&self, props: &Properties) -> Result<String, ResourceFailure> {
        let text = props.get("user_data").and_then(Value::as_str).unwrap_or_default();
        let format = str_prop(props, "user_data_format");
        if matches!(format, Some("RAW" | "SOFTWARE_CONFIG")) && uuid::Uuid::parse_str(text).is_ok() {
            if let Some(config) = self.host.get().software_config(text).await? {
                return Ok(config.get("config").map(keelson_pyfmt::str_of).unwrap_or_default());
            }
        }
        Ok(text.to_string())
    }

    /// Heat's `validate` checks that ask Nova's microversion (keelson
    /// makes them when the server is created).
    fn check_microversions(compute: &Compute<'_>, props: &Properties) -> ActionResult {
        let refuse = |message: &str| Err(ResourceFailure::error("StackValidationFailed", message));
        let networks = list_prop(props, "networks");
        if networks.iter().any(|n| key_str(n, "allocate_network").is_some()) && !compute.supports(AUTO_ALLOCATE_NETWORK)
        {
            return refuse("Cannot use \"allocate_network\" property - compute service does not support the required api microversion.");
        }
        if networks.iter().any(|n| key_str(n, "tag").is_some()) && !compute.supports(NIC_TAGS) {
            return refuse(
                "Cannot use \"tag\" property in networks - nova does not support required api microversion.",
            );
        }
        if !list_prop(props, "tags").is_empty() && !compute.supports(SERVER_TAGS) {
            return refuse("Cannot use \"tags\" property - nova does not support required api microversion.");
        }
        if list_prop(props, "block_device_mapping_v2").iter().any(|m| key_str(m, "volume_type").is_some())
            && !compute.supports(BDM_VOLUME_TYPE)
        {
            return refuse("Cannot use \"volume_type\" property in block_device_mapping_v2 - nova does not support required api microversion 2.67.");
        }
        if map_prop(props, "personality").is_some_and(|p| !p.is_empty()) && compute.supports(NO_PERSONALITY) {
            return refuse(
                "Cannot use the personality parameter as nova no longer supports it. Use user_data instead.",
            );
        }
        Ok(())
    }

    /// Heat's `meta_update`: the server's metadata becomes `wanted`
    /// (items it no longer has removed, then the rest set).
    pub(super) async fn replace_metadata(compute: &Compute<'_>, id: &str, wanted: &Map<String, Value>) -> ActionResult {
        let server = compute.server(id).await.map_err(failure)?;
        let wanted = serialized_metadata(wanted);
        let current: Vec<&String> =
            server.get("metadata").and_then(Value::as_object).map(|m| m.keys().collect()).unwrap_or_default();
        for key in current.into_iter().filter(|k| !wanted.contains_key(k.as_str())) {
            compute.delete_server_metadata(id, key).await.map_err(failure)?;
        }
        compute.set_server_metadata(id, &wanted).await.map_err(failure)
    }

    /// Heat's `fetch_server`: None for the errors worth waiting out
    /// (OverLimit, a 500 or 503).
    pub(super) async fn fetch(compute: &Compute<'_>, id: &str) -> Result<Option<Doc>, OsError> {
        match compute.server(id).await {
            Ok(server) => Ok(Some(server)),
            Err(OsError::Unexpected { status: 413 | 500, .. }) | Err(OsError::Unavailable(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The server, or Heat's NotFound for one Nova no longer has (`noun`:
    /// what the type calls its server).
    async fn existing(compute: &Compute<'_>, id: &str, noun: &str) -> Result<Doc, ResourceFailure> {
        match compute.server(id).await {
            Ok(server) => Ok(server),
            Err(e) if e.is_not_found() => {
                Err(ResourceFailure::error("NotFound", format!("Failed to find {noun} {id}")))
            }
            Err(e) => Err(failure(e)),
        }
    }

    /// Nova's POST /servers, then [`Self::wait_active`], inside one of the
    /// engine's server-build slots (waited for without the check slot);
    /// answers the server's id, already the resource's physical id.
    pub(super) async fn boot(
        host: &HostSlot,
        compute: &Compute<'_>,
        ctx: &mut ActionContext,
        spec: &ServerSpec,
        res_name: &str,
    ) -> Result<String, ResourceFailure> {
        let host = host.get();
        host.release_check_slot();
        let _building = ctx.unless_cancelled(host.server_build_slot()).await?;
        let id = compute.create_server(spec).await.map_err(failure)?;
        ctx.state.physical_id = Some(id.clone());
        ctx.state.data.insert(STACK_DATA.into(), ctx.stack_id.clone());
        Self::wait_active(compute, ctx, &id, res_name).await?;
        Ok(id)
    }

    /// Heat's `_check_active`, until the server is ACTIVE (`res_name`:
    /// the type's name for it in Heat's texts).
    pub(super) async fn wait_active(
        compute: &Compute<'_>,
        ctx: &ActionContext,
        id: &str,
        res_name: &str,
    ) -> ActionResult {
        loop {
            let Some(server) = Self::fetch(compute, id).await.map_err(failure)? else {
                ctx.sleep(POLL_SECS).await?;
                continue;
            };
            if Self::is_active(&server, res_name)? {
                return Ok(());
            }
            ctx.sleep(POLL_SECS).await?;
        }
    }

    /// Heat's `_check_active` of one look at the server: whether it is
    /// ACTIVE (false: a status worth waiting through), failing for ERROR
    /// or a status Heat does not know.
    pub(super) fn is_active(server: &Doc, res_name: &str) -> Result<bool, ResourceFailure> {
        match status(server) {
            "ACTIVE" => Ok(true),
            s if DEFERRED.contains(&s) => Ok(false),
            "ERROR" => {
                let reason = format!(
                    "Message: {}, Code: {}",
                    fault_text(server, "message", "Unknown"),
                    fault_text(server, "code", "Unknown")
                );
                Err(resource_in_error("ERROR", &reason))
            }
            _ => {
                let shown = keelson_pyfmt::str_of(field(server, "status"));
                Err(resource_unknown_status(&format!("{res_name} is not active"), &shown))
            }
        }
    }

    /// Heat's `resize` then `check_resize`: Nova is asked once the server
    /// is readable, then watched until VERIFY_RESIZE.
    pub(super) async fn resize(
        compute: &Compute<'_>,
        ctx: &ActionContext,
        id: &str,
        flavor_id: &str,
        flavor: &str,
    ) -> ActionResult {
        while Self::fetch(compute, id).await.map_err(failure)?.is_none() {
            ctx.sleep(POLL_SECS).await?;
        }
        compute.resize_server(id, flavor_id).await.map_err(failure)?;
        loop {
            let server = Self::fetch(compute, id).await.map_err(failure)?;
            match server.as_ref().map(status) {
                None | Some("RESIZE" | "ACTIVE") => ctx.sleep(POLL_SECS).await?,
                Some("VERIFY_RESIZE") => break,
                Some(s) => {
                    return Err(ResourceFailure::error("Error", format!("Resizing to '{flavor}' failed, status '{s}'")))
                }
            }
        }
        // `verify_resize`, then `check_verify_resize`.
        loop {
            let Some(server) = Self::fetch(compute, id).await.map_err(failure)? else {
                ctx.sleep(POLL_SECS).await?;
                continue;
            };
            match status(&server) {
                "VERIFY_RESIZE" => break,
                s => return Err(resource_unknown_status(&format!("Could not confirm resize of server {id}"), s)),
            }
        }
        compute.confirm_resize(id).await.map_err(failure)?;
        loop {
            let Some(server) = Self::fetch(compute, id).await.map_err(failure)? else {
                ctx.sleep(POLL_SECS).await?;
                continue;
            };
            let task = server.get("OS-EXT-STS:task_state").and_then(Value::as_str);
            match status(&server) {
                "ACTIVE" => return Ok(()),
                "VERIFY_RESIZE" => ctx.sleep(POLL_SECS).await?,
                _ if task.is_some_and(|t| t.contains("resize")) => ctx.sleep(POLL_SECS).await?,
                s => return Err(resource_unknown_status(&format!("Confirm resize for server {id} failed"), s)),
            }
        }
    }

    /// Heat's `rebuild` then `check_rebuild`.
    async fn rebuild(
        compute: &Compute<'_>,
        ctx: &ActionContext,
        id: &str,
        image_id: &str,
        rebuild: &Rebuild,
    ) -> ActionResult {
        while Self::fetch(compute, id).await.map_err(failure)?.is_none() {
            ctx.sleep(POLL_SECS).await?;
        }
        compute.rebuild_server(id, image_id, rebuild).await.map_err(failure)?;
        loop {
            let server = Self::fetch(compute, id).await.map_err(failure)?;
            match server.as_ref().map(status) {
                None | Some("REBUILD") => ctx.sleep(POLL_SECS).await?,
                Some("ERROR") => {
                    return Err(ResourceFailure::error("Error", "Rebuilding server failed, status 'ERROR'"))
                }
                Some(_) => return Ok(()),
            }
        }
    }

    /// Heat's `handle_suspend` and `check_suspend_complete` (`noun`: what
    /// the type calls its server in Heat's texts).
    pub(super) async fn suspend_in_stack(host: &HostSlot, ctx: &mut ActionContext, noun: &str) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else {
            let message = format!("Cannot suspend {}, resource_id not set", ctx.resource_name);
            return Err(ResourceFailure::error("Error", message));
        };
        let session = stack_session(host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        let server = Self::existing(&compute, &id, noun).await?;
        if status(&server) != "SUSPENDED" {
            compute.suspend_server(&id).await.map_err(failure)?;
        }
        loop {
            let Some(server) = Self::fetch(&compute, &id).await.map_err(failure)? else {
                ctx.sleep(POLL_SECS).await?;
                continue;
            };
            match status(&server) {
                "SUSPENDED" => return Ok(()),
                s if s == "ACTIVE" || DEFERRED.contains(&s) => ctx.sleep(POLL_SECS).await?,
                s => {
                    let name = keelson_pyfmt::str_of(field(&server, "name"));
                    return Err(resource_unknown_status(&format!("Suspend of {noun} {name} failed"), s));
                }
            }
        }
    }

    /// Heat's `handle_resume` and `check_resume_complete` (`noun` and
    /// `res_name`: the type's names for its server in Heat's texts).
    pub(super) async fn resume_in_stack(
        host: &HostSlot,
        ctx: &mut ActionContext,
        noun: &str,
        res_name: &str,
    ) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else {
            let message = format!("Cannot resume {}, resource_id not set", ctx.resource_name);
            return Err(ResourceFailure::error("Error", message));
        };
        let session = stack_session(host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        let server = Self::existing(&compute, &id, noun).await?;
        if status(&server) != "ACTIVE" {
            compute.resume_server(&id).await.map_err(failure)?;
        }
        Self::wait_active(&compute, ctx, &id, res_name).await
    }

    /// Heat's `_delete` and `check_delete_server_complete`.
    pub(super) async fn delete_server(compute: &Compute<'_>, ctx: &ActionContext, id: &str) -> ActionResult {
        match compute.delete_server(id).await {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other.map_err(failure)?,
        }
        loop {
            let server = match Self::fetch(compute, id).await {
                Err(e) if e.is_not_found() => return Ok(()),
                other => other.map_err(failure)?,
            };
            let Some(server) = server else {
                ctx.sleep(POLL_SECS).await?;
                continue;
            };
            if server.get("OS-EXT-STS:task_state").and_then(Value::as_str) == Some("deleting") {
                ctx.sleep(POLL_SECS).await?;
                continue;
            }
            match status(&server) {
                "DELETED" => return Ok(()),
                "SOFT_DELETED" => compute.force_delete_server(id).await.map_err(failure)?,
                "ERROR" => {
                    let reason = format!(
                        "Server {} delete failed: ({}) {}",
                        keelson_pyfmt::str_of(field(&server, "name")),
                        fault_text(&server, "code", "None"),
                        fault_text(&server, "message", "Unknown")
                    );
                    return Err(resource_in_error("ERROR", &reason));
                }
                _ => {}
            }
            ctx.sleep(POLL_SECS).await?;
        }
    }
}

impl NovaActions for Server {
    fn host(&self) -> &HostSlot {
        &self.host
    }

    async fn create_with(&self, session: &Session, compute: &Compute<'_>, ctx: &mut ActionContext) -> ActionResult {
        let props = ctx.properties.clone();
        Self::check_microversions(compute, &props)?;
        let user_text = self.user_data_text(&props).await?;
        let cfn_url = match str_prop(&props, "user_data_format") {
            Some("HEAT_CFNTOOLS") => Self::cfn_url(&self.host, ctx).await?,
            _ => None,
        };
        if Self::software_config(&props) {
            let transport = str_prop(&props, "software_config_transport").map(str::to_owned);
            publish_collect_config(&self.host, ctx, transport.as_deref(), DEFAULT_COLLECTORS).await?;
        }
        let image_ref = match str_prop(&props, "image") {
            Some(image) => Some(super::super::glance::image_id(session, image).await?),
            None => None,
        };
        let flavor = str_prop(&props, "flavor").unwrap_or_default();
        let flavor_ref = Self::flavor_id(compute, flavor).await?;
        let mappings = list_prop(&props, "block_device_mapping_v2");
        let mut image_ids = Vec::new();
        for mapping in mappings {
            image_ids.push(match mapping_image(mapping) {
                Some(image) => Some(super::super::glance::image_id(session, image).await?),
                None => None,
            });
        }
        let networks = Self::networks(session, compute, ctx, &props).await?;
        let text_list =
            |name: &str| -> Vec<String> { list_prop(&props, name).iter().map(keelson_pyfmt::str_of).collect() };
        let spec = ServerSpec {
            name: Self::server_name(ctx),
            image_ref,
            flavor_ref,
            key_name: str_prop(&props, "key_name").map(str::to_owned),
            availability_zone: str_prop(&props, "availability_zone").map(str::to_owned),
            security_groups: text_list("security_groups"),
            metadata: map_prop(&props, "metadata").filter(|m| !m.is_empty()).map(serialized_metadata),
            scheduler_hints: map_prop(&props, "scheduler_hints").cloned(),
            networks,
            user_data: Self::user_data(&props, &user_text, &ctx.state.metadata, cfn_url.as_deref()),
            block_device_mapping: block_devices_v1(list_prop(&props, "block_device_mapping")),
            block_device_mapping_v2: block_devices_v2(mappings, &image_ids),
            config_drive: props.get("config_drive").and_then(Value::as_bool),
            admin_pass: str_prop(&props, "admin_pass").map(str::to_owned),
            disk_config: str_prop(&props, "diskConfig").map(str::to_owned),
            reservation_id: str_prop(&props, "reservation_id").map(str::to_owned),
            personality: map_prop(&props, "personality").cloned().unwrap_or_default(),
        };
        let id = Self::boot(&self.host, compute, ctx, &spec, "Server").await?;
        let tags = text_list("tags");
        if !tags.is_empty() {
            compute.set_server_tags(&id, &tags).await.map_err(failure)?;
        }
        Ok(())
    }

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
        let props = ctx.properties.clone();
        if has("software_config_transport") && Self::software_config(&props) {
            let transport = str_prop(&props, "software_config_transport").map(str::to_owned);
            publish_collect_config(&self.host, ctx, transport.as_deref(), DEFAULT_COLLECTORS).await?;
        }
        if has("metadata") {
            Self::replace_metadata(compute, &id, map_prop(&props, "metadata").unwrap_or(&Map::new())).await?;
        }
        if has("tags") && compute.supports(SERVER_TAGS) {
            let tags: Vec<String> = list_prop(&props, "tags").iter().map(keelson_pyfmt::str_of).collect();
            compute.set_server_tags(&id, &tags).await.map_err(failure)?;
        }
        if has("name") {
            let name = Self::server_name(ctx);
            compute.rename_server(&id, &name).await.map_err(failure)?;
        }
        if has("networks") {
            let groups: Vec<String> = list_prop(&props, "security_groups").iter().map(keelson_pyfmt::str_of).collect();
            let (before, after) = (list_prop(old, "networks"), list_prop(&props, "networks"));
            network_update::update_networks(session, compute, ctx, &id, before, after, &groups).await?;
        }
        if has("flavor") {
            let flavor = str_prop(&props, "flavor").unwrap_or_default();
            let flavor_id = Self::flavor_id(compute, flavor).await?;
            Self::resize(compute, ctx, &id, &flavor_id, &flavor_id).await?;
        }
        let admin_pass = str_prop(&props, "admin_pass").map(str::to_owned);
        if has("user_data") && str_prop(&props, "user_data_update_policy") == Some("REBUILD") {
            // Heat hands the user data to its rebuild as the image; keelson
            // rebuilds the current image instead.
            let server = compute.server(&id).await.map_err(failure)?;
            let image = server.get("image").and_then(|i| i.get("id")).and_then(Value::as_str).unwrap_or_default();
            Self::rebuild(compute, ctx, &id, image, &Rebuild::default()).await?;
        }
        if has("image") {
            let image_id = match str_prop(&props, "image") {
                Some(image) => super::super::glance::image_id(session, image).await?,
                None => String::new(),
            };
            let rebuild = Rebuild {
                admin_pass,
                preserve_ephemeral: str_prop(&props, "image_update_policy") == Some("REBUILD_PRESERVE_EPHEMERAL"),
                metadata: map_prop(&props, "metadata").map(serialized_metadata),
            };
            Self::rebuild(compute, ctx, &id, &image_id, &rebuild).await?;
        } else if has("admin_pass") {
            compute.change_password(&id, admin_pass.as_deref().unwrap_or_default()).await.map_err(failure)?;
        }
        Ok(())
    }

    async fn delete_with(&self, _: &Session, compute: &Compute<'_>, ctx: &mut ActionContext, id: &str) -> ActionResult {
        Self::delete_server(compute, ctx, id).await
    }
}

impl Plugin for Server {
    const TYPE: &'static str = "OS::Nova::Server";

    fn schema(&self) -> &ResourceSchema {
        &self.schema
    }

    /// After a signal elsewhere in the stack (upstream `metadata_update`):
    /// Heat merges the re-resolved template metadata over what the server keeps (its deployments).
    fn metadata_refresh(&self) -> crate::resources::MetadataRefresh {
        crate::resources::MetadataRefresh::MergeTemplate
    }

    fn required_service(&self) -> Option<RequiredService> {
        Some(RequiredService::NOVA)
    }

    /// Heat's `prepare_for_replace`: the old server gives up its ports
    /// first (its replacement may be given the same port).
    async fn prepare_for_replace(&self, ctx: &mut ActionContext) -> ActionResult {
        if ctx.state.physical_id.is_none() {
            return Ok(());
        }
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        let neutron = Network::connect(&session).await.map_err(neutron::failure)?;
        ports::detach_for_replace(&compute, &neutron, ctx).await
    }

    /// Heat's `restore_prev_rsrc`: a rollback gives the old server its
    /// ports back from the replacement.
    async fn restore_prev_rsrc(&self, ctx: &mut ActionContext, replacement: Option<&str>) -> ActionResult {
        if ctx.state.physical_id.is_none() {
            return Ok(());
        }
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        ports::reattach_after_rollback(&compute, ctx, replacement).await
    }

    /// The properties, then Heat's `validate` checks, which name the
    /// resource.
    fn validate_properties(&self, resource_name: &str, given: &Value) -> Result<Properties, EngineError> {
        let props = validate_properties(&self.schema, resource_name, given)?;
        Self::check_properties(resource_name, &props)?;
        Ok(props)
    }

    /// Heat's `needs_replace_with_prop_diff` on top of the default
    /// decision: the REPLACE update policies replace.
    fn update_decision(&self, old: &Properties, new: &Properties) -> UpdateDecision {
        let decision = default_update_decision(&self.schema, old, new);
        if decision != UpdateDecision::InPlace {
            return decision;
        }
        let changed = changed_properties(old, new);
        let policy = |name: &str, default: &str| -> String {
            str_prop(new, name).or_else(|| str_prop(old, name)).unwrap_or(default).to_string()
        };
        let has = |name: &str| changed.iter().any(|c| c == name);
        if (has("flavor") && policy("flavor_update_policy", "RESIZE") == "REPLACE")
            || (has("image") && policy("image_update_policy", "REBUILD") == "REPLACE")
            || (has("user_data") && policy("user_data_update_policy", "REPLACE") == "REPLACE")
        {
            return UpdateDecision::Replace;
        }
        UpdateDecision::InPlace
    }

    async fn create(&self, ctx: &mut ActionContext) -> ActionResult {
        create_in_stack(self, ctx).await
    }

    async fn update(&self, ctx: &mut ActionContext, old: &Properties) -> ActionResult {
        update_in_stack(self, ctx, old).await
    }

    async fn delete(&self, ctx: &mut ActionContext) -> ActionResult {
        if Self::software_config(&ctx.state.properties) || Self::software_config(&ctx.properties) {
            delete_transport_user(&self.host, &ctx.state).await?;
        }
        delete_in_stack(self, ctx).await?;
        // The server is gone: the ports it made go too (also those made
        // before a boot that failed).
        if !ports::internal_ports(&ctx.state).is_empty() {
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            let neutron = Network::connect(&session).await.map_err(neutron::failure)?;
            ports::delete_internal_ports(&neutron, &mut ctx.state).await?;
        }
        Ok(())
    }

    /// Heat's `handle_check`: the server is ACTIVE.
    fn check(&self, ctx: &mut ActionContext) -> Option<impl std::future::Future<Output = ActionResult> + Send> {
        Some(async move {
            let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
            let session = stack_session(&self.host, &ctx.stack_id).await?;
            let compute = compute(&session).await?;
            let server = compute.server(&id).await.map_err(failure)?;
            match status(&server) {
                "ACTIVE" => Ok(()),
                s => Err(ResourceFailure::error("Error", format!("'status': expected 'ACTIVE', got '{s}'"))),
            }
        })
    }

    async fn suspend(&self, ctx: &mut ActionContext) -> ActionResult {
        Self::suspend_in_stack(&self.host, ctx, "server").await
    }

    async fn resume(&self, ctx: &mut ActionContext) -> ActionResult {
        Self::resume_in_stack(&self.host, ctx, "server", "Server").await
    }

    /// Heat's `handle_snapshot` and `check_snapshot_complete`: a Nova
    /// image of the server, its id kept as `snapshot_image_id`, waited for
    /// until Glance has it active and Nova is done uploading it.
    async fn snapshot(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        let name = ctx.stable_physical_name();
        let image_id = compute.create_image(&id, &name).await.map_err(failure)?;
        ctx.state.data.insert(SNAPSHOT_IMAGE_ID.to_string(), image_id.clone());
        let images = glance::image_client(&session).await?;
        loop {
            let image = images.get(&image_id).await.map_err(glance::failure)?;
            let image_status = image.get("status").and_then(Value::as_str).unwrap_or_default().to_lowercase();
            match image_status.as_str() {
                "active" => {
                    let server = compute.server(&id).await.map_err(failure)?;
                    let task = server.get("OS-EXT-STS:task_state").and_then(Value::as_str).unwrap_or_default();
                    if !IMAGE_UPLOAD_TASKS.contains(&task) {
                        return Ok(());
                    }
                }
                "error" | "deleted" => return Err(ResourceFailure::error("Error", image_status)),
                _ => {}
            }
            ctx.sleep(POLL_SECS).await?;
        }
    }

    /// Heat's `handle_delete_snapshot`: the snapshot's image goes (already
    /// gone is fine).
    async fn delete_snapshot(&self, ctx: &mut ActionContext) -> ActionResult {
        let Some(image_id) = ctx.state.data.get(SNAPSHOT_IMAGE_ID).cloned() else { return Ok(()) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let images = glance::image_client(&session).await?;
        match images.delete(&image_id).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other.map_err(glance::failure),
        }
    }

    /// Heat's `handle_restore`: the server is rebuilt from its snapshot's
    /// image.
    fn restore_properties(&self, resource_data: &Map<String, Value>) -> Map<String, Value> {
        resource_data
            .get(SNAPSHOT_IMAGE_ID)
            .map(|image| Map::from_iter([("image".to_string(), image.clone())]))
            .unwrap_or_default()
    }

    /// Heat's: a FAILED server is replaced unless Nova still has it in a
    /// usable state.
    async fn needs_replace_failed(&self, ctx: &mut ActionContext) -> Result<bool, ResourceFailure> {
        let Some(id) = ctx.state.physical_id.clone() else { return Ok(true) };
        let session = stack_session(&self.host, &ctx.stack_id).await?;
        let compute = compute(&session).await?;
        match compute.server(&id).await {
            Ok(server) => Ok(matches!(status(&server), "ERROR" | "DELETED" | "SOFT_DELETED")),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(failure(e)),
        }
    }

    async fn attribute(&self, state: &ResourceState, name: &str) -> Result<Value, EngineError> {
        let Some(id) = &state.physical_id else { return Ok(Value::Null) };
        match name {
            "name" => return Ok(Self::shown_name(state)),
            "os_collect_config" => {
                return Ok(state.metadata.get("os-collect-config").cloned().unwrap_or_else(|| json!({})))
            }
            "console_urls" => return Ok(Value::Null),
            _ => {}
        }
        let Some(session) = attribute_session(&self.host, state).await? else { return Ok(Value::Null) };
        let compute = Compute::connect(&session).await.map_err(attribute_error)?;
        Self::attribute_with(&session, &compute, id, name).await
    }
}

#[cfg(test)]
mod tests;
