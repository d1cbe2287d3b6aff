//! The committed cluster configuration: a JSON document holding the cluster
//! name, the controller peers and the mesh's runtime settings, its
//! canonical bytes, and the checksum and version derived from them.
//!
//! Canonical bytes are the document serialised compactly with every
//! object's keys sorted, so two nodes holding the same content hash the
//! same bytes whatever key order or whitespace a `setconf` file used.
//! (Numbers are kept as written: `1` and `1.0` are different content.)

use sha2::{Digest, Sha256};

use crate::model::CtrlPeer;

/// Why a configuration document is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    #[error("the configuration is not JSON: {0}")]
    Json(String),
    #[error("the configuration must be a JSON object")]
    NotObject,
    #[error("clusterName must be a non-empty string")]
    ClusterName,
    #[error("peers must be a list of {{name, host, port}} objects: {0}")]
    Peers(String),
    #[error("settings must be an object")]
    Settings,
    #[error("unknown top-level key {0:?} (allowed: clusterName, peers, settings)")]
    UnknownKey(String),
}

/// A validated configuration with its canonical form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedConfig {
    canonical: Vec<u8>,
    checksum: [u8; 32],
    cluster_name: String,
    peers: Vec<CtrlPeer>,
}

impl CommittedConfig {
    /// Parses and validates a document (any key order, any whitespace).
    pub fn from_json(bytes: &[u8]) -> Result<CommittedConfig, DocError> {
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| DocError::Json(e.to_string()))?;
        CommittedConfig::from_value(value)
    }

    pub fn from_value(value: serde_json::Value) -> Result<CommittedConfig, DocError> {
        let serde_json::Value::Object(map) = &value else {
            return Err(DocError::NotObject);
        };
        if let Some(key) = map.keys().find(|k| !matches!(k.as_str(), "clusterName" | "peers" | "settings")) {
            return Err(DocError::UnknownKey(key.clone()));
        }
        let cluster_name = match map.get("clusterName") {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(DocError::ClusterName),
        };
        let peers = match map.get("peers") {
            None => Vec::new(),
            Some(v) => parse_peers(v)?,
        };
        if let Some(s) = map.get("settings") {
            if !s.is_object() {
                return Err(DocError::Settings);
            }
        }
        let canonical = canonical_bytes(&value);
        let checksum = sha256(&canonical);
        Ok(CommittedConfig { canonical, checksum, cluster_name, peers })
    }

    /// The configuration the first primary of a new cluster commits: its
    /// own settings' cluster name and peers, no runtime settings.
    pub fn bootstrap(cluster_name: &str, peers: &[CtrlPeer]) -> CommittedConfig {
        let value = serde_json::json!({
            "clusterName": cluster_name,
            "peers": peers.iter().map(|p| serde_json::json!({"name": p.name, "host": p.host, "port": p.port})).collect::<Vec<_>>(),
            "settings": {},
        });
        // The value is built from validated settings; if it ever failed
        // validation the fallback still hashes deterministically.
        CommittedConfig::from_value(value.clone()).unwrap_or_else(|_| {
            let canonical = canonical_bytes(&value);
            let checksum = sha256(&canonical);
            CommittedConfig { canonical, checksum, cluster_name: cluster_name.to_string(), peers: peers.to_vec() }
        })
    }

    pub fn canonical(&self) -> &[u8] {
        &self.canonical
    }

    pub fn checksum(&self) -> &[u8; 32] {
        &self.checksum
    }

    pub fn version(&self) -> u64 {
        version_of(&self.checksum)
    }

    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    pub fn peers(&self) -> &[CtrlPeer] {
        &self.peers
    }

    /// The document as a JSON value (canonical key order).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_slice(&self.canonical).unwrap_or(serde_json::Value::Null)
    }
}

fn parse_peers(v: &serde_json::Value) -> Result<Vec<CtrlPeer>, DocError> {
    let serde_json::Value::Array(items) = v else {
        return Err(DocError::Peers("not a list".into()));
    };
    let mut peers: Vec<CtrlPeer> = Vec::with_capacity(items.len());
    for item in items {
        let name = item.get("name").and_then(|n| n.as_str()).filter(|n| !n.is_empty());
        let host = item.get("host").and_then(|n| n.as_str()).filter(|n| !n.is_empty());
        let port = item
            .get("port")
            .and_then(|n| n.as_u64())
            .and_then(|p| u32::try_from(p).ok())
            .filter(|p| (1..=65535).contains(p));
        let (Some(name), Some(host), Some(port)) = (name, host, port) else {
            return Err(DocError::Peers(format!("bad entry {item}")));
        };
        if peers.iter().any(|p| p.name == name) {
            return Err(DocError::Peers(format!("duplicate name {name:?}")));
        }
        peers.push(CtrlPeer { name: name.to_string(), host: host.to_string(), port });
    }
    Ok(peers)
}

/// The document serialised with sorted keys and no whitespace.
pub fn canonical_bytes(value: &serde_json::Value) -> Vec<u8> {
    fn sorted(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                // serde_json keeps insertion order here (preserve_order),
                // so inserting in sorted order serialises sorted.
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&map[k]));
                }
                serde_json::Value::Object(out)
            }
            serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // Serialising a Value cannot fail (string keys, no foreign types).
    serde_json::to_vec(&sorted(value)).unwrap_or_default()
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The version: the checksum's first 8 bytes as a big-endian u64.
pub fn version_of(checksum: &[u8; 32]) -> u64 {
    let mut first = [0u8; 8];
    first.copy_from_slice(&checksum[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"clusterName":"keelson","peers":[{"name":"c1","host":"127.0.0.1","port":7001}],"settings":{"candidates":{"b":1,"a":[2,{"z":0,"y":1}]}}}"#;

    #[test]
    fn same_content_same_checksum_whatever_the_layout() {
        let a = CommittedConfig::from_json(DOC.as_bytes()).unwrap();
        let b = CommittedConfig::from_json(
            br#"{
              "settings": {"candidates": {"a": [2, {"y": 1, "z": 0}], "b": 1}},
              "peers": [{"port": 7001, "host": "127.0.0.1", "name": "c1"}],
              "clusterName": "keelson"
            }"#,
        )
        .unwrap();
        assert_eq!(a.canonical(), b.canonical());
        assert_eq!(a.checksum(), b.checksum());
        assert_eq!(a.version(), b.version());
        assert_eq!(
            std::str::from_utf8(a.canonical()).unwrap(),
            r#"{"clusterName":"keelson","peers":[{"host":"127.0.0.1","name":"c1","port":7001}],"settings":{"candidates":{"a":[2,{"y":1,"z":0}],"b":1}}}"#
        );
        // Canonicalising the canonical form changes nothing.
        let again = CommittedConfig::from_json(a.canonical()).unwrap();
        assert_eq!(again.canonical(), a.canonical());
    }

    #[test]
    fn different_content_differs() {
        let a = CommittedConfig::from_json(DOC.as_bytes()).unwrap();
        let b = CommittedConfig::from_json(DOC.replace("\"b\":1", "\"b\":2").as_bytes()).unwrap();
        assert_ne!(a.checksum(), b.checksum());
        assert_ne!(a.version(), b.version());
    }

    #[test]
    fn version_is_the_first_eight_bytes_big_endian() {
        let a = CommittedConfig::from_json(DOC.as_bytes()).unwrap();
        let sum = sha256(a.canonical());
        assert_eq!(&sum, a.checksum());
        let expected = sum[..8].iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        assert_eq!(a.version(), expected);
        let mut c = [0u8; 32];
        c[0] = 0x01;
        c[7] = 0xff;
        c[8] = 0xee; // beyond the prefix: ignored
        assert_eq!(version_of(&c), 0x0100_0000_0000_00ff);
        // A known vector: SHA-256("") = e3b0c442 98fc1c14 …
        assert_eq!(version_of(&sha256(b"")), 0xe3b0_c442_98fc_1c14);
    }

    #[test]
    fn validation() {
        assert!(matches!(CommittedConfig::from_json(b"[]"), Err(DocError::NotObject)));
        assert!(matches!(CommittedConfig::from_json(b"{"), Err(DocError::Json(_))));
        assert!(matches!(CommittedConfig::from_json(br#"{"clusterName":""}"#), Err(DocError::ClusterName)));
        assert!(matches!(CommittedConfig::from_json(br#"{"clusterName":"k","x":1}"#), Err(DocError::UnknownKey(_))));
        assert!(matches!(CommittedConfig::from_json(br#"{"clusterName":"k","settings":[]}"#), Err(DocError::Settings)));
        assert!(matches!(
            CommittedConfig::from_json(br#"{"clusterName":"k","peers":[{"name":"a","host":"h","port":0}]}"#),
            Err(DocError::Peers(_))
        ));
        assert!(matches!(
            CommittedConfig::from_json(
                br#"{"clusterName":"k","peers":[{"name":"a","host":"h","port":1},{"name":"a","host":"h","port":2}]}"#
            ),
            Err(DocError::Peers(_))
        ));
    }

    #[test]
    fn bootstrap_is_deterministic() {
        let peers = vec![CtrlPeer { name: "c1".into(), host: "127.0.0.1".into(), port: 7001 }];
        let a = CommittedConfig::bootstrap("keelson", &peers);
        let b = CommittedConfig::bootstrap("keelson", &peers);
        assert_eq!(a, b);
        assert_eq!(a.cluster_name(), "keelson");
        assert_eq!(a.peers(), &peers[..]);
    }
}
