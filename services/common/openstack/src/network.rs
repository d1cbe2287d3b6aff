//! Neutron's v2.0 API over a [`Session`] and the catalog's `network`
//! endpoint: the security groups a project deletion leaves behind
//! (Neutron's per-project `default` group), and the calls of Heat's
//! OS::Neutron::* resources (create, show, update, delete of a [`Kind`],
//! name-or-id lookup as neutronclient's, tags, DHCP and L3 agent
//! scheduling, router interfaces, the rules under a QoS policy).

use http::Method;
use serde_json::{json, Map, Value};

use crate::ec2::quote;
use crate::error::OsError;
use crate::session::Session;

/// Heat's name of this client: its endpoint type and TLS settings go by it.
pub const CLIENT: &str = "neutron";

/// One kind of Neutron resource: the key of one in a body, the key of a
/// list of them, and the collection's path under `/v2.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// `network`; also the name neutronclient's lookup messages use.
    pub key: &'static str,
    /// `networks`.
    pub collection: &'static str,
    /// `/networks`.
    pub path: &'static str,
}

pub const NETWORK: Kind = Kind { key: "network", collection: "networks", path: "/networks" };
pub const SUBNET: Kind = Kind { key: "subnet", collection: "subnets", path: "/subnets" };
pub const ROUTER: Kind = Kind { key: "router", collection: "routers", path: "/routers" };
pub const PORT: Kind = Kind { key: "port", collection: "ports", path: "/ports" };
pub const SECURITY_GROUP: Kind =
    Kind { key: "security_group", collection: "security_groups", path: "/security-groups" };
pub const SECURITY_GROUP_RULE: Kind =
    Kind { key: "security_group_rule", collection: "security_group_rules", path: "/security-group-rules" };
pub const SUBNETPOOL: Kind = Kind { key: "subnetpool", collection: "subnetpools", path: "/subnetpools" };
/// neutronclient names a QoS policy `policy` in its lookup messages.
pub const QOS_POLICY: Kind = Kind { key: "policy", collection: "policies", path: "/qos/policies" };
pub const SEGMENT: Kind = Kind { key: "segment", collection: "segments", path: "/segments" };
pub const FLOATING_IP: Kind = Kind { key: "floatingip", collection: "floatingips", path: "/floatingips" };
/// The rules of a QoS policy live under the policy
/// (`/qos/policies/<id>/bandwidth_limit_rules`): see [`Network::create_in`].
pub const BANDWIDTH_LIMIT_RULE: Kind =
    Kind { key: "bandwidth_limit_rule", collection: "bandwidth_limit_rules", path: "/bandwidth_limit_rules" };
pub const MINIMUM_BANDWIDTH_RULE: Kind =
    Kind { key: "minimum_bandwidth_rule", collection: "minimum_bandwidth_rules", path: "/minimum_bandwidth_rules" };
pub const DSCP_MARKING_RULE: Kind =
    Kind { key: "dscp_marking_rule", collection: "dscp_marking_rules", path: "/dscp_marking_rules" };
pub const MINIMUM_PACKET_RATE_RULE: Kind = Kind {
    key: "minimum_packet_rate_rule",
    collection: "minimum_packet_rate_rules",
    path: "/minimum_packet_rate_rules",
};

/// What a name-or-id lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(String),
    NotFound,
    /// More than one has that name.
    Ambiguous,
}

/// Whether `text` starts with a UUID (neutronclient's `re.match` of its
/// UUID pattern: hex groups 8-4-4-4-12, any case).
pub fn looks_like_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let groups = [8usize, 4, 4, 4, 12];
    let mut at = 0;
    for (i, len) in groups.iter().enumerate() {
        if bytes.len() < at + len || !bytes[at..at + len].iter().all(u8::is_ascii_hexdigit) {
            return false;
        }
        at += len;
        if i < groups.len() - 1 {
            if bytes.get(at) != Some(&b'-') {
                return false;
            }
            at += 1;
        }
    }
    true
}

/// Neutron as one session sees it, at `endpoint` (the catalog's URL).
pub struct Network<'a> {
    session: &'a Session,
    endpoint: String,
}

impl<'a> Network<'a> {
    pub fn new(session: &'a Session, endpoint: &str) -> Self {
        Network { session, endpoint: endpoint.trim_end_matches('/').to_string() }
    }

    /// The catalog's `network` endpoint (as the session's endpoint choice
    /// picks it for `neutron`).
    pub async fn connect(session: &'a Session) -> Result<Network<'a>, OsError> {
        let endpoint = session.client_endpoint(CLIENT, "network").await?;
        Ok(Network::new(session, &endpoint))
    }

    /// The session Neutron is asked through (its token's project scopes
    /// what a lookup by name finds).
    pub fn session(&self) -> &'a Session {
        self.session
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, OsError> {
        let url = format!("{}/v2.0{}", self.endpoint, path);
        self.session.client_call(CLIENT, method, &url, &[], body).await?.json()
    }

    /// The ids of project `project_id`'s security groups named `name`.
    pub async fn security_group_ids(&self, project_id: &str, name: &str) -> Result<Vec<String>, OsError> {
        let query = [("project_id", project_id), ("name", name)];
        let groups = self.list(SECURITY_GROUP, &query).await?;
        Ok(groups.iter().filter_map(|g| g.get("id").and_then(Value::as_str)).map(str::to_owned).collect())
    }

    /// Deletes a security group; Ok when it is gone already.
    pub async fn delete_security_group(&self, id: &str) -> Result<(), OsError> {
        match self.delete(SECURITY_GROUP, id).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        }
    }

    /// `GET /v2.0/<collection>?<query>`: the listed objects.
    pub async fn list(&self, kind: Kind, query: &[(&str, &str)]) -> Result<Vec<Value>, OsError> {
        let query: Vec<String> = query.iter().map(|(k, v)| format!("{}={}", quote(k), quote(v))).collect();
        let path = if query.is_empty() { kind.path.to_string() } else { format!("{}?{}", kind.path, query.join("&")) };
        let doc = self.call(Method::GET, &path, None).await?;
        doc.get(kind.collection)
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| OsError::InvalidResponse(format!("no {} in Neutron's answer", kind.collection)))
    }

    /// `POST` of one `kind` with `fields`; answers the created object.
    pub async fn create(&self, kind: Kind, fields: Map<String, Value>) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::POST, kind.path, Some(&json!({ kind.key: fields }))).await?;
        object_of(kind, doc)
    }

    /// Bulk `POST` of `kind`s (`{"<collection>": [...]}`).
    pub async fn create_many(&self, kind: Kind, objects: Vec<Value>) -> Result<(), OsError> {
        self.call(Method::POST, kind.path, Some(&json!({ kind.collection: objects }))).await.map(drop)
    }

    /// The aliases of the extensions Neutron has (`GET /v2.0/extensions`).
    pub async fn extension_aliases(&self) -> Result<Vec<String>, OsError> {
        let doc = self.call(Method::GET, "/extensions", None).await?;
        let extensions = doc
            .get("extensions")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no extensions in Neutron's answer".into()))?;
        Ok(extensions.iter().filter_map(|e| e.get("alias").and_then(Value::as_str)).map(str::to_owned).collect())
    }

    /// `GET` of one `kind` by id.
    pub async fn show(&self, kind: Kind, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &format!("{}/{}", kind.path, quote(id)), None).await?;
        object_of(kind, doc)
    }

    /// `PUT` of `fields` onto one `kind`.
    pub async fn update(&self, kind: Kind, id: &str, fields: Map<String, Value>) -> Result<(), OsError> {
        let body = json!({ kind.key: fields });
        self.call(Method::PUT, &format!("{}/{}", kind.path, quote(id)), Some(&body)).await.map(drop)
    }

    /// `DELETE` of one `kind`; the caller decides what a 404 means.
    pub async fn delete(&self, kind: Kind, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("{}/{}", kind.path, quote(id)), None).await.map(drop)
    }

    /// The path of a `kind` that lives under one `parent` object.
    fn nested_path(parent: Kind, parent_id: &str, kind: Kind) -> String {
        format!("{}/{}{}", parent.path, quote(parent_id), kind.path)
    }

    /// `POST` of one `kind` under `parent` `parent_id` (a QoS policy's
    /// rule); answers the created object.
    pub async fn create_in(
        &self,
        parent: Kind,
        parent_id: &str,
        kind: Kind,
        fields: Map<String, Value>,
    ) -> Result<Map<String, Value>, OsError> {
        let path = Self::nested_path(parent, parent_id, kind);
        let doc = self.call(Method::POST, &path, Some(&json!({ kind.key: fields }))).await?;
        object_of(kind, doc)
    }

    /// `GET` of one `kind` under `parent` `parent_id`.
    pub async fn show_in(
        &self,
        parent: Kind,
        parent_id: &str,
        kind: Kind,
        id: &str,
    ) -> Result<Map<String, Value>, OsError> {
        let path = format!("{}/{}", Self::nested_path(parent, parent_id, kind), quote(id));
        object_of(kind, self.call(Method::GET, &path, None).await?)
    }

    /// `PUT` of `fields` onto one `kind` under `parent` `parent_id`.
    pub async fn update_in(
        &self,
        parent: Kind,
        parent_id: &str,
        kind: Kind,
        id: &str,
        fields: Map<String, Value>,
    ) -> Result<(), OsError> {
        let path = format!("{}/{}", Self::nested_path(parent, parent_id, kind), quote(id));
        self.call(Method::PUT, &path, Some(&json!({ kind.key: fields }))).await.map(drop)
    }

    /// `DELETE` of one `kind` under `parent` `parent_id`.
    pub async fn delete_in(&self, parent: Kind, parent_id: &str, kind: Kind, id: &str) -> Result<(), OsError> {
        let path = format!("{}/{}", Self::nested_path(parent, parent_id, kind), quote(id));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// neutronclient's `find_resourceid_by_name_or_id`: a UUID-looking
    /// value is first asked for as an id, then anything as a name.
    pub async fn lookup(&self, kind: Kind, name_or_id: &str) -> Result<Lookup, OsError> {
        if looks_like_uuid(name_or_id) {
            let found = self.list(kind, &[("id", name_or_id), ("fields", "id")]).await?;
            if let Some(id) = found.first().and_then(|o| o.get("id")).and_then(Value::as_str) {
                return Ok(Lookup::Found(id.to_string()));
            }
        }
        let found = self.list(kind, &[("name", name_or_id), ("fields", "id")]).await?;
        match found.as_slice() {
            [] => Ok(Lookup::NotFound),
            [one] => one
                .get("id")
                .and_then(Value::as_str)
                .map(|id| Lookup::Found(id.to_string()))
                .ok_or_else(|| OsError::InvalidResponse(format!("a {} without an id", kind.key))),
            _ => Ok(Lookup::Ambiguous),
        }
    }

    /// `PUT /v2.0/<collection>/<id>/tags`: the tags become `tags`.
    pub async fn replace_tags(&self, kind: Kind, id: &str, tags: &[Value]) -> Result<(), OsError> {
        let body = json!({ "tags": tags });
        let path = format!("{}/{}/tags", kind.collection, quote(id));
        self.call(Method::PUT, &format!("/{path}"), Some(&body)).await.map(drop)
    }

    /// The ids of the agents an `agents_path` lists
    /// (`/networks/<id>/dhcp-agents`, `/routers/<id>/l3-agents`).
    async fn agent_ids(&self, agents_path: &str) -> Result<Vec<String>, OsError> {
        let doc = self.call(Method::GET, agents_path, None).await?;
        let agents = doc
            .get("agents")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no agents in Neutron's answer".into()))?;
        Ok(agents.iter().filter_map(|a| a.get("id").and_then(Value::as_str)).map(str::to_owned).collect())
    }

    /// The DHCP agents hosting network `network_id`.
    pub async fn dhcp_agent_ids(&self, network_id: &str) -> Result<Vec<String>, OsError> {
        self.agent_ids(&format!("/networks/{}/dhcp-agents", quote(network_id))).await
    }

    pub async fn add_network_to_dhcp_agent(&self, agent_id: &str, network_id: &str) -> Result<(), OsError> {
        let body = json!({ "network_id": network_id });
        self.call(Method::POST, &format!("/agents/{}/dhcp-networks", quote(agent_id)), Some(&body)).await.map(drop)
    }

    pub async fn remove_network_from_dhcp_agent(&self, agent_id: &str, network_id: &str) -> Result<(), OsError> {
        let path = format!("/agents/{}/dhcp-networks/{}", quote(agent_id), quote(network_id));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// The L3 agents hosting router `router_id`.
    pub async fn l3_agent_ids(&self, router_id: &str) -> Result<Vec<String>, OsError> {
        self.agent_ids(&format!("/routers/{}/l3-agents", quote(router_id))).await
    }

    pub async fn add_router_to_l3_agent(&self, agent_id: &str, router_id: &str) -> Result<(), OsError> {
        let body = json!({ "router_id": router_id });
        self.call(Method::POST, &format!("/agents/{}/l3-routers", quote(agent_id)), Some(&body)).await.map(drop)
    }

    pub async fn remove_router_from_l3_agent(&self, agent_id: &str, router_id: &str) -> Result<(), OsError> {
        let path = format!("/agents/{}/l3-routers/{}", quote(agent_id), quote(router_id));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// `PUT /routers/<id>/add_router_interface` (or `remove_...`) with
    /// `{"subnet_id": ...}` or `{"port_id": ...}`.
    pub async fn router_interface(
        &self,
        router_id: &str,
        add: bool,
        target: &Map<String, Value>,
    ) -> Result<(), OsError> {
        let action = if add { "add_router_interface" } else { "remove_router_interface" };
        let path = format!("/routers/{}/{action}", quote(router_id));
        self.call(Method::PUT, &path, Some(&Value::Object(target.clone()))).await.map(drop)
    }
}

/// The object under `kind.key` of an answer.
fn object_of(kind: Kind, doc: Value) -> Result<Map<String, Value>, OsError> {
    match doc {
        Value::Object(mut m) => match m.remove(kind.key) {
            Some(Value::Object(o)) => Ok(o),
            _ => Err(OsError::InvalidResponse(format!("no {} in Neutron's answer", kind.key))),
        },
        _ => Err(OsError::InvalidResponse(format!("no {} in Neutron's answer", kind.key))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_like_values_as_neutronclient_matches_them() {
        assert!(looks_like_uuid("0d3b6c6e-6f55-4a0b-9b8e-1c2d3e4f5a6b"));
        assert!(looks_like_uuid("0D3B6C6E-6F55-4A0B-9B8E-1C2D3E4F5A6B-and-more"));
        assert!(!looks_like_uuid("private"));
        assert!(!looks_like_uuid("0d3b6c6e6f554a0b9b8e1c2d3e4f5a6b"));
        assert!(!looks_like_uuid("0d3b6c6e-6f55-4a0b-9b8e-1c2d3e4f5a6"));
    }
}
