//! A server's attributes, read from Nova (and its ports from Neutron)
//! each time, as Heat's `_resolve_attribute` reads them.

use keelson_openstack::compute::{Compute, SERVER_TAGS};
use keelson_openstack::network::{self, Network};
use keelson_openstack::{OsError, Session};
use serde_json::{json, Map, Value};

use super::super::super::neutron;
use super::super::attribute_error;
use super::{field, Doc, Server};
use crate::error::EngineError;

impl Server {
    /// novaclient's `server.networks`: each network's addresses.
    fn networks_of(server: &Doc) -> Map<String, Value> {
        let mut out = Map::new();
        for (label, addresses) in server.get("addresses").and_then(Value::as_object).into_iter().flatten() {
            let ips: Vec<Value> =
                addresses.as_array().into_iter().flatten().filter_map(|a| a.get("addr").cloned()).collect();
            out.insert(label.clone(), Value::Array(ips));
        }
        out
    }

    /// Heat's `_extend_networks`: each network also under its id, when
    /// Neutron knows one network by that name.
    async fn extend_networks(neutron: &Network<'_>, nets: Map<String, Value>) -> Result<Map<String, Value>, OsError> {
        let mut out = nets.clone();
        for (label, value) in nets {
            if let network::Lookup::Found(id) = neutron.lookup(network::NETWORK, &label).await? {
                out.insert(id, value);
            }
        }
        Ok(out)
    }

    /// Heat's `_get_server_addresses`: the server's ports in Neutron, by
    /// network name, each fixed IP with its port, subnets and network,
    /// and the floating IPs on it.
    async fn addresses(neutron: &Network<'_>, server_id: &str) -> Result<Map<String, Value>, OsError> {
        let mut nets: Map<String, Value> = Map::new();
        for port in neutron.list(network::PORT, &[("device_id", server_id)]).await? {
            let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            let network_id = text(&port, "network_id");
            let found = neutron.list(network::NETWORK, &[("id", &network_id)]).await?;
            let label = found.first().map(|n| text(n, "name")).unwrap_or_default();
            let network_doc = found.first().cloned().unwrap_or(Value::Null);
            let mut entries = nets.get(&label).and_then(Value::as_array).cloned().unwrap_or_default();
            let mac = text(&port, "mac_address");
            let fixed_ips = port.get("fixed_ips").and_then(Value::as_array).cloned().unwrap_or_default();
            for fixed in &fixed_ips {
                let addr = text(fixed, "ip_address");
                let version = match addr.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V4(_)) => json!(4),
                    Ok(std::net::IpAddr::V6(_)) => json!(6),
                    Err(_) => Value::Null,
                };
                if !addr.is_empty() {
                    for fip in neutron.list(network::FLOATING_IP, &[("fixed_ip_address", &addr)]).await? {
                        entries.push(json!({"addr": fip.get("floating_ip_address"), "version": version,
                            "OS-EXT-IPS-MAC:mac_addr": mac, "OS-EXT-IPS:type": "floating", "port": null}));
                    }
                }
                let mut subnets = Vec::new();
                for f in &fixed_ips {
                    let subnet_id = text(f, "subnet_id");
                    if !subnet_id.is_empty() {
                        subnets.extend(neutron.list(network::SUBNET, &[("id", &subnet_id)]).await?);
                    }
                }
                entries.push(json!({"addr": addr, "OS-EXT-IPS-MAC:mac_addr": mac, "OS-EXT-IPS:type": "fixed",
                    "port": text(&port, "id"), "version": version, "subnets": subnets, "network": network_doc}));
            }
            nets.insert(label, Value::Array(entries));
        }
        Self::extend_networks(neutron, nets).await
    }

    pub(super) async fn attribute_with(
        session: &Session,
        compute: &Compute<'_>,
        id: &str,
        name: &str,
    ) -> Result<Value, EngineError> {
        let server = match compute.server(id).await {
            Ok(server) => server,
            // Heat ignores a server that is gone: every attribute is ''.
            Err(e) if e.is_not_found() => return Ok(json!("")),
            Err(e) => return Err(attribute_error(e)),
        };
        let neutron = || async { Network::connect(session).await.map_err(neutron::attribute_error) };
        Ok(match name {
            "show" => Value::Object(server),
            "first_address" => {
                // novaclient's networks, last network name first.
                let nets = Self::networks_of(&server);
                let mut labels: Vec<&String> = nets.keys().collect();
                labels.sort_by(|a, b| b.cmp(a));
                labels
                    .into_iter()
                    .find_map(|l| nets[l].as_array().and_then(|a| a.first()).cloned())
                    .unwrap_or_else(|| json!(""))
            }
            "addresses" => {
                let client = neutron().await?;
                Value::Object(Self::addresses(&client, id).await.map_err(neutron::attribute_error)?)
            }
            "networks" => {
                let client = neutron().await?;
                let nets = Self::networks_of(&server);
                Value::Object(Self::extend_networks(&client, nets).await.map_err(neutron::attribute_error)?)
            }
            "instance_name" => field(&server, "OS-EXT-SRV-ATTR:instance_name").clone(),
            "accessIPv4" | "accessIPv6" => field(&server, name).clone(),
            "tags" if compute.supports(SERVER_TAGS) => field(&server, "tags").clone(),
            // console_urls: not resolved by keelson yet.
            _ => Value::Null,
        })
    }
}
