//! Configuration as each subcommand sees it: the oslo-style files, the
//! environment variables the Placement tooling uses, and the embedded
//! defaults of `all-in-one`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context as _};
use keelson_db::{DatabaseUrl, PoolSettings};
use keelson_runtime::config::clamp_u32;
use keelson_runtime::Config;

use crate::cli::CommonArgs;

/// Embedded defaults: where all-in-one keeps its data.
pub const DATA_DIR: &str = "keelson-data";

/// Loads the configuration files (`--config-file …` then
/// `PLACEMENT_CONFIG_FILE`).
pub fn load(common: &CommonArgs) -> anyhow::Result<Config> {
    let mut files: Vec<PathBuf> = common.config_files.clone();
    if let Ok(f) = std::env::var("PLACEMENT_CONFIG_FILE") {
        if !f.is_empty() {
            files.push(PathBuf::from(f));
        }
    }
    Ok(Config::load(&files)?)
}

/// All-in-one's embedded defaults for whatever the files leave unset.
pub fn apply_all_in_one_defaults(config: &mut Config) -> anyhow::Result<()> {
    if !config.is_set("placement_database", "connection") {
        std::fs::create_dir_all(DATA_DIR).with_context(|| format!("creating ./{DATA_DIR}"))?;
        config.set("placement_database", "connection", &format!("sqlite:///{DATA_DIR}/placement.db"));
    }
    if !config.is_set("database", "connection") {
        std::fs::create_dir_all(DATA_DIR).with_context(|| format!("creating ./{DATA_DIR}"))?;
        // Several harness-started instances may share a working directory:
        // each keeps its own orchestration database.
        let file = match std::env::var("PLACEMENT_PORT") {
            Ok(port) if !port.is_empty() => format!("orchestration-{port}.db"),
            _ => "orchestration.db".to_string(),
        };
        config.set("database", "connection", &format!("sqlite:///{DATA_DIR}/{file}"));
    }
    if !config.is_set("api", "auth_strategy") {
        config.set("api", "auth_strategy", "noauth2");
    }
    if !config.is_set("orchestration", "auth_strategy") {
        config.set("orchestration", "auth_strategy", "noauth");
    }
    Ok(())
}

/// Where harness-mode listeners that the configuration does not name
/// bind: a free port on a loopback address other than the harness's own
/// 127.0.0.1. The harness picks a free 127.0.0.1 port for each instance
/// before starting it; were the internal listeners of another instance on
/// 127.0.0.1:0 too, the kernel could hand one of them that port in between
/// and the instance would find its REST port taken.
pub const HARNESS_INTERNAL_LISTEN: &str = "127.0.0.2:0";

/// Whether the process was started by Placement tooling that picks the
/// REST port (the conformance harness runs several instances at once).
pub fn harness_mode() -> bool {
    std::env::var("PLACEMENT_PORT").is_ok_and(|p| !p.is_empty())
}

/// Where the Placement API listens: `PLACEMENT_BIND`/`PLACEMENT_PORT`
/// when set, else `[keelson] placement_listen` (all-in-one: loopback).
pub fn placement_listen(config: &Config, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    if harness_mode() || std::env::var("PLACEMENT_BIND").is_ok() {
        let bind = std::env::var("PLACEMENT_BIND").unwrap_or_else(|_| "127.0.0.1".into());
        let port = std::env::var("PLACEMENT_PORT").unwrap_or_else(|_| "8778".into());
        return parse_addr(&format!("{bind}:{port}"), "PLACEMENT_BIND/PLACEMENT_PORT");
    }
    listen(config, "placement_listen", all_in_one)
}

/// A listen address option; all-in-one binds loopback by default, and in
/// harness mode every listener the configuration does not name takes a
/// free port so that several instances can run side by side.
pub fn listen(config: &Config, option: &str, all_in_one: bool) -> anyhow::Result<SocketAddr> {
    if config.is_set("keelson", option) {
        let v = config.get_str("keelson", option).unwrap_or_default();
        return parse_addr(&v, &format!("[keelson] {option}"));
    }
    if all_in_one && harness_mode() && option != "placement_listen" {
        return parse_addr(HARNESS_INTERNAL_LISTEN, option);
    }
    let default = config.get_str("keelson", option).unwrap_or_default();
    let addr = if all_in_one { default.replace("0.0.0.0", "127.0.0.1") } else { default };
    parse_addr(&addr, &format!("[keelson] {option}"))
}

fn parse_addr(v: &str, what: &str) -> anyhow::Result<SocketAddr> {
    use std::net::ToSocketAddrs as _;
    v.to_socket_addrs()
        .with_context(|| format!("invalid address {v:?} for {what}"))?
        .next()
        .with_context(|| format!("address {v:?} for {what} resolves to nothing"))
}

/// The mesh's mutual TLS identity (`[keelson] tls_*_file`); None:
/// plaintext.
pub fn mesh_tls(config: &Config) -> anyhow::Result<Option<std::sync::Arc<keelson_runtime::tls::MeshTls>>> {
    Ok(keelson_runtime::tls::MeshTls::from_config(config)?)
}

/// The Placement database URL from `[placement_database] connection`.
pub fn database_url(config: &Config) -> anyhow::Result<DatabaseUrl> {
    let Some(url) = config.get_str("placement_database", "connection") else {
        bail!("[placement_database] connection is not set");
    };
    DatabaseUrl::parse(&url).with_context(|| {
        format!("[placement_database] connection in {}", config.source_of("placement_database", "connection"))
    })
}

/// The stack engine's database URL from `[database] connection` (Heat's
/// option; its own database, apart from Placement's).
pub fn orchestration_database_url(config: &Config) -> anyhow::Result<DatabaseUrl> {
    let Some(url) = config.get_str("database", "connection") else {
        bail!("[database] connection (the orchestration database) is not set");
    };
    DatabaseUrl::parse(&url)
        .with_context(|| format!("[database] connection in {}", config.source_of("database", "connection")))
}

/// Pool settings from `[placement_database]`.
pub fn pool_settings(config: &Config) -> PoolSettings {
    let mut s = PoolSettings::default();
    if let Some(n) = config.get_int("placement_database", "max_pool_size").filter(|n| *n > 0) {
        let overflow = config.get_int("placement_database", "max_overflow").unwrap_or(0).max(0);
        s.max_connections = clamp_u32(n.saturating_add(overflow));
    }
    if let Some(t) = config.get_int("placement_database", "pool_timeout").filter(|t| *t > 0) {
        s.acquire_timeout = std::time::Duration::from_secs(t as u64);
    }
    s.mysql_sql_mode = config.get_str("placement_database", "mysql_sql_mode");
    s
}
