//! The controller's domain values: what a request asks, what an answer
//! holds, and the typed refusals. Transport-free: the Cap'n Proto server
//! and client convert to and from these.

use std::fmt;

/// A controller's role. PRIMARY and STANDBY come out of the election;
/// INIT is "starting, not yet connected/synced", ELECTING "no primary
/// known, campaigning".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Init,
    Electing,
    Primary,
    Standby,
}

impl Role {
    /// The name the commands print and `--json` carries.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Init => "INIT",
            Role::Electing => "ELECTING",
            Role::Primary => "PRIMARY",
            Role::Standby => "STANDBY",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configured controller.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CtrlPeer {
    pub name: String,
    pub host: String,
    pub port: u32,
}

impl CtrlPeer {
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// The primary a node knows about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrimaryRef {
    pub name: String,
    /// host:port of its RPC listener.
    pub address: String,
}

/// The answer to `ctrlstatus`: the responder's local view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtrlStatus {
    pub cluster_name: String,
    /// `None`: no elected or known primary (printed "unknown").
    pub primary: Option<PrimaryRef>,
    pub responder_name: String,
    pub responder_role: Role,
    pub term: u64,
    /// 0: no configuration committed (or not yet known).
    pub config_version: u64,
    /// Empty: no configuration committed (or not yet known).
    pub config_checksum: Vec<u8>,
    pub committed_lsn: u64,
    pub applied_lsn: u64,
    pub fenced: bool,
    pub peers: Vec<CtrlPeer>,
    pub quorum: bool,
}

impl CtrlStatus {
    /// The seed's JSON shape (plus `quorum` and `primaryAddress`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "clusterName": self.cluster_name,
            "primaryName": self.primary.as_ref().map(|p| p.name.as_str()).unwrap_or(""),
            "primaryAddress": self.primary.as_ref().map(|p| p.address.as_str()).unwrap_or(""),
            "responderName": self.responder_name,
            "responderRole": self.responder_role.as_str(),
            "term": self.term,
            "configVersion": self.config_version,
            "configChecksum": hex::encode(&self.config_checksum),
            "committedLsn": self.committed_lsn,
            "appliedLsn": self.applied_lsn,
            "fenced": self.fenced,
            "quorum": self.quorum,
            "peers": self.peers.iter().map(|p| serde_json::json!({"name": p.name, "host": p.host, "port": p.port})).collect::<Vec<_>>(),
            "peerCount": self.peers.len(),
        })
    }
}

/// The committed configuration as `clusterconf` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConf {
    /// Canonical JSON bytes.
    pub document: Vec<u8>,
    pub version: u64,
    pub checksum: Vec<u8>,
    pub lsn: u64,
    pub term: u64,
}

/// What a committed write returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteAck {
    pub term: u64,
    pub lsn: u64,
}

/// A service instance in the registry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Registration {
    pub service: String,
    pub instance: String,
    pub address: String,
    pub ttl_seconds: u32,
}

/// Every operation the controller serves; the dispatch gate is keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    CtrlStatus,
    ClusterConf,
    SetConf,
    Register,
    Heartbeat,
    Deregister,
    List,
}

impl Opcode {
    pub const ALL: [Opcode; 7] = [
        Opcode::CtrlStatus,
        Opcode::ClusterConf,
        Opcode::SetConf,
        Opcode::Register,
        Opcode::Heartbeat,
        Opcode::Deregister,
        Opcode::List,
    ];

    /// Whether the operation changes replicated state (the failover client
    /// treats writes differently: they must reach the primary).
    pub fn is_write(self) -> bool {
        matches!(self, Opcode::SetConf | Opcode::Register | Opcode::Heartbeat | Opcode::Deregister)
    }
}

/// A request, decoded from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    CtrlStatus,
    ClusterConf,
    SetConf { document: Vec<u8> },
    Register(Registration),
    Heartbeat { service: String, instance: String },
    Deregister { service: String, instance: String },
    List { service: String },
}

impl Request {
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::CtrlStatus => Opcode::CtrlStatus,
            Request::ClusterConf => Opcode::ClusterConf,
            Request::SetConf { .. } => Opcode::SetConf,
            Request::Register(_) => Opcode::Register,
            Request::Heartbeat { .. } => Opcode::Heartbeat,
            Request::Deregister { .. } => Opcode::Deregister,
            Request::List { .. } => Opcode::List,
        }
    }
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    CtrlStatus(Box<CtrlStatus>),
    ClusterConf(ClusterConf),
    Write(WriteAck),
    List(Vec<Registration>),
}

/// A typed refusal, as it crosses the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtrlError {
    /// ERR_STANDBY: this node is not the primary; the one it knows, if any.
    #[error("ERR_STANDBY: not the primary (primary: {})", .primary.as_ref().map(|p| format!("{} at {}", p.name, p.address)).unwrap_or_else(|| "unknown".into()))]
    Standby { primary: Option<PrimaryRef> },
    /// ERR_NOT_READY: INIT, ELECTING, or a primary still catching up.
    #[error("ERR_NOT_READY: {0}")]
    NotReady(String),
    /// The primary cannot reach the etcd quorum: writes are refused.
    #[error("ERR_NO_QUORUM: the primary has lost the etcd quorum")]
    NoQuorum,
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("controller error: {0}")]
    Internal(String),
    /// The write lost the term fence: another primary took over.
    #[error("ERR_DEPOSED: this node lost the primary role (term fence) before the write committed")]
    Deposed,
}
