//! The controller's options (`[controller]`, `[etcd]`, `[keelson] data_dir`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keelson_runtime::tls::MeshTls;
use keelson_runtime::Config;

use crate::model::CtrlPeer;
use crate::options;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("[controller] name must be a non-empty name without '/' (got {0:?})")]
    Name(String),
    #[error("[controller] peers: invalid entry {0:?} (expected name=host:port)")]
    Peer(String),
    #[error("[controller] peers: duplicate name {0:?}")]
    DuplicatePeer(String),
    #[error("[controller] lease_ttl must be between 1 and 3600 seconds (got {0})")]
    LeaseTtl(i64),
    #[error("[controller] cluster_name must be a non-empty name without '/' (got {0:?})")]
    ClusterName(String),
    #[error("[etcd] endpoints: invalid endpoint {0:?} (expected http://host:port)")]
    Endpoint(String),
    #[error("{0}")]
    Tls(#[from] keelson_runtime::tls::TlsError),
}

/// One node's settings.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub name: String,
    /// Where the RPC listener is bound (the caller binds it).
    pub listen: SocketAddr,
    /// The configured controllers; empty means "just this node".
    pub peers: Vec<CtrlPeer>,
    pub cluster_name: String,
    pub lease_ttl: Duration,
    /// Empty: single-node mode (no etcd).
    pub etcd_endpoints: Vec<String>,
    /// Where this node keeps its small local files.
    pub data_dir: Option<PathBuf>,
    /// Mutual TLS on the RPC listener (None: plaintext).
    pub tls: Option<Arc<MeshTls>>,
}

impl ControllerSettings {
    /// Reads the options; `listen` is the address the caller bound.
    pub fn from_config(config: &Config, listen: SocketAddr) -> Result<ControllerSettings, SettingsError> {
        let name = config.get(&options::NAME);
        if !valid_name(&name) {
            return Err(SettingsError::Name(name));
        }
        let cluster_name = config.get(&options::CLUSTER_NAME);
        if !valid_name(&cluster_name) {
            return Err(SettingsError::ClusterName(cluster_name));
        }
        let peers = parse_peers(&config.get(&options::PEERS))?;
        let ttl = config.get(&options::LEASE_TTL);
        if !(1..=3600).contains(&ttl) {
            return Err(SettingsError::LeaseTtl(ttl));
        }
        let etcd_endpoints = config.get(&options::ETCD_ENDPOINTS);
        for e in &etcd_endpoints {
            if !(e.starts_with("http://") || e.starts_with("https://")) || e.len() <= "http://".len() {
                return Err(SettingsError::Endpoint(e.clone()));
            }
        }
        let data_dir = config.get(&options::DATA_DIR).map(PathBuf::from);
        Ok(ControllerSettings {
            name,
            listen,
            peers,
            cluster_name,
            lease_ttl: Duration::from_secs(ttl as u64),
            etcd_endpoints,
            data_dir,
            tls: MeshTls::from_config(config)?,
        })
    }

    /// Single-node settings (tests, embedders).
    pub fn single_node(name: &str, listen: SocketAddr) -> ControllerSettings {
        ControllerSettings {
            name: name.to_string(),
            listen,
            peers: Vec::new(),
            cluster_name: options::CLUSTER_NAME.default_value(),
            lease_ttl: Duration::from_secs(options::LEASE_TTL.default_value().unsigned_abs()),
            etcd_endpoints: Vec::new(),
            data_dir: None,
            tls: None,
        }
    }

    /// The peers to report: the configured ones, or just this node.
    pub fn effective_peers(&self) -> Vec<CtrlPeer> {
        if self.peers.is_empty() {
            vec![CtrlPeer {
                name: self.name.clone(),
                host: self.listen.ip().to_string(),
                port: u32::from(self.listen.port()),
            }]
        } else {
            self.peers.clone()
        }
    }

    /// Where clients reach this node: its entry in `peers`, else the
    /// listen address (a wildcard listen address is useless to a client,
    /// hence the peers entry first).
    pub fn advertised_address(&self) -> String {
        self.peers
            .iter()
            .find(|p| p.name == self.name)
            .map(CtrlPeer::address)
            .unwrap_or_else(|| self.listen.to_string())
    }
}

fn valid_name(n: &str) -> bool {
    !n.is_empty() && !n.contains('/') && !n.chars().any(char::is_whitespace)
}

/// Parses `name=host:port` entries (a bare `host:port` is named after itself).
pub fn parse_peers(items: &[String]) -> Result<Vec<CtrlPeer>, SettingsError> {
    let mut peers: Vec<CtrlPeer> = Vec::new();
    for item in items {
        let (name, addr) = match item.split_once('=') {
            Some((n, a)) => (n.trim().to_string(), a.trim()),
            None => (item.trim().to_string(), item.trim()),
        };
        let (host, port) = split_host_port(addr).ok_or_else(|| SettingsError::Peer(item.clone()))?;
        if !valid_name(&name) {
            return Err(SettingsError::Peer(item.clone()));
        }
        if peers.iter().any(|p| p.name == name) {
            return Err(SettingsError::DuplicatePeer(name));
        }
        peers.push(CtrlPeer { name, host, port });
    }
    Ok(peers)
}

/// `host:port` or `[v6]:port`.
pub fn split_host_port(addr: &str) -> Option<(String, u32)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u32 = port.parse().ok().filter(|p| (1..=65535).contains(p))?;
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let mut c = Config::default();
        c.merge_text(text, std::path::Path::new("t.conf")).unwrap();
        c.validate(&keelson_runtime::config::Registry::assemble(&[options::OPTIONS])).unwrap();
        c
    }

    #[test]
    fn the_issue_format() {
        let c = config(
            "[controller]\nname = c2\nlisten = 127.0.0.1:7002\npeers = c1=127.0.0.1:7001,c2=127.0.0.1:7002,c3=127.0.0.1:7003\n\
             cluster_name = keelson\nlease_ttl = 2\n[etcd]\nendpoints = http://127.0.0.1:2379\n",
        );
        let s = ControllerSettings::from_config(&c, "127.0.0.1:7002".parse().unwrap()).unwrap();
        assert_eq!(s.name, "c2");
        assert_eq!(s.peers.len(), 3);
        assert_eq!(s.peers[2], CtrlPeer { name: "c3".into(), host: "127.0.0.1".into(), port: 7003 });
        assert_eq!(s.lease_ttl, Duration::from_secs(2));
        assert_eq!(s.etcd_endpoints, vec!["http://127.0.0.1:2379"]);
        assert_eq!(s.advertised_address(), "127.0.0.1:7002");
    }

    #[test]
    fn defaults_are_single_node() {
        let s = ControllerSettings::from_config(&config(""), "127.0.0.1:7001".parse().unwrap()).unwrap();
        assert_eq!(s.name, "c1");
        assert!(s.etcd_endpoints.is_empty());
        assert_eq!(s.lease_ttl, Duration::from_secs(5));
        assert_eq!(s.effective_peers(), vec![CtrlPeer { name: "c1".into(), host: "127.0.0.1".into(), port: 7001 }]);
    }

    #[test]
    fn bad_values() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(matches!(
            ControllerSettings::from_config(&config("[controller]\npeers = c1=nohost\n"), addr),
            Err(SettingsError::Peer(_))
        ));
        assert!(matches!(
            ControllerSettings::from_config(&config("[controller]\npeers = a=h:1,a=h:2\n"), addr),
            Err(SettingsError::DuplicatePeer(_))
        ));
        assert!(matches!(
            ControllerSettings::from_config(&config("[controller]\nlease_ttl = 0\n"), addr),
            Err(SettingsError::LeaseTtl(0))
        ));
        assert!(matches!(
            ControllerSettings::from_config(&config("[etcd]\nendpoints = 127.0.0.1:2379\n"), addr),
            Err(SettingsError::Endpoint(_))
        ));
        assert_eq!(split_host_port("[::1]:7001"), Some(("::1".into(), 7001)));
    }
}
