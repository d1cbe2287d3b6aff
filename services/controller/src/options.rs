//! The controller's options: `[controller]` (this node and its peers),
//! `[etcd]`, and `[keelson] data_dir` for its local files.

use keelson_runtime::config::{Declaration, Opt};

/// This node's name among the peers (non-empty, no '/').
pub const NAME: Opt<String> = Opt::str("controller", "name", "c1", "this controller's name among its peers");
/// Where the controller's RPC listens.
pub const LISTEN: Opt<String> =
    Opt::str("controller", "listen", "127.0.0.1:7001", "where the controller's RPC listens");
/// The configured controllers, `name=host:port,…`; empty: no controller
/// (the services keep their standalone behaviour).
pub const PEERS: Opt<Vec<String>> =
    Opt::list("controller", "peers", &[], "the controllers, name=host:port,... (empty: none)");
pub const CLUSTER_NAME: Opt<String> =
    Opt::str("controller", "cluster_name", "keelson", "the cluster's name (its etcd key prefix)");
/// Seconds, 1 to 3600 (checked by the settings, which name the range).
pub const LEASE_TTL: Opt<i64> = Opt::int("controller", "lease_ttl", 5, "seconds the primary's etcd lease lasts");
/// Empty: single-node mode (no etcd).
pub const ETCD_ENDPOINTS: Opt<Vec<String>> =
    Opt::list("etcd", "endpoints", &[], "etcd endpoints, http://host:port,... (empty: single node)");
/// An empty value keeps the controller's state in memory.
pub const DATA_DIR: Opt<Option<String>> =
    Opt::optional_str("keelson", "data_dir", Some("./keelson-data"), "where a node keeps its small local files");

pub const OPTIONS: &[&dyn Declaration] =
    &[&NAME, &LISTEN, &PEERS, &CLUSTER_NAME, &LEASE_TTL, &ETCD_ENDPOINTS, &DATA_DIR];
