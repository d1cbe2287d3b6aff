//! Nova's compute API calls Heat's OS::Nova::* resources make, over a
//! [`Session`].
//!
//! Like Heat's nova client plugin, a [`Compute`] talks the newest
//! microversion both sides know: the endpoint's current version (its
//! version document), capped at the newest one Heat's novaclient speaks
//! ([`CLIENT_MAX`]). Every call carries it in the headers novaclient
//! sends, and the request bodies follow that version (a key pair's `type`
//! from 2.2, `user_id` from 2.10; a server group's single `policy` and
//! `rules` from 2.64; the quota fields 2.57 still accepts).

use http::Method;
use serde_json::{json, Map, Value};

use crate::error::OsError;
use crate::session::Session;

/// Heat's name of this client: its endpoint type and TLS settings go by it.
pub const CLIENT: &str = "nova";

/// A compute API microversion (`2.64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion {
    pub major: u16,
    pub minor: u16,
}

impl Microversion {
    pub const fn new(major: u16, minor: u16) -> Self {
        Microversion { major, minor }
    }

    /// `"2.64"`; None for anything else.
    pub fn parse(text: &str) -> Option<Microversion> {
        let (major, minor) = text.trim().split_once('.')?;
        Some(Microversion { major: major.parse().ok()?, minor: minor.parse().ok()? })
    }
}

impl std::fmt::Display for Microversion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The newest microversion Heat 27.0.1's novaclient (18.x) speaks.
pub const CLIENT_MAX: Microversion = Microversion::new(2, 96);
/// Key pair `type`.
pub const KEYPAIR_TYPE: Microversion = Microversion::new(2, 2);
/// Key pair `user_id`.
pub const KEYPAIR_USER: Microversion = Microversion::new(2, 10);
/// Nova no longer generates key pairs: `public_key` is required.
pub const KEYPAIR_PUBLIC_KEY_REQUIRED: Microversion = Microversion::new(2, 92);
/// Server tags.
pub const SERVER_TAGS: Microversion = Microversion::new(2, 26);
/// Server group `soft-affinity` and `soft-anti-affinity`.
pub const SOFT_POLICIES: Microversion = Microversion::new(2, 15);
/// Server group `policy` + `rules` instead of `policies`.
pub const SERVER_GROUP_RULES: Microversion = Microversion::new(2, 64);
/// Quota sets refuse the network quotas.
pub const QUOTA_NO_NETWORK: Microversion = Microversion::new(2, 36);
/// Quota sets refuse the injected file quotas too.
pub const QUOTA_STRICT: Microversion = Microversion::new(2, 57);

/// `networks: "auto"` / `"none"` when booting a server.
pub const AUTO_ALLOCATE_NETWORK: Microversion = Microversion::new(2, 37);
/// Tagged nics when booting a server.
pub const NIC_TAGS: Microversion = Microversion::new(2, 42);
/// A `volume_type` in a block device mapping.
pub const BDM_VOLUME_TYPE: Microversion = Microversion::new(2, 67);
/// Servers are booted without `personality` files.
pub const NO_PERSONALITY: Microversion = Microversion::new(2, 57);

/// The quota fields novaclient still passes from 2.57 on.
pub const QUOTAS_FROM_2_57: [&str; 7] =
    ["instances", "cores", "ram", "metadata_items", "key_pairs", "server_groups", "server_group_members"];

/// A key pair as Nova answers its creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keypair {
    /// The key pair's id: its name.
    pub name: String,
    pub public_key: String,
    /// Only for a key pair Nova generated.
    pub private_key: Option<String>,
}

/// A flavor as Nova shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Flavor {
    pub id: String,
    pub is_public: Value,
}

/// What a new flavor is.
#[derive(Debug, Clone, PartialEq)]
pub struct FlavorSpec {
    pub name: String,
    /// None: Nova generates a UUID.
    pub id: Option<String>,
    pub ram: i64,
    pub vcpus: i64,
    pub disk: i64,
    pub swap: i64,
    pub ephemeral: i64,
    pub rxtx_factor: f64,
    pub is_public: bool,
}

/// What a server gets attached to at boot.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerNetworks {
    /// No `networks` (Nova's default before 2.37; from 2.37 novaclient
    /// refuses to boot without nics, the caller's to say).
    Default,
    /// `networks: "auto"` or `"none"` (from 2.37).
    Allocate(String),
    /// One entry per nic: `uuid`, `port`, `fixed_ip` as Nova takes them.
    Nics(Vec<Map<String, Value>>),
}

/// A server to boot, as novaclient's `servers.create` takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    /// None: boots from a volume of the block device mapping.
    pub image_ref: Option<String>,
    pub flavor_ref: String,
    pub key_name: Option<String>,
    pub availability_zone: Option<String>,
    /// Security group names or ids.
    pub security_groups: Vec<String>,
    /// Already serialized to strings.
    pub metadata: Option<Map<String, Value>>,
    /// `os:scheduler_hints`.
    pub scheduler_hints: Option<Map<String, Value>>,
    pub networks: ServerNetworks,
    /// The text novaclient base64-encodes.
    pub user_data: Option<String>,
    /// The legacy mapping, entries as novaclient parses them.
    pub block_device_mapping: Option<Vec<Value>>,
    pub block_device_mapping_v2: Option<Vec<Value>>,
    pub config_drive: Option<bool>,
    pub admin_pass: Option<String>,
    /// `OS-DCF:diskConfig`: `AUTO` or `MANUAL`.
    pub disk_config: Option<String>,
    pub reservation_id: Option<String>,
    /// Path → contents (sent only before 2.57).
    pub personality: Map<String, Value>,
}

/// A port a server is attached to (`GET /servers/{id}/os-interface`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub port_id: String,
    pub net_id: String,
    pub mac_addr: String,
    /// The first fixed IP's address and subnet.
    pub ip_address: Option<String>,
    pub subnet_id: Option<String>,
}

/// Nova's compute API through one session, at one negotiated microversion.
pub struct Compute<'a> {
    session: &'a Session,
    endpoint: String,
    version: Microversion,
}

/// The endpoint's current microversion from its version document
/// (`{"version": {"version": "2.96", ...}}`); a legacy v2.0 endpoint
/// answers none and speaks 2.0.
fn current_version(doc: &Value) -> Result<Microversion, OsError> {
    match doc.pointer("/version/version").and_then(Value::as_str) {
        Some("") | None => Ok(Microversion::new(2, 0)),
        Some(v) => Microversion::parse(v).ok_or_else(|| OsError::InvalidResponse(format!("compute version {v:?}"))),
    }
}

/// The microversion headers novaclient sends: the legacy one from 2.1, the
/// standard one from 2.27.
pub fn version_headers(version: Microversion) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    if version.minor != 0 {
        headers.push(("x-openstack-nova-api-version", version.to_string()));
    }
    if version.minor >= 27 {
        headers.push(("openstack-api-version", format!("compute {version}")));
    }
    headers
}

impl<'a> Compute<'a> {
    /// The compute endpoint of the session's catalog (as its endpoint
    /// choice picks it for `nova`) and the microversion to speak with it.
    pub async fn connect(session: &'a Session) -> Result<Compute<'a>, OsError> {
        let endpoint = session.client_endpoint(CLIENT, "compute").await?;
        let doc = session
            .version_document(&endpoint, || async {
                match session.client_call(CLIENT, Method::GET, &endpoint, &[], None).await {
                    Ok(answer) => answer.json(),
                    // An endpoint with the project id in its path: its root
                    // is one level up, as novaclient retries.
                    Err(e) if e.is_not_found() => {
                        let root =
                            format!("{}/", endpoint.rsplit_once('/').map_or(endpoint.as_str(), |(head, _)| head));
                        session.client_call(CLIENT, Method::GET, &root, &[], None).await?.json()
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        let version = current_version(&doc)?.min(CLIENT_MAX);
        Ok(Compute { session, endpoint, version })
    }

    /// A client of `endpoint` speaking `version` (no negotiation).
    pub fn at(session: &'a Session, endpoint: &str, version: Microversion) -> Compute<'a> {
        Compute { session, endpoint: endpoint.trim_end_matches('/').to_string(), version }
    }

    pub fn version(&self) -> Microversion {
        self.version
    }

    /// Whether the negotiated microversion is at least `version`.
    pub fn supports(&self, version: Microversion) -> bool {
        self.version >= version
    }

    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, OsError> {
        let url = format!("{}{}", self.endpoint, path);
        let owned = version_headers(self.version);
        let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.session.client_call(CLIENT, method, &url, &headers, body).await?.json()
    }

    /// The `POST /os-keypairs` body at this microversion: `type` (default
    /// `ssh`) from 2.2, `user_id` from 2.10, `public_key` when given (always
    /// from 2.92).
    pub fn keypair_body(
        &self,
        name: &str,
        public_key: Option<&str>,
        key_type: Option<&str>,
        user_id: Option<&str>,
    ) -> Value {
        let mut kp = Map::new();
        kp.insert("name".into(), json!(name));
        if self.supports(KEYPAIR_TYPE) {
            kp.insert("type".into(), json!(key_type.unwrap_or("ssh")));
        }
        match public_key {
            Some(key) if !key.is_empty() => {
                kp.insert("public_key".into(), json!(key));
            }
            _ if self.supports(KEYPAIR_PUBLIC_KEY_REQUIRED) => {
                kp.insert("public_key".into(), Value::Null);
            }
            _ => {}
        }
        if let Some(user) = user_id.filter(|u| !u.is_empty() && self.supports(KEYPAIR_USER)) {
            kp.insert("user_id".into(), json!(user));
        }
        json!({ "keypair": kp })
    }

    /// `POST /os-keypairs` with [`Compute::keypair_body`].
    pub async fn create_keypair(&self, body: &Value) -> Result<Keypair, OsError> {
        let doc = self.call(Method::POST, "/os-keypairs", Some(body)).await?;
        let kp = doc.get("keypair").ok_or_else(|| OsError::InvalidResponse("no keypair in Nova's answer".into()))?;
        let text = |k: &str| kp.get(k).and_then(Value::as_str).map(str::to_owned);
        Ok(Keypair {
            name: text("name").ok_or_else(|| OsError::InvalidResponse("a key pair without a name".into()))?,
            public_key: text("public_key").unwrap_or_default(),
            private_key: text("private_key"),
        })
    }

    /// `GET /os-keypairs/{name}`: its public key.
    pub async fn keypair_public_key(&self, name: &str) -> Result<String, OsError> {
        let doc = self.call(Method::GET, &format!("/os-keypairs/{}", segment(name)), None).await?;
        Ok(doc.pointer("/keypair/public_key").and_then(Value::as_str).unwrap_or_default().to_string())
    }

    pub async fn delete_keypair(&self, name: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/os-keypairs/{}", segment(name)), None).await.map(drop)
    }

    /// The `POST /flavors` body (novaclient's: every field, `id` null for a
    /// generated one).
    pub fn flavor_body(spec: &FlavorSpec) -> Value {
        json!({"flavor": {
            "name": spec.name,
            "ram": spec.ram,
            "vcpus": spec.vcpus,
            "disk": spec.disk,
            "id": spec.id,
            "swap": spec.swap,
            "OS-FLV-EXT-DATA:ephemeral": spec.ephemeral,
            "rxtx_factor": spec.rxtx_factor,
            "os-flavor-access:is_public": spec.is_public,
        }})
    }

    pub async fn create_flavor(&self, spec: &FlavorSpec) -> Result<Flavor, OsError> {
        let doc = self.call(Method::POST, "/flavors", Some(&Self::flavor_body(spec))).await?;
        flavor_of(&doc)
    }

    pub async fn flavor(&self, id: &str) -> Result<Flavor, OsError> {
        flavor_of(&self.call(Method::GET, &format!("/flavors/{}", segment(id)), None).await?)
    }

    /// `GET /flavors` (novaclient's list without details, public flavors
    /// and those the project may use): each flavor's id and name.
    pub async fn flavor_names(&self) -> Result<Vec<(String, String)>, OsError> {
        let doc = self.call(Method::GET, "/flavors", None).await?;
        let text = |f: &Value, k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(doc
            .get("flavors")
            .and_then(Value::as_array)
            .ok_or_else(|| OsError::InvalidResponse("no flavors in Nova's answer".into()))?
            .iter()
            .map(|f| (text(f, "id"), text(f, "name")))
            .collect())
    }

    pub async fn delete_flavor(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/flavors/{}", segment(id)), None).await.map(drop)
    }

    /// `GET /flavors/{id}/os-extra_specs`.
    pub async fn extra_specs(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &format!("/flavors/{}/os-extra_specs", segment(id)), None).await?;
        Ok(doc.get("extra_specs").and_then(Value::as_object).cloned().unwrap_or_default())
    }

    /// `POST /flavors/{id}/os-extra_specs`: adds or overwrites `specs`.
    pub async fn set_extra_specs(&self, id: &str, specs: &Map<String, Value>) -> Result<(), OsError> {
        let body = json!({ "extra_specs": specs });
        self.call(Method::POST, &format!("/flavors/{}/os-extra_specs", segment(id)), Some(&body)).await.map(drop)
    }

    pub async fn unset_extra_spec(&self, id: &str, key: &str) -> Result<(), OsError> {
        let path = format!("/flavors/{}/os-extra_specs/{}", segment(id), segment(key));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// The projects a private flavor is shared with.
    pub async fn flavor_access(&self, id: &str) -> Result<Vec<String>, OsError> {
        let doc = self.call(Method::GET, &format!("/flavors/{}/os-flavor-access", segment(id)), None).await?;
        Ok(doc
            .get("flavor_access")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|e| e.get("tenant_id").and_then(Value::as_str).map(str::to_owned)).collect())
            .unwrap_or_default())
    }

    /// `addTenantAccess` (`add`) or `removeTenantAccess`.
    pub async fn set_flavor_access(&self, id: &str, project_id: &str, add: bool) -> Result<(), OsError> {
        let action = if add { "addTenantAccess" } else { "removeTenantAccess" };
        let body = json!({ action: {"tenant": project_id} });
        self.call(Method::POST, &format!("/flavors/{}/action", segment(id)), Some(&body)).await.map(drop)
    }

    /// The `POST /os-server-groups` body at this microversion: from 2.64
    /// the first policy as `policy` and `rules` when there are any
    /// (`max_server_per_host` as an integer), before it `policies`.
    pub fn server_group_body(&self, name: &str, policies: &[String], rules: Option<&Map<String, Value>>) -> Value {
        if self.supports(SERVER_GROUP_RULES) {
            let mut group = Map::new();
            group.insert("name".into(), json!(name));
            group.insert("policy".into(), policies.first().map_or(Value::Null, |p| json!(p)));
            if let Some(rules) = rules.filter(|r| !r.is_empty()) {
                let mut rules = rules.clone();
                // novaclient sends `int(value)`: 2.0 and 2.5 are 2.
                let whole = rules.get("max_server_per_host").and_then(Value::as_f64).map(f64::trunc);
                if let Some(n) = whole.and_then(|n| format!("{n:.0}").parse::<i64>().ok()) {
                    rules.insert("max_server_per_host".into(), json!(n));
                }
                group.insert("rules".into(), Value::Object(rules));
            }
            json!({ "server_group": group })
        } else {
            json!({"server_group": {"name": name, "policies": policies}})
        }
    }

    /// Answers the new group's id.
    pub async fn create_server_group(&self, body: &Value) -> Result<String, OsError> {
        let doc = self.call(Method::POST, "/os-server-groups", Some(body)).await?;
        doc.pointer("/server_group/id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| OsError::InvalidResponse("no server_group id in Nova's answer".into()))
    }

    pub async fn server_group_exists(&self, id: &str) -> Result<bool, OsError> {
        match self.call(Method::GET, &format!("/os-server-groups/{}", segment(id)), None).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn delete_server_group(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/os-server-groups/{}", segment(id)), None).await.map(drop)
    }

    /// `PUT /os-quota-sets/{project}` with `quotas` (the caller leaves out
    /// what this microversion no longer takes).
    pub async fn update_quotas(&self, project_id: &str, quotas: &Map<String, Value>) -> Result<(), OsError> {
        let body = json!({ "quota_set": quotas });
        self.call(Method::PUT, &format!("/os-quota-sets/{}", segment(project_id)), Some(&body)).await.map(drop)
    }

    /// `POST /servers/{id}/os-volume_attachments`: attaches a volume as
    /// `device` (None: Nova picks).
    pub async fn attach_volume(&self, server_id: &str, volume_id: &str, device: Option<&str>) -> Result<(), OsError> {
        let body = json!({"volumeAttachment": {"volumeId": volume_id, "device": device}});
        let path = format!("/servers/{}/os-volume_attachments", segment(server_id));
        self.call(Method::POST, &path, Some(&body)).await.map(drop)
    }

    /// `DELETE /servers/{id}/os-volume_attachments/{volume}`.
    pub async fn detach_volume(&self, server_id: &str, volume_id: &str) -> Result<(), OsError> {
        let path = format!("/servers/{}/os-volume_attachments/{}", segment(server_id), segment(volume_id));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// Whether the server still shows the volume attached.
    pub async fn volume_attached(&self, server_id: &str, volume_id: &str) -> Result<bool, OsError> {
        let path = format!("/servers/{}/os-volume_attachments/{}", segment(server_id), segment(volume_id));
        match self.call(Method::GET, &path, None).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The `POST /servers` body novaclient sends for `spec` at this
    /// microversion (`user_data` base64-encoded, security groups by name,
    /// `os:scheduler_hints` beside the server).
    pub fn server_body(&self, spec: &ServerSpec) -> Value {
        use base64::Engine as _;
        let mut server = Map::new();
        server.insert("name".into(), json!(spec.name));
        server.insert("imageRef".into(), json!(spec.image_ref.clone().unwrap_or_default()));
        server.insert("flavorRef".into(), json!(spec.flavor_ref));
        server.insert("min_count".into(), json!(1));
        server.insert("max_count".into(), json!(1));
        if let Some(data) = &spec.user_data {
            server.insert("user_data".into(), json!(base64::engine::general_purpose::STANDARD.encode(data)));
        }
        if let Some(meta) = &spec.metadata {
            server.insert("metadata".into(), Value::Object(meta.clone()));
        }
        if let Some(id) = &spec.reservation_id {
            server.insert("reservation_id".into(), json!(id));
        }
        if let Some(key) = &spec.key_name {
            server.insert("key_name".into(), json!(key));
        }
        if let Some(zone) = &spec.availability_zone {
            server.insert("availability_zone".into(), json!(zone));
        }
        if !spec.security_groups.is_empty() {
            let groups: Vec<Value> = spec.security_groups.iter().map(|g| json!({ "name": g })).collect();
            server.insert("security_groups".into(), Value::Array(groups));
        }
        if !spec.personality.is_empty() && !self.supports(NO_PERSONALITY) {
            let files: Vec<Value> = spec
                .personality
                .iter()
                .map(|(path, contents)| {
                    let text = contents.as_str().map_or_else(|| contents.to_string(), str::to_owned);
                    json!({"path": path, "contents": base64::engine::general_purpose::STANDARD.encode(text)})
                })
                .collect();
            server.insert("personality".into(), Value::Array(files));
        }
        match &spec.networks {
            ServerNetworks::Nics(nics) => {
                server.insert("networks".into(), Value::Array(nics.iter().cloned().map(Value::Object).collect()));
            }
            ServerNetworks::Allocate(how) if self.supports(AUTO_ALLOCATE_NETWORK) => {
                server.insert("networks".into(), json!(how));
            }
            _ => {}
        }
        if let Some(bdm) = spec.block_device_mapping.as_ref().filter(|b| !b.is_empty()) {
            server.insert("block_device_mapping".into(), Value::Array(bdm.clone()));
        }
        if let Some(bdm) = spec.block_device_mapping_v2.as_ref().filter(|b| !b.is_empty()) {
            server.insert("block_device_mapping_v2".into(), Value::Array(bdm.clone()));
        }
        if let Some(drive) = spec.config_drive {
            server.insert("config_drive".into(), json!(drive));
        }
        if let Some(pass) = &spec.admin_pass {
            server.insert("adminPass".into(), json!(pass));
        }
        if let Some(disk) = &spec.disk_config {
            server.insert("OS-DCF:diskConfig".into(), json!(disk));
        }
        let mut body = Map::new();
        body.insert("server".into(), Value::Object(server));
        if let Some(hints) = spec.scheduler_hints.as_ref().filter(|h| !h.is_empty()) {
            body.insert("os:scheduler_hints".into(), Value::Object(hints.clone()));
        }
        Value::Object(body)
    }

    /// `POST /servers`: answers the new server's id.
    pub async fn create_server(&self, spec: &ServerSpec) -> Result<String, OsError> {
        let doc = self.call(Method::POST, "/servers", Some(&self.server_body(spec))).await?;
        doc.pointer("/server/id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| OsError::InvalidResponse("no server id in Nova's answer".into()))
    }

    /// `GET /servers/{id}`: the server as Nova shows it.
    pub async fn server(&self, id: &str) -> Result<Map<String, Value>, OsError> {
        let doc = self.call(Method::GET, &format!("/servers/{}", segment(id)), None).await?;
        doc.get("server")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| OsError::InvalidResponse("no server in Nova's answer".into()))
    }

    pub async fn delete_server(&self, id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/servers/{}", segment(id)), None).await.map(drop)
    }

    /// `PUT /servers/{id}` with a new name.
    pub async fn rename_server(&self, id: &str, name: &str) -> Result<(), OsError> {
        let body = json!({"server": {"name": name}});
        self.call(Method::PUT, &format!("/servers/{}", segment(id)), Some(&body)).await.map(drop)
    }

    /// `POST /servers/{id}/action` with one action body.
    async fn server_action(&self, id: &str, action: &Value) -> Result<(), OsError> {
        self.call(Method::POST, &format!("/servers/{}/action", segment(id)), Some(action)).await.map(drop)
    }

    /// `createImage`: a snapshot image of the server, answered by its id
    /// (in the body from 2.45, in `Location` before).
    pub async fn create_image(&self, id: &str, name: &str) -> Result<String, OsError> {
        let url = format!("{}/servers/{}/action", self.endpoint, segment(id));
        let owned = version_headers(self.version);
        let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = json!({"createImage": {"name": name}});
        let answer = self.session.call_with(Method::POST, &url, &headers, Some(&body)).await?;
        let from_location = || answer.header("location").and_then(|l| l.rsplit('/').next()).map(str::to_string);
        match answer.json()?.get("image_id").and_then(Value::as_str) {
            Some(image_id) => Ok(image_id.to_string()),
            None => from_location().ok_or_else(|| OsError::InvalidResponse("createImage answered no image id".into())),
        }
    }

    /// `resize` to another flavor (Nova then waits in VERIFY_RESIZE).
    pub async fn resize_server(&self, id: &str, flavor_id: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({"resize": {"flavorRef": flavor_id}})).await
    }

    pub async fn confirm_resize(&self, id: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({ "confirmResize": null })).await
    }

    /// `rebuild` from another image, as novaclient sends it (`adminPass`
    /// when given, `preserve_ephemeral` only when true, `metadata` when
    /// not empty).
    pub async fn rebuild_server(&self, id: &str, image_id: &str, rebuild: &Rebuild) -> Result<(), OsError> {
        self.server_action(id, &json!({ "rebuild": rebuild_body(image_id, rebuild) })).await
    }

    pub async fn suspend_server(&self, id: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({ "suspend": null })).await
    }

    pub async fn resume_server(&self, id: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({ "resume": null })).await
    }

    /// `forceDelete`: a soft-deleted server goes for good.
    pub async fn force_delete_server(&self, id: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({ "forceDelete": null })).await
    }

    pub async fn change_password(&self, id: &str, admin_pass: &str) -> Result<(), OsError> {
        self.server_action(id, &json!({"changePassword": {"adminPass": admin_pass}})).await
    }

    /// `POST /servers/{id}/metadata`: adds or overwrites these items.
    pub async fn set_server_metadata(&self, id: &str, metadata: &Map<String, Value>) -> Result<(), OsError> {
        let body = json!({ "metadata": metadata });
        self.call(Method::POST, &format!("/servers/{}/metadata", segment(id)), Some(&body)).await.map(drop)
    }

    pub async fn delete_server_metadata(&self, id: &str, key: &str) -> Result<(), OsError> {
        let path = format!("/servers/{}/metadata/{}", segment(id), segment(key));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// `GET /servers/{id}/os-interface`: the ports the server is on.
    pub async fn interfaces(&self, id: &str) -> Result<Vec<Interface>, OsError> {
        let doc = self.call(Method::GET, &format!("/servers/{}/os-interface", segment(id)), None).await?;
        let text = |i: &Value, k: &str| i.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Ok(doc
            .get("interfaceAttachments")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|i| Interface {
                        port_id: text(i, "port_id"),
                        net_id: text(i, "net_id"),
                        mac_addr: text(i, "mac_addr"),
                        ip_address: i.pointer("/fixed_ips/0/ip_address").and_then(Value::as_str).map(str::to_owned),
                        subnet_id: i.pointer("/fixed_ips/0/subnet_id").and_then(Value::as_str).map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `POST /servers/{id}/os-interface`: attaches a port, or a new port
    /// on a network (with a fixed IP), or (neither) one Nova picks;
    /// answers the attached port's id.
    pub async fn attach_interface(
        &self,
        id: &str,
        port_id: Option<&str>,
        net_id: Option<&str>,
        fixed_ip: Option<&str>,
    ) -> Result<String, OsError> {
        let mut attachment = Map::new();
        if let Some(port) = port_id {
            attachment.insert("port_id".into(), json!(port));
        }
        if let Some(net) = net_id {
            attachment.insert("net_id".into(), json!(net));
        }
        if let Some(ip) = fixed_ip {
            attachment.insert("fixed_ips".into(), json!([{ "ip_address": ip }]));
        }
        let body = json!({ "interfaceAttachment": attachment });
        let doc = self.call(Method::POST, &format!("/servers/{}/os-interface", segment(id)), Some(&body)).await?;
        Ok(doc.pointer("/interfaceAttachment/port_id").and_then(Value::as_str).unwrap_or_default().to_string())
    }

    /// `DELETE /servers/{id}/os-interface/{port}`.
    pub async fn detach_interface(&self, id: &str, port_id: &str) -> Result<(), OsError> {
        let path = format!("/servers/{}/os-interface/{}", segment(id), segment(port_id));
        self.call(Method::DELETE, &path, None).await.map(drop)
    }

    /// `PUT /servers/{id}/tags`: replaces the server's tags (from 2.26).
    pub async fn set_server_tags(&self, id: &str, tags: &[String]) -> Result<(), OsError> {
        let body = json!({ "tags": tags });
        self.call(Method::PUT, &format!("/servers/{}/tags", segment(id)), Some(&body)).await.map(drop)
    }

    /// `DELETE /os-quota-sets/{project}`: back to the defaults.
    pub async fn delete_quotas(&self, project_id: &str) -> Result<(), OsError> {
        self.call(Method::DELETE, &format!("/os-quota-sets/{}", segment(project_id)), None).await.map(drop)
    }
}

/// What a rebuild keeps or changes besides the image.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rebuild {
    pub admin_pass: Option<String>,
    pub preserve_ephemeral: bool,
    /// Already serialized to strings.
    pub metadata: Option<Map<String, Value>>,
}

fn rebuild_body(image_id: &str, rebuild: &Rebuild) -> Value {
    let mut body = Map::new();
    body.insert("imageRef".into(), json!(image_id));
    if let Some(pass) = &rebuild.admin_pass {
        body.insert("adminPass".into(), json!(pass));
    }
    if rebuild.preserve_ephemeral {
        body.insert("preserve_ephemeral".into(), json!(true));
    }
    if let Some(meta) = rebuild.metadata.as_ref().filter(|m| !m.is_empty()) {
        body.insert("metadata".into(), Value::Object(meta.clone()));
    }
    Value::Object(body)
}

fn flavor_of(doc: &Value) -> Result<Flavor, OsError> {
    let f = doc.get("flavor").ok_or_else(|| OsError::InvalidResponse("no flavor in Nova's answer".into()))?;
    Ok(Flavor {
        id: f
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| OsError::InvalidResponse("a flavor without an id".into()))?,
        is_public: f.get("os-flavor-access:is_public").cloned().unwrap_or(json!("N/A")),
    })
}

/// A path segment, percent-encoded.
fn segment(value: &str) -> String {
    crate::ec2::quote(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpClient;

    fn compute(session: &Session, v: Microversion) -> Compute<'_> {
        Compute::at(session, "http://nova/v2.1/", v)
    }

    fn session() -> Session {
        Session::new(HttpClient::default(), "http://k:5000", crate::AuthMethod::Existing { token: "t".into() })
    }

    #[test]
    fn versions_and_headers() {
        assert_eq!(Microversion::parse("2.64"), Some(Microversion::new(2, 64)));
        assert_eq!(Microversion::parse("2"), None);
        assert!(Microversion::new(2, 9) < Microversion::new(2, 10));
        assert_eq!(current_version(&json!({"version": {"version": "2.100"}})).unwrap().min(CLIENT_MAX), CLIENT_MAX);
        assert_eq!(current_version(&json!({"version": {"version": ""}})).unwrap(), Microversion::new(2, 0));
        assert!(current_version(&json!({"version": {"version": "x"}})).is_err());
        assert_eq!(version_headers(Microversion::new(2, 0)), []);
        assert_eq!(version_headers(Microversion::new(2, 1)), [("x-openstack-nova-api-version", "2.1".to_string())]);
        assert_eq!(
            version_headers(Microversion::new(2, 96)),
            [("x-openstack-nova-api-version", "2.96".to_string()), ("openstack-api-version", "compute 2.96".into())]
        );
    }

    #[test]
    fn keypair_bodies_follow_the_microversion() {
        let s = session();
        assert_eq!(
            compute(&s, Microversion::new(2, 1)).keypair_body("k", None, Some("x509"), Some("u")),
            json!({"keypair": {"name": "k"}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 2)).keypair_body("k", Some("ssh-rsa A"), None, Some("u")),
            json!({"keypair": {"name": "k", "type": "ssh", "public_key": "ssh-rsa A"}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 10)).keypair_body("k", Some(""), Some("x509"), Some("u")),
            json!({"keypair": {"name": "k", "type": "x509", "user_id": "u"}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 92)).keypair_body("k", Some("ssh-rsa A"), None, None),
            json!({"keypair": {"name": "k", "type": "ssh", "public_key": "ssh-rsa A"}})
        );
    }

    #[test]
    fn server_group_and_flavor_bodies() {
        let s = session();
        let anti = vec!["anti-affinity".to_string()];
        let rules = json!({"max_server_per_host": 2.5}).as_object().cloned().unwrap();
        assert_eq!(
            compute(&s, Microversion::new(2, 63)).server_group_body("g", &anti, Some(&rules)),
            json!({"server_group": {"name": "g", "policies": ["anti-affinity"]}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 64)).server_group_body("g", &anti, Some(&rules)),
            json!({"server_group": {"name": "g", "policy": "anti-affinity", "rules": {"max_server_per_host": 2}}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 96)).server_group_body("g", &anti, None),
            json!({"server_group": {"name": "g", "policy": "anti-affinity"}})
        );
        let spec = FlavorSpec {
            name: "f".into(),
            id: None,
            ram: 512,
            vcpus: 1,
            disk: 0,
            swap: 0,
            ephemeral: 0,
            rxtx_factor: 1.0,
            is_public: false,
        };
        assert_eq!(
            Compute::flavor_body(&spec),
            json!({"flavor": {"name": "f", "ram": 512, "vcpus": 1, "disk": 0, "id": null, "swap": 0,
                "OS-FLV-EXT-DATA:ephemeral": 0, "rxtx_factor": 1.0, "os-flavor-access:is_public": false}})
        );
    }

    fn server_spec() -> ServerSpec {
        ServerSpec {
            name: "s".into(),
            image_ref: Some("img".into()),
            flavor_ref: "fl".into(),
            key_name: None,
            availability_zone: None,
            security_groups: Vec::new(),
            metadata: None,
            scheduler_hints: None,
            networks: ServerNetworks::Default,
            user_data: None,
            block_device_mapping: None,
            block_device_mapping_v2: None,
            config_drive: None,
            admin_pass: None,
            disk_config: None,
            reservation_id: None,
            personality: Map::new(),
        }
    }

    #[test]
    fn server_bodies_follow_the_microversion() {
        let s = session();
        let plain = server_spec();
        assert_eq!(
            compute(&s, Microversion::new(2, 36)).server_body(&plain),
            json!({"server": {"name": "s", "imageRef": "img", "flavorRef": "fl", "min_count": 1, "max_count": 1}})
        );
        assert_eq!(compute(&s, Microversion::new(2, 37)).server_body(&plain)["server"].get("networks"), None);
        let none = ServerSpec { networks: ServerNetworks::Allocate("none".into()), ..server_spec() };
        assert_eq!(compute(&s, Microversion::new(2, 96)).server_body(&none)["server"]["networks"], json!("none"));
        assert_eq!(compute(&s, Microversion::new(2, 36)).server_body(&none)["server"].get("networks"), None);
        let nic = json!({"uuid": "n1", "fixed_ip": "10.0.0.5"}).as_object().cloned().unwrap();
        let full = ServerSpec {
            image_ref: None,
            key_name: Some("k".into()),
            availability_zone: Some("nova".into()),
            security_groups: vec!["default".into()],
            metadata: Some(json!({"a": "1"}).as_object().cloned().unwrap()),
            scheduler_hints: Some(json!({"group": "g"}).as_object().cloned().unwrap()),
            networks: ServerNetworks::Nics(vec![nic]),
            user_data: Some("#!/bin/sh".into()),
            block_device_mapping_v2: Some(vec![json!({"uuid": "v", "source_type": "volume"})]),
            config_drive: Some(true),
            admin_pass: Some("pw".into()),
            disk_config: Some("AUTO".into()),
            personality: json!({"/etc/motd": "hi"}).as_object().cloned().unwrap(),
            ..server_spec()
        };
        assert_eq!(
            compute(&s, Microversion::new(2, 96)).server_body(&full),
            json!({"server": {"name": "s", "imageRef": "", "flavorRef": "fl", "min_count": 1, "max_count": 1,
                "user_data": "IyEvYmluL3No", "metadata": {"a": "1"}, "key_name": "k", "availability_zone": "nova",
                "security_groups": [{"name": "default"}], "networks": [{"uuid": "n1", "fixed_ip": "10.0.0.5"}],
                "block_device_mapping_v2": [{"uuid": "v", "source_type": "volume"}], "config_drive": true,
                "adminPass": "pw", "OS-DCF:diskConfig": "AUTO"},
                "os:scheduler_hints": {"group": "g"}})
        );
        assert_eq!(
            compute(&s, Microversion::new(2, 56)).server_body(&full)["server"]["personality"],
            json!([{"path": "/etc/motd", "contents": "aGk="}])
        );
    }

    #[test]
    fn rebuild_bodies() {
        assert_eq!(rebuild_body("img", &Rebuild::default()), json!({"imageRef": "img"}));
        let all = Rebuild {
            admin_pass: Some("pw".into()),
            preserve_ephemeral: true,
            metadata: Some(json!({"a": "1"}).as_object().cloned().unwrap()),
        };
        assert_eq!(
            rebuild_body("img", &all),
            json!({"imageRef": "img", "adminPass": "pw", "preserve_ephemeral": true, "metadata": {"a": "1"}})
        );
    }
}
